"""The summary line of `waitlab run`: where the ranks sit, and nothing that carries no information (issue 42)."""

from __future__ import annotations

from waitlab.experiments.results import summary_text

META = {"scenario": "s", "scenario_hash": "h", "platform": "dawning_5000a", "seed": 1, "simgrid_version": "3.32"}


def _summary(paths: dict[str, float]) -> dict:
    return {"makespan": 1.0, "events": 10, "wait_states": 2, "totals": {"compute": 1.0, "wait": 1.0},
            "wait_by_pattern": {"late_sender": 1.0}, "wait_by_op": {"recv": 1.0}, "wait_by_path": paths}


def test_placement_and_call_paths_in_the_summary_line() -> None:
    top = summary_text(_summary({"(top level)": 1.0}), {**META, "ranks": 8, "nodes": 1, "ranks_per_node": 16})
    assert "8 ranks on dawning_5000a (1 node, up to 16 ranks per node), seed 1" in top
    assert "wait by call path" not in top  # every wait at the top level: the line would say nothing
    nested = summary_text(_summary({"main>solve": 0.75, "(top level)": 0.25}),
                          {**META, "ranks": 32, "nodes": 2, "ranks_per_node": 16})
    assert "32 ranks on dawning_5000a (2 nodes x 16 ranks)" in nested
    assert "wait by call path: main>solve 0.7500 s (75.0%), (top level) 0.2500 s (25.0%)" in nested
