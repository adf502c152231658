"""Cost of the one-sided (RMA) analysis on large event tables: epochs, matching and wait states.

Builds a synthetic event table (no SMPI): R ranks, S steps; each step every rank does a fence epoch with one
put to its right neighbour, then a post/start/complete/wait exchange with its neighbours and an exclusive
lock epoch on rank 0.  Prints the time of :func:`rma_epochs` and :func:`rma_wait_states` per size.  Timings
taken on a shared machine are noisy; compare sizes measured back to back.

    .venv/bin/python benchmarks/bench_rma_waits.py
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd

from waitlab.models.analysis.rma_epochs import rma_epochs
from waitlab.models.analysis.rma_waits import rma_wait_states

#: One step of one rank: (op, peer: "right" / "left" / "zero" / None).
STEP = (("win_fence", None), ("put", "right"), ("win_fence", None),
        ("win_post", None), ("win_group", "left"), ("win_start", None), ("win_group", "right"),
        ("put", "right"), ("win_complete", None), ("win_wait", None),
        ("win_lock", "zero"), ("put", "zero"), ("win_unlock", "zero"))


def table(ranks: int, steps: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per_rank = steps * len(STEP)
    rank = np.repeat(np.arange(ranks), per_rank)
    k = np.tile(np.arange(per_rank), ranks)
    op = np.array([o for o, _ in STEP], dtype=object)[k % len(STEP)]
    role = np.array([p or "" for _, p in STEP], dtype=object)[k % len(STEP)]
    peer = np.select([role == "right", role == "left", role == "zero"],
                     [(rank + 1) % ranks, (rank - 1) % ranks, 0], -1)
    dur = rng.exponential(1e-4, rank.size)
    t = np.cumsum(dur.reshape(ranks, per_rank), axis=1).ravel()
    return pd.DataFrame({"rank": rank.astype(np.int32), "op": pd.Categorical(op), "enter": t - dur, "exit": t,
                         "peer": peer.astype(np.int32), "tag": np.zeros(rank.size, np.int32)})


def main() -> int:
    print(f"{'ranks':>6} {'steps':>6} {'events':>9} {'epochs s':>9} {'waits s':>9} {'wait rows':>10}")
    for ranks, steps in ((16, 100), (64, 250), (256, 250), (1024, 100)):
        ev = table(ranks, steps)
        t0 = time.perf_counter()
        rma_epochs(ev)
        t1 = time.perf_counter()
        w = rma_wait_states(ev)
        t2 = time.perf_counter()
        print(f"{ranks:6d} {steps:6d} {len(ev):9d} {t1 - t0:9.3f} {t2 - t1:9.3f} {sum(x[1].size for x in w):10d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
