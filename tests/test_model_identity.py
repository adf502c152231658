"""A Python function given as a model is the function it is: two closures of one factory are two models (their
cached scores are not shared), two different functions of one name are refused, and ``""`` as a region (the event
table's name for code outside every region) is read as ``"(top level)"``."""

from __future__ import annotations

import threading
import tomllib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from scenario_files import imbalance_toml, scenario_toml

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.diagnosis import evaluate
from waitlab.experiments.diagnosis.check import tiny_cases
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.registry import ModelSpec, resolve, resolve_all, run_model
from waitlab.experiments.diagnosis.suite import Case, load_suite
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.protocol import RunData

Model = Callable[..., pd.DataFrame]


def blame_on(rank: int) -> Model:
    def fixed(run: RunData, **options: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [rank], "region": ["Stencil"], "seconds": [run.total_wait * 0.9]})
    return fixed


def test_two_closures_of_one_factory_have_different_digests() -> None:
    a, b = resolve(blame_on(1)), resolve(blame_on(0))
    assert a.key == b.key  # both "test_model_identity:fixed"
    assert evaluate.model_digest(a) != evaluate.model_digest(b)
    assert evaluate.model_digest(a) == evaluate.model_digest(resolve(blame_on(1)))  # same captured value: cached


def test_a_closure_over_what_cannot_be_pickled_is_not_cached() -> None:
    lock = threading.Lock()

    def locked(run: RunData, **options: object) -> pd.DataFrame:
        with lock:
            return pd.DataFrame({"rank": [0], "region": ["Stencil"], "seconds": [0.0]})
    assert evaluate.model_digest(resolve(locked)) is None


def test_two_closures_get_their_own_rows(tmp_path: Path) -> None:
    """The case slows rank 1 (the culprit): the closure blaming rank 1 hits, then the one blaming rank 0 misses,
    though the first one's row is in the cache."""
    sc = from_mapping(tomllib.loads(scenario_toml("slow1", 2, 'kind = "stencil"\nsteps = 2', seed=1,
                                                  more=imbalance_toml("1", 0.5))), "slow1.toml")
    case = Case("slow1", tmp_path / "slow1.toml", "imbalance", "rank 1 slow", sc)
    evaluate.materialize_all([case], tmp_path, None, False)
    first = evaluate.evaluate_case(case, [resolve(blame_on(1))], tmp_path, evaluate.Settings())
    second = evaluate.evaluate_case(case, [resolve(blame_on(0))], tmp_path, evaluate.Settings())
    assert first.rows[0]["top1"] == 1.0
    assert second.rows[0]["top1"] == 0.0


def test_two_lambdas_are_refused_with_the_argument_named() -> None:
    with pytest.raises(InputError) as err:
        resolve_all([lambda run, **o: None, lambda run, **o: None])
    text = str(err.value)
    assert "models" in text and "<lambda>" in text and "distinct name" in text


def test_the_same_function_twice_is_one_model() -> None:
    f = blame_on(0)
    assert len(resolve_all([f, f])) == 1
    assert len(resolve_all(["cwpdm", "cwpdm"])) == 1


def test_two_closures_are_refused_by_diagnose() -> None:
    run = next(iter(tiny_cases().values()))
    with pytest.raises(InputError, match="distinct name"):
        run_models(run.events, run.waits, models=[blame_on(0), blame_on(1)])


def test_a_model_spec_of_the_same_function_with_other_options_is_refused() -> None:
    f = blame_on(0)
    with pytest.raises(InputError, match="distinct name"):
        resolve_all([ModelSpec("m", "m", f, {"a": 1}), ModelSpec("m", "m", f, {"a": 2})])


def top(name: str) -> Model:
    def model(run: RunData, **options: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [0], "region": [name], "seconds": [run.total_wait / 2]})
    return model


def test_an_empty_region_passes_check_model() -> None:
    assert waitlab.check_model(top("")) == []


def test_an_empty_region_is_read_as_the_top_level() -> None:
    run = next(iter(tiny_cases().values()))
    out = run_model(ModelSpec("empty", "empty", top("")), run)
    assert list(out.frame["region"]) == ["(top level)"]
    assert list(out.frame["callpath"]) == ["(top level)"]
    out = run_model(resolve(top("")), run)  # in a forked child too
    assert list(out.frame["region"]) == ["(top level)"]


def top_compute(name: str) -> Model:
    """Blame each rank's compute outside every region (the event table's region ``""``), named ``name``."""
    def model(run: RunData, **options: object) -> pd.DataFrame:
        ev = run.events
        top = ev[(ev["op"].astype(str) == "compute") & (ev["region"].astype(str) == "")]
        d = (top["exit"] - top["enter"]).groupby(top["rank"]).sum()
        sec = d * min(1.0, run.total_wait / max(float(d.sum()), 1e-30))
        return pd.DataFrame({"rank": d.index.astype(int), "region": name, "seconds": sec.to_numpy(float)})
    return model


def test_an_empty_region_scores_as_the_top_level(tmp_path: Path) -> None:
    """swap-16's wait comes from the tracer's flushes, outside every region: blaming the top level is a hit whether
    the model spells it ``""`` or ``"(top level)"``, with no false blame."""
    case = load_suite(None, ["swap-16"])[0]
    evaluate.materialize_all([case], tmp_path, None, False)
    specs = [ModelSpec("empty", "empty", top_compute("")), ModelSpec("named", "named", top_compute("(top level)"))]
    empty, named = evaluate.evaluate_case(case, specs, tmp_path, evaluate.Settings(), use_cache=False).rows
    assert empty["top1"] == 1.0 and empty["false_blame"] == 0.0
    assert {k: empty[k] for k in evaluate.SCORES} == {k: named[k] for k in evaluate.SCORES}
