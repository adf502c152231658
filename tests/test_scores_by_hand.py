"""The leaderboard's scores and aggregates, and a few numbers the models and importers rest on, computed by hand.

Each test names the mistake it catches: total error measured as attributed / truth instead of
(attributed - truth) / truth; errors aggregated by their mean instead of their median; blame shifting's idle time
while nobody works dropped; a tie tolerance of 100 us instead of 1 us; a wrong tail of the HOL factor past the
exact chains (a Monte Carlo of Karol et al.'s switch at n = 16 and 32).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from waitlab.experiments.diagnosis.diagnose import Diagnosis
from waitlab.experiments.diagnosis.evaluate import SCORES, case_scores
from waitlab.experiments.diagnosis.leaderboard import leaderboard_dict
from waitlab.experiments.diagnosis.registry import ModelRun
from waitlab.experiments.report.diagnosis_report import to_markdown
from waitlab.models.analysis.baselines import blame_shifting_model
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.suite_scores import tie_sets
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.models.contention import hol_factors, monte_carlo_throughput

# ------------------------------------------------------------------------------------------ one case's scores


class _Truth:
    """A ground truth with one costed pair: removing rank 0's excess in A saves 2 s (of every kind of wait)."""

    def __init__(self) -> None:
        self.reruns: dict[str, dict[str, float]] = {}
        self.partial_noise: list[str] = []
        self.baseline = {"total_wait": 2.0, "makespan": 1.0}

    def cost(self, level: str, metric: str) -> pd.Series:
        if level == "region":
            return pd.Series({"A": 2.0})
        return pd.Series([2.0], index=pd.MultiIndex.from_tuples([(0, "A")], names=["rank", "region"]))

    def cost_of(self, label: str, metric: str) -> float:
        return 2.0


def test_one_case_scored_by_hand() -> None:
    # The model blames (0, A) 3 s, (2, A) 1 s and (1, B) 1 s: attributed 5 s.  Injected: rank 0's A and rank 2's A
    # (the ground truth costed only rank 0's).
    blame = pd.DataFrame({"rank": [0, 2, 1], "region": ["A", "A", "B"], "cost": [3.0, 1.0, 1.0]})
    model = SimpleNamespace(metric="total_wait", blame=lambda: blame, attributed=5.0, key="m",
                            frame=pd.DataFrame())
    ledger = pd.DataFrame({"rank": [0, 2], "region": ["A", "A"], "step": [0, 0], "seconds": [0.5, 0.1],
                           "kind": ["imbalance"] * 2})
    s = case_scores(model, _Truth(), ledger, {}, SimpleNamespace(top_k=3), [])  # type: ignore[arg-type]
    assert s["top1"] == 1.0  # the most blamed pair, (0, A), is the truly costliest
    assert s["blame_error"] == pytest.approx((abs(4 - 2) + abs(1 - 0)) / 2)  # per region: A 4 vs 2, B 1 vs 0
    # per (rank, region), over the pairs whose truth is known: (0, A) costed, (1, B) without a cause (truth 0);
    # (2, A) had a cause but no re-run, so it is left out
    assert s["rank_error"] == pytest.approx((abs(3 - 2) + abs(1 - 0)) / 2)
    assert s["total_error"] == pytest.approx((5 - 2) / 2)  # (attributed - true total) / true total
    assert s["false_blame"] == pytest.approx(1 / 5)  # (1, B) has no injected seconds: 1 s of 5 s
    assert math.isnan(s["spearman"]) and math.isnan(s["predicted"]) and math.isnan(s["realized"])


# ------------------------------------------------------------------------------------------ aggregates


def test_leaderboard_takes_medians_of_errors_and_means_of_the_rest() -> None:
    cases = ["a", "b", "c", "d"]
    rows = pd.DataFrame({
        "model": ["m"] * 4, "name": ["M"] * 4, "case": cases, "cause": ["x", "x", "y", "y"], "what": cases,
        "ranks": [16] * 4, "platform": ["p"] * 4, "error": ["", "", "", "it failed"],
        "top1": [1.0, 0.0, 1.0, 0.0], "topk": [1.0, 1.0, 0.0, 0.0],
        "blame_error": [0.1, 0.2, 0.9, 5.0], "rank_error": [0.0, 0.5, 0.6, 5.0],
        "total_error": [-0.9, 0.1, 0.3, 5.0], "false_blame": [0.0, 0.0, 0.6, 1.0],
        "spearman": [math.nan, 0.5, 1.0, -1.0], "predicted": [0.5, 0.7, 0.9, 0.0],
        "realized": [0.2, 0.4, 0.9, 0.0], "seconds": [0.1] * 4,
    })
    assert set(SCORES) <= set(rows.columns)
    board = leaderboard_dict(rows, [])
    overall = board["overall"]["m"]  # the failed case "d" is not scored
    assert overall["cases"] == 3
    assert overall["blame_error"] == pytest.approx(0.2)  # median of 0.1, 0.2, 0.9 (mean 0.4)
    assert overall["rank_error"] == pytest.approx(0.5)  # median of 0, 0.5, 0.6 (mean 0.367)
    assert overall["total_error"] == pytest.approx(0.3)  # median of |-0.9|, 0.1, 0.3 (mean 0.433)
    assert overall["top1"] == pytest.approx(2 / 3)  # mean (median 1)
    assert overall["topk"] == pytest.approx(2 / 3)
    assert overall["false_blame"] == pytest.approx(0.2)  # mean of 0, 0, 0.6 (median 0)
    assert overall["spearman"] == pytest.approx(0.75)  # mean of 0.5 and 1, n/a skipped
    assert overall["predicted"] == pytest.approx(0.7) and overall["realized"] == pytest.approx(0.5)
    by_y = board["by_cause"]["m|y"]  # only case c is scored in class y
    assert (by_y["cases"], by_y["blame_error"], by_y["top1"]) == (1, 0.9, 1.0)


# ------------------------------------------------------------------------------------------ blame shifting


def test_blame_shifting_leaves_idle_time_unexplained_while_nobody_works() -> None:
    # 0 -> 1 -> 2 chain.  Rank 0 computes [0, 2] and sends; rank 1 computes [0, 1], its receive waits [1, 2] and
    # the message takes until 3, then it sends on; rank 2 computes [0, 1] and waits [1, 3] for rank 1's send.
    # [1, 2]: I = 2 idle, W = 1 working (rank 0): rank 0 gets 2 x 1 s.  [2, 3]: rank 2 idles, nobody works:
    # 1 s unexplained.  Total wait 1 + 2 = 3 s = 2 blamed + 1 unexplained.
    ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                     enter=[0, 2, 0, 1, 3, 0, 1], exit=[2, 2, 1, 3, 3, 1, 4], match=[-1, 0, -1, 0, 1, -1, 1],
                     done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
    ws = wait_states(ev)
    assert ws["wait"].sum() == pytest.approx(3.0)
    out = blame_shifting_model(RunData(ev, ws))
    blamed = {(int(r), str(g)): float(s) for r, g, s in zip(out["rank"], out["region"], out["seconds"], strict=True)}
    assert blamed == pytest.approx({(0, "(top level)"): 2.0})
    assert out.attrs["unexplained"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------ tie tolerance


def _late_pair(gap: float) -> pd.DataFrame:
    # ranks 1 and 2 arrive at a barrier `gap` seconds apart, 2 s after rank 0: rank 0 waits for both
    return make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                       enter=[0, 1, 0, 3, 0, 3 + gap], exit=[1, 3 + gap, 3, 3 + gap, 3 + gap, 3 + gap],
                       match=[-1, 0] * 3)


def test_tie_tolerance_is_one_microsecond() -> None:
    by_rank = {}
    for gap in (0.5e-6, 5e-6):  # inside and outside 1 us (both inside a 100 us tolerance)
        ev = _late_pair(gap)
        costs = cwpdm(ev, wait_states(ev)).costs
        by_rank[gap] = costs.loc[costs["cost"] > 1e-3].groupby("rank")["cost"].sum().to_dict()
    assert set(by_rank[0.5e-6]) == {1, 2}  # a tie: the wait is split between the two late ranks
    assert set(by_rank[5e-6]) == {2}  # 5 us apart: only the last one is the culprit
    # the ledger's ties: injected seconds per step 0.5 us apart are tied, 5 us apart are not
    led = pd.DataFrame({"rank": [1, 2, 3], "region": ["S"] * 3, "step": [0] * 3,
                        "seconds": [0.004, 0.004 + 0.5e-6, 0.004 + 5.5e-6], "kind": ["imbalance"] * 3})
    assert tie_sets(led, [(1, "S"), (2, "S"), (3, "S")]) == [((1, "S"), (2, "S"))]


# ------------------------------------------------------------------------------------------ HOL factor tail


@pytest.mark.parametrize(("n", "slots", "tol"), [(16, 2500, 0.010), (32, 2000, 0.006)])
def test_hol_factor_past_the_exact_chains_matches_a_monte_carlo(n: int, slots: int, tol: float) -> None:
    """Past 12 inputs :func:`hol_factors` extrapolates; Karol et al.'s switch simulated slot by slot (0.1 s each)
    agrees within 3 standard deviations of the simulation (0.0034 at n = 16, 0.0019 at n = 32, over 10 seeds).
    Jumping to the limit 2 - sqrt(2) (0.5858) or staying at rho(12) (0.6071) would fail at n = 32."""
    simulated = monte_carlo_throughput(n, slots=slots, seed=0)
    assert float(hol_factors(n)[n - 1]) == pytest.approx(simulated, abs=tol)
    assert abs(2 - math.sqrt(2) - simulated) > tol  # the limit itself is too far off
    assert np.all(np.diff(hol_factors(n)) < 0)


# ------------------------------------------------------------------------------------------ blame floor


def test_diagnosis_report_lists_no_blame_below_the_floor() -> None:
    """1.127e-17 s of blame (floating-point dust of a subtraction) is below SimGrid's 1 ns clock: not listed."""
    frame = pd.DataFrame({"rank": [0, 1, 2], "region": ["A", "B", "C"], "callpath": ["A", "B", "C"],
                          "seconds": [2.0, 1.127e-17, 3e-9]})
    model = ModelRun(key="m", name="M", metric="total_wait", frame=frame, seconds=0.0, peak_bytes=0, denominator=2.0)
    diag = Diagnosis(scenario=None, metadata={"scenario": "x"}, models=[model], truth=None,
                     baseline={"total_wait": 2.0, "makespan": 3.0, "collective_max_wait": 0.0,
                               "wait_by_op": {"barrier": 2.0}})
    md = to_markdown(diag)
    assert "1.127e-17" not in md and "`B`" not in md
    assert "| `C` | 3e-09 |" in md  # 3 ns is above the floor
    assert "Most blamed (rank, region): (0, `A`) 2 s, (2, `C`) 3e-09 s" in md
    assert "Blame below 1e-09 s" in md
    assert "Wait by operation: MPI_Barrier 2 s" in md  # one spelling per MPI call in the report
