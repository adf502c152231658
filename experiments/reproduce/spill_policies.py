"""Spilling-policy comparison on a BSP application (issue 3): overhead, condition C, wait distortion, flushes.

The application is waitlab's 2-D ``stencil`` (halo exchange with up to four
neighbours, an imbalanced ``Stencil`` region, an allreduce every step) on a
scaled-down Dawning 5000A.  Every MPI call is recorded with its message
payload, so ranks with more neighbours fill their buffers faster: the
per-rank growth is imbalanced, which is what makes per-rank flushing break
condition C.  The buffer is small enough to be flushed several times in the
run, and the memory small enough that keeping everything swaps.

For every policy the unperturbed run is shared, the perturbed run is
simulated, and the table reports: the makespan increase, the total tracer
overhead (rank-seconds of records, swap, flushes and pads), the violations of
condition C for the spilling alone and for all tracer overhead, the wait
distortion (sum of |measured - unperturbed| over all wait states, and the
total), and the flush counts.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.pipeline import prepare, run, simulate_ops
from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.perturbation_report import PerturbationResult
from waitlab.experiments.scenario import Scenario, from_mapping

#: The policies compared, with their ``[tracing]`` keys.
POLICY_SETTINGS: dict[str, dict[str, Any]] = {
    "keep": {"policy": "keep"},
    "per_rank": {"policy": "per_rank"},
    "swapout_f": {"policy": "swapout_f", "every": "auto", "sync": "collectives"},
    "vampir_sync": {"policy": "vampir_sync", "fill_level": 0.8},
    "padded_sync": {"policy": "padded_sync", "fill_level": 0.8},
    "predictive_sync": {"policy": "predictive_sync", "safety": 1.5},
}


@dataclass(frozen=True)
class ComparisonSetup:
    """The application and tracer of the comparison (defaults: see the module doc)."""

    steps: int = 50
    halo_bytes: int = 16384
    compute_seconds: float = 0.01
    imbalance: float = 0.002
    record_bytes: int = 64
    copy_cost: float = 1.5545e-9
    fixed_cost: float = 1e-6
    buffer_bytes: int = 1 << 20
    node_memory: int = 32 << 20
    swap_factor: float = 74.8
    tau_margin: float = 2.0
    seed: int = 7


def scenario(ranks: int, policy: str, setup: ComparisonSetup) -> Scenario:
    """The comparison scenario for one rank count and policy."""
    tracing = dict(POLICY_SETTINGS[policy])
    tracing.update({"buffer_bytes": setup.buffer_bytes, "memory": setup.node_memory,
                    "swap_factor": setup.swap_factor})
    data: dict[str, Any] = {
        "scenario": {"name": f"policies-{policy}-{ranks}", "ranks": ranks, "seed": setup.seed},
        "platform": {"name": "dawning_5000a"},
        "application": {
            "kind": "stencil", "steps": setup.steps, "dims": 2, "halo_bytes": setup.halo_bytes,
            "compute_seconds": setup.compute_seconds, "allreduce_every": 1,
            "imbalance": [{"region": "Stencil", "ranks": "all", "distribution": "exponential",
                           "magnitude": setup.imbalance}],
        },
        "instrumentation": {"events": "mpi", "record_bytes": setup.record_bytes, "payload": 1.0,
                            "fixed_cost": setup.fixed_cost, "copy_cost": setup.copy_cost},
        "tracing": tracing,
    }  # fmt: skip
    return from_mapping(data, f"<policies {policy}>")


def _tau(ranks: int, setup: ComparisonSetup) -> float:
    """f's tau: ``tau_margin`` times the longest possible flush (a full buffer), as a programmer would choose."""
    prep = prepare(scenario(ranks, "keep", setup))
    rp, model = prep.platform, prep.model
    rate = model.disk.bandwidth / rp.ranks_per_node
    return setup.tau_margin * (model.disk.latency + setup.buffer_bytes / rate)


def row(res: PerturbationResult, policy: str, ranks: int) -> dict[str, Any]:
    """One line of the comparison table."""
    rep = res.report
    inj = rep["injected_seconds"]
    sp = rep["spill"] or {}
    d = res.distortion["distortion"]
    return {
        "ranks": ranks, "policy": policy,
        "makespan_unperturbed": rep["makespan"]["unperturbed"], "makespan_measured": rep["makespan"]["measured"],
        "makespan_increase": rep["makespan"]["difference"],
        "tracer_overhead": inj.get("overhead", 0.0) + inj.get("swap", 0.0) + inj.get("flush", 0.0),
        "record_overhead": inj.get("overhead", 0.0), "swap_seconds": inj.get("swap", 0.0),
        "flush_seconds": inj.get("flush", 0.0),
        "c_violations_spill": rep["condition_c_spill"]["violating_pairs"]
        + rep["condition_c_spill"]["violating_collectives"],
        "c_max_diff_spill": rep["condition_c_spill"]["max_difference"],
        "c_violations_all": rep["condition_c"]["violating_pairs"] + rep["condition_c"]["violating_collectives"],
        "c_checked": rep["condition_c"]["pairs"] + rep["condition_c"]["collectives"],
        "wait_distortion_abs": float(d.abs().sum()), "wait_distortion_total": float(d.sum()),
        "flushes": sp.get("flushes", 0), "synchronized_flushes": sp.get("synchronized_flushes", 0),
        "individual_flushes": sp.get("individual_flushes", 0), "swapped_MB": sp.get("swap_bytes", 0.0) / 2**20,
    }  # fmt: skip


def compare(ranks: Sequence[int] = (256, 1024), policies: Sequence[str] = tuple(POLICY_SETTINGS),
            setup: ComparisonSetup | None = None, progress: bool = True) -> pd.DataFrame:
    """Simulate every policy at every rank count; one row per (ranks, policy)."""
    setup = setup or ComparisonSetup()
    rows = []
    for n in ranks:
        t = time.perf_counter()
        tau = _tau(n, setup)
        base_sc = scenario(n, "keep", setup)
        base = simulate_ops(prepare(base_sc))
        for pol in policies:
            sc = scenario(n, pol, setup)
            if pol == "swapout_f":
                sc = sc.with_values({"tracing.tau": tau})
            pres = run(sc, base=base).perturbation
            assert pres is not None
            res = pres
            rows.append(row(res, pol, n))
            if progress:
                r = rows[-1]
                print(f"  {n} ranks, {pol}: +{r['makespan_increase']:.4f} s, overhead {r['tracer_overhead']:.3f} "
                      f"rank-s, C violations (spill) {r['c_violations_spill']}, flushes {r['flushes']}", flush=True)
        if progress:
            print(f"{n} ranks done in {time.perf_counter() - t:.1f} s", flush=True)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """The comparison as a Markdown table."""
    cols = [("ranks", "{:d}"), ("policy", "{}"), ("makespan_increase", "{:.4f}"), ("tracer_overhead", "{:.3f}"),
            ("c_violations_spill", "{:d}"), ("c_violations_all", "{:d}"), ("wait_distortion_abs", "{:.4f}"),
            ("flushes", "{:d}"), ("individual_flushes", "{:d}"), ("swapped_MB", "{:.1f}")]
    head = ["ranks", "policy", "makespan +s", "tracer overhead (rank-s)", "C violations (spill)",
            "C violations (all)", "sum abs wait distortion (s)", "flushes", "individual", "swapped MB"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in table.iterrows():
        out.append("| " + " | ".join(f.format(int(r[c]) if f == "{:d}" else r[c]) for c, f in cols) + " |")
    return "\n".join(out)


def plot(table: pd.DataFrame, path: Path) -> None:
    """Bars of tracer overhead, makespan increase and wait distortion per policy and rank count."""
    metrics = [("tracer_overhead", "tracer overhead (rank-s)"), ("makespan_increase", "makespan increase (s)"),
               ("wait_distortion_abs", "sum |wait distortion| (s)"), ("c_violations_spill", "C violations (spill)")]
    ranks = sorted(table["ranks"].unique())
    pols = list(dict.fromkeys(table["policy"]))
    fig, axes = subplots(1, len(metrics), figsize=(4 * len(metrics), 4))
    width = 0.8 / max(len(ranks), 1)
    for ax, (m, label) in zip(axes, metrics, strict=True):
        for i, n in enumerate(ranks):
            sub = table[table["ranks"] == n].set_index("policy").reindex(pols)
            ax.bar(np.arange(len(pols)) + i * width, sub[m].to_numpy(float), width, label=f"{n} ranks")
        ax.set_xticks(np.arange(len(pols)) + width * (len(ranks) - 1) / 2)
        ax.set_xticklabels(pols, rotation=45, ha="right", fontsize=8)
        ax.set_title(label, fontsize=9)
        if m != "c_violations_spill" and (table[m] > 0).all():
            ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def write(table: pd.DataFrame, folder: Path, setup: ComparisonSetup, png: bool = True) -> None:
    """``policies.csv``, ``policies.md``, ``setup.json`` and ``policies.png`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "policies.csv", index=False)
    (folder / "policies.md").write_text(markdown(table) + "\n")
    (folder / "setup.json").write_text(json.dumps(dataclasses.asdict(setup), indent=2) + "\n")
    if png:
        plot(table, folder / "policies.png")
