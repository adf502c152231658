"""Machine descriptions (data files) and their rendering to SimGrid XML."""
