"""Checks and an ideal-network timing of application models' operation tables (pure, no SMPI).

Shared by the application-model tests: structural checks (point-to-point balance, nested regions, collectives that
agree, a consistent ledger), :func:`ideal_times` (enter and exit time of every operation with free messages,
optionally rendezvous sends; :mod:`ideal_replay` builds a whole event table instead) and the small parameter
sets every application is checked with.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest

from waitlab.models.apps.common import AppParams
from waitlab.models.apps.imbalance import Imbalance
from waitlab.models.apps.registry import (
    FftParams,
    LaredSParams,
    MatmulParams,
    PingpongParams,
    StencilParams,
    WavefrontParams,
)
from waitlab.models.ops import ACTIONS, CODE, COLLECTIVE_ACTIONS, OpTable

# ----------------------------------------------------------------------------------------------------------------
# helpers


def actions(ops: OpTable, rank: int) -> list[str]:
    """Action names of one rank, in order."""
    return [ACTIONS[c] for c in ops.code[ops.rank == rank]]


def check_p2p_balance(ops: OpTable) -> Counter[tuple[int, int, int]]:
    """Assert every (src, dst, tag) has as many sends as receives; return the send counts."""
    send = ops.mask(["send", "isend"])
    recv = ops.mask(["recv", "irecv"])
    sends = Counter(zip(ops.rank[send].tolist(), ops.peer[send].tolist(), ops.tag[send].tolist(), strict=True))
    recvs = Counter(zip(ops.peer[recv].tolist(), ops.rank[recv].tolist(), ops.tag[recv].tolist(), strict=True))
    assert sends == recvs, f"unmatched messages: {(sends - recvs) + (recvs - sends)}"
    assert not (ops.peer[send | recv] == ops.rank[send | recv]).any(), "message to self"
    # sizes agree pairwise, in order, per (src, dst, tag)
    key_s = defaultdict(list)
    key_r = defaultdict(list)
    for i in np.flatnonzero(send):
        key_s[(ops.rank[i], ops.peer[i], ops.tag[i])].append(ops.value[i])
    for i in np.flatnonzero(recv):
        key_r[(ops.peer[i], ops.rank[i], ops.tag[i])].append(ops.value[i])
    assert key_s == key_r
    return sends


def check_regions_nested(ops: OpTable) -> None:
    """Assert enter/leave are balanced and nested per rank, and each compute is in its own region."""
    enter, leave, compute = CODE["enter"], CODE["leave"], CODE["compute"]
    for r in range(ops.n_ranks):
        rows = np.flatnonzero(ops.rank == r)
        stack: list[int] = []
        for i in rows:
            c, name = ops.code[i], ops.name[i]
            if c == enter:
                assert name >= 0
                stack.append(name)
            elif c == leave:
                assert stack and stack[-1] == name, f"rank {r}: leave {ops.names[name]} does not close {stack}"
                stack.pop()
            elif c == compute:
                assert stack and stack[-1] == name, f"rank {r}: compute of {name} outside its region"
            else:
                assert name == -1
        assert not stack, f"rank {r}: regions left open: {[ops.names[n] for n in stack]}"


def collective_sequence(ops: OpTable, rank: int) -> list[tuple[int, float, float, int, int]]:
    m = ops.mask(COLLECTIVE_ACTIONS) & (ops.rank == rank)
    return list(zip(ops.code[m].tolist(), ops.value[m].tolist(), ops.value2[m].tolist(), ops.peer[m].tolist(),
                    ops.step[m].tolist(), strict=True))


def check_collectives_agree(ops: OpTable) -> None:
    first = collective_sequence(ops, 0)
    for r in range(1, ops.n_ranks):
        assert collective_sequence(ops, r) == first, f"rank {r} has another collective sequence"


def check_ledger(ops: OpTable) -> None:
    """The ledger and the table's excess column describe the same injected seconds."""
    led = ops.ledger
    assert led.total() == pytest.approx(float(ops.excess.sum()), rel=1e-12, abs=1e-12)
    assert (ops.excess >= 0).all() and (led.seconds > 0).all()
    assert (ops.excess <= ops.value + 1e-12).all()
    hit = ops.cause >= 0
    assert hit.sum() == len(led)
    assert sorted(ops.cause[hit].tolist()) == list(range(len(led)))
    assert np.array_equal(led.seconds[ops.cause[hit]], ops.excess[hit])
    assert np.array_equal(led.rank[ops.cause[hit]], ops.rank[hit])
    assert np.array_equal(led.step[ops.cause[hit]], ops.step[hit])
    assert np.array_equal(led.region[ops.cause[hit]], ops.name[hit])
    assert (ops.code[hit] == CODE["compute"]).all()
    assert set(led.kind.tolist()) <= {0}  # all "imbalance"


def check_all(ops: OpTable) -> None:
    check_p2p_balance(ops)
    check_regions_nested(ops)
    check_collectives_agree(ops)
    check_ledger(ops)
    assert (ops.step >= 0).all(), "every op belongs to a step"
    assert (ops.value >= 0).all()


def ideal_times(ops: OpTable, *, rendezvous: bool = False) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Enter and exit time of every op with an infinitely fast network (a reference, not SMPI).

    ``compute`` takes its value in seconds; a receive completes when its matching
    send has started; collectives complete when the last rank enters (``bcast``:
    when the root enters).  With ``rendezvous`` a blocking ``send`` also waits for
    the matching receive to be posted (raises on deadlock either way).
    """
    n = ops.n_ranks
    counts = ops.per_rank_counts()
    start = np.concatenate(([0], np.cumsum(counts)))
    code, value, peer, tag = ops.code.tolist(), ops.value.tolist(), ops.peer.tolist(), ops.tag.tolist()
    names = {c: ACTIONS[c] for c in set(code)}
    enter_t = np.full(len(ops), np.nan)
    exit_t = np.full(len(ops), np.nan)
    t = [0.0] * n
    ptr = start[:-1].tolist()
    end = start[1:].tolist()
    send_posts: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    recv_posts: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    pending: list[list[tuple[tuple[int, int, int], int]]] = [[] for _ in range(n)]
    posted_k = [-1] * n  # index of the receive a blocked rank already posted (-1: none yet)
    sent_k = [-1] * n  # index of the send a blocked rank already posted
    coll_count = [0] * n
    arrivals: list[dict[int, float]] = []
    done = 0
    while done < n:
        progress = False
        for r in range(n):
            while ptr[r] < end[r]:
                i = ptr[r]
                a = names[code[i]]
                if np.isnan(enter_t[i]):
                    enter_t[i] = t[r]
                if a == "compute":
                    t[r] += value[i]
                elif a in ("isend", "send"):
                    key = (r, peer[i], tag[i])
                    if sent_k[r] < 0:
                        send_posts[key].append(t[r])
                        sent_k[r] = len(send_posts[key]) - 1
                    if a == "send" and rendezvous:
                        k = sent_k[r]
                        if len(recv_posts[key]) <= k:
                            break
                        t[r] = max(t[r], recv_posts[key][k])
                    sent_k[r] = -1
                elif a in ("irecv", "recv"):
                    key = (peer[i], r, tag[i])
                    if posted_k[r] < 0:
                        recv_posts[key].append(t[r])
                        posted_k[r] = len(recv_posts[key]) - 1
                    k = posted_k[r]
                    if a == "irecv":
                        pending[r].append((key, k))
                    else:
                        if len(send_posts[key]) <= k:
                            break
                        t[r] = max(t[r], send_posts[key][k])
                    posted_k[r] = -1
                elif a == "waitall":
                    if any(len(send_posts[key]) <= k for key, k in pending[r]):
                        break
                    t[r] = max([t[r], *(send_posts[key][k] for key, k in pending[r])])
                    pending[r] = []
                elif a in COLLECTIVE_ACTIONS:
                    c = coll_count[r]
                    while len(arrivals) <= c:
                        arrivals.append({})
                    arrivals[c].setdefault(r, t[r])
                    if a == "bcast":
                        if peer[i] not in arrivals[c]:
                            break
                        t[r] = max(t[r], arrivals[c][peer[i]])
                    else:
                        if len(arrivals[c]) < n:
                            break
                        t[r] = max(arrivals[c].values())
                    coll_count[r] += 1
                exit_t[i] = t[r]
                ptr[r] += 1
                progress = True
                if ptr[r] == end[r]:
                    done += 1
        if not progress and done < n:
            raise RuntimeError(f"deadlock: ranks stuck at {[ptr[r] - start[r] for r in range(n)]}")
    return enter_t, exit_t


def waits(ops: OpTable, enter_t: npt.NDArray[np.float64], exit_t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Time spent in every MPI op (all of it is waiting with an ideal network)."""
    w = exit_t - enter_t
    w[ops.mask(["compute", "enter", "leave"])] = 0.0
    return w


SMALL: dict[str, tuple[AppParams, int]] = {
    "stencil": (StencilParams(steps=3, allreduce_every=2), 6),
    "lared_s": (LaredSParams(steps=2, halo_bytes=1024), 6),
    "pingpong": (PingpongParams(steps=4, compute_seconds=0.01), 4),
    "matmul": (MatmulParams(matrix_size=12, block_columns=3), 5),
    "fft": (FftParams(steps=2, alltoall_algorithm="lam_simple"), 5),
    "wavefront": (WavefrontParams(steps=3, blocks=2, corners=("nw", "se")), 6),
}


def with_imbalance(params: AppParams, spec: Imbalance) -> AppParams:
    return replace(params, imbalance=(*params.imbalance, spec))


