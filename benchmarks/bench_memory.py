"""waitlab's own memory and time at scale (issue 15): peak bytes per event of each Python stage of a run.

The LARED-S-like scenario (Dawning 5000A model) runs stage by stage, exactly as ``waitlab run`` does
(generation, trace writing, SMPI, reading the log, the event table, wait states, summary, the results
folder with its picture unless ``--no-png``).  Before each stage the process's peak resident set
(``VmHWM``) is reset through ``/proc/self/clear_refs``; after it the new peak is read.  Printed per
stage: wall time, peak RSS above the RSS after the imports and a 16-rank warm-up run, and that figure
divided by the number of events (bytes per event held at the stage's peak, everything held from earlier
stages included; resident pages of memory-mapped tables count too, though the kernel may drop them);
"anon peak" and "anon after", the process's own anonymous memory (``RssAnon``: without the memory-mapped
operation table of a large run, simulator/spill.py, whose clean pages the kernel drops when memory is short)
at the stage's peak (sampled every millisecond by a separate process) and after it, per event; then the
whole run's wall time over its SMPI stage.  Each size runs in a fresh subprocess.  ``--tracemalloc`` adds
the peak and the held bytes of Python and numpy allocations (not pyarrow's) per stage.

    .venv/bin/python benchmarks/bench_memory.py --ranks 1024 4096 --steps 1

The machine is shared: quote ratios measured back to back, not absolute times.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from waitlab.experiments.pipeline import Run, finish, prepare, run
from waitlab.experiments.results import write_run
from waitlab.experiments.scenario import from_mapping
from waitlab.experiments.sources import Execution, compute_speed
from waitlab.models.ops import CODE
from waitlab.simulator import spill
from waitlab.simulator.build import replay_binary
from waitlab.simulator.limits import check_replay_limits
from waitlab.simulator.smpi import run_smpirun
from waitlab.simulator.spill import release_free_memory, spill_ops
from waitlab.simulator.timeline import build_events, read_log
from waitlab.simulator.trace import write_trace


def _status(key: str) -> int:
    """A ``/proc/self/status`` figure in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def _sample_anon(pid: int, conn: Any) -> None:
    """Sampler process: the peak of ``pid``'s anonymous memory (``RssAnon``) since the last request, every ms."""
    status = Path(f"/proc/{pid}/status")
    peak = 0
    while True:
        if conn.poll():
            if conn.recv() == "stop":
                return
            conn.send(peak)
            peak = 0
        try:
            line = next(ln for ln in status.read_text().splitlines() if ln.startswith("RssAnon:"))
        except (OSError, StopIteration):
            return
        peak = max(peak, int(line.split()[1]) * 1024)
        time.sleep(0.001)


class AnonPeak:
    """The peak anonymous memory of this process between two calls, sampled from another process (no GIL)."""

    def __init__(self) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._proc = multiprocessing.get_context("fork").Process(target=_sample_anon, args=(os.getpid(), child),
                                                                 daemon=True)
        self._proc.start()

    def __call__(self) -> int:
        """The peak since the previous call (then restarts)."""
        self._conn.send("peak")
        return int(self._conn.recv())

    def close(self) -> None:
        self._conn.send("stop")
        self._proc.join(5)


def _built(events: Any) -> Any:
    release_free_memory()  # as simulator/replay.py after the event table
    return events


def _scenario(ranks: int, steps: int) -> Any:
    return from_mapping({"scenario": {"name": f"mem-{ranks}", "ranks": ranks, "seed": 1},
                         "platform": {"name": "dawning_5000a"}, "application": {"kind": "lared_s", "steps": steps}},
                        "bench_memory")


def one(ranks: int, steps: int, traced: bool = False, png: bool = True) -> dict[str, Any]:
    sc = _scenario(ranks, steps)
    with tempfile.TemporaryDirectory(prefix="bench-mem-warm-") as tmp:  # lazy imports and first-use caches
        write_run(run(_scenario(16, 1)), Path(tmp), png=png)
    gc.collect()
    base = _status("VmRSS")
    base_anon = _status("RssAnon")
    anon: list[int] = []  # the process's own (anonymous) memory after each stage: not memory-mapped files
    rows: list[tuple[str, float, int]] = []
    traces: list[tuple[int, int]] = []  # Python and numpy allocations (not pyarrow's): peak, held after
    held: dict[str, Any] = {}
    if traced:
        tracemalloc.start()

    sampler = AnonPeak()
    anon_peak: list[int] = []

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        gc.collect()
        _reset_peak()
        sampler()
        if traced:
            tracemalloc.reset_peak()
        t = time.perf_counter()
        out = fn()
        rows.append((name, time.perf_counter() - t, _status("VmHWM") - base))
        anon.append(_status("RssAnon") - base_anon)
        anon_peak.append(max(sampler(), _status("RssAnon")) - base_anon)
        if traced:
            gc.collect()
            traces.append((tracemalloc.get_traced_memory()[1], tracemalloc.get_traced_memory()[0]))
        return out

    t0 = time.perf_counter()
    prep = stage("prepare", lambda: prepare(sc))
    # as experiments/sources.py: a large table is memory-mapped from here on (simulator/spill.py)
    ops = stage("generate", lambda: spill_ops(prep.source.operations(prep.platform, prep.smpi_config(), Path("."))))
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:
        work = Path(tmp)
        xml, hostfile = prep.platform.write(work)
        markers = np.isin(ops.code, [CODE["enter"], CODE["leave"]])
        written = np.flatnonzero(~markers)  # as simulator/replay.py: the markers left out, no copy of the table
        del markers
        index = stage("write_trace", lambda: write_trace(ops, compute_speed(sc, prep.platform), work / "trace",
                                                         rows=written, shared=True))
        release_free_memory()  # as simulator/replay.py before SMPI
        settings = {**check_replay_limits(ranks, per_rank_files=False), **prep.smpi_config()}
        log = work / "events.bin"
        res = stage("smpi", lambda: run_smpirun(replay_binary(), ranks, xml, hostfile, replay_index=index,
                                                config=settings, env={"WAITLAB_LOG": str(log)}, timeout=3600,
                                                what="bench", cwd=work))
        held["times"] = stage("read_log", lambda: read_log(log, ops))
    events = stage("build_events", lambda: _built(build_events(ops, *held.pop("times"))))
    ex = Execution(ops, events, res.output, settings, {})
    result = stage("waits+summary", lambda: finish(prep, ex))
    with tempfile.TemporaryDirectory(prefix="bench-mem-out-") as tmp:
        stage("write_results", lambda: write_run(Run(result), Path(tmp), png=png))
    total = time.perf_counter() - t0
    sampler.close()
    n = len(result.events)
    smpi = next(s for name, s, _ in rows if name == "smpi")
    return {"ranks": ranks, "steps": steps, "events": n, "ops": len(ops), "baseline_MiB": base / 2**20,
            "stages": [{"stage": name, "s": round(s, 3), "peak_MiB": round(p / 2**20, 1),
                        "B_per_event": round(p / n), "anon_after_B_per_event": round(anon[i] / n),
                        "anon_peak_B_per_event": round(anon_peak[i] / n),
                        **({"traced_peak_B_per_event": round(traces[i][0] / n),
                            "traced_held_B_per_event": round(traces[i][1] / n)} if traced else {})}
                       for i, (name, s, p) in enumerate(rows)],
            "peak_B_per_event": round(max(p for _, _, p in rows) / n),
            "anon_peak_B_per_event": round(max(anon_peak) / n), "total_s": round(total, 2),
            "smpi_s": round(smpi, 2), "total_over_smpi": round(total / smpi, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--tracemalloc", action="store_true",
                    help="also trace Python and numpy allocations (slower: times are not comparable)")
    ap.add_argument("--no-png", action="store_true", help="skip the timeline picture (as waitlab run --no-png)")
    ap.add_argument("--spill-min-ops", type=int, default=None,
                    help="memory-map operation tables from this size on (default: simulator.spill.SPILL_MIN_OPS)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        if args.spill_min_ops is not None:
            spill.SPILL_MIN_OPS = args.spill_min_ops
        print(json.dumps(one(args.ranks[0], args.steps, args.tracemalloc, not args.no_png)))
        return 0
    for n in args.ranks:
        cmd = [sys.executable, __file__, "--one", "--ranks", str(n), "--steps", str(args.steps),
               *(["--tracemalloc"] if args.tracemalloc else []), *(["--no-png"] if args.no_png else []),
               *(["--spill-min-ops", str(args.spill_min_ops)] if args.spill_min_ops is not None else [])]
        # its own session: on time-out, kill the whole group (smpirun and the SMPI process included)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            print(f"{n:>6} ranks: timed out after {args.timeout:.0f} s")
            continue
        out = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        if out.returncode != 0:
            print(f"{n:>6} ranks: FAILED {out.stderr.strip().splitlines()[-1:] or out.returncode}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{n} ranks x {r['steps']} steps: {r['events']:,} events, {r['ops']:,} operations; whole run "
              f"{r['total_s']:.2f} s = {r['total_over_smpi']:.3f} x the SMPI stage ({r['smpi_s']:.2f} s); "
              f"peak {r['peak_B_per_event']} B/event above the imports ({r['baseline_MiB']:.0f} MiB), anonymous "
              f"memory peak {r['anon_peak_B_per_event']} B/event")
        traced = " traced peak/held B/event" if args.tracemalloc else ""
        print(f"  {'stage':<14} {'wall s':>8} {'peak MiB':>9} {'B/event':>8} {'anon peak':>9} {'anon after':>10}"
              f"{traced}")
        for s in r["stages"]:
            extra = (f" {s['traced_peak_B_per_event']:>11} {s['traced_held_B_per_event']:>5}"
                     if args.tracemalloc else "")
            print(f"  {s['stage']:<14} {s['s']:>8.3f} {s['peak_MiB']:>9.1f} {s['B_per_event']:>8} "
                  f"{s['anon_peak_B_per_event']:>9} {s['anon_after_B_per_event']:>10}{extra}")
        print("  " + json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
