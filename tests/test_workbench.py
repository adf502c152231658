"""The diagnosis workbench (issue 24): the model protocol, check_model, the registry, the baselines
(hand-computed), near ties, the suite, and the leaderboard."""

from __future__ import annotations

import importlib.metadata
import math
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.check import check_model, tiny_cases
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.suite import load_suite
from waitlab.models.analysis.baselines import blame_shifting_model, critical_path_model, profile_model
from waitlab.models.analysis.blame_models import cwpdm_model, hcwpdm_each_model
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.graph_blame import graph_model
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.protocol import RunData, blame_problems
from waitlab.models.analysis.suite_scores import l1_error, shared_truth, tie_sets, top_hit
from waitlab.models.analysis.syncpoints import sync_points
from waitlab.models.analysis.waitstates import make_events, wait_states


def _run(ev: pd.DataFrame) -> RunData:
    return RunData(ev, wait_states(ev))


def _by(frame: pd.DataFrame) -> dict[tuple[int, str], float]:
    cols = (frame["rank"], frame["region"], frame["seconds"])
    return {(int(r), str(g)): float(s) for r, g, s in zip(*cols, strict=True)}


def _barrier() -> pd.DataFrame:
    # rank 0 computes 3 s, ranks 1 and 2 compute 1 s, then a barrier: ranks 1 and 2 wait 2 s each
    return make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                       enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)


def _chain() -> pd.DataFrame:
    # 0 -> 1 -> 2 late-sender chain: rank 0 computes 3 s, ranks 1 and 2 compute 1 s (waits of 2 s each)
    return make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                       enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
                       done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])


# ------------------------------------------------------------------------------------------ baselines


def test_profile_charges_each_wait_to_the_waiter() -> None:
    assert _by(profile_model(_run(_barrier()))) == {(1, "(top level)"): 2.0, (2, "(top level)"): 2.0}


def test_blame_shifting_by_hand() -> None:
    # rank 0 works [0,3]; rank 1 works [0,1] then waits [1,3]; rank 2 works [0,2] then waits [2,3].
    # [1,2]: I=1 idle, W=2 working -> 0.5 s each to ranks 0 and 2; [2,3]: I=2, W=1 -> 2 s to rank 0.
    ev = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                     enter=[0, 3, 0, 1, 0, 2], exit=[3, 3, 1, 3, 2, 3], match=[-1, 0] * 3)
    out = blame_shifting_model(_run(ev))
    assert _by(out) == pytest.approx({(0, "(top level)"): 2.5, (2, "(top level)"): 0.5})
    assert out["seconds"].sum() == pytest.approx(3.0)  # = total wait: somebody worked during every wait


def test_critical_path_imbalance_by_hand() -> None:
    # critical path = rank 0's 3 s of compute; mean compute per rank (3+1+1)/3; iota = 3 - 5/3 = 4/3;
    # in seconds of wait n * iota = 3 * 4/3 = 4 = the two waits of 2 s
    assert _by(critical_path_model(_run(_barrier()))) == pytest.approx({(0, "(top level)"): 4.0})


def test_critical_path_imbalance_without_any_wait_blames_nothing() -> None:
    # the root of a reduce computes 3 s, the others 1 s: the path is imbalanced, but nobody waits (a late root of a
    # reduce makes no wait state), so no wait can be blamed and the output keeps the protocol
    ev = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "reduce"] * 3, enter=[0, 3, 0, 1, 0, 1],
                     exit=[3, 3, 1, 1, 1, 1], match=[-1, 0] * 3, peer=[-1, 0] * 3)
    run = _run(ev)
    assert run.total_wait == 0.0
    out = critical_path_model(run)
    assert out["seconds"].sum() == 0.0 and blame_problems(out, run) == []


def test_graph_backtracks_both_waits_to_rank_0() -> None:
    assert _by(graph_model(_run(_chain()), share=1.0)) == pytest.approx({(0, "(top level)"): 4.0})
    # share 0.5: only the largest wait (the first of the two equal ones) is backtracked
    assert _by(graph_model(_run(_chain()), share=0.5)) == pytest.approx({(0, "(top level)"): 2.0})


def test_protocol_cwpdm_and_hcwpdm_keep_their_numbers() -> None:
    for ev in (_barrier(), _chain()):
        run = _run(ev)
        c = cwpdm(ev, run.waits).costs
        assert _by(cwpdm_model(run)) == pytest.approx(
            {(int(r), str(g)): float(v) for r, g, v in zip(c["rank"], c["region"], c["cost"], strict=True)})
        h = hcwpdm(ev, run.waits, pairing="each").costs
        assert _by(hcwpdm_each_model(run)) == pytest.approx(
            {(int(r), str(g)): float(v) for r, g, v in zip(h["rank"], h["region"], h["cost"], strict=True)})


# ------------------------------------------------------------------------------------------ near ties


def test_near_tie_within_a_microsecond_is_split() -> None:
    # ranks 1 and 2 arrive at the barrier 0.4 us apart, rank 0 waits ~2 s: half of it each (1 us tolerance)
    ev = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                     enter=[0, 1, 0, 3, 0, 3 + 4e-7], exit=[1, 3 + 4e-7, 3, 3 + 4e-7, 3 + 4e-7, 3 + 4e-7],
                     match=[-1, 0] * 3)
    ws = wait_states(ev)
    by_rank = cwpdm(ev, ws).costs.groupby("rank")["cost"].sum().to_dict()
    assert by_rank[1] == pytest.approx(by_rank[2], rel=1e-6)
    exact = cwpdm(ev, ws, sync=sync_points(ev, ws, split_ties=True, tie_tolerance=0.0))
    assert set(exact.costs.loc[exact.costs["cost"] > 1e-3, "rank"]) == {2}  # without the tolerance: one rank


def test_tie_sets_and_shared_truth() -> None:
    led = pd.DataFrame({"rank": [3, 9, 5], "region": ["S"] * 3, "step": [0, 0, 0],
                        "seconds": [0.004, 0.004000001, 0.001], "kind": ["imbalance"] * 3})
    sets = tie_sets(led, [(3, "S"), (9, "S"), (5, "S")])
    assert sets == [((3, "S"), (9, "S"))]
    truth = shared_truth(pd.Series({(3, "S"): 1e-7, (9, "S"): 0.0, (5, "S"): 0.1}), {sets[0]: 0.3})
    assert truth[(3, "S")] == truth[(9, "S")] == pytest.approx(0.15)
    # either member of the tied top set is a hit
    assert top_hit(pd.Series({(9, "S"): 1.0}), truth) == 1.0
    assert top_hit(pd.Series({(5, "S"): 1.0}), truth) == 0.0
    assert math.isnan(l1_error(pd.Series({"S": 1.0}), pd.Series({"S": 0.0}), 0.0))  # n/a, not a huge %


# ------------------------------------------------------------------------------------------ check_model


def _frame(**cols: list[object]) -> pd.DataFrame:
    return pd.DataFrame(cols)


def _with_attrs(**attrs: object) -> pd.DataFrame:
    out = _frame(rank=[0], region=["A"], seconds=[0.0])
    out.attrs = dict(attrs)
    return out


@pytest.mark.parametrize(("model", "expected"), [
    (lambda run, **o: [1, 2], "not a pandas DataFrame"),
    (lambda run, **o: _frame(rank=[0], seconds=[1.0]), "has no column region"),
    (lambda run, **o: _frame(rank=[0], region=["A"], seconds=[-1.0]), "negative blame"),
    (lambda run, **o: _frame(rank=[99], region=["A"], seconds=[0.1]), "rank 99, which does not exist"),
    (lambda run, **o: _frame(rank=[0], region=["A"], seconds=[run.total_wait + 1.0]), "more than the run's"),
    (lambda run, **o: 1 / 0, "raised ZeroDivisionError"),
    (lambda run, **o: _frame(rank=[0], region=[None], seconds=[0.1]), "region values that are not strings"),
    (lambda run, **o: _frame(rank=[0], region=[5], seconds=[0.1]), "region values that are not strings"),
    (lambda run, **o: _frame(rank=[0], region=["A"], callpath=[None], seconds=[0.1]),
     "callpath values that are not strings"),
    (lambda run, **o: _frame(rank=[0], region=["A"], seconds=["0.1"]), "seconds column of"),
    (lambda run, **o: _with_attrs(explains="bogus_measure"), "says it explains 'bogus_measure'"),
    (lambda run, **o: _with_attrs(explains=""), "says it explains ''"),
    (lambda run, **o: _with_attrs(explains="considered_wait:nosuchop"), "naming nosuchop, which is no MPI operation"),
    (lambda run, **o: _with_attrs(explains_wait=float("nan")), "says it explains_wait nan"),
])
def test_check_model_names_each_problem(model: object, expected: str) -> None:
    problems = check_model(model)  # type: ignore[arg-type]
    assert any(expected in p for p in problems), problems


def test_a_model_explaining_considered_wait_is_measured_against_that_wait() -> None:
    # an allreduce entered at 0, 1 and 3 s: ranks 0 and 1 wait 3 and 2 s (5 s in all); the largest wait of the
    # instance (what considered_wait:allreduce counts) is 3 s, the denominator when the model gives no explains_wait
    ev = make_events(rank=[0, 1, 2], op=["allreduce"] * 3, enter=[0.0, 1.0, 3.0], exit=[3.0] * 3, match=[0] * 3)
    run = RunData(ev, wait_states(ev))

    def focused(run: RunData, **o: object) -> pd.DataFrame:
        return _with_attrs(explains="considered_wait:allreduce")

    res = registry.run_model(registry.resolve(focused), run)
    assert run.total_wait == 5.0 and res.denominator == 3.0 and res.metric == "considered_wait:allreduce"


@pytest.mark.parametrize("key", list(registry.BUILTIN))
def test_builtin_models_keep_the_protocol(key: str) -> None:
    assert check_model(key) == []


#: check_model's sub-communicator and one-sided runs: (wait pattern, waits per rank, the late rank), by hand
#: (experiments/diagnosis/check.py): rank 3 enters its group's barrier at 3 s, rank 2 at 1 s; rank 2 reaches the
#: closing fence at 4 s, ranks 0 and 1 at 2 s; rank 1 holds rank 0's lock to its unlock at 3.1 s, rank 2 asks at 1 s.
TINY = {"barrier on two sub-communicators": ("wait_at_barrier", {2: 2.0}, 3),
        "one-sided fence, one late rank": ("rma_wait_at_fence", {0: 2.0, 1: 2.0}, 2),
        "one-sided lock contention": ("rma_lock_contention", {2: 2.1}, 1)}


@pytest.mark.parametrize("case", list(TINY))
def test_check_model_sub_communicator_and_one_sided_runs(case: str) -> None:
    pattern, waits, late = TINY[case]
    run = tiny_cases()[case]
    assert set(run.waits["pattern"]) == {pattern}
    assert run.waits.groupby("rank")["wait"].sum().to_dict() == pytest.approx(waits)
    # the models that follow a wait to its culprit blame the late rank for all of it
    for key in ("cwpdm", "hcwpdm_each", "critical_path", "graph"):
        blame = registry.resolve(key).fn(run)
        assert set(blame["rank"]) == {late}, key
        assert blame["seconds"].sum() == pytest.approx(sum(waits.values())), key
    # the profile blames the waiters
    assert set(registry.resolve("profile").fn(run)["rank"]) == set(waits)


def test_a_failing_model_is_named_and_the_others_kept() -> None:
    ev = _barrier()
    errors: dict[str, str] = {}
    runs = run_models(ev, wait_states(ev), models=["cwpdm", lambda run, **o: 1 / 0, "profile"], errors=errors,
                      memory=False)
    assert [r.key for r in runs] == ["cwpdm", "profile"]
    (msg,) = errors.values()
    assert "raised ZeroDivisionError" in msg and "<lambda>" in msg


# ------------------------------------------------------------------------------------------ registry


def test_models_from_a_file_outside_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mymodels_t.py").write_text(textwrap.dedent("""
        import pandas as pd
        def blame_zero(run, **options):
            return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = registry.resolve("mymodels_t:blame_zero")
    assert spec.key == "mymodels_t:blame_zero" and check_model(spec) == []
    assert registry.resolve(f"{tmp_path / 'mymodels_t.py'}:blame_zero").fn(_run(_barrier()))["seconds"].sum() == 4.0
    with pytest.raises(InputError, match="has no function 'nope'"):
        registry.resolve("mymodels_t:nope")
    with pytest.raises(InputError, match=r"unknown model .nope."):
        registry.resolve("nope")


def test_entry_point_models_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = importlib.metadata.EntryPoint(name="prof", value="waitlab.models.analysis.baselines:profile_model",
                                       group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    spec = registry.resolve("prof")
    assert _by(spec.fn(_run(_barrier()))) == {(1, "(top level)"): 2.0, (2, "(top level)"): 2.0}


# ------------------------------------------------------------------------------------------ suite


def test_builtin_suite_covers_the_cause_classes() -> None:
    cases = load_suite()
    assert len(cases) >= 40
    assert {c.cause for c in cases} >= {"compute imbalance", "system noise", "propagation chain", "collective",
                                        "instrumentation overhead", "trace flushing", "trace swapping",
                                        "mixed causes", "ties", "degraded link", "sub-communicators",
                                        "one-sided"}
    names = {c.file.stem for c in cases}
    assert {"collective-barrier-16", "collective-early-reduce-16", "noise-one-node-16", "link-degraded-16",
            "subcomm-row-16", "subcomm-row-256", "rma-fence-16", "rma-lock-16"} <= names
    assert {16, 256} <= {c.scenario.ranks for c in cases if c.cause == "sub-communicators"}
    assert {16, 64} <= {c.scenario.ranks for c in cases if c.cause == "one-sided"}  # 256 ranks: docs/workbench.md
    # the sub-communicator cases run their closing collective on row / column communicators
    sub = [c for c in cases if c.cause == "sub-communicators"]
    assert {c.scenario.application.collective_comm for c in sub} == {"row", "column"}
    # the one-sided cases run the suite's own C program (its source ships with the suite)
    rma = [c for c in cases if c.cause == "one-sided"]
    assert {c.scenario.application_kind for c in rma} == {"program"}
    assert {c.scenario.application.args[0] for c in rma} == {"fence", "lock"}
    assert {16, 256} <= {c.scenario.ranks for c in cases}
    assert len({c.scenario.platform.name for c in cases}) >= 2


def test_a_bad_suite_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text('[[case]]\nfile = "missing.toml"\ncause = "x"\n')
    with pytest.raises(InputError, match=r"case\[0\]\.file"):
        load_suite(tmp_path)
    with pytest.raises(InputError, match=r"has no suite\.toml"):
        load_suite(tmp_path / "nowhere")


def test_api_exports_the_workbench() -> None:
    assert {"check_model", "evaluate"} <= set(waitlab.__all__)


def test_a_sweep_with_an_unknown_model_is_refused_before_running(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text((load_suite(only=["imbalance-one-late-16"])[0].file).read_text())
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n'
                                      '[sweep]\ndiagnose = ["cwpdm", "nosuch"]\n')
    with pytest.raises(InputError, match=r"sweep\.diagnose: unknown model 'nosuch'"):
        waitlab.load_sweep(tmp_path / "sw.toml")
