"""Round 25, the Python API in a notebook: a Diagnosis of any model displays, one text where a list belongs is
refused, the evaluation cache follows what a model reads, a missing suite is named first, arguments are refused
naming the Python argument, a scenario is built from a dict, ``check_model`` has a time limit, no tqdm thread is
left behind and a RunResult shows in one line."""

from __future__ import annotations

import html
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import tqdm
from scenario_files import TINY, imbalance_toml, scenario_toml

import waitlab
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.diagnosis import evaluate as ev_module
from waitlab.experiments.diagnosis.check import tiny_cases
from waitlab.experiments.diagnosis.diagnose import diagnose as diagnose_tables
from waitlab.experiments.diagnosis.registry import resolve
from waitlab.experiments.diagnosis.suite import load_suite
from waitlab.models.analysis.protocol import RunData

#: The culprit-only case of the small suite: rank 1 is 0.5 s late in each of 2 steps.
SLOW = scenario_toml("slow1", 2, 'kind = "stencil"\nsteps = 2', seed=1, more=imbalance_toml("1", 0.5))


def blame_rank1(run: RunData, **options: object) -> pd.DataFrame:
    return pd.DataFrame({"rank": [1], "region": ["Stencil"], "seconds": [run.total_wait]})


#: Read by :func:`scaled` at each call: a notebook's parameter cell.
SCALE = 1.0


def scaled(run: RunData, **options: object) -> pd.DataFrame:
    return pd.DataFrame({"rank": [1], "region": ["Stencil"], "seconds": [run.total_wait * SCALE]})


def _one(message: object) -> str:
    text = str(message)
    assert "\n" not in text, text
    return text


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A suite of one 2-rank case."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "slow1.toml").write_text(SLOW)
    (folder / "suite.toml").write_text('[[case]]\nfile = "slow1.toml"\ncause = "compute imbalance"\nwhat = "x"\n')
    return folder


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(TINY)
    return p


@pytest.fixture
def no_tqdm_monitor() -> Iterator[None]:
    """No tqdm monitor thread running before the test (an earlier bar's would be reused, not started)."""
    mon = tqdm.tqdm.monitor
    if mon is not None:
        mon.exit()
        tqdm.tqdm.monitor = None
    yield


def _monitors() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if type(t).__name__ == "TMonitor"]


# ------------------------------------------------------------------ 1. a Diagnosis of any model displays


def test_a_diagnosis_of_plugin_and_baseline_models_displays() -> None:
    run = next(iter(tiny_cases().values()))
    diag = diagnose_tables(run.events, run.waits, truth=False, models=["cwpdm", "profile", "critical_path",
                                                                        blame_rank1])
    page = diag._repr_html_()
    for m in diag.models:
        assert html.escape(m.name) in page
    plugin = diag.model("test_r25_api:blame_rank1")
    assert f"{plugin.attributed:.4g}" in page


# ------------------------------------------------------------------ 2. one text where a list belongs


def test_one_case_name_as_text_is_refused(tmp_path: Path, suite: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.evaluate(suite, tmp_path / "lb", only="slow1", png=False)  # type: ignore[arg-type]
    assert _one(exc.value).startswith("(python call): only: must be a list of texts, got the text 'slow1'")
    assert "only=['slow1']" in str(exc.value) and not (tmp_path / "lb").exists()
    with pytest.raises(InputError, match=r"^\(python call\): only: "):
        load_suite(suite, "slow1")  # type: ignore[arg-type]


def test_one_model_as_text_is_refused_by_evaluate(tmp_path: Path, suite: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.evaluate(suite, tmp_path / "lb", models="cwpdm", png=False)  # type: ignore[arg-type]
    assert _one(exc.value).startswith("(python call): models: must be a list of models, got str 'cwpdm'")
    with pytest.raises(InputError, match=r"^\(python call\): models: must be a list"):
        ev_module.all_models("cwpdm")  # type: ignore[arg-type]


def test_the_command_line_s_cases_are_a_list(tmp_path: Path, suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(suite), "-o", str(tmp_path / "lb"), "--case", "nosuch", "-q"]) == 2
    err = capsys.readouterr().err
    assert "no case matches nosuch" in err and "only" not in err


# ------------------------------------------------------------------ 2b. the cache follows what a model reads


def test_a_changed_global_is_scored_again(tmp_path: Path, suite: Path, no_tqdm_monitor: None) -> None:
    """The tester's stale.py: a model reads a module-level SCALE; changed between two evaluates, the second one's
    row is the new model's, not the cached row of the first (and no tqdm thread is left behind)."""
    global SCALE
    before = set(threading.enumerate())
    kw: dict[str, Any] = {"models": [scaled], "cache_dir": tmp_path / "cache", "png": False}
    try:
        SCALE = 1.0
        first = waitlab.evaluate(suite, tmp_path / "lb1", **kw)
        SCALE = 0.5
        second = waitlab.evaluate(suite, tmp_path / "lb2", **kw)
    finally:
        SCALE = 1.0
    third = waitlab.evaluate(suite, tmp_path / "lb3", **kw)  # SCALE back to 1.0: the first row, from the cache
    row = [e.rows.set_index("model").loc["test_r25_api:scaled"] for e in (first, second, third)]
    assert row[0]["total_error"] == pytest.approx(0.0, abs=1e-3)
    assert row[1]["total_error"] == pytest.approx(-0.5, abs=1e-3)
    assert row[2]["total_error"] == row[0]["total_error"]
    assert not any("not cached" in n for n in first.notes)
    assert not set(threading.enumerate()) - before and not _monitors()
    assert tqdm.tqdm.monitor_interval == 10  # the caller's own tqdm setting is left as it was


def test_a_notebook_function_is_not_cached_and_the_notes_say_so(tmp_path: Path, suite: Path) -> None:
    """A function whose source is no file (a notebook cell: ``/tmp/ipykernel_.../1.py`` does not exist)."""
    namespace: dict[str, Any] = {"pd": pd}
    code = compile("def cell(run, **options):\n    return pd.DataFrame({'rank': [1], 'region': ['Stencil'], "
                   "'seconds': [run.total_wait]})\n", str(tmp_path / "ipykernel_1" / "1.py"), "exec")
    exec(code, namespace)
    cell = namespace["cell"]
    assert ev_module.model_digest(resolve(cell)) is None
    out = waitlab.evaluate(suite, tmp_path / "lb", models=[cell], cache_dir=tmp_path / "cache", png=False)
    note = [n for n in out.notes if "not cached" in n]
    assert len(note) == 1 and "is not a file (a notebook cell" in note[0], out.notes
    assert "Model failures" not in (tmp_path / "lb" / "leaderboard.md").read_text()


def test_a_global_that_cannot_be_pickled_is_not_cached() -> None:
    assert ev_module.model_digest(resolve(reads_lock)) is None
    assert ev_module.model_digest(resolve(blame_rank1)) is not None  # reads pd (a module) only: cached


LOCK = threading.Lock()


def reads_lock(run: RunData, **options: object) -> pd.DataFrame:
    with LOCK:
        return blame_rank1(run)


def test_a_helper_of_the_same_module_is_followed() -> None:
    global SCALE
    before = ev_module.model_digest(resolve(calls_scaled))
    try:
        SCALE = 2.0
        assert ev_module.model_digest(resolve(calls_scaled)) != before
    finally:
        SCALE = 1.0
    assert ev_module.model_digest(resolve(calls_scaled)) == before


def calls_scaled(run: RunData, **options: object) -> pd.DataFrame:
    return scaled(run)


# ------------------------------------------------------------------ 3. a missing suite is named first


def test_a_missing_suite_is_named_before_the_output_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as exc:
        waitlab.evaluate("nosuite", out="everr5", png=False)
    assert _one(exc.value).startswith("nosuite: (suite): has no suite.toml")


# ------------------------------------------------------------------ 4. errors name the Python argument


def test_load_scenario_and_with_values_name_the_call(scenario: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.load_scenario(3)  # type: ignore[arg-type]
    assert _one(exc.value).startswith("(python call): path: must be the path of a scenario TOML file")
    sc = waitlab.load_scenario(scenario)
    with pytest.raises(InputError) as exc:
        sc.with_values([("scenario.ranks", 4)])  # type: ignore[arg-type]
    assert _one(exc.value).startswith("(python call): changes: must be a dict")
    with pytest.raises(InputError) as exc:
        sc.with_values({"scenario.ranks": "16"})
    assert (exc.value.file, exc.value.field) == ("(python call)", "scenario.ranks")
    with pytest.raises(InputError) as exc:
        sc.with_values({"nosection.x": 1})
    assert exc.value.file == "(python call)"
    assert sc.with_values({"scenario.ranks": 8}).ranks == 8


def _slow_model(run: RunData, **options: object) -> pd.DataFrame:
    time.sleep(60)
    return blame_rank1(run)


@pytest.mark.parametrize("kwargs, field", [
    ({"model_timeout": "5", "models": [blame_rank1]}, "model_timeout"),
    ({"model_timeout": -1}, "model_timeout"),
    ({"model_timeout": True}, "model_timeout"),
])
def test_evaluate_checks_model_timeout_first(tmp_path: Path, suite: Path, kwargs: dict[str, Any],
                                             field: str) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.evaluate(suite, tmp_path / "lb", png=False, **kwargs)
    assert (exc.value.file, exc.value.field) == ("(python call)", field)
    _one(exc.value)
    assert not (tmp_path / "lb").exists()


def test_resolve_refuses_a_time_limit_of_text() -> None:
    with pytest.raises(InputError, match=r"^\(python call\): model_timeout: must be a positive number of seconds, "
                       r"got '5'"):
        resolve(blame_rank1, timeout="5")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="model_timeout"):
        resolve("cwpdm", timeout=-1)


@pytest.mark.parametrize("kwargs, field", [
    ({"truth": "no"}, "truth"),
    ({"memory": "yes"}, "memory"),
    ({"use_cache": 0}, "use_cache"),
    ({"culprit_share": 5.0}, "culprit_share"),
    ({"culprit_share": float("nan")}, "culprit_share"),
    ({"focus_share": -1}, "focus_share"),
    ({"focus_share": 0}, "focus_share"),
])
def test_diagnose_checks_flags_and_shares(tmp_path: Path, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.diagnose(tmp_path / "nothing", **kwargs)
    assert (exc.value.file, exc.value.field) == ("(python call)", field)
    assert "--" not in _one(exc.value)


def test_diagnose_names_cache_dir(tmp_path: Path) -> None:
    f = tmp_path / "events.csv"
    f.write_text("x\n")
    with pytest.raises(InputError) as exc:
        waitlab.diagnose(tmp_path / "nothing", cache_dir=f)
    assert (exc.value.file, exc.value.field) == (str(f), "cache_dir") and "--" not in _one(exc.value)


def test_compare_png_names_its_argument(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.api.compare_png(None, tmp_path / "cmp.txt")  # type: ignore[arg-type]
    assert (exc.value.file, exc.value.field) == ("(python call)", "path") and "--png" not in _one(exc.value)
    assert not (tmp_path / "cmp.txt").exists()


def test_an_output_folder_inside_a_file_names_that_file(tmp_path: Path, scenario: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.run(scenario, scenario / "sub")
    text = _one(exc.value)
    assert exc.value.file == str(scenario / "sub") and exc.value.field == "(output folder)"
    assert f"lies inside {scenario}, which is a file" in text and "disk" not in text


# ------------------------------------------------------------------ 5. a scenario from a dict


def test_a_scenario_from_a_dict_is_the_file_s(scenario: Path) -> None:
    data = tomllib.loads(TINY)
    sc = waitlab.scenario_from_dict(data)
    assert sc.hash() == waitlab.load_scenario(scenario).hash()
    with pytest.raises(InputError) as exc:
        waitlab.run(data)  # type: ignore[arg-type]
    assert "got dict" in _one(exc.value) and "waitlab.scenario_from_dict" in str(exc.value)
    with pytest.raises(InputError) as exc:
        waitlab.scenario_from_dict({**data, "scenario": {**data["scenario"], "ranks": "16"}})
    assert (exc.value.file, exc.value.field) == ("(python call)", "scenario.ranks")
    with pytest.raises(InputError, match=r"^\(python call\): data: must be a dict"):
        waitlab.scenario_from_dict("[scenario]")  # type: ignore[arg-type]


# ------------------------------------------------------------------ 6. check_model's time limit


def takes_no_timeout_option(run: RunData, **options: object) -> pd.DataFrame:
    assert "model_timeout" not in options, options
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [0.0]})


def test_check_model_takes_a_time_limit_and_stops_at_the_first_time_out() -> None:
    assert waitlab.check_model(takes_no_timeout_option, model_timeout=30) == []
    t = time.monotonic()
    out = waitlab.check_model(_slow_model, model_timeout=1)
    assert time.monotonic() - t < 30
    assert len(out) == 1 and "did not return within 1 s" in out[0] and "the check stopped here" in out[0], out
    assert "6 more cases not run" in out[0]
    for bad in (-1, "5", float("nan")):
        with pytest.raises(InputError, match=r"^\(python call\): model_timeout: "):
            waitlab.check_model("cwpdm", model_timeout=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ 7. threads and reprs


def test_diagnose_leaves_no_tqdm_thread_and_a_run_result_is_one_line(tmp_path: Path, suite: Path,
                                                                      no_tqdm_monitor: None) -> None:
    run = waitlab.run(suite / "slow1.toml", tmp_path / "r")
    text = repr(run.result)
    assert _one(text).startswith("RunResult(scenario 'slow1': 2 ranks on dawning_5000a, makespan ")
    assert len(text) < 300 and "wait states" in text
    assert "makespan" in run.result._repr_html_()
    before = set(threading.enumerate())
    diag = waitlab.diagnose(tmp_path / "r", cache_dir=tmp_path / "cache")
    assert diag.truth is not None and diag.truth.simulated > 0  # re-runs went through the progress bar
    assert not set(threading.enumerate()) - before and not _monitors()
    assert tqdm.tqdm.monitor_interval == 10
