"""A user's model cannot run code in waitlab's process through its answer, hold waitlab with a thread, flood it with
rows, or get around its time limit (round 23, tester t3's items 2, 4, 5, 7 and 8).

- the answer is data only (``meta.json`` and ``table.bin``, :mod:`waitlab.experiments.diagnosis.sandbox`): a model that
  writes a malicious pickle where the answer goes (``out.pkl``, ``meta.json``) runs nothing in waitlab's process (the
  pickle's marker file is never created) and gets one line; a well-formed answer it forges is checked like a table it
  returned (the protocol, the row cap) and refused in one line; a FIFO or a link to ``/dev/zero`` in its place does not
  hang waitlab;
- a model that returns its table and leaves a thread running: its table counts, at once;
- a table with more rows than the run has events is refused in one line, in the child and (forged) in the parent;
- a model file named like a module waitlab uses, attrs that cannot be copied, a bool rank, names with control
  characters or megabytes long: one line each; deleting what is in its folder does not stop the time limit.

Hand-made barrier: rank 0 computes 3 s, ranks 1 and 2 compute 1 s, then a barrier: 4 s of wait, 6 events.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab.errors import InputError
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.sandbox import MIN_ROW_CAP, _pack, row_cap
from waitlab.models.analysis.protocol import MAX_NAME_CHARS, RunData, blame_problems
from waitlab.models.analysis.waitstates import make_events, wait_states

FORGERS = textwrap.dedent('''
    """Models that write their own answer into the folder waitlab gave them, then end their process."""
    import os
    import pickle
    import threading
    import time

    import numpy as np
    import pandas as pd

    MARKER = os.environ["T23_MARKER"]


    class Boom:
        """Unpickling it creates the marker file."""

        def __reduce__(self):
            return (open, (MARKER, "w"))


    def _global(module, name):
        return (pickle.SHORT_BINUNICODE + bytes([len(module)]) + module.encode() + pickle.SHORT_BINUNICODE
                + bytes([len(name)]) + name.encode() + pickle.STACK_GLOBAL)


    def attack():
        """A pickle that got through round 22's "numpy only" unpickler: numpy._core._methods' ``pickle.loads`` of a
        pickle of Boom."""
        inner = pickle.dumps(Boom(), protocol=4)
        return (b"\\x80\\x04" + _global("numpy._core._methods", "pickle.loads") + pickle.BINBYTES
                + len(inner).to_bytes(4, "little") + inner + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)


    def _folder():
        return os.path.dirname(os.readlink("/proc/self/fd/1"))  # the folder of its redirected output


    def forges_a_pickle(run, **options):
        data = attack()
        for name in ("out.pkl", "meta.json", "table.bin"):
            with open(os.path.join(_folder(), name), "wb") as fh:
                fh.write(data)
        os._exit(0)


    def forges_a_bad_table(run, **options):
        from waitlab.experiments.diagnosis.sandbox import _pack

        cols = {"rank": np.array([999, -5]), "region": ["NoSuch", "(top level)"], "callpath": ["x", "y"],
                "seconds": np.array([float("nan"), -1e9])}
        rows, columns, names, table = _pack(cols)
        with open(os.path.join(_folder(), "table.bin"), "wb") as fh:
            fh.write(table)
        with open(os.path.join(_folder(), "meta.json"), "w") as fh:
            fh.write('{"status": "ok", "rows": %d, "columns": %s, "names": %d, "attrs": {}, "seconds": 0, "peak": 0}'
                     % (rows, str(columns).replace("'", '"'), names))
        os._exit(0)


    def forges_a_fifo(run, **options):
        os.mkfifo(os.path.join(_folder(), "meta.json"))
        os._exit(0)


    def leaves_a_thread(run, **options):
        threading.Thread(target=lambda: time.sleep(1000), daemon=False).start()
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})


    def empties_its_folder_then_sleeps(run, **options):
        for name in os.listdir(_folder()):
            if name not in ("printed", "in.pkl"):
                os.unlink(os.path.join(_folder(), name))
        for fd in range(3, 256):
            try:
                os.close(fd)
            except OSError:
                pass
        time.sleep(300)


    def too_many_rows(run, **options):
        n = len(run.events) + 10_001
        return pd.DataFrame({"rank": np.zeros(n, int), "region": "(top level)", "seconds": np.zeros(n)})


    def attrs_not_copied(run, **options):
        class NoCopy:
            def __reduce__(self):
                raise RuntimeError("no copy of me")

        out = pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})
        out.attrs["x"] = NoCopy()
        return out
''')


def _barrier() -> pd.DataFrame:
    return make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                       enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)


def _run() -> RunData:
    ev = _barrier()
    return RunData(ev, wait_states(ev))


@pytest.fixture
def forgers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "t23_forgers.py").write_text(FORGERS)
    monkeypatch.setenv("T23_MARKER", str(tmp_path / "MARKER"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def _errors(names: list[str], timeout: float = 30.0) -> dict[str, str]:
    ev = _barrier()
    errors: dict[str, str] = {}
    models = [registry.resolve(f"t23_forgers.py:{n}", timeout=timeout) for n in names]
    runs = run_models(ev, wait_states(ev), models=["cwpdm", *models], memory=False, errors=errors)
    assert runs[0].key == "cwpdm"  # the built-in model's result is kept
    return {k.split(":", 1)[1]: v for k, v in errors.items()}


# ------------------------------------------------------------------------------------------ forged answers


def test_a_forged_answer_runs_nothing_in_waitlabs_process_and_is_refused_in_one_line(forgers: Path) -> None:
    errors = _errors(["forges_a_pickle", "forges_a_bad_table", "forges_a_fifo"])
    assert set(errors) == {"forges_a_pickle", "forges_a_bad_table", "forges_a_fifo"}
    assert not (forgers / "MARKER").exists()  # the pickle was never unpickled, here or anywhere
    for msg in errors.values():
        assert "\n" not in msg and len(msg) < 1000, msg
    assert "sent an answer waitlab cannot read (meta.json is not JSON" in errors["forges_a_pickle"]
    bad = errors["forges_a_bad_table"]
    assert "returned a table the protocol does not allow" in bad
    assert "NaN or infinite" in bad and "blames rank 999, which does not exist" in bad
    assert "left a meta.json that is not a file" in errors["forges_a_fifo"]  # (and waitlab did not block on it)


def _forge(meta: str | bytes, table: bytes | None = None, link: str | None = None) -> object:
    """A Python function model (run in a forked child) writing the answer ``meta``/``table`` itself."""
    def model(run: RunData, **options: object) -> pd.DataFrame:
        folder = os.path.dirname(os.readlink("/proc/self/fd/1"))
        if table is not None:
            Path(folder, "table.bin").write_bytes(table)
        if link is not None:
            os.symlink(link, os.path.join(folder, "meta.json"))
        else:
            Path(folder, "meta.json").write_bytes(meta.encode() if isinstance(meta, str) else meta)
        os._exit(0)
    return model


def _one(model: object) -> str:
    ev = _barrier()
    errors: dict[str, str] = {}
    runs = run_models(ev, wait_states(ev), models=[model, "profile"], memory=False,
                      errors=errors)
    assert [r.key for r in runs] == ["profile"] and len(errors) == 1
    msg = next(iter(errors.values()))
    assert "\n" not in msg, msg
    return msg


def test_forged_answers_of_the_wrong_shape_are_one_line_each() -> None:
    rows, columns, names, table = _pack({"rank": np.array([0]), "region": ["(top level)"],
                                         "callpath": ["(top level)"], "seconds": np.array([1.0])})
    good = {"status": "ok", "rows": rows, "columns": columns, "names": names, "attrs": {}, "seconds": 0.1, "peak": 0}

    def meta(**change: object) -> str:
        import json
        return json.dumps({**good, **change})

    cases = {
        "a table of 1000000000 rows, more than the 10000 a table": (meta(rows=10**9), table),
        "rows and names are not counts": (meta(rows=-1), table),
        "columns are not": (meta(columns=["rank", "region", "seconds", "evil"]), table),
        "attrs are not str, int and float": (meta(attrs={"x": [1, 2]}), table),
        "seconds and peak bytes are not numbers": (meta(seconds=float("nan")), table),
        "bytes, not the": (meta(), table[:10]),
        "does not hold 2 names": (meta(names=2), table),
        "codes are not names": (meta(), table[:8] + (5).to_bytes(8, "little") + table[16:]),
        "no status": ('{"status": "pwned"}', None),
        "is not JSON": ("[" * 100_000, None),
        "has no table.bin": (meta(), None),
    }
    for words, (m, t) in cases.items():
        msg = _one(_forge(m, t))
        assert "sent an answer waitlab cannot read" in msg and words in msg, (words, msg)
    # an error it sends: one line, cut, control characters shown escaped
    msg = _one(_forge('{"status": "error", "error": "boom\\nline two\\u001b[2J' + "x" * 100_000 + '"}'))
    assert "boom line two\\x1b[2J" in msg and len(msg) < 2200 and "\x1b" not in msg
    # a link in place of the answer (to /dev/zero: endless) is not followed
    assert "left a meta.json waitlab cannot open" in _one(_forge("", link="/dev/zero"))


def test_a_forged_answer_that_keeps_the_protocol_is_just_a_table() -> None:
    rows, columns, names, table = _pack({"rank": np.array([1, 2]), "region": ["(top level)"] * 2,
                                         "callpath": ["(top level)"] * 2, "seconds": np.array([2.0, 2.0])})
    import json
    meta = json.dumps({"status": "ok", "rows": rows, "columns": columns, "names": names,
                       "attrs": {"explains": "total_wait"}, "seconds": 0.5, "peak": 0})
    ev = _barrier()
    runs = run_models(ev, wait_states(ev), models=[_forge(meta, table)], memory=False)
    assert runs[0].frame[["rank", "seconds"]].to_numpy().tolist() == [[1, 2.0], [2, 2.0]]


def test_a_table_comes_back_as_it_was_returned() -> None:
    def rich(run: RunData, **options: object) -> pd.DataFrame:
        out = pd.DataFrame({"rank": np.array([0, 1, 2], np.int8), "region": pd.Categorical(["", "A", "A"]),
                            "callpath": ["", "A>B", "A>C"], "seconds": [1.0, 0.5, 0.25], "kind": ["imbalance", 3, None],
                            "improvement": [0.1, 0.2, 0.3]})
        out.attrs = {"explains": "total_wait", "explains_wait": 4.0, "n": 3, "dropped": [1]}
        return out

    run = _run()
    got = registry.run_model(registry.resolve(rich, timeout=30), run).frame
    assert got["rank"].tolist() == [0, 1, 2] and got["rank"].dtype == np.int64
    assert got["region"].tolist() == ["(top level)", "A", "A"]
    assert got["callpath"].tolist() == ["(top level)", "A>B", "A>C"]
    assert got["seconds"].tolist() == [1.0, 0.5, 0.25] and got["improvement"].tolist() == [0.1, 0.2, 0.3]
    assert got["kind"].tolist() == ["imbalance", "3", "None"]
    assert got.attrs == {"explains": "total_wait", "explains_wait": 4.0, "n": 3}


# ------------------------------------------------------------------------------------------ threads, rows, time


def test_a_model_that_leaves_a_thread_running_is_answered_at_once(forgers: Path) -> None:
    spec = registry.resolve("t23_forgers.py:leaves_a_thread", timeout=3.0)
    t = time.monotonic()
    res = registry.run_model(spec, _run())
    assert res.frame["seconds"].tolist() == [4.0]
    assert time.monotonic() - t < 15  # (the child's start-up; its call ended before its 3 s)


def test_a_forked_function_that_leaves_a_thread_running_is_answered_too() -> None:
    import threading

    def leaves(run: RunData, **options: object) -> pd.DataFrame:
        threading.Thread(target=lambda: time.sleep(1000), daemon=False).start()
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})

    res = registry.run_model(registry.resolve(leaves, timeout=3.0), _run())
    assert res.frame["seconds"].tolist() == [4.0]


def test_more_rows_than_the_run_has_events_are_refused_in_one_line(forgers: Path) -> None:
    assert row_cap(6) == MIN_ROW_CAP and row_cap(10**7) == 10**7
    errors = _errors(["too_many_rows", "attrs_not_copied"])
    msg = errors["too_many_rows"]
    # the rule applied: the cap is 10,000 rows on this 6-event run, not its 6 events
    assert "\n" not in msg and ("returned a table of 10007 rows, more than the 10000 a table of this run may have (one "
                                "per event of the run, 6 events, and at least 10000)") in msg, msg
    msg = errors["attrs_not_copied"]
    assert "\n" not in msg and "attrs cannot be copied (raised RuntimeError: no copy of me)" in msg, msg


def test_emptying_its_folder_does_not_get_around_the_time_limit(forgers: Path) -> None:
    t = time.monotonic()
    errors = _errors(["empties_its_folder_then_sleeps"], timeout=2.0)
    assert "did not return within 2 s" in errors["empties_its_folder_then_sleeps"]
    assert time.monotonic() - t < 30  # not the 120 s of the import limit


# ------------------------------------------------------------------------------------------ names and ranks


@pytest.mark.parametrize("name", ["pandas", "waitlab", "json"])
def test_a_model_file_named_like_a_module_waitlab_uses_is_refused(name: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / f"{name}.py").write_text("def m(run, **options):\n    return None\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as exc:
        registry.resolve(f"shadow/{name}.py:m")
    text = str(exc.value)
    assert "\n" not in text and f"has the name of the module {name}, which waitlab uses" in text
    assert f"rename it (e.g. my_{name}.py)" in text
    monkeypatch.chdir(tmp_path / "shadow")  # `--model pandas:m` beside the file
    with pytest.raises(InputError) as exc:
        registry.resolve(f"{name}:m")
    assert f"shadow/{name}.py has the name of the module {name}" in str(exc.value)


def test_bool_ranks_and_unprintable_or_huge_names_break_the_protocol() -> None:
    run = _run()

    def frame(**cols: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [1.0], **cols})

    assert blame_problems(frame(rank=[True]), run) == ["has ranks that are True or False, not integers"]
    assert blame_problems(frame(rank=pd.Series([True], dtype=object)), run) == [
        "has ranks that are True or False, not integers"]
    (msg,) = blame_problems(frame(region=["a\nb\x00c"]), run)
    assert msg == "has region names with control characters (a line break, a tab, NUL, ...): 'a\\nb\\x00c'"
    (msg,) = blame_problems(frame(callpath=["R" * 10_000_000]), run)
    assert msg == f"has a callpath name of 10000000 characters, more than {MAX_NAME_CHARS}"
    assert blame_problems(frame(kind=["noise\t1"]), run)[0].startswith("has kind names with control characters")
    (msg,) = blame_problems(frame(seconds=["1.0"]), run)  # one problem, not a sum of the text as seconds
    assert msg.startswith("has a seconds column of ") and msg.endswith(" values, not numbers")  # (str, or object)
    assert blame_problems(frame(region=["x" * MAX_NAME_CHARS], kind=[None]), run) == []
    # a name the run has is the run's, however long
    ev = _barrier()
    ev["region"] = pd.Categorical(["R" * 5000] * 6)
    assert blame_problems(frame(region=["R" * 5000]), RunData(ev, wait_states(ev))) == []
