"""A run's Chrome trace stays small when one step alone is larger than the summary (issue 15: 16,384 ranks x 1 step
gave a 359,424-event trace although the summary holds 200,000)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.simulator.chrome_trace import _keep_rows, chrome_trace_text, first_steps


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


def _keep_rows_by_mask(ev: pd.DataFrame, waits: pd.DataFrame, keep: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows ``keep`` and their waits, references renumbered, the plain way (a copy and a lookup table)."""
    new_row = np.full(len(ev) + 1, -1, np.int64)
    new_row[np.flatnonzero(keep)] = np.arange(int(keep.sum()))
    out = ev[keep].reset_index(drop=True)
    out["done"] = new_row[ev["done"].to_numpy()[keep]]  # -1 (none) looks up the last entry: -1
    w_out = waits[keep[waits["event"].to_numpy()]].reset_index(drop=True)
    w_out["event"] = new_row[w_out["event"].to_numpy()]
    return out, w_out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.data())
def test_kept_rows_match_a_plain_copy_whether_or_not_they_are_the_first(n: int, data: st.DataObject) -> None:
    # issue 25: the first rows (all of them for a program without step markers) are a slice, not a copy
    done = np.array(data.draw(st.lists(st.integers(-1, n - 1), min_size=n, max_size=n)), np.int64)
    ev = pd.DataFrame({"rank": np.arange(n) // 3, "enter": np.arange(n, dtype=float), "done": done})
    w_events = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    waits = pd.DataFrame({"event": np.array(w_events, np.int64), "wait": np.ones(len(w_events))})
    prefix = data.draw(st.booleans())
    k = data.draw(st.integers(0, n))
    keep = np.arange(n) < k if prefix else np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    got, got_w = _keep_rows(ev, waits, keep)
    want, want_w = _keep_rows_by_mask(ev, waits, keep)
    np.testing.assert_array_equal(got["enter"].to_numpy(), want["enter"].to_numpy())
    np.testing.assert_array_equal(got["done"].to_numpy(), want["done"].to_numpy())
    np.testing.assert_array_equal(got_w["event"].to_numpy(), want_w["event"].to_numpy())
    np.testing.assert_array_equal(got_w["wait"].to_numpy(), want_w["wait"].to_numpy())
