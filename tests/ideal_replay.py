"""An ideal-network replay of an OpTable for hand-computed model tests (no SimGrid).

Messages are eager and free (a receive completes when both sides have
arrived), collectives complete when the last rank arrives, local actions take
exactly their seconds.  The event table is built by the real
:func:`~waitlab.simulator.timeline.build_events`, so it has every column.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

from waitlab.experiments.diagnosis.groundtruth import wait_metrics
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.columns import frame
from waitlab.models.ops import ACTIONS, COLLECTIVE_ACTIONS, LOCAL_ACTIONS, OpBuilder, OpTable
from waitlab.simulator.matching import completions, match_messages
from waitlab.simulator.timeline import build_events, collective_instances


def ideal_replay(ops: OpTable) -> pd.DataFrame:
    """Event table of ``ops`` replayed on an ideal network."""
    n = len(ops)
    match = match_messages(ops)
    done = completions(ops, match)
    inst = collective_instances(ops)
    reqs_of: dict[int, list[int]] = defaultdict(list)
    for j in np.flatnonzero(np.isin([ACTIONS[c] for c in ops.code], ["irecv"])).tolist():
        if done[j] >= 0:
            reqs_of[int(done[j])].append(j)
    te, tx = np.zeros(n), np.zeros(n)
    counts = ops.per_rank_counts()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pc, end = starts.copy(), starts + counts
    clock = np.zeros(ops.n_ranks)
    send_time: dict[int, float] = {}
    arrivals: dict[int, dict[int, float]] = defaultdict(dict)
    while (pc < end).any():
        progressed = False
        for r in range(ops.n_ranks):
            while pc[r] < end[r]:
                i = int(pc[r])
                a = ACTIONS[ops.code[i]]
                t = float(clock[r])
                if a in ("enter", "leave", "irecv", "location"):
                    finish = t
                elif a in LOCAL_ACTIONS:
                    finish = t + float(ops.value[i])
                elif a in ("send", "isend"):
                    send_time[int(match[i])] = t
                    finish = t
                elif a == "recv":
                    if int(match[i]) not in send_time:
                        break
                    finish = max(t, send_time[int(match[i])])
                elif a in ("wait", "waitall"):
                    need = [send_time.get(int(match[j])) for j in reqs_of.get(i, [])]
                    if any(x is None for x in need):
                        break
                    finish = max([t, *(x for x in need if x is not None)])
                elif a in COLLECTIVE_ACTIONS:
                    arr = arrivals[int(inst[i])]
                    arr[r] = t
                    if len(arr) < ops.n_ranks:
                        break
                    finish = max(arr.values())
                else:
                    raise ValueError(f"ideal replay does not support {a}")
                te[i], tx[i] = t, finish
                clock[r] = finish
                pc[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("deadlock in ideal replay")
    return frame(build_events(ops, te, tx))


def work(b: OpBuilder, ranks: object, seconds: object, region: str) -> None:
    b.add("enter", ranks, region=region)
    b.add("compute", ranks, value=seconds, region=region)
    b.add("leave", ranks, region=region)


def chain_ops(x: float, base: float = 1.0, n: int = 4) -> OpTable:
    """Ranks 0..n-1 work ``base`` in region "work" (rank 0: base + x), then 0 -> 1 -> ... -> n-1."""
    b = OpBuilder(n)
    b.add("enter", range(n), region="work")
    b.add("compute", range(n), value=[base + x] + [base] * (n - 1), excess=[x] + [0.0] * (n - 1), region="work")
    b.add("leave", range(n), region="work")
    for r in range(n - 1):
        b.add("send", r, peer=r + 1, value=8)
        b.add("recv", r + 1, peer=r, value=8)
    return b.build()


def ideal_rerun(scenario: object, ops: OpTable, speed_profiles: object = None) -> dict:
    """A counterfactual re-run on the ideal network (the ``rerun`` hook of the ground truth)."""

    ev = ideal_replay(ops)
    return wait_metrics(ev, wait_states(ev))
