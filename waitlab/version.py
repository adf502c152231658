"""The version of waitlab (one place)."""

__version__ = "0.2.0"
