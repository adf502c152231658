"""Users' models see what a measured trace holds and run in a process of their own (issue 40).

- the tables a model gets hold no injected cause (``cause``, ``excess``), no cause ledger (``run.ops``) and no
  label of an inserted perturbation (``noise``, ``overhead``, ...): a model reading them fails with a pointer to
  the protocol; the built-in models give the same tables as on the raw ones;
- a user's model that calls ``sys.exit``, ``os._exit``, crashes, loops forever, mutates its inputs or prints:
  one line naming it and its file, the other models' results kept and unchanged, nothing printed on stdout;
- ``waitlab evaluate`` with such models on one real case: the built-in models' rows are byte-identical to a run
  without them, and the failed model's rows carry their error.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab.cli import main
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.check import check_model
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.evaluate import SCORES
from waitlab.experiments.diagnosis.leaderboard import to_markdown
from waitlab.models.analysis.measured import EVENT_COLUMNS, TRUTH_COLUMNS, measured_events
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.waitstates import make_events, wait_states

HOSTILE = textwrap.dedent('''
    """Models a user might write, on purpose or not."""
    import ctypes
    import os
    import sys

    import pandas as pd


    def _blame(run):
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})


    def good(run, **options):
        return _blame(run)


    def exits0(run, **options):
        sys.exit(0)


    def exits3(run, **options):
        sys.exit(3)


    def hard_exit(run, **options):
        os._exit(0)


    def loops(run, **options):
        while True:
            pass


    def segfault(run, **options):
        ctypes.string_at(0)


    def mutates(run, **options):
        blame = _blame(run)
        run.waits["wait"] = 0.0
        run.events.drop(run.events.index, inplace=True)
        return blame


    def prints(run, **options):
        print("hello from the model")
        os.write(1, b"written on fd 1\\n")
        return _blame(run)


    def reads_excess(run, **options):
        return pd.DataFrame({"rank": [0], "region": ["a"], "seconds": [float(run.events["excess"].sum())]})


    def reads_ops(run, **options):
        return run.ops.ledger


    def blames_noise(run, **options):
        ev = run.events
        noisy = ev["op"].astype(str) == "noise"
        return pd.DataFrame({"rank": ev.loc[noisy, "rank"].to_numpy(), "region": "(top level)",
                             "seconds": 0.0})
''')


def _barrier() -> pd.DataFrame:
    """Rank 0 computes 3 s, ranks 1 and 2 1 s (plus 0.5 s of inserted noise on rank 1) before a barrier: 4 s
    of wait.  The event table carries the simulator's truth columns like a run's."""
    ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "barrier", "compute", "noise", "barrier", "compute",
                                                     "barrier"],
                     enter=[0, 3, 0, 0.5, 1, 0, 1], exit=[3, 3, 0.5, 1, 3, 1, 3], match=[-1, 0, -1, -1, 0, -1, 0])
    ev["cause"] = np.array([0, -1, -1, 1, -1, -1, -1])
    ev["excess"] = np.array([2.0, 0, 0, 0.5, 0, 0, 0])
    return ev


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "hostile.py").write_text(HOSTILE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


# ------------------------------------------------------------------------------------------ what a model sees


def test_a_model_gets_no_truth_columns_and_no_ledger() -> None:
    ev = _barrier()
    run = RunData(ev, wait_states(ev))
    assert not set(TRUTH_COLUMNS) & set(run.events.columns)
    assert set(run.events.columns) <= set(EVENT_COLUMNS)
    assert not hasattr(run, "ops")
    # the inserted noise is work like any other in a trace: no label says it was injected, and no row of its own
    # says how long it took (rank 1's compute 0-0.5 s and noise 0.5-1 s are one stretch of work from 0 to 1 s)
    assert run.events["op"].astype(str).tolist() == ["compute", "barrier", "compute", "barrier", "compute", "barrier"]
    assert run.events[["rank", "enter", "exit"]].values.tolist()[2] == [1, 0.0, 1.0]
    assert set(run.events["kind"].astype(str)) == {"compute", "mpi"}
    # the waits point at the same activities in the merged table
    raw_waits = wait_states(ev)
    assert (run.events["op"].to_numpy()[run.waits["event"]] == ev["op"].to_numpy()[raw_waits["event"]]).all()
    assert (run.events["rank"].to_numpy()[run.waits["event"]] == ev["rank"].to_numpy()[raw_waits["event"]]).all()
    # the caller's table is untouched
    assert "excess" in ev and ev["op"].astype(str).tolist()[3] == "noise"
    assert measured_events(run.events).equals(run.events)  # idempotent


def test_the_builtin_models_give_the_same_tables_on_the_raw_and_the_measured_run() -> None:
    ev = _barrier()
    w = wait_states(ev)
    raw = object.__new__(RunData)  # the tables as the simulator wrote them, truth and labels included
    for name, value in (("events", ev), ("waits", w), ("placement", None)):
        object.__setattr__(raw, name, value)
    for key, spec in registry.BUILTIN.items():
        a, b = registry.run_model(spec, raw).frame, registry.run_model(spec, RunData(ev, w)).frame
        assert a.equals(b), key


def _reads_excess(run: RunData, **options: object) -> pd.DataFrame:
    return pd.DataFrame({"rank": [0], "region": ["a"], "seconds": [float(run.events["excess"].sum())]})


def _reads_ops(run: RunData, **options: object) -> pd.DataFrame:
    return run.ops.ledger  # type: ignore[attr-defined]


def test_check_model_says_a_model_read_the_truth() -> None:
    lines = check_model(_reads_excess)
    assert len(lines) == 7 and all("KeyError: 'excess'" in ln and "measured trace" in ln for ln in lines), lines
    assert all("no attribute 'ops'" in ln for ln in check_model(_reads_ops))


# ------------------------------------------------------------------------------------------ isolation


def test_hostile_models_are_one_line_each_and_the_others_are_unchanged(user_dir: Path,
                                                                          capfd: pytest.CaptureFixture[str]) -> None:
    ev = _barrier()
    w = wait_states(ev)
    names = ["exits0", "hard_exit", "loops", "segfault", "mutates", "prints", "reads_excess"]
    hostile = [registry.resolve(f"hostile:{n}", timeout=2.0) for n in names]
    alone = run_models(ev, w, models=["cwpdm", "critical_path", "profile"], memory=False)
    capfd.readouterr()
    errors: dict[str, str] = {}
    runs = run_models(ev, w, models=["cwpdm", *hostile, "critical_path", "profile"], memory=False, errors=errors)
    out, err = capfd.readouterr()
    assert [r.key for r in runs] == ["cwpdm", "hostile:mutates", "hostile:prints", "critical_path", "profile"]
    for a, b in zip(alone, [r for r in runs if not r.key.startswith("hostile:")], strict=True):
        assert a.frame.equals(b.frame), a.key
    file = str(user_dir / "hostile.py")
    expected = {"exits0": "called sys.exit(0)", "hard_exit": "ended its process with exit status 0",
                "loops": "did not return within 2 s",
                "segfault": "killed by SIGSEGV", "reads_excess": "raised KeyError: 'excess'"}
    assert set(errors) == {f"hostile:{k}" for k in expected}
    for k, what in expected.items():
        msg = errors[f"hostile:{k}"]
        assert msg.startswith(f"model 'hostile:{k}' ") and what in msg and file in msg and "\n" not in msg, msg
    # the model's copy was changed, not the caller's tables
    assert len(ev) == 7 and w["wait"].sum() == pytest.approx(4.0)
    # what a model prints goes to stderr, named, never to stdout (diagnose --json)
    assert out == ""
    assert "model 'hostile:prints' printed: hello from the model" in err
    assert "model 'hostile:prints' printed: written on fd 1" in err


def test_a_users_model_is_never_imported_in_waitlabs_process(user_dir: Path) -> None:
    (user_dir / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n\ndef f(run, **o):\n    return None\n")
    with pytest.raises(Exception, match=r"exits_at_import.py:f': cannot be imported: called sys.exit\(0\)"):
        registry.resolve("exits_at_import.py:f")
    assert "exits_at_import" not in sys.modules and "hostile" not in sys.modules
    registry.resolve("hostile:good")
    assert "hostile" not in sys.modules


# ------------------------------------------------------------------------------------------ evaluate, one real case


@pytest.mark.simgrid
@pytest.mark.slow
def test_evaluate_keeps_the_builtin_rows_byte_identical(user_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["evaluate", "--case", "imbalance-one-late-16", "--cache", str(tmp_path / "cache"), "--no-png", "-q"]
    assert main([*base, "-o", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    hostile = ["exits0", "hard_exit", "loops", "mutates", "prints"]
    args = [*base, "--model-timeout", "3", "-o", str(tmp_path / "lb"), "--json"]
    for h in hostile:
        args += ["--model", f"hostile:{h}"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert out.startswith("{") and "hello from the model" not in out  # --json output stays JSON
    lines = [ln for ln in err.splitlines() if ln.startswith("waitlab: error:")]
    assert len(lines) == 3 and all(str(user_dir / "hostile.py") in ln for ln in lines), err
    for h in ("exits0", "hard_exit", "loops"):
        assert sum(f"model 'hostile:{h}'" in ln for ln in lines) == 1, h
    rows = pd.read_csv(tmp_path / "lb" / "leaderboard.csv")
    failed = rows[rows["error"].notna()]
    assert set(failed["model"]) == {"hostile:exits0", "hostile:hard_exit", "hostile:loops"}
    assert {"hostile:mutates", "hostile:prints"} <= set(rows.loc[rows["error"].isna(), "model"])
    plain = (tmp_path / "plain" / "leaderboard.csv").read_text().splitlines()
    mine = (tmp_path / "lb" / "leaderboard.csv").read_text().splitlines()
    assert plain[0] == mine[0]
    assert plain[1:] == [ln for ln in mine[1:] if not ln.startswith("hostile:")]
    assert "Model failures" in (tmp_path / "lb" / "leaderboard.md").read_text()


def test_evaluate_refuses_unsafe_output_folders_before_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["evaluate", "--case", "imbalance-one-late-16", "--cache", str(tmp_path / "cache"), "--no-png", "-q"]
    for target in ("/", ".", str(Path.home())):
        assert main([*base, "-o", target]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "(leaderboard folder)" in err, err
    assert not (tmp_path / "cache").exists()
    assert not (tmp_path / "leaderboard.md").exists()


def test_the_leaderboard_marks_a_failed_models_cases() -> None:
    rows = []
    for m in ("good", "half", "broken"):
        for case in ("x", "y"):
            err = "boom" if m == "broken" or (m == "half" and case == "y") else ""
            rows.append({"model": m, "name": m.upper(), "case": case, "cause": "k", "what": "w", "ranks": 4,
                         "platform": "p", "error": err, **{s: (np.nan if err else 0.5) for s in SCORES}})
    md = to_markdown(pd.DataFrame(rows), ["broken failed"])
    table: dict[str, str] = {}
    for ln in md.splitlines():  # the overall table's rows (the first row of each model)
        if ln.startswith("| ") and ln.endswith(" |"):
            table.setdefault(ln.split(" | ")[0][2:], ln)
    assert table["GOOD"].endswith("| 2 |")
    assert table["HALF"].endswith("| 1 (1 failed) |")
    assert table["BROKEN"].count("failed") == len(SCORES) + 1 and table["BROKEN"].endswith("| 0 (2 failed) |")
