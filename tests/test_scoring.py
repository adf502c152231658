"""Scores of diagnosis models against ground truth, on hand-computed vectors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from waitlab.models.analysis.scoring import (
    by_rank_region,
    by_region,
    culprits,
    false_blame,
    improvement,
    relative_error,
    score,
    spearman,
    top_k_precision,
)


def test_top_k_precision_counts_overlap_of_top_sets():
    model = pd.Series({"A": 9.0, "B": 5.0, "C": 4.0, "D": 0.0})
    truth = pd.Series({"A": 3.0, "C": 8.0, "E": 1.0})
    assert top_k_precision(model, truth, 1) == 0.0  # model's top is A, truth's top is C
    assert top_k_precision(model, truth, 2) == 0.5  # {A, B} vs {C, A}
    assert top_k_precision(model, truth, 3) == pytest.approx(2 / 3)  # {A, B, C} vs {C, A, E}
    # k larger than the number of true culprits shrinks to it
    assert top_k_precision(model, truth, 10) == pytest.approx(2 / 3)
    assert math.isnan(top_k_precision(model, pd.Series({"A": 0.0}), 3))


def test_spearman_perfect_and_reversed():
    truth = pd.Series({"A": 3.0, "B": 2.0, "C": 1.0})
    assert spearman(truth * 10, truth) == pytest.approx(1.0)
    assert spearman(pd.Series({"A": 1.0, "B": 2.0, "C": 3.0}), truth) == pytest.approx(-1.0)
    assert math.isnan(spearman(pd.Series({"A": 1.0}), pd.Series({"A": 1.0})))


def test_relative_error_and_false_blame():
    assert relative_error(11.0, 10.0) == pytest.approx(0.1)
    assert math.isnan(relative_error(1.0, 0.0))
    blamed = pd.Series({"A": 6.0, "MPI_recv": 2.0, "B": 2.0})
    assert false_blame(blamed, {"A", "B"}) == (2.0, 0.2)


def test_improvement_reproduces_the_papers_arithmetic():
    # Wu et al.: 30 s of 41.6 s predicted (72%); realized 18.1 s of 41.6 s (44%)
    got = improvement(30.0, 41.6, 41.6 - 18.1)
    assert got["predicted"] == pytest.approx(0.721, abs=1e-3)
    assert got["realized"] == pytest.approx(0.435, abs=1e-3)


def test_aggregations_and_culprits():
    blame = pd.DataFrame({"rank": [0, 1, 1, 2], "region": ["A", "A", "B", "C"], "cost": [4.0, 2.0, 3.0, 0.5]})
    assert by_region(blame).to_dict() == {"A": 6.0, "B": 3.0, "C": 0.5}
    assert by_rank_region(blame).index.tolist()[0] == (0, "A")
    assert culprits(by_region(blame)) == ["A", "B"]
    assert culprits(by_region(blame), share=0.5) == ["A"]


def test_score_collects_everything():
    pred = pd.Series({"A": 6.0, "B": 3.0, "X": 1.0})
    truth = pd.Series({"A": 5.0, "B": 4.0})
    # per (rank, region): only rank 0's A and rank 1's B were injected; rank 2's B (1 s) and rank 0's X (1 s) were
    # not, although B is an injected region: false blame 2 s of 10 s (as waitlab evaluate counts it)
    pairs = pd.Series({(0, "A"): 6.0, (1, "B"): 2.0, (2, "B"): 1.0, (0, "X"): 1.0})
    s = score(pred, truth, predicted_rank_region=pairs, attributed=10.0, true_total=9.0,
              causal={(0, "A"), (1, "B")}, k=2)
    assert s["top_k_region"] == 1.0
    assert s["relative_error_total"] == pytest.approx(1 / 9)
    assert s["false_blame_seconds"] == 2.0 and s["false_blame_share"] == pytest.approx(0.2)
    assert s["spearman_region"] == pytest.approx(1.0)


def test_spearman_agrees_with_scipy_on_tied_vectors() -> None:
    """The pandas rank correlation used by scoring equals scipy's spearmanr (an independent implementation)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = rng.integers(0, 5, 20).astype(float)  # many ties
        b = rng.normal(size=20) + a * rng.random()
        idx = [f"r{i}" for i in range(20)]
        assert spearman(pd.Series(a, idx), pd.Series(b, idx)) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
