"""Benchmark: ``waitlab evaluate`` on the built-in suite, from a cold cache and then warm (issue 24).

Targets on two cores: under 15 minutes cold (every suite run and counterfactual re-run simulated), under
30 s warm (everything from the cache).  Prints the wall time of each pass, how much it simulated, the
load average (the machine may be shared) and the total cost of each model, and checks that the warm
pass wrote the same leaderboard bytes.

    .venv/bin/python benchmarks/bench_evaluate.py                       # the whole suite, a fresh cache
    .venv/bin/python benchmarks/bench_evaluate.py --case -16 --cache /tmp/ev-cache   # the 16-rank cases
    .venv/bin/python benchmarks/bench_evaluate.py --out /tmp/lb          # keep the cold pass's leaderboard

Besides wall time it prints the CPU seconds of the pass (this process and every child it waited for,
``resource.getrusage``: ``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``): on a shared machine the wall time grows
with the other users' load, the CPU seconds much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import waitlab


def _cpu() -> float:
    """CPU seconds (user + system) of this process and of its waited-for children so far."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _pass(label: str, cache: Path, out: Path, only: tuple[str, ...], workers: int) -> waitlab.Evaluation:
    t, c = time.perf_counter(), _cpu()
    ev = waitlab.evaluate(None, out, only=only, cache_dir=cache, workers=workers, png=True)
    wall, cpu = time.perf_counter() - t, _cpu() - c
    print(f"{label}: {wall:.1f} s wall, {cpu:.1f} CPU s, {ev.rows['case'].nunique()} cases x "
          f"{ev.rows['model'].nunique()} models, {ev.counts['runs_simulated']} suite runs + "
          f"{ev.counts['reruns_simulated']} counterfactual re-runs simulated, load average {os.getloadavg()[0]:.1f}",
          flush=True)
    return ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", nargs="*", default=[], help="only the cases whose name contains one of these")
    ap.add_argument("--cache", type=Path, default=None, help="cache folder (default: a fresh temporary one)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="keep the cold pass's leaderboard folder here")
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
        if args.out is not None:
            shutil.copytree(tmp / "cold", args.out, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
