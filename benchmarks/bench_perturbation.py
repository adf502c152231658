"""Benchmark of the perturbation stages (issue 3) at 1024 ranks x 50 steps, the condition C checker, and SMPI.

Part 1 (no SMPI): the 2-D ``stencil`` application (halo exchange with up to four neighbours, an
allreduce per step) at ``--ranks`` x ``--steps``; every stage of the perturbation layer is timed:
jitter, instrumentation records, each spilling policy (plan + buffer state + operations), inserting
the operations, rendering 1 kHz noise profiles for every rank, and -- on an event table with
synthetic times (every operation takes its nominal duration, as if there were no waiting) -- the
noise ledger, the condition C checker and the wait distortion join.  Target: the checker
processes >= 2 million events per second.

Part 2 (SMPI, skipped with ``--no-smpi``): the same application (4 KiB halos) simulated by SMPI
without noise and with 1 kHz periodic noise (25 us detours, random phase per node); the ratio of
the SMPI wall times must stay <= 3.

    .venv/bin/python benchmarks/bench_perturbation.py                  # everything (a few minutes)
    .venv/bin/python benchmarks/bench_perturbation.py --no-smpi        # stages only (seconds)
    .venv/bin/python benchmarks/bench_perturbation.py --smpi-ranks 256 # smaller SMPI comparison
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.perturbation import parse_perturbation
from waitlab.experiments.pipeline import prepare, simulate
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.registry import generate
from waitlab.models.columns import frame
from waitlab.models.ops import CODE
from waitlab.models.perturb import noise_hits as nh
from waitlab.models.perturb.condition_c import check_condition_c, original_keys, wait_distortion
from waitlab.models.perturb.stage import PlatformFacts, noise_setup, perturb_ops
from waitlab.simulator.timeline import build_events

TARGET_CHECKER_EVENTS_PER_S = 2e6
TARGET_SMPI_RATIO = 3.0


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls and the last result."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def synthetic_times(ops: Any) -> tuple[np.ndarray, np.ndarray]:
    """Enter/exit of every operation if each took its nominal duration back to back on its rank."""
    dur = np.zeros(len(ops))
    for a in ("compute", "overhead", "noise", "delay", "swap"):
        m = ops.code == CODE[a]
        dur[m] = ops.value[m]
    fl = ops.code == CODE["flush"]
    dur[fl] = ops.value[fl] / np.where(ops.value2[fl] > 0, ops.value2[fl], np.inf)
    counts = ops.per_rank_counts()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    cs = np.cumsum(dur)
    base = np.repeat(cs[starts] - dur[starts], counts)
    t_exit = cs - base
    return t_exit - dur, t_exit


def stages(ranks: int, steps: int) -> dict[str, Any]:
    sc = from_mapping({"scenario": {"ranks": ranks, "seed": 1}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "stencil", "steps": steps, "dims": 2}}, "<bench>")
    out: dict[str, Any] = {"ranks": ranks, "steps": steps}
    t, ops = timed(lambda: generate(sc.application, sc.ranks, sc.seed))
    out["application_ops"] = len(ops)
    out["generate_s"] = t
    rpn = 16
    facts = PlatformFacts(n_ranks=ranks, ranks_per_node=rpn, core_speed=7.6e9,
                          host_of_rank=tuple(f"node-{r // rpn}-core-{r % rpn}" for r in range(ranks)),
                          node_of_rank=np.arange(ranks) // rpn, node_memory=32 << 20, disk_bandwidth=1e8,
                          disk_latency=5e-3)
    base_sections = {"noise": {"jitter_std": 0.05},
                     "instrumentation": {"events": "all", "record_bytes": 64, "payload": 1.0, "fixed_cost": 1e-6,
                                         "copy_cost": 1.55e-9}}
    policies: dict[str, dict[str, Any]] = {}
    perturbed = None
    for pol, extra in (("keep", {}), ("per_rank", {}), ("swapout_f", {"every": "auto", "tau": 10.0}),
                       ("vampir_sync", {}), ("padded_sync", {}), ("predictive_sync", {})):
        cfg = parse_perturbation({**base_sections, "tracing": {"policy": pol, "buffer_bytes": 1 << 20, **extra}})
        t0 = time.perf_counter()
        p = perturb_ops(ops, cfg, facts, seed=1)
        t = time.perf_counter() - t0
        policies[pol] = {"total_s": t, **{f"{k}_s": v for k, v in p.seconds.items()},
                         "inserted_ops": len(p.ops) - len(ops), "flushes": p.spill.flushes if p.spill else 0}
        if pol == "predictive_sync":
            perturbed = p
    out["policies"] = policies
    assert perturbed is not None
    pops = perturbed.ops
    out["perturbed_ops"] = len(pops)
    # noise profiles: 1 kHz periodic, one pattern per rank (per core)
    ncfg = parse_perturbation({"noise": {"model": "periodic", "frequency": 1000.0, "duration": 2.5e-5,
                                         "scope": "core"}}).noise
    t, setup = timed(lambda: noise_setup(ncfg, facts, seed=1, horizon=10.0))
    out["noise_profiles_s"] = t
    # event tables with synthetic times
    te, tx = synthetic_times(pops)
    t, ev = timed(lambda: frame(build_events(pops, te, tx)))  # condition C reads pandas
    out["events"] = len(ev)
    out["build_events_s"] = t
    t, (led_rows) = timed(lambda: nh.noise_hits(setup.pattern, setup.pattern_host_of_rank,
                                                *_cpu(pops, te, tx, setup, facts.core_speed)))
    out["noise_ledger_s"] = t
    out["noise_hits"] = len(led_rows)
    t, rep = timed(lambda: check_condition_c(ev), repeat=3)
    out["condition_c_s"] = t
    out["condition_c_events_per_s"] = len(ev) / t
    out["condition_c_holds"] = rep.holds
    te0, tx0 = synthetic_times(ops)
    ev0 = frame(build_events(ops, te0, tx0))
    # synthetic times have no waits: give every MPI event of both tables a wait state to join
    w0, w1 = synthetic_waits(ev0, 1), synthetic_waits(ev, 2)
    counts = pops.per_rank_counts()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rows = starts[ev["rank"].to_numpy()] + ev["seq"].to_numpy()
    oseq = perturbed.origin_seq(ops)[rows]
    t, dist = timed(lambda: wait_distortion(w1, original_keys(ev, oseq), w0, original_keys(ev0)))
    out["distortion_s"] = t
    out["distortion_wait_states"] = len(dist)
    return out


def synthetic_waits(ev: pd.DataFrame, seed: int) -> pd.DataFrame:
    """One wait state per MPI event (random seconds), in the wait-state table's columns."""
    rows = np.flatnonzero(ev["kind"].cat.codes.to_numpy() == list(ev["kind"].cat.categories).index("mpi"))
    return pd.DataFrame({"event": rows, "rank": ev["rank"].to_numpy()[rows], "pattern": "late_sender",
                         "wait": np.random.default_rng(seed).exponential(1e-3, rows.size)})


def _cpu(ops: Any, te: np.ndarray, tx: np.ndarray, setup: Any, speed: float) -> tuple[Any, ...]:
    rows, a, b = nh.cpu_intervals(ops, te, tx, speed, setup.pattern, setup.pattern_host_of_rank)
    return ops.rank[rows].astype(np.int64), rows, a, b


def checker_scaling(n_events: int) -> dict[str, float]:
    """The checker on a bigger synthetic table (ring exchange + allreduce), for the events/s figure."""
    ranks = 1024
    steps = max(1, n_events // (ranks * 4))
    r = np.repeat(np.arange(ranks), steps * 4)
    j = np.tile(np.arange(steps * 4), ranks)
    s, slot = j // 4, j % 4
    op = np.array(["overhead", "isend", "irecv", "allreduce"])[slot]
    match = np.where(slot == 1, s * ranks + r, np.where(slot == 2, s * ranks + (r - 1) % ranks,
                                                        np.where(slot == 3, s, -1)))
    dur = np.where(slot == 0, 1e-6 * (1 + (r % 3)), 0.0)
    ev = pd.DataFrame({"rank": r.astype(np.int32), "seq": j.astype(np.int32),
                       "kind": pd.Categorical(np.where(slot == 0, "overhead", "mpi")),
                       "op": pd.Categorical(op), "enter": np.zeros(r.size), "exit": dur, "match": match})
    t, rep = timed(lambda: check_condition_c(ev), repeat=3)
    return {"events": float(len(ev)), "seconds": t, "events_per_s": len(ev) / t,
            "violations": float(rep.violating_pairs + rep.violating_collectives)}


def smpi_ratio(ranks: int, steps: int, scope: str) -> dict[str, Any]:
    sc = from_mapping({"scenario": {"ranks": ranks, "seed": 1},
                       "platform": {"name": "dawning_5000a", "split_cores": scope == "core"},
                       "application": {"kind": "stencil", "steps": steps, "dims": 2, "halo_bytes": 4096,
                                       "imbalance": [{"region": "Stencil", "ranks": "all",
                                                      "distribution": "exponential", "magnitude": 0.002}]},
                       "simulation": {"timeout": 3600.0}}, "<bench>")
    ops = generate(sc.application, sc.ranks, sc.seed)
    quiet = simulate(sc, ops)
    cfg = parse_perturbation({"noise": {"model": "periodic", "frequency": 1000.0, "duration": 2.5e-5,
                                        "scope": scope}}).noise
    setup = noise_setup(cfg, prepare(sc).facts, seed=1, horizon=10.0)
    noisy = simulate(sc, ops, speed_profiles=setup.speed_profiles)
    return {"ranks": ranks, "steps": steps, "scope": scope, "profiles": len(setup.speed_profiles),
            "smpi_quiet_s": quiet.stage_seconds["smpi"], "smpi_noise_s": noisy.stage_seconds["smpi"],
            "ratio": noisy.stage_seconds["smpi"] / quiet.stage_seconds["smpi"],
            "makespan_quiet": quiet.summary["makespan"], "makespan_noise": noisy.summary["makespan"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--checker-events", type=float, default=5e6, help="events of the checker scaling table")
    ap.add_argument("--no-smpi", action="store_true", help="skip the SMPI noise-slowdown measurement")
    ap.add_argument("--smpi-ranks", type=int, default=1024)
    ap.add_argument("--smpi-steps", type=int, default=50)
    ap.add_argument("--scope", choices=("node", "core"), default="node", help="noise scope of the SMPI run")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    res: dict[str, Any] = {"stages": stages(args.ranks, args.steps)}
    s = res["stages"]
    print(f"perturbation stages at {s['ranks']} ranks x {s['steps']} steps ({s['application_ops']} application "
          f"operations, {s['perturbed_ops']} after perturbation, {s['events']} events)")
    print(f"  generate application        {s['generate_s']:8.3f} s")
    for pol, v in s["policies"].items():
        parts = ", ".join(f"{k[:-2]} {v[k]:.3f}" for k in ("jitter_s", "instrumentation_s", "spill_s", "insert_s"))
        print(f"  perturb_ops {pol:16s} {v['total_s']:8.3f} s  ({parts}; {v['inserted_ops']} ops inserted, "
              f"{v['flushes']} flushes)")
    print(f"  noise profiles (1 kHz/core) {s['noise_profiles_s']:8.3f} s")
    print(f"  build event table           {s['build_events_s']:8.3f} s")
    print(f"  noise ledger                {s['noise_ledger_s']:8.3f} s  ({s['noise_hits']} hits)")
    print(f"  condition C checker         {s['condition_c_s']:8.3f} s  ({s['condition_c_events_per_s'] / 1e6:.1f} M "
          f"events/s, target {TARGET_CHECKER_EVENTS_PER_S / 1e6:.0f} M)")
    print(f"  wait distortion join        {s['distortion_s']:8.3f} s  ({s['distortion_wait_states']} wait states)")
    c = checker_scaling(int(args.checker_events))
    res["checker"] = c
    print(f"condition C checker on {c['events'] / 1e6:.1f} M events: {c['seconds']:.3f} s, "
          f"{c['events_per_s'] / 1e6:.1f} M events/s "
          f"({'ok' if c['events_per_s'] >= TARGET_CHECKER_EVENTS_PER_S else 'BELOW TARGET'})")
    if not args.no_smpi:
        r = smpi_ratio(args.smpi_ranks, args.smpi_steps, args.scope)
        res["smpi"] = r
        print(f"SMPI at {r['ranks']} ranks x {r['steps']} steps: noise-free {r['smpi_quiet_s']:.1f} s, 1 kHz "
              f"periodic noise per {r['scope']} ({r['profiles']} profiles) {r['smpi_noise_s']:.1f} s: ratio "
              f"{r['ratio']:.2f} ({'ok' if r['ratio'] <= TARGET_SMPI_RATIO else 'ABOVE 3x'}); makespan "
              f"{r['makespan_quiet']:.4f} -> {r['makespan_noise']:.4f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
