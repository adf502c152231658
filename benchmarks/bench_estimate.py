"""The resource estimate against measurement (issue 23): predicted vs measured SMPI seconds as the ranks grow.

For each rank count a scenario (default: the 2-D stencil on Sunway TaihuLight of issue 23, ``--kind`` and
``--platform`` choose others) is prepared, estimated (:func:`waitlab.experiments.estimate.estimate`, the time
model alone, without the correction learned from earlier runs) and simulated as ``waitlab run`` does
(:func:`~waitlab.experiments.pipeline.simulate_ops`).  Printed per size: events, the model's SMPI seconds, the
measured SMPI stage (wall) and the CPU seconds of the SMPI processes (user + system of the children: on a
loaded machine the wall time includes waiting for a core, the CPU time less so; sampled from /proc once per
second, so a run stopped at the time limit has them too, with the actions it replayed of all and the simulated
time it reached, from the replay's progress file), their ratio to the prediction, SMPI's peak memory (largest
child's maxrss) and the growth exponent of the measured time between consecutive sizes (log time / log ranks).
Each size runs in a fresh subprocess, with a time limit.

    nice -n 10 .venv/bin/python benchmarks/bench_estimate.py --ranks 4096 16384 20480 --steps 2 --timeout 3600

The machine is shared: run it niced, and compare CPU seconds rather than wall seconds between sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from rank_ladder import dash, exponent, run_ladder, smpimain_procs

from waitlab.experiments.estimate import estimate
from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import from_mapping
from waitlab.simulator.progress import Progress, reporting


def _smpi_cpu_seconds(work: str) -> float:
    """User + system CPU seconds of the simulator whose event log is in ``work`` (0 when not found)."""
    tick = os.sysconf("SC_CLK_TCK")
    for proc in smpimain_procs(f"WAITLAB_LOG={work}"):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15 of stat)
        except (OSError, IndexError, ValueError):
            continue
    return 0.0


def one(ranks: int, steps: int, kind: str, platform: str, timeout: float) -> dict:
    app: dict = {"kind": kind, "steps": steps}
    if kind == "stencil":
        app["dims"] = 2
    sc = from_mapping({"scenario": {"name": f"estimate-{ranks}", "ranks": ranks, "seed": 1},
                       "platform": {"name": platform}, "application": app,
                       "simulation": {"timeout": timeout}}, "bench_estimate")
    prep = prepare(sc)
    est = estimate(prep)
    row: dict = {"ranks": ranks, "steps": steps, "kind": kind, "platform": platform, "events": est.events,
                 "predicted_smpi_s": round(est.replay_seconds, 3), "predicted_total_s": round(est.seconds, 3),
                 "predicted_smpi_MiB": round(est.smpi_memory_bytes / (1 << 20))}
    t0 = time.perf_counter()
    seen: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-estimate-") as tmp:

        def record(p: Progress | None) -> None:  # once per second while SMPI runs: progress and its CPU seconds
            if p is None:
                return
            seen.update(actions=p.actions, total=p.total, simulated=p.simulated or 0.0, elapsed=p.elapsed)
            seen["cpu"] = max(seen.get("cpu", 0.0), _smpi_cpu_seconds(tmp))

        try:
            with reporting(record):
                res = simulate_ops(prep, keep_dir=Path(tmp))
        except Exception as exc:  # a time-out or a SimGrid failure is a measurement too
            row["error"] = str(exc).splitlines()[0][:200]
            res = None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    # a simulator killed at the time limit is not a waited-for child: its CPU seconds come from /proc, sampled
    row["smpi_cpu_s"] = round(max(children.ru_utime + children.ru_stime, seen.get("cpu", 0.0)), 2)
    if res is None and seen:  # how far the simulation got: actions replayed of all, simulated seconds
        row.update(done_actions=int(seen["actions"]), total_actions=int(seen["total"]),
                   done_simulated_s=seen["simulated"])
    row["smpi_peak_MiB"] = round(children.ru_maxrss / 1024)
    row["total_s"] = round(time.perf_counter() - t0, 2)
    if res is not None:
        row["measured_smpi_s"] = round(res.stage_seconds["smpi"], 2)
        row["makespan"] = float(res.summary["makespan"])
        row["ratio"] = round(row["measured_smpi_s"] / est.replay_seconds, 2)
        row["cpu_ratio"] = round(row["smpi_cpu_s"] / est.replay_seconds, 2)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[4096, 16384, 20480])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--kind", default="stencil")
    ap.add_argument("--platform", default="sunway_taihulight")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per SMPI run")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.ranks[0], args.steps, args.kind, args.platform, args.timeout)))
        return 0
    print(f"{'ranks':>7} {'events':>10} {'pred SMPI s':>11} {'meas SMPI s':>11} {'CPU s':>8} {'x pred':>7} "
          f"{'x pred CPU':>10} {'peak MiB':>8} {'pred MiB':>8}  exponent (wall / CPU)")

    def command(n: int) -> list[str]:
        return [sys.executable, __file__, "--one", "--ranks", str(n), "--steps", str(args.steps), "--kind",
                args.kind, "--platform", args.platform, "--timeout", str(args.timeout)]

    def line(r: dict, prev: dict | None) -> str:
        exps = ""
        if prev is not None and exponent(prev, r, "measured_smpi_s") is not None:
            exps = " / ".join(dash(exponent(prev, r, key), ".2f") for key in ("measured_smpi_s", "smpi_cpu_s"))
        return (f"{r['ranks']:>7} {r['events']:>10,} {r['predicted_smpi_s']:>11.1f} "
                f"{dash(r.get('measured_smpi_s'), '.1f'):>11} {r['smpi_cpu_s']:>8.1f} {dash(r.get('ratio'), '.1f'):>7} "
                f"{dash(r.get('cpu_ratio'), '.1f'):>10} {r['smpi_peak_MiB']:>8} {r['predicted_smpi_MiB']:>8}  {exps}")

    run_ladder(args.ranks, command, args.timeout + 900, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
