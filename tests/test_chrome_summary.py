"""A run's Chrome trace stays small when one step alone is larger than the summary (issue 15: 16,384 ranks x 1 step
gave a 359,424-event trace although the summary holds 200,000)."""

from __future__ import annotations

import json

import numpy as np

from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.simulator.chrome_trace import chrome_trace_text, first_steps


def _one_step_barrier(n_ranks: int, per_rank: int):
    """Each rank computes ``per_rank - 1`` times (rank r for r+1 s in all), then all meet at one barrier."""
    rows: list[tuple[int, str, float, float, int]] = []
    for r in range(n_ranks):
        t = 0.0
        for _ in range(per_rank - 1):
            rows.append((r, "compute", t, t + (r + 1) / (per_rank - 1), -1))
            t = rows[-1][3]
        rows.append((r, "barrier", t, float(n_ranks), 0))
    rank, op, enter, exit_, match = (list(c) for c in zip(*rows, strict=True))
    return make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match)


def test_one_large_step_keeps_its_lowest_ranks() -> None:
    ev = _one_step_barrier(n_ranks=10, per_rank=3)  # 30 events, all in step 0
    waits = wait_states(ev)
    out, w_out, last, ranks = first_steps(ev, waits, max_events=10)
    assert (last, ranks) == (0, 3)  # 3 ranks x 3 events = 9 <= 10; 4 ranks would be 12
    assert sorted(set(out["rank"].tolist())) == [0, 1, 2]
    # waits of the kept ranks only, pointing at the same events as before (renumbered)
    assert w_out["rank"].tolist() == waits[waits["rank"] < 3]["rank"].tolist()
    np.testing.assert_array_equal(out["enter"].to_numpy()[w_out["event"].to_numpy()],
                                  ev["enter"].to_numpy()[waits[waits["rank"] < 3]["event"].to_numpy()])


def test_summarised_trace_says_which_ranks() -> None:
    ev = _one_step_barrier(n_ranks=10, per_rank=3)
    doc = json.loads(chrome_trace_text(ev, wait_states(ev), {"scenario": "t"}, max_events=10))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "wait"]
    assert len(slices) == 9
    assert doc["otherData"]["summarised"].startswith("steps 0..0, ranks 0..2 only (9 of 30 events)")


def test_a_single_rank_larger_than_the_summary_is_still_shown() -> None:
    ev = _one_step_barrier(n_ranks=2, per_rank=5)
    out, _, _, ranks = first_steps(ev, wait_states(ev), max_events=3)
    assert ranks == 1 and len(out) == 5


def test_a_run_without_steps_is_bounded_by_a_time_window() -> None:
    # issue 25: a 2-rank program without step markers (osu_get_bw) wrote every one of its 4.7 M events
    rows = [(r, "compute", float(i), i + 0.5, -1) for r in range(2) for i in range(400)]
    rank, op, enter, exit_, match = (list(c) for c in zip(*rows, strict=True))
    ev = make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match)
    ev["step"] = -1  # a program without step markers
    doc = json.loads(chrome_trace_text(ev, wait_states(ev), {"scenario": "t"}, max_events=50))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "wait"]
    assert len(slices) == 50  # rank 0's first 50 computes: enter 0..49 s
    assert doc["otherData"]["summarised"] == ("ranks 0..0, the first 50 s only (50 of 800 events): "
                                              "waitlab export --chrome writes the whole run")
