"""Scale benchmark (issue 15): stock SMPI replay and ``waitlab run`` side by side as the ranks grow.

For each rank count, the LARED-S-like scenario (examples/lared_s_dawning.toml, scaled) is generated, its time-
independent trace written once (one shared file, region markers removed) and replayed by SimGrid's stock
``smpireplaymain`` with waitlab's SimGrid settings; then the whole ``waitlab run`` (generation, trace, SMPI,
parsing, wait states, results folder without picture) runs on the same scenario. Both run with ``contention =
"none"``: stock SimGrid does not have waitlab's contention plugin (``waitlab/contention`` is an unknown
setting there). Printed per size: wall time, peak memory of each SMPI process (``/usr/bin/time`` for the stock
one; VmHWM polled for waitlab's, since a process forked from Python inherits its peak) and of the Python
process (bytes per event: peak above the imports), and the simulated makespan; then the growth exponent fitted
between consecutive sizes (log time / log ranks). Each size runs in a fresh subprocess, with a time limit.

    .venv/bin/python benchmarks/bench_scale.py --ranks 1024 4096 16384 --steps 5 --timeout 600

Options for the SimGrid side only (``--stock-only`` skips the waitlab run):

- ``--simgrid-prefix /work/sg-inst``: the stock replay of another SimGrid (its ``bin/smpirun`` and
  ``lib/simgrid/smpireplaymain``, or a build tree's ``smpi_script/bin`` and ``lib``), e.g. 3.34 built
  from source (docs/performance.md, "Scale"); waitlab's own run always uses the Debian 3.32.
- ``--allreduce-p2p binomial|rdb``: the trace with every allreduce written as point-to-point operations
  (:mod:`waitlab.models.collective_expand`), so no rank completes P requests at once.
- ``--wrapper "valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p"``: run the stock replay
  under a tool (smpirun's ``-wrapper``); callgrind's instruction counts are repeatable on a loaded box.

The simulated makespan is read with 9 decimals (the log date of SMPI's "Simulation time" line).

The machine is shared: quote ratios measured back to back, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from rank_ladder import dash, exponent, run_ladder, smpimain_procs

from waitlab.experiments.pipeline import Run, prepare, simulate_ops
from waitlab.experiments.results import write_run
from waitlab.experiments.scenario import from_mapping
from waitlab.models.collective_expand import ALGORITHMS, expand_allreduce
from waitlab.models.ops import CODE
from waitlab.simulator.limits import check_replay_limits
from waitlab.simulator.trace import write_trace

STOCK = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"
SMPIRUN = "smpirun"


def simgrid_programs(prefix: str | None) -> tuple[str, str]:
    """(smpirun, smpireplaymain) of the Debian SimGrid, or of an install prefix or build tree."""
    if not prefix:
        return SMPIRUN, STOCK
    root = Path(prefix)
    # a build tree also has bin/smpirun, but that one points at the install prefix
    runs = [root / "smpi_script" / "bin" / "smpirun", root / "bin" / "smpirun"]
    mains = [root / "lib" / "simgrid" / "smpireplaymain", root / "lib" / "smpireplaymain"]
    run = next((p for p in runs if p.is_file()), None)
    main = next((p for p in mains if p.is_file()), None)
    if run is None or main is None:
        raise SystemExit(f"--simgrid-prefix {prefix}: no smpirun in {[str(p) for p in runs]} "
                         f"or no smpireplaymain in {[str(p) for p in mains]}")
    return str(run), str(main)


def scenario(ranks: int, steps: int, platform: str):
    return from_mapping({"scenario": {"name": f"scale-{ranks}", "ranks": ranks, "seed": 1},
                         "platform": {"name": platform}, "application": {"kind": "lared_s", "steps": steps},
                          # stock SimGrid has no waitlab contention plugin: both sides run without the laws
                          "simulation": {"contention": "none"}},
                        "bench_scale")


def _hwm_poller(marker: str, out: dict[str, int], stop: threading.Event) -> None:
    """Poll the VmHWM of smpimain processes whose environment names ``marker`` (our run only)."""
    while not stop.is_set():
        for proc in smpimain_procs(marker):
            try:
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        out["kib"] = max(out.get("kib", 0), int(line.split()[1]))
            except OSError:
                continue
        stop.wait(0.2)


def stock_replay(prep, ops, timeout: float, prefix: str | None = None, wrapper: str = "") -> dict:
    keep = np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))
    smpirun, stock = simgrid_programs(prefix)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        xml, hostfile = prep.platform.write(Path(tmp))
        t = time.perf_counter()
        index = write_trace(ops.take(keep), prep.platform.core_speed, Path(tmp) / "trace", shared=True)
        trace_s = time.perf_counter() - t
        cfg = {**check_replay_limits(ops.n_ranks), **prep.smpi_config()}
        cmd = ["/usr/bin/time", "-f", "MAXRSS_KIB %M", smpirun, "-no-privatize", "-np", str(ops.n_ranks),
               "-platform", str(xml), "-hostfile", str(hostfile), "-replay", str(index),
               *(["-wrapper", wrapper] if wrapper else []), stock,
               *[f"--cfg={k}:{v}" for k, v in cfg.items()], "--log=root.thres:warning",
               "--log=smpi_replay.thres:info", "--log=smpi_replay.fmt:%m@%.9d%n"]
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"stock_s": None, "stock_timeout": timeout}
        wall = time.perf_counter() - t
    rss = [ln for ln in out.splitlines() if ln.startswith("MAXRSS_KIB")]
    sim = [ln for ln in out.splitlines() if "Simulation time" in ln]
    row = {"stock_s": round(wall, 2), "stock_rc": proc.returncode, "trace_write_s": round(trace_s, 2),
           "stock_MiB": round(int(rss[-1].split()[1]) / 1024) if rss else None,
           "stock_makespan": float(sim[-1].split("@")[-1]) if sim else None}
    if proc.returncode != 0 or not sim:
        row["stock_tail"] = out.strip().splitlines()[-8:]
    return row


def one(ranks: int, steps: int, platform: str, timeout: float, cfg: list[str], args: argparse.Namespace) -> dict:
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # after imports
    sc = scenario(ranks, steps, platform).with_values({"simulation.timeout": timeout})
    if cfg:  # extra SimGrid settings, e.g. smpi/allreduce:rdb (they may change the simulated result)
        sc = sc.with_values({"simulation.config": dict(c.split(":", 1) for c in cfg)})
    prep = prepare(sc)
    ops = prep.source.operations(prep.platform, prep.smpi_config(), Path(os.devnull))
    if args.allreduce_p2p:
        ops = expand_allreduce(ops, args.allreduce_p2p, prep.platform.core_speed)
    row: dict = {"ranks": ranks, "steps": steps, "operations": len(ops)}
    row.update(stock_replay(prep, ops, timeout, args.simgrid_prefix, args.wrapper))
    if args.stock_only:
        row["python_MiB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return row
    work = Path(tempfile.mkdtemp(prefix="bench-scale-wl-"))
    hwm: dict[str, int] = {}
    stop = threading.Event()
    poller = threading.Thread(target=_hwm_poller, args=(str(work), hwm, stop), daemon=True)
    poller.start()
    t0 = time.perf_counter()
    try:
        result = simulate_ops(prep, keep_dir=work)
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            write_run(Run(result), Path(tmp), png=False)
            outputs = time.perf_counter() - t
    except Exception as exc:
        stop.set()
        row.update({"waitlab_s": None, "waitlab_error": str(exc).splitlines()[0][:200]})
        return row
    finally:
        stop.set()
        subprocess.run(["rm", "-rf", str(work)], check=False)
    total = time.perf_counter() - t0
    row.update({
        "waitlab_s": round(total, 2), "stages_s": {k: round(v, 2) for k, v in result.stage_seconds.items()},
        "outputs_s": round(outputs, 2), "events": len(result.events),
        "waitlab_smpi_MiB": round(hwm["kib"] / 1024) if "kib" in hwm else None,
        "python_MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "python_B_per_event": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kib) * 1024
                                    / len(result.events)),
        "makespan": result.summary["makespan"],
    })
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--platform", default="dawning_5000a")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per replay (stock and waitlab)")
    ap.add_argument("--cfg", nargs="*", default=[], metavar="KEY:VALUE",
                    help="extra SimGrid settings for both replays (e.g. smpi/allreduce:rdb)")
    ap.add_argument("--simgrid-prefix", default=None, metavar="DIR",
                    help="stock replay of another SimGrid (install prefix or build tree); implies --stock-only")
    ap.add_argument("--stock-only", action="store_true", help="only the stock replay, not the waitlab run")
    ap.add_argument("--allreduce-p2p", choices=ALGORITHMS, default=None,
                    help="write every allreduce as point-to-point operations (stock replay only)")
    ap.add_argument("--wrapper", default="", help="command that runs the stock replay (smpirun -wrapper)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.stock_only = args.stock_only or bool(args.simgrid_prefix or args.allreduce_p2p)
    if args.one:
        print(json.dumps(one(args.ranks[0], args.steps, args.platform, args.timeout, args.cfg, args)))
        return 0
    print(f"{'ranks':>7} {'ops':>10} {'stock s':>8} {'stock MiB':>9} {'waitlab s':>9} {'wl/stock':>8} "
          f"{'wl SMPI MiB':>11} {'py MiB':>7} {'py B/ev':>7}  exponent stock / waitlab")

    def command(n: int) -> list[str]:
        return [sys.executable, __file__, "--one", "--ranks", str(n), "--steps", str(args.steps), "--platform",
                args.platform, "--timeout", str(args.timeout), "--wrapper", args.wrapper,
                *(["--stock-only"] if args.stock_only else []),
                *(["--simgrid-prefix", args.simgrid_prefix] if args.simgrid_prefix else []),
                *(["--allreduce-p2p", args.allreduce_p2p] if args.allreduce_p2p else []), "--cfg", *args.cfg]

    def line(r: dict, prev: dict | None) -> str:
        ratio = r["waitlab_s"] / r["stock_s"] if r.get("waitlab_s") and r.get("stock_s") else None
        exps = ""
        if prev is not None:
            exps = " / ".join(dash(exponent(prev, r, key), ".2f") for key in ("stock_s", "waitlab_s"))
        return (f"{r['ranks']:>7} {r['operations']:>10,} {dash(r.get('stock_s'), '.1f'):>8} "
                f"{dash(r.get('stock_MiB')):>9} {dash(r.get('waitlab_s'), '.1f'):>9} {dash(ratio, '.2f'):>8} "
                f"{dash(r.get('waitlab_smpi_MiB')):>11} {dash(r.get('python_MiB')):>7} "
                f"{dash(r.get('python_B_per_event')):>7}  {exps}")

    run_ladder(args.ranks, command, 3 * args.timeout + 600, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
