"""Every model gets tables it cannot change for the others (round 21): a Python function handed to the API runs on a
copy of its own, a model that calls ``sys.exit`` is left out (the others kept), and a user's model in its own process
leaves no process behind.  Hand-made barrier: rank 0 computes 3 s, ranks 1 and 2 compute 1 s, then a barrier, so
ranks 1 and 2 wait 2 s each (4 s in all), all of it outside every region."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.sandbox import IsolatedModel
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.waitstates import make_events, wait_states


def _barrier() -> pd.DataFrame:
    return make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                       enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)


def _by(frame: pd.DataFrame) -> dict[tuple[int, str], float]:
    cols = (frame["rank"], frame["region"], frame["seconds"])
    return {(int(r), str(g)): float(s) for r, g, s in zip(*cols, strict=True)}


def _mutate_waits(run: RunData, **options: object) -> pd.DataFrame:
    run.waits["wait"] = 1e-3  # replaces the column of the table it was given
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [1e-3]})


def _write_through_array(run: RunData, **options: object) -> pd.DataFrame:
    run.waits["wait"].array[0] = 100.0  # writes into the array (a shallow copy would share it, copy-on-write or not)
    run.events["exit"].array[0] = 100.0
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [1.0]})


@pytest.mark.parametrize("mutator", [_mutate_waits, _write_through_array])
def test_a_function_that_changes_its_tables_changes_nothing_for_the_other_models(mutator: object) -> None:
    ev = _barrier()
    waits = wait_states(ev)
    before_ev, before_w = ev.copy(), waits.copy()
    alone = run_models(ev, waits, models=["profile", "cwpdm"], memory=False)
    runs = run_models(ev, waits, models=[mutator, "profile", "cwpdm"], memory=False)  # type: ignore[list-item]
    by_key = {r.key: r for r in runs}
    # hand-computed: the waiter's own region for profile, the late rank 0 for CWP-DM, 4 s in all
    assert _by(by_key["profile"].frame) == {(1, "(top level)"): 2.0, (2, "(top level)"): 2.0}
    assert _by(by_key["cwpdm"].frame) == {(0, "(top level)"): 4.0}
    assert by_key["cwpdm"].attributed == 4.0 and by_key["cwpdm"].unexplained == 0.0
    assert [_by(r.frame) for r in alone] == [_by(by_key["profile"].frame), _by(by_key["cwpdm"].frame)]
    pd.testing.assert_frame_equal(ev, before_ev)
    pd.testing.assert_frame_equal(waits, before_w)


def test_the_checks_of_a_model_see_the_run_as_it_was_given() -> None:
    def inflate(run: RunData, **options: object) -> pd.DataFrame:
        run.waits["wait"] = run.waits["wait"] * 1000  # 4 s of wait become 4000 s, then blamed
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})

    ev = _barrier()
    errors: dict[str, str] = {}
    assert run_models(ev, wait_states(ev), models=[inflate], errors=errors, memory=False) == []
    (msg,) = errors.values()
    assert "blames 4000 s, more than the run's 4 s of wait" in msg


def test_a_function_that_calls_sys_exit_is_left_out_and_the_others_kept() -> None:
    def exits(run: RunData, **options: object) -> pd.DataFrame:
        raise SystemExit(3)

    ev = _barrier()
    errors: dict[str, str] = {}
    runs = run_models(ev, wait_states(ev), models=[exits, "profile"], errors=errors, memory=True)
    assert [r.key for r in runs] == ["profile"] and _by(runs[0].frame) == {(1, "(top level)"): 2.0,
                                                                         (2, "(top level)"): 2.0}
    (msg,) = errors.values()
    assert "called sys.exit(3)" in msg and "exits" in msg


def test_ctrl_c_in_a_function_model_is_not_swallowed() -> None:
    def interrupted(run: RunData, **options: object) -> pd.DataFrame:  # in its child: Ctrl-C reaches waitlab
        os.kill(os.getppid(), signal.SIGINT)
        time.sleep(60)
        return pd.DataFrame()

    ev = _barrier()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_models(ev, wait_states(ev), models=[interrupted], errors={}, memory=False)
    assert time.monotonic() - t0 < 30  # the child was not waited for


def test_a_copy_of_a_run_has_tables_of_its_own() -> None:
    ev = _barrier()
    placement = pd.DataFrame({"rank": [0, 1, 2], "node": [0, 0, 1]})
    run = RunData(ev, wait_states(ev), placement)
    mine = run.copy()
    assert mine.total_wait == 4.0 and list(mine.events.columns) == list(run.events.columns)
    mine.waits["wait"].array[0] = 50.0
    mine.events["enter"].array[0] = 50.0
    assert mine.placement is not None
    mine.placement["node"].array[0] = 9
    assert run.total_wait == 4.0 and float(run.events["enter"].iloc[0]) == 0.0
    assert run.placement is not None and int(run.placement["node"].iloc[0]) == 0
    assert mine.total_wait == 52.0  # 50 + 2


def test_the_built_in_models_share_the_run_and_change_none_of_its_tables() -> None:
    ev = _barrier()
    run = RunData(ev, wait_states(ev))
    events, waits = run.events.copy(), run.waits.copy()
    for spec in registry.BUILTIN.values():
        assert registry.model_input(spec, run) is run
        registry.run_model(spec, run)
    pd.testing.assert_frame_equal(run.events, events)
    pd.testing.assert_frame_equal(run.waits, waits)
    fn_spec = registry.resolve(_mutate_waits)  # a function runs in a forked child, which has a copy of its own
    assert isinstance(fn_spec.fn, IsolatedModel) and registry.model_input(fn_spec, run) is run
    raw = registry.ModelSpec("raw", "raw", _mutate_waits)  # not resolved: run here, on a copy
    assert registry.model_input(raw, run) is not run


LEAVER = textwrap.dedent('''
    import os
    import subprocess

    import pandas as pd


    def leaves_a_child(run, **options):
        p = subprocess.Popen(["sleep", "3000"])  # never waited for
        with open(os.environ["R21_PIDFILE"], "w") as fh:
            fh.write(str(p.pid))
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})
''')


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_users_model_leaves_no_process_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r21_leaver.py").write_text(LEAVER)
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("R21_PIDFILE", str(pidfile))
    spec = registry.resolve(f"{tmp_path / 'r21_leaver.py'}:leaves_a_child", timeout=60)
    ev = _barrier()
    try:
        res = registry.run_model(spec, RunData(ev, wait_states(ev)))
        assert _by(res.frame) == {(0, "(top level)"): 4.0}
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        if pidfile.exists() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the sleep this test started
