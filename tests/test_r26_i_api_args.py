"""Round 26 (i): a LoadedRun keeps its folder (absolute, its lazily read files checked), callable-object models get
a stable key, flags refuse text, wrong argument types are one line naming the Python argument, numpy integers are
integers."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import waitlab
from waitlab import api
from waitlab.errors import InputError
from waitlab.experiments.diagnosis.registry import resolve, resolve_all
from waitlab.experiments.executors import check_executor

#: A 4-rank stencil of 2 steps; rank 1 computes 0.05 s more each step: 2 x 0.05 = 0.1 s in its cause ledger.
LATE: dict[str, Any] = {"scenario": {"name": "late4", "ranks": 4, "seed": 1}, "platform": {"name": "dawning_5000a"},
        "application": {"kind": "stencil", "dims": 2, "steps": 2, "compute_seconds": 0.01,
                        "imbalance": [{"region": "Stencil", "ranks": [1], "distribution": "constant",
                                       "magnitude": 0.05}]}}


def _balanced() -> waitlab.Scenario:
    return waitlab.scenario_from_dict({**LATE, "application": {**LATE["application"], "imbalance": []}})


@pytest.mark.simgrid
def test_loaded_run_keeps_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    late = waitlab.scenario_from_dict(LATE)
    for where in (tmp_path / "one", tmp_path / "two"):  # the same relative name, two runs
        where.mkdir()
        waitlab.run(late if where.name == "one" else _balanced(), where / "res")
    monkeypatch.chdir(tmp_path / "one")
    loaded = waitlab.load_run("res")
    assert loaded.folder == tmp_path / "one" / "res" and loaded.folder.is_absolute()
    monkeypatch.chdir(tmp_path / "two")  # "res" is now the balanced run
    assert loaded.ledger()["seconds"].sum() == pytest.approx(0.1)  # 2 steps x 0.05 s, the late run's
    page = tmp_path / "two" / "res" / "report.html"
    before = page.read_bytes()
    waitlab.report(loaded)  # into the late run's folder, not the current folder's "res"
    assert page.read_bytes() == before


@pytest.mark.simgrid
def test_loaded_run_refuses_a_replaced_folder(tmp_path: Path) -> None:
    out = tmp_path / "res"
    waitlab.run(waitlab.scenario_from_dict(LATE), out)
    loaded = waitlab.load_run(out)
    waitlab.run(_balanced(), out, force=True)  # the folder is another run's now
    for read in (loaded.ledger, lambda: loaded.ops, lambda: waitlab.report(loaded)):
        with pytest.raises(InputError) as exc:
            read()
        assert exc.value.file == str(out) and "load_run" in exc.value.fix and "\n" not in str(exc.value)
    with pytest.raises(InputError, match="changed since the folder was loaded"):
        waitlab.diagnose(loaded, models=[])


class _Blame:
    """A model with parameters, written as a class with __call__."""

    def __init__(self, share: float = 1.0) -> None:
        self.share = share

    def __call__(self, run: object, **options: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [0.0]})


def _model(run: object, **options: object) -> pd.DataFrame:
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [0.0]})


def test_callable_object_is_named_by_its_class() -> None:
    a, b = resolve(_Blame()), resolve(_Blame())
    assert a.key == b.key == f"{__name__}:_Blame"  # not its memory address: the same in every session
    assert resolve(functools.partial(_model)).key == "functools:partial"
    assert resolve(_model).key == f"{__name__}:_model"  # a function: as before
    with pytest.raises(InputError, match="two different models are both named"):  # keys stay unique
        resolve_all([_Blame(0.5), _Blame(1.0)])


@pytest.mark.parametrize("call", [
    lambda: waitlab.load_run("nowhere", "no"),
    lambda: waitlab.load_run("nowhere", trust_edited="no"),
    lambda: waitlab.load_events("nowhere", "no"),
    lambda: waitlab.compare("a", "b", trust_edited="no"),
    lambda: waitlab.check_c("nowhere", trust_edited="no"),
    lambda: waitlab.import_otf2("nowhere.otf2", "out", force="no"),
    lambda: waitlab.import_otf2("nowhere.otf2", "out", force="False"),
    lambda: waitlab.capture("nowhere.toml", "out", force="no"),
    lambda: waitlab.capture("nowhere.toml", "out", check="no"),
    lambda: waitlab.run("nowhere.toml", png="no"),
    lambda: waitlab.run("nowhere.toml", check_resources="no"),
])
def test_text_is_not_a_flag(call: object) -> None:
    with pytest.raises(InputError, match=r"^\(python call\): \w+: must be True or False, got '(no|False)'"):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(("call", "name"), [
    (lambda: waitlab.check_c("nowhere", atol="x"), "atol"),
    (lambda: waitlab.check_c("nowhere", kinds="overhead"), "kinds"),
    (lambda: waitlab.check_c(123), "events"),
    (lambda: waitlab.load_events(123), "path"),
    (lambda: waitlab.calibrate("dawning_5000a", timeout=0), "timeout"),
    (lambda: waitlab.calibrate("dawning_5000a", timeout=float("nan")), "timeout"),
    (lambda: waitlab.capture("nowhere.toml", "out", via="nosuch"), "via"),
    (lambda: waitlab.import_otf2("nowhere.otf2", "out", cpu_ratio="2"), "cpu_ratio"),
    (lambda: waitlab.import_otf2("nowhere.otf2", 5), "out"),
])
def test_wrong_kind_names_the_python_argument(call: object, name: str) -> None:
    with pytest.raises(InputError) as exc:
        call()  # type: ignore[operator]
    assert (exc.value.file, exc.value.field) == ("(python call)", name)


def test_workers_must_be_an_integer() -> None:
    for bad in ("2", 1.5, True, 0):
        with pytest.raises(InputError, match="workers: must be an integer >= 1"):
            check_executor("local", bad, None, "evaluate")
    check_executor("local", np.int64(2), None, "evaluate")


def test_numpy_integers_are_integers() -> None:
    plain = waitlab.scenario_from_dict(LATE)
    data = {**LATE, "scenario": {**LATE["scenario"], "ranks": np.int64(4)}}
    sc = waitlab.scenario_from_dict(data)
    assert type(sc.ranks) is int and sc.hash() == plain.hash()
    assert type(data["scenario"]["ranks"]) is np.int64  # the caller's dict is not changed
    eight = sc.with_values({"scenario.ranks": np.int64(8)})
    assert eight.ranks == 8 and eight.hash() == plain.with_values({"scenario.ranks": 8}).hash()
    with pytest.raises(InputError, match="must be an integer"):  # a bool is still not a number of ranks
        sc.with_values({"scenario.ranks": np.True_})


def test_describe_takes_a_numpy_integer() -> None:
    assert api.describe("dawning_5000a", xml_ranks=np.int64(2)) == api.describe("dawning_5000a", xml_ranks=2)
    with pytest.raises(InputError, match=r"^\(python call\): xml_ranks: "):
        api.describe("dawning_5000a", xml_ranks="2")


def test_the_studies_api_names_its_python_arguments(tmp_path: Path) -> None:
    """Tester t7 of session 26: sweep(123), sweep(bar="no"), diagnose(cache_dir=123) and write_report(None, ...) gave
    tracebacks from deep inside (or took "no" as true); each is now one line naming the Python argument."""
    cases = [(lambda: waitlab.sweep(123), "sweep_file: must be the path of a sweep"),
             (lambda: waitlab.sweep(tmp_path / "s.toml", bar="no"), "bar: must be True or False, got 'no'"),
             (lambda: waitlab.diagnose(tmp_path, cache_dir=123), "cache_dir: must be the path of a cache folder"),
             (lambda: waitlab.write_report(None, tmp_path / "r"), "diag: must be a Diagnosis")]
    for call, want in cases:
        with pytest.raises(InputError) as info:
            call()
        assert want in str(info.value) and str(info.value).startswith("(python call): "), str(info.value)
    assert not (tmp_path / "r").exists()
