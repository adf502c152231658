"""Impossible timelines are reported (issue 39): a collective instance where a rank left before the last rank entered
is named in one line by run's summary, by diagnose's notes and in report.html; the built-in suite is silent."""

from __future__ import annotations

import pandas as pd
import pytest

from waitlab.experiments.diagnosis.diagnose import diagnose
from waitlab.experiments.diagnosis.suite import load_suite
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.report.html import build_html
from waitlab.experiments.results import summary_text
from waitlab.models.analysis.summary import rank_budget, summarize
from waitlab.models.analysis.timeline_check import impossible_collectives, impossible_line
from waitlab.models.analysis.waitstates import make_events, wait_states


def crafted() -> pd.DataFrame:
    """Four ranks: barrier 0 as SMPI 3.32's Ibarrier left it (enter 0, 0.5, 1.0, 1.5; ranks 1 and 2 leave at once),
    a correct allreduce 1, an alltoall 2 where rank 3 leaves 0.25 s before rank 0 enters, a correct barrier 3."""
    enter = [0.0, 0.5, 1.0, 1.5, 2.0, 2.0, 2.0, 2.5, 3.0, 3.0, 3.0, 2.75, 4.0, 4.0, 4.0, 4.2]
    exit_ = [1.5, 0.5, 1.0, 1.5, 2.5, 2.5, 2.5, 2.5, 3.1, 3.1, 3.1, 2.75, 4.2, 4.2, 4.2, 4.2]
    rank = [0, 1, 2, 3] * 4
    op = ["barrier"] * 4 + ["allreduce"] * 4 + ["alltoall"] * 4 + ["barrier"] * 4
    match = [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    order = sorted(range(16), key=lambda i: (rank[i], i))
    return make_events(rank=[rank[i] for i in order], op=[op[i] for i in order], enter=[enter[i] for i in order],
                       exit=[exit_[i] for i in order], match=[match[i] for i in order])


def test_crafted_impossible_instances_are_found_by_hand() -> None:
    found = impossible_collectives(crafted())
    # barrier: instances 0 and 3, only 0 broken: the last entry 1.5 s, rank 1 out at 0.5 s: gap 1.0 s
    # alltoall: rank 3 out at 2.75 s, ranks 0-2 enter at 3.0 s: gap 0.25 s; the allreduce is possible
    assert found == [{"op": "alltoall", "instances": 1, "of": 1, "worst_gap": pytest.approx(0.25),
                      "worst_instance": 2},
                     {"op": "barrier", "instances": 1, "of": 2, "worst_gap": pytest.approx(1.0), "worst_instance": 0}]
    line = impossible_line(found)
    assert "\n" not in line and line.startswith("impossible timeline: alltoall: 1 of 1 instance")
    assert "barrier: 1 of 2 instances has a rank leaving before the last entered (worst gap 1 s, instance 0)" in line


def test_a_nonblocking_completion_entry_is_not_its_arrival() -> None:
    # rank 0 completes an Iallreduce it posted long before (tag = its request serial): rank 1 may leave before
    # rank 0's completion call begins; a blocking rank 0 entering then would make the timeline impossible
    ev = make_events(rank=[0, 1], op=["allreduce"] * 2, enter=[2.0, 1.0], exit=[2.0, 1.1], match=[0, 0])
    assert impossible_collectives(ev)[0]["worst_gap"] == pytest.approx(0.9)
    assert impossible_collectives(ev.assign(tag=[1, 0])) == []


def test_run_summary_diagnose_and_report_say_it() -> None:
    ev = crafted()
    ws = wait_states(ev)
    summary = summarize(ev, ws)
    line = impossible_line(summary["impossible_collectives"])
    assert line
    meta = {"scenario": "crafted", "scenario_hash": "x", "ranks": 4, "platform": "p", "nodes": 4,
            "ranks_per_node": 1, "seed": 0, "simgrid_version": "3.32"}
    assert summary_text(summary, meta).splitlines()[-1] == line
    assert line in diagnose(ev, ws).notes
    assert line in build_html(meta, summary, ev, ws, rank_budget(ev, ws), None)
    fine = ev[ev["match"] == 1].reset_index(drop=True)  # the possible allreduce alone: nothing said
    assert summarize(fine, wait_states(fine))["impossible_collectives"] == []
    assert not any(n.startswith("impossible") for n in diagnose(fine, wait_states(fine)).notes)


@pytest.mark.simgrid
@pytest.mark.parametrize("case", [c for c in load_suite() if c.scenario.ranks <= 16], ids=lambda c: c.name)
def test_built_in_suite_cases_are_possible(case) -> None:  # type: ignore[no-untyped-def]
    # the 16-rank cases here; the 256- and 64-rank ones were checked once (docs/real_programs.md)
    assert impossible_collectives(simulate(case.scenario).events) == []
