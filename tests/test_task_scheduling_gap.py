"""Table 4 of He et al. against the task-scheduling model: the gap is structural, not a bad fit (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.models.apps.task_scheduling import PAPER_TABLE4, TaskScheduling, overhead_seconds


def test_no_service_time_puts_all_three_rows_within_20_percent() -> None:
    # The model's only parameter, scanned from 1 us to 10 ms per request: the overhead is flat in the task
    # length while the refill is hidden (P s < L), and when it is not, the short tasks pay 19 (P s - L), which
    # already makes the 64 s row's start and end bursts 2 P s > 32 s.  No s meets the 20% acceptance on all rows.
    paper = {length: dyn - st for length, (st, dyn) in PAPER_TABLE4.items()}
    for s in np.geomspace(1e-6, 1e-2, 2001):
        m = TaskScheduling(service=float(s))
        errors = [abs(overhead_seconds(m, length) / paper[length] - 1) for length in paper]
        assert max(errors) > 0.2, s


def test_paper_overheads_are_shorter_than_one_task() -> None:
    # An extra (21st) task on any thread would cost a whole task length, 16 s at least: every measured
    # overhead is below it, so the end of the runs had no last-task imbalance to model.
    for length, (static, dynamic) in PAPER_TABLE4.items():
        assert static == 20 * length
        assert 0 < dynamic - static < length


def test_task_length_error_is_not_a_one_parameter_fix() -> None:
    # docs/sunway.md, table 4, third pass: the static column is the nominal 20 L, so a task-length error d adds
    # 20 d L to the measured overhead.  Constant + 20 d L through the 16 s and 256 s rows (two parameters):
    # d = (2.95 - 4.95) / (20 x 240) = -4.17e-4, constant = 4.95 + 20 x 4.17e-4 x 16 = 5.083 s, so at 64 s
    # 5.083 - 0.533 = 4.55 s against the paper's 3.88 s: +17%, inside 20% only with both parameters fitted.
    over = {length: dyn - st for length, (st, dyn) in PAPER_TABLE4.items()}
    d = (over[256.0] - over[16.0]) / (20 * (256.0 - 16.0))
    const = over[16.0] - 20 * d * 16.0
    assert d == pytest.approx(-4.1667e-4, rel=1e-3) and const == pytest.approx(5.0833, rel=1e-4)
    assert (const + 20 * d * 64.0) / over[64.0] - 1 == pytest.approx(0.1727, abs=1e-3)
