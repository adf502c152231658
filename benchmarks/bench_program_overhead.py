"""waitlab's own work around a real program run (issue 25): seconds beside the SMPI stage, and where they go.

Runs ``tests/programs/bsp.c`` (8 events per rank and step) with ``--ranks`` ranks x ``--steps`` steps through
``waitlab.api.run`` into a results folder, then the same run with stock SimGrid alone (the folder's
``program/rerun/smpirun.sh``), and prints, in wall and in CPU seconds (``resource.getrusage``: on a shared machine
the CPU seconds are the figure to trust):

* the SMPI stage: the ``smpirun`` process of the program with waitlab's layer recording (its CPU: the children's);
* waitlab's own work: everything else ``api.run`` does (Python's CPU and that of its other children: ``addr2line``),
  as a share of the SMPI stage, and per part (reading the layer's records, the event table, wait states, each file
  of the results folder);
* the stock run (no layer recording): the layer's own cost inside the SMPI stage is the difference;
* events per second of waitlab's own work, and peak memory (Python's, and the simulator's).

The program is built (and every module imported) by a 1-step run first: not part of the figures.  ``--repeat N``
times N runs and ends with the median share and its spread (on a shared virtual machine the SMPI stage of the same
run moves by a third from run to run, and waitlab's own work with it).

    nice -n 10 .venv/bin/python benchmarks/bench_program_overhead.py --ranks 16 --steps 3000    # ~384 k events
    nice -n 10 .venv/bin/python benchmarks/bench_program_overhead.py --ranks 16 --steps 33000   # ~4.2 M events
    .venv/bin/python benchmarks/bench_program_overhead.py --ranks 16 --steps 13000 --no-stock --repeat 6  # ~10 s stages
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.experiments import pipeline, programs, results, sources
from waitlab.experiments.report import html, plots
from waitlab.simulator import program_run

BSP = Path(__file__).resolve().parent.parent / "tests" / "programs" / "bsp.c"


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


class Clock:
    """Wall and CPU (own + children) seconds of named parts, nested parts subtracted from none.

    A part's own CPU is that of the thread running it (``RUSAGE_THREAD``): the results folder's Parquet tables are
    written by a background thread while the main thread draws the pictures, so the parts' wall seconds overlap and
    add up to more than the run's, while their CPU seconds add up to the process's (``RUSAGE_SELF``, the totals).
    """

    def __init__(self, who: int = resource.RUSAGE_THREAD) -> None:
        self.parts: dict[str, list[float]] = {}
        self.who = who

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        w, s, c = time.perf_counter(), _cpu(self.who), _cpu(resource.RUSAGE_CHILDREN)
        try:
            yield
        finally:
            acc = self.parts.setdefault(name, [0.0, 0.0, 0.0])
            acc[0] += time.perf_counter() - w
            acc[1] += _cpu(self.who) - s
            acc[2] += _cpu(resource.RUSAGE_CHILDREN) - c

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        if not hasattr(owner, attr):  # a part that the code measured does not have (an older version)
            return
        fn: Callable[..., Any] = getattr(owner, attr)

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            with self.part(name):
                return fn(*a, **k)

        setattr(owner, attr, timed)


def _descendants(root: int) -> list[int]:
    """PIDs of ``root``'s descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _watch_peak(done: threading.Event, seen: list[float]) -> None:
    """Until ``done``: the largest peak resident size (VmHWM, MiB) of any descendant of this process, in ``seen``."""
    while not done.wait(0.05):
        for pid in _descendants(os.getpid()):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    seen[0] = max(seen[0], int(line.split()[1]) / 1024)


def _measure(args: argparse.Namespace, folder: Path, clock: Clock, peak_after_smpi: list[float],
             out: str) -> dict[str, Any]:
    """One timed run of ``folder/s.toml`` into ``folder/out`` (and its stock rerun): prints and returns the figures."""
    clock.parts.clear()
    whole = Clock(resource.RUSAGE_SELF)  # every thread of the process
    with whole.part("api.run"):
        run = api.run(folder / "s.toml", folder / out)
    peak_py = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_sim = peak_after_smpi[-1]
    stages = dict(run.result.stage_seconds)
    stock = Clock(resource.RUSAGE_SELF)
    with stock.part("stock"):
        cmd = ["true"] if args.no_stock else ["sh", str(folder / out / "program" / "rerun" / "smpirun.sh")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    events = len(run.result.events)
    tw, ts, tc = whole.parts["api.run"]
    sw, ss, sc = clock.parts["smpi"]
    total_cpu, smpi_cpu = ts + tc, ss + sc
    own_w, own_cpu = tw - sw, total_cpu - smpi_cpu
    kw, ks, kc = stock.parts["stock"]
    print(f"bsp.c, {args.ranks} ranks x {args.steps} steps: {events:,} events, stock rerun exit {proc.returncode}")
    print(f"{'':34}{'wall s':>9}{'CPU s':>9}")
    print(f"  waitlab run (api.run, folder)  {tw:9.2f}{total_cpu:9.2f}")
    for name, (w, s, c) in clock.parts.items():
        print(f"    {name:<29}{w:9.2f}{s + c:9.2f}")
    if not args.no_stock:  # without the stock rerun there is nothing to take the stage's cost from
        print(f"  stock smpirun (rerun/)         {kw:9.2f}{ks + kc:9.2f}")
        print(f"  layer's cost inside the SMPI stage (SMPI stage - stock): {sw - kw:.2f} s wall, "
              f"{smpi_cpu - ks - kc:.2f} s CPU")
    named = sum(s + c for name, (w, s, c) in clock.parts.items() if name != "smpi")
    print(f"  other parts (wait states, summary, placement, ...): {own_cpu - named:.2f} s CPU")
    print(f"  waitlab's own work: {own_w:.2f} s wall = {100 * own_w / max(sw, 1e-9):.1f}% of the SMPI stage; "
          f"{own_cpu:.2f} s CPU = {100 * own_cpu / max(smpi_cpu, 1e-9):.1f}% of its CPU")
    print(f"  events per CPU second of waitlab's own work: {events / max(own_cpu, 1e-9):,.0f}; "
          f"SMPI stage: {events / max(smpi_cpu, 1e-9):,.0f}")
    print(f"  peak memory: waitlab (Python) {peak_py:.0f} MiB, simulator {peak_sim:.0f} MiB")
    print(f"  (stage_seconds: {json.dumps({k: round(v, 3) for k, v in sorted(stages.items())})})")
    shutil.rmtree(folder / out, ignore_errors=True)  # a repeat's folder: not kept
    return {"ranks": args.ranks, "steps": args.steps, "events": events, "total_wall": tw, "total_cpu": total_cpu,
            "smpi_wall": sw, "smpi_cpu": smpi_cpu, "own_wall": own_w, "own_cpu": own_cpu, "stock_wall": kw,
            "stock_cpu": ks + kc, "peak_python_mib": peak_py, "peak_simulator_mib": peak_sim,
            "parts": {k: list(v) for k, v in clock.parts.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--no-stock", action="store_true", help="skip the stock SimGrid rerun (the layer's cost)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs (this machine's noise: their median and spread)")
    args = ap.parse_args()
    clock = Clock()
    # the parts of waitlab's work (module attributes looked up at call time)
    clock.wrap(program_run, "run_smpirun", "smpi")
    # the simulator's own peak: the largest VmHWM of this process's descendants while the SMPI stage runs, read
    # from /proc (RUSAGE_CHILDREN would report the largest child ever waited for: an earlier fork of this large
    # process, such as the compiler of the first run, counts the parent's resident pages)
    smpirun = program_run.run_smpirun
    peak_after_smpi: list[float] = []

    def run_and_peak(*a: Any, **k: Any) -> Any:
        seen = [0.0]
        done = threading.Event()
        watcher = threading.Thread(target=_watch_peak, args=(done, seen))
        watcher.start()
        try:
            return smpirun(*a, **k)
        finally:
            done.set()
            watcher.join()
            peak_after_smpi.append(seen[0])

    program_run.run_smpirun = run_and_peak  # type: ignore[assignment]
    clock.wrap(programs.prog, "read_records", "read records")
    clock.wrap(programs.prog, "records_to_ops", "records -> operations")
    clock.wrap(programs.prog, "rerun_files", "rerun files")
    clock.wrap(pipeline, "build_events", "event table")
    clock.wrap(sources, "program_binary", "build (cached)")
    clock.wrap(results, "write_ops", "ops.parquet")
    clock.wrap(results, "write_table", "events/waits/... parquet")
    clock.wrap(results, "write_chrome_trace", "trace.json")
    clock.wrap(plots, "timeline_png", "timeline.png")  # imported by write_result when it runs
    clock.wrap(html, "write_html_report", "report.html")
    clock.wrap(results, "write_program_output", "program/ (output, rerun)")
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-overhead-") as tmp:
        folder = Path(tmp)
        scenario = ('[scenario]\nname = "bsp"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                    '[application]\nkind = "program"\nsources = ["' + str(BSP) + '"]\nargs = ["{steps}"]\n')
        (folder / "warm.toml").write_text(scenario.format(ranks=args.ranks, steps=1))
        api.run(folder / "warm.toml", folder / "warm")  # build the program, import every module
        (folder / "s.toml").write_text(scenario.format(ranks=args.ranks, steps=args.steps))
        for k in range(args.repeat):
            if k:
                print()
            figures.append(_measure(args, folder, clock, peak_after_smpi, f"out{k}"))
    if args.repeat > 1:
        share = [100 * f["own_wall"] / max(f["smpi_wall"], 1e-9) for f in figures]
        print(f"\n{args.repeat} runs: waitlab's own work {min(f['own_wall'] for f in figures):.2f} to "
              f"{max(f['own_wall'] for f in figures):.2f} s wall, {statistics.median(share):.1f}% of the SMPI stage "
              f"(median; {min(share):.1f} to {max(share):.1f}%, {sum(x < 10 for x in share)} of {len(share)} "
              "under 10%)")
    if args.json:
        args.json.write_text(json.dumps(figures[0] if args.repeat == 1 else figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
