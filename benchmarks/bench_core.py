"""Benchmark of the core pipeline (issue 2): LARED-S-like scenario at 256, 1024, 4096 ranks x 20 steps.

For each size, prints the wall time of each stage (trace generation, trace writing, SMPI, parsing,
wait states), events/s of parsing + wait-state detection (cold: the single pass inside the run, in a
fresh process; warm: best of 5 passes over the same log after one warm-up), peak memory of the Python process and of
SMPI, and the ratio of the whole ``waitlab run`` pipeline (and of its SMPI stage) to SimGrid's stock
``smpireplaymain`` replaying the same time-independent trace (region markers removed, since the
stock replayer does not know them).

Each size runs in a fresh subprocess so peak-memory figures are not polluted by earlier sizes.  The SMPI
peak printed here comes from ``RUSAGE_CHILDREN`` and includes the Python parent's peak (a forked
process inherits it): use ``bench_scale.py`` for the SMPI processes' own peak.

    .venv/bin/python benchmarks/bench_core.py --ranks 256 1024 4096 --steps 20
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from waitlab.experiments.pipeline import Run, prepare, simulate_ops
from waitlab.experiments.results import write_run
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import CODE
from waitlab.simulator.smpi import run_smpirun
from waitlab.simulator.timeline import build_events, read_log
from waitlab.simulator.trace import write_trace

STOCK = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"


def scenario_dict(ranks: int, steps: int) -> dict:
    return {
        "scenario": {"name": f"bench-lared-{ranks}", "ranks": ranks, "seed": 1},
        "platform": {"name": "dawning_5000a"},
        "application": {"kind": "lared_s", "steps": steps},
        # stock smpireplaymain has no waitlab contention plugin: compare both without the laws
        "simulation": {"contention": "none"},
    }


def one(ranks: int, steps: int) -> dict:
    sc = from_mapping(scenario_dict(ranks, steps), "bench")
    workdir = Path(tempfile.mkdtemp(prefix="bench-core-"))
    t0 = time.perf_counter()
    prep = prepare(sc)
    result = simulate_ops(prep, keep_dir=workdir)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        write_run(Run(result), Path(tmp), png=False)  # as `waitlab run` (timeline.png only with --png)
        outputs = time.perf_counter() - t
    total = time.perf_counter() - t0
    py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    smpi_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    # Stock replay of the same trace without region markers.
    ops = result.ops
    keep = np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))
    stock_ops = ops.take(keep)
    platform = prep.platform
    with tempfile.TemporaryDirectory() as tmp:
        xml, hostfile = platform.write(Path(tmp))
        index = write_trace(stock_ops, platform.core_speed, Path(tmp) / "trace")
        t = time.perf_counter()
        # the same SimGrid settings as waitlab's run (platform calibration, solver precision)
        run_smpirun(Path(STOCK), ranks, xml, hostfile, replay_index=index, config=prep.smpi_config(), timeout=3600,
                    what="stock replay")
        stock = time.perf_counter() - t
    st = result.stage_seconds
    n_events = len(result.events)
    # Steady-state throughput of parsing + wait states on the same log (pyperf style: 1 warm-up, best of 5).
    warm = []
    for _ in range(6):
        t = time.perf_counter()
        wait_states(build_events(ops, *read_log(workdir / "events.bin", ops)))
        warm.append(time.perf_counter() - t)
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "ranks": ranks, "steps": steps, "events": n_events, "wait_states": len(result.waits),
        "stages_s": {k: round(v, 3) for k, v in st.items()}, "outputs_s": round(outputs, 3),
        "waitlab_total_s": round(total, 3), "stock_smpireplaymain_s": round(stock, 3),
        "ratio_total_to_stock": round(total / stock, 3), "ratio_smpi_to_stock": round(st["smpi"] / stock, 3),
        "parse_plus_waits_events_per_s": round(n_events / (st["parse"] + st["wait_states"])),
        "parse_plus_waits_warm_events_per_s": round(n_events / min(warm[1:])),
        "python_peak_MiB": round(py_peak), "smpi_peak_MiB": round(smpi_peak),
        "simulated_makespan_s": result.summary["makespan"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.ranks[0], args.steps)))
        return 0
    print(f"{'ranks':>6} {'events':>9} {'gen':>6} {'write':>6} {'smpi':>7} {'parse':>6} {'waits':>6} "
          f"{'total':>7} {'stock':>7} {'tot/stk':>7} {'smpi/stk':>8} {'ev/s cold':>10} {'ev/s warm':>10} "
          f"{'py MiB':>7} {'smpi MiB':>8}")
    for n in args.ranks:
        out = subprocess.run([sys.executable, __file__, "--one", "--ranks", str(n), "--steps", str(args.steps)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{n:>6} FAILED: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        s = r["stages_s"]
        print(f"{n:>6} {r['events']:>9} {s['generate']:>6.2f} {s['write_trace']:>6.2f} {s['smpi']:>7.2f} "
              f"{s['parse']:>6.2f} {s['wait_states']:>6.2f} {r['waitlab_total_s']:>7.2f} "
              f"{r['stock_smpireplaymain_s']:>7.2f} {r['ratio_total_to_stock']:>7.2f} {r['ratio_smpi_to_stock']:>8.2f} "
              f"{r['parse_plus_waits_events_per_s']:>10,} {r['parse_plus_waits_warm_events_per_s']:>10,} "
              f"{r['python_peak_MiB']:>7} {r['smpi_peak_MiB']:>8}")
        print("       " + json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
