"""Results kept on disk are keyed by waitlab's code: a changed waitlab (another wait-state rule, a fixed noise model)
does not reuse counterfactual metrics or scored rows an older one computed at the same version number."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from scenario_files import TINY

from waitlab.experiments.diagnosis import evaluate, groundtruth
from waitlab.experiments.diagnosis.registry import BUILTIN
from waitlab.experiments.diagnosis.suite import Case
from waitlab.experiments.scenario import from_mapping
from waitlab.models.ops import OpBuilder
from waitlab.version import code_digest


def test_the_digest_covers_the_code_and_is_stable():
    assert code_digest() == code_digest() and len(code_digest()) == 16


def test_cached_results_are_keyed_by_the_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    sc = from_mapping(tomllib.loads(TINY), "tiny.toml")
    cf = groundtruth.Counterfactuals(sc, OpBuilder(2).build(), cache_dir=tmp_path)
    case = Case("tiny", tmp_path / "tiny.toml", "imbalance", "a tiny case", sc)
    spec = next(iter(BUILTIN.values()))
    before = cf._path("ab" * 32), evaluate._row_path(tmp_path, case, spec, evaluate.Settings())
    monkeypatch.setattr(groundtruth, "code_digest", lambda: "another-waitlab")
    monkeypatch.setattr(evaluate, "code_digest", lambda: "another-waitlab")
    after = cf._path("ab" * 32), evaluate._row_path(tmp_path, case, spec, evaluate.Settings())
    assert before[0] != after[0] and before[1] != after[1]


def test_a_suite_run_is_kept_per_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    sc = from_mapping(tomllib.loads(TINY), "tiny.toml")
    before = evaluate.run_folder(tmp_path, sc)
    monkeypatch.setattr(evaluate, "code_digest", lambda: "another-waitlab")
    assert evaluate.run_folder(tmp_path, sc) != before
