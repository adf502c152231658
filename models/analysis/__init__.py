"""Analyses over event tables: wait states, synchronization points, CWP-DM, H-CWP-DM, scoring, summaries."""
