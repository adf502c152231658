"""The perturbation report: unperturbed vs measured run, condition C, wait distortion, buffer timeline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.ops import CAUSE_KINDS, CODE, OpTable
from waitlab.models.perturb import detours as dt
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb import noise_hits as nh
from waitlab.models.perturb.condition_c import ConditionCReport, distortion_summary
from waitlab.models.perturb.stage import NoiseSetup, PerturbationConfig, PerturbedOps


@dataclass(frozen=True)
class PerturbationResult:
    """Unperturbed and measured runs of one scenario, and how they differ."""

    config: PerturbationConfig
    unperturbed: Any  # RunResult
    measured: Any  # RunResult
    perturbed: PerturbedOps
    noise: NoiseSetup
    noise_hits: nh.NoiseHits
    condition_c: ConditionCReport
    condition_c_spill: ConditionCReport
    distortion: pd.DataFrame
    report: dict[str, Any]


def event_op_rows(events: pd.DataFrame, ops: OpTable) -> npt.NDArray[np.int64]:
    """Row of the operation table behind every event row ((rank, seq) -> row)."""
    counts = ops.per_rank_counts()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return (starts[events["rank"].to_numpy()] + events["seq"].to_numpy()).astype(np.int64)


def perturbation_report(name: str, cfg: PerturbationConfig, base: Any, measured: Any, p: PerturbedOps,
            setup: NoiseSetup, hits: nh.NoiseHits, cc: ConditionCReport, cc_spill: ConditionCReport,
            dist: pd.DataFrame) -> dict[str, Any]:
    m0, m1 = float(base.summary["makespan"]), float(measured.summary["makespan"])
    led = measured.ops.ledger
    injected = {k: float(led.seconds[(led.kind == i)].sum()) for i, k in enumerate(CAUSE_KINDS)
                if k != "imbalance"}
    pattern = setup.pattern
    noisy = np.isfinite(pattern.period)  # hosts that have detours (``nodes`` leaves the others without)
    per_host = pattern.fraction()[noisy]
    return {
        "scenario": name,
        "config": cfg.describe(),
        "makespan": {"unperturbed": m0, "measured": m1, "difference": m1 - m0,
                     "slowdown": (m1 / m0) if m0 > 0 else float("nan")},
        "total_wait": {"unperturbed": float(base.waits["wait"].sum()), "measured": float(measured.waits["wait"].sum())},
        "injected_seconds": injected,
        "noise": {
            "model": nz.describe(cfg.noise.model), "scope": cfg.noise.scope,
            "hosts_with_profiles": len(setup.speed_profiles),
            "detour_fraction": float(per_host.mean()) if per_host.size else 0.0,  # over the hosts with detours
            "hosts_with_detours": int(per_host.size), "hosts": int(pattern.n_hosts),
            "hits": len(hits), "delayed_work_seconds": hits.total(),
            "jitter_std": cfg.noise.jitter.std, "jitter_mean": cfg.noise.jitter.mean,
        },
        "instrumentation": {"records": len(p.records), "record_bytes": float(p.records.bytes.sum())},
        "spill": dataclasses.asdict(p.spill) if p.spill is not None else None,
        "buffer": p.spec.describe() if p.spec is not None else None,
        "condition_c": cc.as_dict(),
        "condition_c_spill": cc_spill.as_dict(),
        "distortion": distortion_summary(dist),
    }  # fmt: skip


def _free_swap(rep: dict[str, Any]) -> str:
    """A note when the trace swapped (P1, a property of memory, is violated) but the swap stalls cost nothing."""
    sp = rep["spill"]
    if sp["p1_ok"] or rep["injected_seconds"].get("swap", 0.0) > 0:
        return ""
    why = ("instrumentation.copy_cost is 0" if not rep.get("config", {}).get("instrumentation", {}).get("copy_cost")
           else "tracing.swap_factor is 1")
    return f" (at no cost: a swap stall is (swap_factor - 1) x copy_cost per swapped byte, and {why})"


def mib(nbytes: float) -> str:
    """Bytes as MiB for the report: three decimals, or three significant digits below 0.001 MiB, so a small amount
    does not read as none (300 bytes: 0.000286, not 0.000).

    >>> mib(0), mib(300), mib(5 * 2**20 + 2**19), mib(2**10)
    ('0.000', '0.000286', '5.500', '0.000977')
    """
    x = float(nbytes) / 2**20
    if x == 0 or abs(x) >= 1e-3:
        return f"{x:.3f}"
    return np.format_float_positional(x, precision=3, unique=False, fractional=False, trim="-")


def _host_word(nzr: dict[str, Any]) -> str:
    """What a noise pattern belongs to: a node, or a rank (``scope = "core"``)."""
    return "nodes" if nzr.get("scope") != "core" else "ranks"


def report_text(rep: dict[str, Any]) -> str:
    """The perturbation report for humans (``perturbation.txt``)."""
    mk = rep["makespan"]
    lines = [
        f"perturbation report for scenario {rep['scenario']}",
        f"makespan: unperturbed {mk['unperturbed']:.6f} s, measured {mk['measured']:.6f} s "
        f"(+{mk['difference']:.6f} s, x{mk['slowdown']:.4f})",
        f"total wait: unperturbed {rep['total_wait']['unperturbed']:.6f} s, measured "
        f"{rep['total_wait']['measured']:.6f} s",
        "injected: " + ", ".join(f"{k} {v:.6f} s" for k, v in rep["injected_seconds"].items()),
    ]
    nzr = rep["noise"]
    if nzr["hosts_with_profiles"] or nzr["jitter_std"] or nzr["jitter_mean"]:
        hosts = (f" on the {nzr['hosts_with_detours']} of {nzr['hosts']} {_host_word(nzr)} with noise"
                 if "hosts" in nzr and nzr["hosts_with_detours"] < nzr["hosts"] else "")
        lines.append(f"noise: {nzr['model']} per {nzr['scope']}, {nzr['hits']} detour hits delayed "
                     f"{nzr['delayed_work_seconds']:.6f} s of work (detours take {100 * nzr['detour_fraction']:.3f}% "
                     f"of the time{hosts})")
    if rep["instrumentation"]["records"]:
        lines.append(f"instrumentation: {rep['instrumentation']['records']} records, "
                     f"{mib(rep['instrumentation']['record_bytes'])} MiB")
    sp = rep["spill"]
    if sp:
        lines.append(f"spilling policy {sp['policy']}: {sp['flushes']} flushes ({sp['synchronized_flushes']} "
                     f"synchronised, {sp['individual_flushes']} individual), {mib(sp['flushed_bytes'])} MiB "
                     f"written in {sp['flush_seconds']:.6f} s (pads {sp['pad_seconds']:.6f} s), "
                     f"{mib(sp['swap_bytes'])} MiB swapped; P1 (no swapping) "
                     f"{'holds' if sp['p1_ok'] else 'violated'}{_free_swap(rep)}")
    cc = rep["condition_c"]
    lines.append("condition C (all tracer overhead): " + ("holds" if cc["holds"] else
                 f"violated by {cc['violating_pairs']}/{cc['pairs']} pairs and {cc['violating_collectives']}/"
                 f"{cc['collectives']} collectives, max difference {cc['max_difference']:.6g} s, first at rank "
                 f"{cc['first'].get('rank')} event {cc['first'].get('seq')} ({cc['first'].get('op')})"))
    cs = rep["condition_c_spill"]
    lines.append("condition C (spilling only: swap, flush, pads): " + ("holds" if cs["holds"] else
                 f"violated by {cs['violating_pairs']}/{cs['pairs']} pairs and {cs['violating_collectives']}/"
                 f"{cs['collectives']} collectives, max difference {cs['max_difference']:.6g} s"))
    d = rep["distortion"]
    lines.append(f"wait distortion: {d['wait_states']} wait states, total {d['total_distortion']:+.6f} s, "
                 f"mean |d| {d['mean_abs_distortion']:.6g} s, max |d| {d['max_abs_distortion']:.6g} s")
    for pat, v in d["by_pattern"].items():
        lines.append(f"  {pat}: unperturbed {v['unperturbed']:.6f} s -> measured {v['measured']:.6f} s "
                     f"({v['distortion']:+.6f} s)")
    return "\n".join(lines)


def buffer_timeline(res: PerturbationResult) -> pd.DataFrame:
    """Trace-buffer bytes of every rank over simulated time: one row per record and per flush.

    Columns ``rank, time, resident`` (bytes in the rank's buffer right after the record or flush),
    ``event`` (``record`` or ``flush``) and ``swapped`` (bytes of the record copied past the memory limit).
    """
    p = res.perturbed
    if p.state is None or not len(p.records):
        return pd.DataFrame({"rank": [], "time": [], "resident": [], "event": [], "swapped": []})
    ops = res.measured.ops
    ev = res.measured.events
    t_exit = np.full(len(ops), np.nan)
    t_exit[event_op_rows(ev, ops)] = ev["exit"].to_numpy()
    new_row_of = np.full(int(p.origin.max()) + 1, -1, np.int64)
    kept = np.flatnonzero(p.origin >= 0)
    new_row_of[p.origin[kept]] = kept
    rec_time = t_exit[new_row_of[p.records.row]]
    real = p.state.flush_bytes > 0
    flush_rows = np.flatnonzero((ops.code == CODE["flush"]) & (p.origin < 0))
    if real.sum() != flush_rows.size:  # (cannot happen: every flush with bytes is one operation)
        real = np.zeros(len(p.flushes), bool)
        flush_rows = flush_rows[:0]
    rank = np.concatenate((p.records.rank, p.flushes.rank[real]))
    key_ = np.concatenate((p.records.pos, p.flushes.pos[real]))
    time_ = np.concatenate((rec_time, t_exit[flush_rows]))
    resident = np.concatenate((p.state.resident + p.records.bytes, np.zeros(int(real.sum()))))
    swapped = np.concatenate((p.state.over, np.zeros(int(real.sum()))))
    event = np.concatenate((np.zeros(len(p.records), np.int8), np.ones(int(real.sum()), np.int8)))
    order = np.lexsort((key_, rank))
    rank, time_, resident, swapped, event = rank[order], time_[order], resident[order], swapped[order], event[order]
    # a record written after a flush is stamped no earlier than the flush (program order per rank)
    time_ = dt.group_running_max(np.nan_to_num(time_, nan=0.0), rank.astype(np.int64))
    return pd.DataFrame({"rank": rank.astype(np.int32), "time": time_, "resident": resident,
                         "event": pd.Categorical.from_codes(event, categories=["record", "flush"]),
                         "swapped": swapped})
