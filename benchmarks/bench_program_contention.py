"""Cost of the contention laws in a real program run (issue 39): the same program with and without them.

Runs ``benchmarks/programs/alltoall.c`` (an OSU-style loop of ``MPI_Alltoall``) through ``waitlab.api.run`` with
``[simulation] contention = "platform"`` (the platform's laws, through the contention plugin loaded into SMPI) and
``"none"``, alternately, ``--repeat`` times each, and prints the simulated makespan and the median CPU seconds of
the simulator (``smpirun`` and its children, ``resource.getrusage``; on a shared machine CPU seconds are the figure
to trust) and of the whole run.  The program is built by a first run, not counted.

    nice -n 10 .venv/bin/python benchmarks/bench_program_contention.py --ranks 16 --rpn 4 --iterations 200
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from waitlab import api
from waitlab.experiments.scenario import from_mapping

PROGRAM = Path(__file__).resolve().parent / "programs" / "alltoall.c"


def one(tmp: Path, ranks: int, rpn: int, size: int, iterations: int, contention: str, k: int) -> dict[str, float]:
    data = {"scenario": {"name": f"alltoall-{contention}", "ranks": ranks},
            "platform": {"name": "dawning_5000a", "ranks_per_node": rpn},
            "application": {"kind": "program", "sources": [str(PROGRAM)], "args": [str(size), str(iterations)]},
            "simulation": {"contention": contention}}
    sc = from_mapping(data, str(tmp / "s.toml"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    api.run(sc, tmp / f"out-{contention}-{k}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own2 = resource.getrusage(resource.RUSAGE_SELF)
    simulator = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    total = simulator + (own2.ru_utime + own2.ru_stime) - (own.ru_utime + own.ru_stime)
    summary = json.loads((tmp / f"out-{contention}-{k}" / "summary.json").read_text())
    acted = json.loads((tmp / f"out-{contention}-{k}" / "run.json").read_text())["contention"].get("acted", {})
    return {"makespan": summary["makespan"], "simulator_cpu": simulator, "total_cpu": total, "wall": wall,
            "links": float(sum(acted.values()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--rpn", type=int, default=4, help="ranks per node")
    ap.add_argument("--size", type=int, default=65536, help="bytes per peer")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-contention-") as tmp:
        one(Path(tmp), args.ranks, args.rpn, args.size, 1, "none", -1)  # builds the program
        got: dict[str, list[dict[str, float]]] = {"platform": [], "none": []}
        for k in range(args.repeat):
            for contention in ("platform", "none"):
                got[contention].append(one(Path(tmp), args.ranks, args.rpn, args.size, args.iterations, contention, k))
    print(f"alltoall.c: {args.ranks} ranks, {args.rpn} per node, {args.size} B per peer, {args.iterations} "
          f"alltoalls, median of {args.repeat}")
    for contention, runs in got.items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"  contention = {contention!r:11} makespan {med['makespan']:.6f} s, links with a law "
              f"{med['links']:.0f}, simulator CPU {med['simulator_cpu']:.2f} s, whole run CPU "
              f"{med['total_cpu']:.2f} s, wall {med['wall']:.2f} s")


if __name__ == "__main__":
    main()
