"""Benchmark: ``waitlab evaluate`` on the built-in suite, from a cold cache and then warm (issue 24).

Targets on two cores: under 15 minutes cold (every suite run and counterfactual re-run simulated), under
30 s warm (everything from the cache).  Prints the wall time of each pass, how much it simulated, the
load average (the machine may be shared) and the total cost of each model, and checks that the warm
pass wrote the same leaderboard bytes.

    .venv/bin/python benchmarks/bench_evaluate.py                       # the whole suite, a fresh cache
    .venv/bin/python benchmarks/bench_evaluate.py --case -16 --cache /tmp/ev-cache   # the 16-rank cases
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import waitlab


def _pass(label: str, cache: Path, out: Path, only: tuple[str, ...], workers: int) -> waitlab.Evaluation:
    t = time.perf_counter()
    ev = waitlab.evaluate(None, out, only=only, cache_dir=cache, workers=workers, png=True)
    wall = time.perf_counter() - t
    print(f"{label}: {wall:.1f} s wall, {ev.rows['case'].nunique()} cases x {ev.rows['model'].nunique()} models, "
          f"{ev.counts['runs_simulated']} suite runs + {ev.counts['reruns_simulated']} counterfactual re-runs "
          f"simulated, load average {os.getloadavg()[0]:.1f}")
    return ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", nargs="*", default=[], help="only the cases whose name contains one of these")
    ap.add_argument("--cache", type=Path, default=None, help="cache folder (default: a fresh temporary one)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-evaluate-"))
    cache = args.cache or tmp / "cache"
    try:
        _pass("cold", cache, tmp / "cold", tuple(args.case), args.workers)
        ev = _pass("warm", cache, tmp / "warm", tuple(args.case), args.workers)
        same = all((tmp / "cold" / f).read_bytes() == (tmp / "warm" / f).read_bytes()
                   for f in ("leaderboard.md", "leaderboard.csv", "leaderboard.json"))
        print(f"warm leaderboard identical to cold: {same}")
        cost = ev.rows.groupby("name", sort=False)["seconds"].sum()
        print("model cost over the suite (s, measured in the cold pass): "
              + ", ".join(f"{k} {v:.2f}" for k, v in cost.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
