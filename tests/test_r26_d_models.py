"""Round 26, tester t3's findings on diagnosis models, scoring and plug-ins (fixer d).

- a model that raises on the hard cases is not ranked above the models that answered every case;
- ``evaluate --no-png`` over an earlier leaderboard removes the earlier figure (the folder's record lists it no more);
- the measured view's ``step`` is -1, as in a table read from a trace, and work across a step boundary is one stretch;
- predicted improvements no run can have are refused, and ``"(top)"`` is refused by the check ``diagnose`` and
  ``evaluate`` apply, as by ``check_model``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import waitlab
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.evaluate import SCORES
from waitlab.experiments.diagnosis.leaderboard import to_markdown, write_leaderboard
from waitlab.experiments.run_folder import MARKER, seal
from waitlab.models.analysis.protocol import RunData, blame_problems
from waitlab.models.analysis.waitstates import make_events, wait_states

# ------------------------------------------------------------------------------------------ the leaderboard's order


def _rows(top1: dict[str, list[float | None]]) -> pd.DataFrame:
    """Leaderboard rows of three cases: per model its top-1 hit per case (None: the model failed on that case)."""
    out = []
    for model, hits in top1.items():
        for i, hit in enumerate(hits):
            scores = dict.fromkeys(SCORES, math.nan if hit is None else 0.1)
            scores["top1"] = math.nan if hit is None else hit
            out.append({"model": model, "name": model, "case": f"c{i}", "cause": "imbalance", "what": "w",
                        "ranks": 4, "platform": "p", **scores, "exact_ties": 0, "near_ties": 0, "seconds": 0.1,
                        "error": "" if hit is not None else f"model {model!r} raised RuntimeError: not sure"})
    return pd.DataFrame(out)


def _overall(md: str) -> list[str]:
    """The models of the overall table, in order."""
    part = md.split("## Overall")[1].split("\n## ")[0]
    return [ln.split(" | ")[0][2:] for ln in part.splitlines() if ln.startswith("| ") and ln[2:5] not in ("mod", "---")]


def test_a_model_that_failed_on_some_cases_comes_after_every_complete_one() -> None:
    # top-1 over the answered cases: A 1/3, B 2/3, C 2/2 (one failed), D 1/1 (two failed), E none (three failed)
    rows = _rows({"A": [1, 0, 0], "B": [1, 1, 0], "C": [1, 1, None], "D": [1, None, None], "E": [None] * 3})
    md = to_markdown(rows, [])
    assert _overall(md) == ["B", "A", "C", "D", "E"]  # was C, D, B, A, E: sorted by the answered cases' top-1
    shown = {ln.split(" | ")[0][2:]: ln for ln in md.split("## Overall")[1].split("\n## ")[0].splitlines()
             if ln.startswith("| ")}
    assert shown["C"].startswith("| C | 100% |") and shown["C"].endswith("| 2 (1 failed) |")  # the columns stay
    assert shown["D"].endswith("| 1 (2 failed) |")
    assert "listed after every model that answered all of them, the fewest failures first" in md
    by_class = md.split("## top-1 hit by cause class")[1].split("\n## ")[0]
    listed = [ln.split(" | ")[0][2:] for ln in by_class.splitlines() if ln.startswith("| ")]
    assert listed[2:] == ["B", "A", "C", "D", "E"]  # (after the title and the rule)


def test_without_a_failure_the_order_and_the_page_are_as_before() -> None:
    # (the built-in models never fail: top-1 first, then the blame error)
    rows = _rows({"A": [1, 0, 0], "B": [1, 1, 0], "F": [0, 1, 1]})
    rows.loc[rows["model"] == "F", "blame_error"] = 0.05
    md = to_markdown(rows, [])
    assert _overall(md) == ["F", "B", "A"]
    assert "failures" not in md and "failed" not in md


def test_no_png_over_an_earlier_leaderboard_removes_its_figure(tmp_path: Path) -> None:
    rows = _rows({"A": [1, 0, 0], "B": [1, 1, 0]})
    out = tmp_path / "lb"
    write_leaderboard(rows, out, [], png=True)
    seal(out, "leaderboard", sums_of=())
    assert (out / "leaderboard.png").is_file()
    files = write_leaderboard(rows[rows["case"] == "c0"], out, [], png=False)
    seal(out, "leaderboard", sums_of=())
    assert not (out / "leaderboard.png").exists()  # it showed three cases, the tables now one
    assert sorted(p.name for p in files) == sorted(p.name for p in out.iterdir() if p.name != MARKER)
    assert "leaderboard.png" not in json.loads((out / MARKER).read_text())["files"]


# ------------------------------------------------------------------------------------------ the measured view's step


def test_the_measured_view_has_no_step_and_work_across_steps_is_one_stretch() -> None:
    """By hand: rank 0 computes 0-1 s in step 0 and 1-2 s in step 1, nothing recorded between (a tracer sees one
    stretch of work, 0-2 s), then a barrier rank 1 waits 2 s in."""
    ev = make_events(rank=[0, 0, 0, 1], op=["compute", "compute", "barrier", "barrier"], enter=[0.0, 1.0, 2.0, 0.0],
                     exit=[1.0, 2.0, 2.0, 2.0], match=[-1, -1, 0, 0])
    ev["step"] = np.array([0, 1, 1, 1], np.int32)
    waits = wait_states(ev)
    assert waits["step"].tolist() == [1]  # the simulator's tables have it
    run = RunData(ev, waits)
    assert run.events["step"].tolist() == [-1, -1, -1] and run.waits["step"].tolist() == [-1]
    assert run.events[["rank", "enter", "exit"]].values.tolist() == [[0, 0.0, 2.0], [0, 2.0, 2.0], [1, 0.0, 2.0]]
    assert run.waits["event"].tolist() == [2] and run.waits["wait"].tolist() == [2.0]


# ------------------------------------------------------------------------------------------ the protocol's checks


def _barrier_run() -> RunData:
    """Rank 1 arrives at 2 s, rank 0 at 0 s: 2 s of wait, makespan 2 s, 2 ranks."""
    ev = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 2.0], exit=[2.0, 2.0], match=[0, 0])
    return RunData(ev, wait_states(ev))


def _improvement(values: list[float], regions: list[str] | None = None) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({"rank": [1] * n, "region": regions or ["A"] * n, "seconds": [2.0 / n] * n,
                         "improvement": values})


@pytest.mark.parametrize(("values", "regions", "problem"), [
    ([2.0], None, ""),  # all the wait
    ([-4.0], None, ""),  # -n * makespan: every rank waiting the whole run
    ([1.5, 0.5], None, ""),
    ([1.5, 1.5], ["A", "B"], ""),  # one region each (the scores sum per region)
    ([2.5], None, "predicts 2.5 s of improvement for an item of the region 'A', more than the run's 2 s of wait"),
    ([1.5, 1.5], None, "predicts 3 s of improvement for the region 'A' (the sum of its rows), more than the run's 2 s"),
    ([-4.5], None, "predicts -4.5 s of improvement for an item of the region 'A', below -2 ranks x the 2 s makespan"),
    ([-3.0, -3.0], None, "predicts -6 s of improvement for the region 'A' (the sum of its rows), below -2 ranks"),
    ([1e308, 1e308], None, "predicts 1e+308 s of improvement for an item of the region 'A', more than"),
    ([-1e308], None, "predicts -1e+308 s of improvement for an item of the region 'A', below -2 ranks"),
])
def test_improvements_no_run_can_have_are_refused(values: list[float], regions: list[str] | None,
                                                  problem: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (1e308 twice: no overflow warning of a sum)
        problems = blame_problems(_improvement(values, regions), _barrier_run())
    if problem:
        assert len(problems) == 1 and problems[0].startswith(problem), problems
    else:
        assert problems == []


def test_diagnose_and_evaluate_refuse_what_check_model_refuses() -> None:
    def top(run: RunData, **options: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [1], "region": ["(top)"], "seconds": [1.0]})

    def huge(run: RunData, **options: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [1], "region": ["A"], "seconds": [1.0], "improvement": [1e308]})

    run = _barrier_run()
    said = ('returned a table the protocol does not allow: names the region "(top)", which the run does not have: '
            'time outside every region is "(top level)"')
    assert waitlab.check_model(top, model_timeout=30)[0] == f"barrier, one late rank: {said}"
    for spec in (registry.ModelSpec("top", "top", top),  # in waitlab's process (a spec not made by resolve)
                 registry.resolve(top, timeout=30)):  # in a forked child, as a user's function runs
        with pytest.raises(registry.ModelFailure) as err:
            registry.run_model(spec, run)
        assert said in str(err.value), err.value
    with pytest.raises(registry.ModelFailure, match=r"predicts 1e\+308 s of improvement for an item of the region 'A'"):
        registry.run_model(registry.resolve(huge, timeout=30), run)


def test_a_region_the_events_do_not_name_is_allowed() -> None:
    """A degraded link's truth is on the region ``network``, in no event: a model reading the platform may blame it."""
    blame = pd.DataFrame({"rank": [1], "region": ["network"], "seconds": [2.0]})
    assert blame_problems(blame, _barrier_run()) == []
