"""Benchmark of the diagnosis stages (issue 4): wait states, H-CWP-DM and CWP-DM on large event tables.

The event table is built directly (numpy, no SMPI): a LARED-S-like BSP program where every step each
rank visits regions ``EOS_Match`` and ``Hydro``, exchanges halos with its ring neighbours
(irecv/irecv/isend/isend/waitall), visits ``Rad`` and calls ``MPI_Allreduce``.  Times follow an ideal
network (eager messages, a collective ends when its last rank arrives), so the table has late-sender waits
that propagate into wait-at-NxN waits.  13 events per rank and step.

Each measurement runs in a fresh subprocess: the table is generated, the peak-RSS counter is reset
(``/proc/self/clear_refs``), and the stage is timed; *peak memory* is the larger of the stage's peak RSS
above the RSS it started with and the peak of its live allocations under ``tracemalloc`` (a second run).
The table itself and, for the models, its wait states are inputs and are not counted.

    .venv/bin/python benchmarks/bench_diagnosis.py                       # 10-million-event table
    .venv/bin/python benchmarks/bench_diagnosis.py --events 2e6           # smaller
    .venv/bin/python benchmarks/bench_diagnosis.py --scaling --plot cost.png   # ranks 256..4096 x steps

Targets: wait states >= 5 M events/s, H-CWP-DM >= 2 M events/s, CWP-DM >= 0.5 M events/s, peak memory
<= 200 bytes per event.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.report.canvas import subplots
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import OpBuilder
from waitlab.simulator.timeline import build_events

EVENTS_PER_RANK_STEP = 13
STAGES = ("wait_states", "hcwpdm", "cwpdm")
TARGET_EVENTS_PER_S = {"wait_states": 5e6, "hcwpdm": 2e6, "cwpdm": 0.5e6}
TARGET_BYTES_PER_EVENT = 200


def bsp_table(ranks: int, steps: int, seed: int = 0) -> pd.DataFrame:
    """The synthetic LARED-S-like event table (see the module docstring)."""
    rng = np.random.default_rng(seed)
    r = np.arange(ranks, dtype=np.int32)
    left, right = (r - 1) % ranks, (r + 1) % ranks
    b = OpBuilder(ranks)
    slots = 17
    for s in range(steps):
        b.add("enter", r, step=s, region="step")
        b.add("enter", r, step=s, region="EOS_Match")
        b.add("compute", r, step=s, region="EOS_Match")
        b.add("leave", r, step=s, region="EOS_Match")
        b.add("enter", r, step=s, region="Hydro")
        b.add("compute", r, step=s, region="Hydro")
        b.add("leave", r, step=s, region="Hydro")
        b.add("irecv", r, step=s, peer=left, tag=0, value=8)
        b.add("irecv", r, step=s, peer=right, tag=1, value=8)
        b.add("isend", r, step=s, peer=right, tag=0, value=8)
        b.add("isend", r, step=s, peer=left, tag=1, value=8)
        b.add("waitall", r, step=s)
        b.add("enter", r, step=s, region="Rad")
        b.add("compute", r, step=s, region="Rad")
        b.add("leave", r, step=s, region="Rad")
        b.add("allreduce", r, step=s, value=8, value2=8)
        b.add("leave", r, step=s, region="step")
    ops = b.build()
    # Times: [rank, step, slot]
    heavy = rng.lognormal(0.0, 0.8, ranks)  # persistent per-rank imbalance of EOS_Match
    te = np.zeros((ranks, steps, slots))
    tx = np.zeros((ranks, steps, slots))
    t0 = 0.0
    for s in range(steps):
        de = 0.02 * heavy * rng.uniform(0.8, 1.2, ranks)
        dh = rng.normal(0.05, 0.002, ranks).clip(0.04)
        dr = rng.normal(0.01, 0.0005, ranks).clip(0.008)
        a = t0 + de + dh
        w = np.maximum(a, np.maximum(a[left], a[right]))
        bb = w + dr
        t1 = float(bb.max()) + 1e-5
        enter = [t0, t0, t0, t0 + de, t0 + de, t0 + de, a, a, a, a, a, a, w, w, bb, bb, t1]
        exit_ = [t0, t0, t0 + de, t0 + de, t0 + de, a, a, a, a, a, a, w, w, bb, bb, t1, t1]
        for k in range(slots):
            te[:, s, k] = enter[k]
            tx[:, s, k] = exit_[k]
        t0 = t1
    return build_events(ops, te.ravel(), tx.ravel())


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(stage: str, ranks: int, steps: int) -> dict[str, Any]:
    """Build the table, then time one stage and measure its peak memory (run in a fresh process)."""
    t = time.perf_counter()
    events = bsp_table(ranks, steps)
    build_s = time.perf_counter() - t
    waits = wait_states(events) if stage != "wait_states" else None
    extra: dict[str, Any] = {}

    def go() -> None:
        if stage == "wait_states":
            extra["wait_states"] = len(wait_states(events))
        elif stage == "hcwpdm":
            assert waits is not None
            extra["considered"] = int(hcwpdm(events, waits).waits["considered"].sum())
        else:
            assert waits is not None
            extra["rounds"] = cwpdm(events, waits).rounds

    gc.collect()
    _reset_peak()
    base = _rss()
    t = time.perf_counter()
    go()
    seconds = time.perf_counter() - t
    rss_peak = max(_peak() - base, 0)
    # Second pass under tracemalloc (numpy reports its buffers to it): the peak of live allocations.
    gc.collect()
    tracemalloc.start()
    go()
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = max(rss_peak, traced_peak)
    n = len(events)
    return {"stage": stage, "ranks": ranks, "steps": steps, "events": n, "seconds": seconds,
            "events_per_s": n / seconds, "peak_bytes": peak, "bytes_per_event": peak / n, "rss_peak_bytes": rss_peak,
            "traced_peak_bytes": traced_peak, "build_s": build_s, "wait_states_in": 0 if waits is None else len(waits),
            **extra}


def run_one(stage: str, ranks: int, steps: int) -> dict[str, Any]:
    # A fixed mmap threshold makes glibc return large buffers to the OS, so the RSS peak is meaningful.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    out = subprocess.run([sys.executable, __file__, "--one", stage, "--ranks", str(ranks), "--steps", str(steps)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{stage} at {ranks} ranks x {steps} steps failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def headline(events: float, ranks: int) -> list[dict[str, Any]]:
    steps = max(1, round(events / (EVENTS_PER_RANK_STEP * ranks)))
    rows = [run_one(stage, ranks, steps) for stage in STAGES]
    print(f"event table: {rows[0]['events']:,} events ({ranks} ranks x {steps} steps), "
          f"{rows[1]['wait_states_in']:,} wait states")
    print(f"{'stage':<12} {'seconds':>8} {'events/s':>12} {'target':>10} {'peak MiB':>9} {'B/event':>8} ok")
    for r in rows:
        target = TARGET_EVENTS_PER_S[r["stage"]]
        ok = r["events_per_s"] >= target and r["bytes_per_event"] <= TARGET_BYTES_PER_EVENT
        print(f"{r['stage']:<12} {r['seconds']:>8.2f} {r['events_per_s']:>12,.0f} {target:>10,.0f} "
              f"{r['peak_bytes'] / 2**20:>9.0f} {r['bytes_per_event']:>8.1f} {'yes' if ok else 'NO'}")
    h, c = rows[1], rows[2]
    print(f"CWP-DM / H-CWP-DM: time x{c['seconds'] / h['seconds']:.2f}, "
          f"memory x{c['peak_bytes'] / max(h['peak_bytes'], 1):.2f}")
    return rows


def scaling(ranks_list: list[int], steps_list: list[int], plot: Path | None) -> list[dict[str, Any]]:
    rows = [run_one(stage, n, s) for s in steps_list for n in ranks_list for stage in ("hcwpdm", "cwpdm")]
    print(f"{'model':<8} {'ranks':>6} {'steps':>6} {'events':>10} {'seconds':>8} {'peak MiB':>9}")
    for r in rows:
        print(f"{r['stage']:<8} {r['ranks']:>6} {r['steps']:>6} {r['events']:>10,} {r['seconds']:>8.3f} "
              f"{r['peak_bytes'] / 2**20:>9.1f}")
    if plot is not None:
        fig, (ax1, ax2) = subplots(1, 2, figsize=(11, 4))
        for stage, marker in (("hcwpdm", "o"), ("cwpdm", "s")):
            for s in steps_list:
                sel = [r for r in rows if r["stage"] == stage and r["steps"] == s]
                label = f"{'H-CWP-DM' if stage == 'hcwpdm' else 'CWP-DM'}, {s} steps"
                ax1.plot([r["ranks"] for r in sel], [r["seconds"] for r in sel], marker=marker, label=label)
                ax2.plot([r["ranks"] for r in sel], [r["peak_bytes"] / 2**20 for r in sel], marker=marker,
                         label=label)
        for ax, what in ((ax1, "diagnosis time (s)"), (ax2, "peak memory (MiB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("ranks")
            ax.set_ylabel(what)
            ax.grid(alpha=0.3)
        ax1.legend(fontsize=8)
        fig.suptitle("Diagnosis cost of the synthetic LARED-S-like table")
        fig.tight_layout()
        fig.savefig(plot, dpi=110, metadata={"Software": None})
        print(f"plot written to {plot}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, default=10e6, help="size of the headline table (default 1e7)")
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--scaling", action="store_true", help="diagnosis cost vs ranks (256..4096) and steps")
    ap.add_argument("--scaling-ranks", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    ap.add_argument("--scaling-steps", type=int, nargs="+", default=[3, 30])
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write all figures as JSON")
    ap.add_argument("--one", choices=STAGES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.ranks, args.steps)))
        return 0
    rows = scaling(args.scaling_ranks, args.scaling_steps, args.plot) if args.scaling else \
        headline(args.events, args.ranks)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
