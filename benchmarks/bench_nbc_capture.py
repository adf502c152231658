"""Live run vs replay of its capture for nonblocking collectives with overlapped compute (issue 25).

Runs ``tests/programs/nbc_overlap.c`` (the structure of OSU's osu_ialltoall: post, compute, wait) under
``waitlab capture`` in each mode and prints the live and replayed makespan, their relative difference, and the
makespan of the same trace replayed without its posts (the collective blocking at its wait, as captures were written
before).  ``wtime`` spins on MPI_Wtime as OSU's dummy compute does: with ``computation = "measured"`` (host time,
differs run to run) or ``"counted"`` (basic blocks) it needs no ``smpi/wtime`` cost.

    nice -n 10 .venv/bin/python benchmarks/bench_nbc_capture.py --ranks 8 --iterations 20
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "programs" / "nbc_overlap.c"
CASES: dict[str, dict[str, Any]] = {
    "exact": {},
    "mixed": {},
    "probe": {},
    "wtime-smpi/wtime": {"simulation": {"config": {"smpi/wtime": "1e-7"}}},
    "wtime-measured": {"computation": "measured"},
    "wtime-counted": {"computation": "counted", "flops_per_block": 1e4},
}


def _blocking(folder: Path, out: Path) -> Path:
    out.mkdir()
    for f in folder.iterdir():
        if f.suffix == ".txt":
            lines = [ln for ln in f.read_text().splitlines() if not re.match(r"^\d+ i[a-z]+ .*nbc=", ln)]
            (out / f.name).write_text("\n".join(re.sub(r" nbc=\d+$", "", ln) for ln in lines) + "\n")
    return out / "index.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--bytes", type=int, default=65536, help="bytes per peer")
    ap.add_argument("--compute", type=float, default=2e-3, help="seconds of compute per iteration (rank 0)")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    args = ap.parse_args()
    print(f"{'case':18} {'live s':>10} {'replay s':>10} {'rel diff':>9} {'no posts s':>11} {'wall s':>7}")
    for case in args.cases:
        mode = case.split("-")[0]
        extra = dict(CASES[case])
        sim = extra.pop("simulation", {})
        with tempfile.TemporaryDirectory(prefix="waitlab-bench-nbc-") as tmp:
            work = Path(tmp)
            data = {"scenario": {"name": f"nbc-{mode}", "ranks": args.ranks}, "platform": {"name": "dawning_5000a"},
                    "application": {"kind": "program", "sources": [str(PROGRAM)],
                                    "args": [mode, str(args.iterations), str(args.bytes), repr(args.compute)],
                                    **extra},
                    "simulation": {"timeout": 600, **sim}}
            t = time.perf_counter()
            sc = from_mapping(data, str(work / "s.toml"))
            capture(sc, work / "cap", check=False)
            meta = json.loads((work / "cap" / "capture.json").read_text())
            live = meta["makespan"]
            rep_sc = from_mapping({"scenario": {"name": "r", "ranks": args.ranks},
                                   "platform": {"name": "dawning_5000a"},
                                   "application": {"kind": "trace", "trace": str(work / "cap" / "index.txt")}},
                                  "<bench>")
            rep = float(simulate(rep_sc).events["exit"].max())
            blk_sc = from_mapping({**rep_sc.resolved(), "application": {"kind": "trace", "trace": str(
                _blocking(work / "cap", work / "blk"))}}, "<bench>")
            blk = float(simulate(blk_sc).events["exit"].max())
            wall = time.perf_counter() - t
        print(f"{case:18} {live:10.6f} {rep:10.6f} {abs(rep - live) / live:9.2e} {blk:11.6f} {wall:7.1f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
