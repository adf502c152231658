"""What users run, timed as a shell runs it (issue 41): each command is its own process, started the way a shell
starts it, and compared with stock SimGrid doing the same simulation.

* ``--replay N``: ``waitlab run`` of an N-rank x ``--steps`` LARED-S-like scenario (Dawning 5000A, contention
  none: stock SimGrid has no contention laws) against stock ``smpireplaymain`` replaying the same trace with the
  same layout (one shared trace file, region markers removed since the stock replayer does not know them) and the
  same SimGrid settings (run by ``smpirun`` from this process, as waitlab runs it).
* ``--pingpong``: ``waitlab run`` of ``benchmarks/programs/pingpong.c`` on 2 ranks (the build is cached by a first,
  untimed run) against the results folder's own stock rerun (``sh program/rerun/smpirun.sh``).
* ``--diagnose FOLDER``: ``waitlab diagnose --no-truth FOLDER``: wall seconds and peak memory.

The machine is shared and noisy: the two sides run in alternated pairs (waitlab, stock, waitlab, stock, ...) and the
median of the pairs' ratios (and of their differences) is reported with its spread.  Peak memory is the child's own
(``os.wait4``: the process and the children it waited for, not this script's).  waitlab's bytecode is brought up to
date first, as ``make setup`` leaves it (where ``PYTHONDONTWRITEBYTECODE`` is set, a module edited since would
otherwise be compiled again by every timed command: 0.09 s of a ping-pong run).

    .venv/bin/python benchmarks/bench_shell.py --replay 1024 --pairs 3
    .venv/bin/python benchmarks/bench_shell.py --pingpong --pairs 3
    .venv/bin/python benchmarks/bench_shell.py --diagnose results/lared-16384
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.stage import prepare
from waitlab.models.ops import CODE
from waitlab.simulator.smpi import run_smpirun
from waitlab.simulator.trace import write_trace

HERE = Path(__file__).resolve().parent
WAITLAB = str(Path(sys.executable).with_name("waitlab"))
STOCK = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"
PINGPONG = HERE / "programs" / "pingpong.c"
#: CPU seconds of every command :func:`timed` ran, in order (on a loaded machine the figure to compare).
CPU: list[float] = []


def timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak memory (MiB) of one command run as its own process; its CPU seconds (user + system,
    with the children it waited for) go to :data:`CPU`."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err[-2000:]}")
    CPU.append(usage.ru_utime + usage.ru_stime)
    return wall, usage.ru_maxrss / 1024


def replay_scenario(ranks: int, steps: int) -> str:
    return (f'[scenario]\nname = "shell-lared-{ranks}"\nranks = {ranks}\nseed = 1\n[platform]\nname = "dawning_5000a"\n'
            f'[application]\nkind = "lared_s"\nsteps = {steps}\n[simulation]\ncontention = "none"\n')


def stock_replay(toml: Path, work: Path) -> Callable[[], float]:
    """The stock replay of the scenario's trace (written once here), timed when called: ``smpirun`` with
    ``smpireplaymain`` and waitlab's SimGrid settings."""

    work.mkdir(parents=True, exist_ok=True)
    prep = prepare(load_scenario(toml))
    ops = prep.source.operations(prep.platform, prep.smpi_config(), work)
    keep = np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))
    xml, hostfile = prep.platform.write(work)
    index = write_trace(ops.take(keep), prep.platform.core_speed, work / "trace", shared=True)

    def run() -> float:
        t, before = time.perf_counter(), os.times()
        run_smpirun(Path(STOCK), ops.n_ranks, xml, hostfile, replay_index=index, config=prep.smpi_config(),
                    timeout=36000, what="stock replay")
        after = os.times()
        CPU.append(after.children_user + after.children_system - before.children_user - before.children_system)
        return time.perf_counter() - t

    return run


#: waitlab's own work in each timed ``waitlab run`` of :func:`pairs` with a ``timing`` file: the command's wall seconds
#: less its SMPI stage (``timing.json``), which the host's speed moves far less than the ratio to stock.
OWN: list[float] = []


def pairs(a: list[str], b: Callable[[], float], n: int, timing: Path | None = None
          ) -> tuple[list[float], list[float], list[float]]:
    """``n`` alternated runs of command ``a`` and of ``b``: their wall seconds and ``a``'s peak memory (``timing``:
    the ``timing.json`` ``a`` writes, read into :data:`OWN`)."""
    wa, wb, peak = [], [], []
    for _ in range(n):
        w, m = timed(a)
        wa.append(w)
        peak.append(m)
        if timing is not None:
            OWN.append(w - json.loads(timing.read_text())["stage_seconds"]["smpi"])
        wb.append(b())
    return wa, wb, peak


def spread(xs: list[float], unit: str = "") -> str:
    return f"median {statistics.median(xs):.3g}{unit} (min {min(xs):.3g}, max {max(xs):.3g})"


def compare(what: str, stock: str, wa: list[float], wb: list[float], peak: list[float], op: str) -> None:
    """Print the pairs' wall seconds and CPU seconds (:data:`CPU`, alternated) of waitlab and ``stock``, and their
    ratios (``op`` "/") or differences ("-")."""
    def vs(a: list[float], b: list[float]) -> str:
        return spread([x / y for x, y in zip(a, b, strict=True)]) if op == "/" else \
            spread([x - y for x, y in zip(a, b, strict=True)], " s")

    ca, cb = CPU[0::2], CPU[1::2]
    print(f"{what}: waitlab run {spread(wa, ' s')}, {stock} {spread(wb, ' s')}; run {op} stock {vs(wa, wb)}; "
          f"waitlab peak {spread(peak, ' MiB')}")
    print(f"  CPU: waitlab run {spread(ca, ' s')}, {stock} {spread(cb, ' s')}; run {op} stock {vs(ca, cb)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replay", type=int, metavar="RANKS")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pingpong", action="store_true")
    ap.add_argument("--messages", type=int, default=1000, help="ping-pong round trips (default 1000)")
    ap.add_argument("--diagnose", type=Path, metavar="FOLDER")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    # waitlab's bytecode brought up to date, as `make setup` leaves it (scripts/bootstrap.sh): where
    # PYTHONDONTWRITEBYTECODE is set, a module edited since would be compiled again by every timed command
    for package in ("waitlab", "experiments", "models", "platforms", "simulator"):
        compileall.compile_dir(HERE.parent / package, quiet=1)
    work = Path(tempfile.mkdtemp(prefix="bench-shell-"))
    try:
        if args.replay:
            toml = work / "s.toml"
            toml.write_text(replay_scenario(args.replay, args.steps))
            stock = stock_replay(toml, work / "stock")
            out = work / "out"
            CPU.clear()
            OWN.clear()
            wa, wb, peak = pairs([WAITLAB, "run", str(toml), "-o", str(out), "--force", "-q"], stock, args.pairs,
                                 timing=out / "timing.json")
            compare(f"{args.replay} ranks x {args.steps} steps", "stock", wa, wb, peak, "/")
            print(f"  waitlab's own work (wall less its SMPI stage): {spread(OWN, ' s')}")
        if args.pingpong:
            toml = work / "p.toml"
            toml.write_text(f'[scenario]\nname = "shell-pingpong"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                            f'[application]\nkind = "program"\nsources = ["{PINGPONG}"]\nargs = ["{args.messages}"]\n')
            out = work / "pp"
            cmd = [WAITLAB, "run", str(toml), "-o", str(out), "--force", "-q"]
            timed(cmd)  # builds the program (cached for the timed runs) and writes the folder whose rerun is timed
            rerun = work / "rerun"
            shutil.copytree(out / "program" / "rerun", rerun)
            CPU.clear()
            wa, wb, peak = pairs(cmd, lambda: timed(["sh", str(rerun / "smpirun.sh")])[0], args.pairs)
            compare(f"ping-pong, 2 ranks x {args.messages}", "stock rerun", wa, wb, peak, "-")
        if args.diagnose:
            CPU.clear()
            runs = [timed([WAITLAB, "diagnose", "--no-truth", "-q", str(args.diagnose), "-o",
                           str(work / "diag")]) for _ in range(args.pairs)]
            print(f"diagnose --no-truth {args.diagnose}: wall {spread([w for w, _ in runs], ' s')}, CPU "
                  f"{spread(CPU, ' s')}, peak {spread([m for _, m in runs], ' MiB')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
