"""waitlab's own work around a program run as a shell user meets it (issue 25): ``waitlab run`` in a fresh process.

``bench_program_overhead.py`` times ``api.run`` in a process that has imported waitlab and run once already; a
command started from a shell also pays the import of waitlab before its SMPI stage, and the first use of every
library after it. Each repeat here is a new Python process running the command's own entry point
(``waitlab.entry``'s command line, ``waitlab.cli.main(["run", SCENARIO, "-o", FOLDER])``, without the process's
end) on ``tests/programs/bsp.c`` or ``benchmarks/programs/pingpong.c`` (``--program``; ``--ranks`` x ``--steps``),
timed in four parts (and the process's peak memory): the imports, the work before the SMPI stage (scenario,
platform, build cache), the SMPI stage (the ``smpirun`` process, while which the command imports what follows it),
and the work after it (records, event table, wait states, the results folder). The first repeat builds the program
(its build is not part of the figures: it is cached for the others and not timed).

    .venv/bin/python benchmarks/bench_cli_overhead.py --repeat 4                      # bsp.c, ~10 s SMPI stages
    .venv/bin/python benchmarks/bench_cli_overhead.py --program pingpong --repeat 4   # no step markers, ~10 s
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: The programs timed: the source and its default ranks and argument (about a 10 s SMPI stage here).
PROGRAMS = {"bsp": (HERE.parent / "tests" / "programs" / "bsp.c", 16, 13000),
            "pingpong": (HERE / "programs" / "pingpong.c", 2, 400000)}
SCENARIO = ('[scenario]\nname = "{name}"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
            '[application]\nkind = "program"\nsources = ["{source}"]\nargs = ["{steps}"]\n')


def child(scenario: Path, folder: Path) -> None:
    """One command in this (fresh) process; prints its four parts as JSON on the last line."""
    t0 = time.perf_counter()
    # loaded by name here, not imported at the top: the import is what is timed (and the parent process never
    # imports waitlab)
    entry = importlib.import_module("waitlab.entry")
    program_run = importlib.import_module("waitlab.simulator.program_run")
    t1 = time.perf_counter()
    real = program_run.run_smpirun
    mark: dict[str, float] = {}

    def timed(*a: Any, **k: Any) -> Any:
        mark["start"], mark["cpu_start"] = time.perf_counter(), _cpu()
        try:
            return real(*a, **k)
        finally:
            mark["end"], mark["cpu_end"] = time.perf_counter(), _cpu()

    program_run.run_smpirun = timed
    code = entry.cli.main(["run", str(scenario), "-o", str(folder), "--force"])  # entry.main would end the process
    t2, cpu2 = time.perf_counter(), _cpu()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"exit": code, "imports": t1 - t0, "before": mark["start"] - t1,
                      "smpi": mark["end"] - mark["start"], "after": t2 - mark["end"], "peak_mib": peak,
                      "cpu_during": mark["cpu_end"] - mark["cpu_start"], "cpu_after": cpu2 - mark["cpu_end"]}))


def _cpu() -> float:
    """CPU seconds of this process so far, all its threads (user and system; not its children: ``smpirun``)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", choices=sorted(PROGRAMS), default="bsp",
                    help="bsp.c (16 ranks, 8 events per rank and step, step markers) or pingpong.c (2 ranks, "
                         "blocking send and receive, no step markers, as most real programs)")
    ap.add_argument("--ranks", type=int, help="default: the program's (16, 2)")
    ap.add_argument("--steps", type=int, help="the program's argument (default: 13000, 400000: ~10 s stages)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("SCENARIO", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return 0
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-cli-") as tmp:
        folder = Path(tmp)
        scenario = folder / "s.toml"
        source, ranks, steps = PROGRAMS[args.program]
        ranks, steps = args.ranks or ranks, args.steps or steps
        scenario.write_text(SCENARIO.format(name=args.program, ranks=ranks, source=source, steps=steps))
        warm = folder / "warm.toml"
        warm.write_text(SCENARIO.format(name=args.program, ranks=ranks, source=source, steps=1))
        subprocess.run([sys.executable, __file__, "--child", str(warm), str(folder / "warm")], check=True,
                       capture_output=True)  # builds the program (cached for the timed runs)
        for k in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--child", str(scenario), str(folder / f"out{k}")],
                                 check=True, capture_output=True, text=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            own = r["imports"] + r["before"] + r["after"]
            r["own"], r["share"] = own, 100 * own / max(r["smpi"], 1e-9)
            runs.append(r)
            print(f"run {k + 1}: imports {r['imports']:.2f} s, before the SMPI stage {r['before']:.2f} s, SMPI stage "
                  f"{r['smpi']:.2f} s, after it {r['after']:.2f} s: waitlab's own work {own:.2f} s = "
                  f"{r['share']:.1f}% of the SMPI stage; CPU after it {r['cpu_after']:.2f} s (during it "
                  f"{r['cpu_during']:.2f} s: the imports that follow the stage, done while SMPI runs); peak memory "
                  f"{r['peak_mib']:.0f} MiB (exit {r['exit']})")
    shares = [r["share"] for r in runs]
    own, imports = statistics.median(r["own"] for r in runs), statistics.median(r["imports"] for r in runs)
    print(f"{len(runs)} runs of {source.name}, {ranks} ranks x {steps} steps: waitlab's own work {own:.2f} s "
          f"(median), {statistics.median(shares):.1f}% of the SMPI stage ({min(shares):.1f} to {max(shares):.1f}%); "
          f"imports {imports:.2f} s; CPU after the stage {statistics.median(r['cpu_after'] for r in runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
