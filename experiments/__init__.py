"""Orchestration: scenarios, runs, ground truth, sweeps, reproductions, reports."""
