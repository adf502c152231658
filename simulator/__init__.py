"""The only part of waitlab that talks to SimGrid: trace writing, the replay extension, timelines."""
