"""Checks of an operation table before SMPI replays it: collectives agree, messages pair up, no certain deadlock.

SimGrid meets a broken trace with a crash ("malloc_consolidate(): invalid chunk size") or a bare deadlock; these
checks name the first mismatch instead:

- every member of a communicator (the world, or a sub-communicator of ``ops.comms``) calls the same collectives
  on it in the same order, with the same root;
- the k-th send from p to q with tag t pairs with the k-th receive posted by q from p with tag t (MPI's
  non-overtaking order), and the receive is not smaller than the send (MPI_ERR_TRUNCATE);
- a walk of the blocking receives that finds ranks waiting on each other even when every send is buffered
  (eager) and every collective lets ranks through: such a deadlock happens in every MPI, SMPI included.

The TI reader also asks, at a trace's lines (:func:`waitlab.simulator.replayable.unrunnable`): every ``wait``
completes a request still pending (:func:`wait_problem`), and what rank i's v-collective sends to rank j is what
rank j's expects from rank i (:func:`v_count_mismatch`).

Examples
--------
>>> from waitlab.models.ops import OpBuilder
>>> b = OpBuilder(2)
>>> b.add("barrier", ranks=0); b.add("allreduce", ranks=1, value=8.0)
>>> first_mismatch(b.build())
('collectives', 'rank 1 calls allreduce as its collective #1 where rank 0 calls barrier')
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.ops import OpTable, channel_tags
from waitlab.models.requests import completing_tests
from waitlab.models.vocabulary import (
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    RECV_ACTIONS,
    SEND_ACTIONS,
    VOCABULARY,
    codes_of,
    is_rooted,
)

_COLLECTIVE = codes_of(sorted(COLLECTIVE_ACTIONS))
_SEND = codes_of(SEND_ACTIONS)  # send, isend, ssend, issend
_RECV = codes_of(RECV_ACTIONS)
_NONBLOCKING_P2P = codes_of(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking)
_SEND_SET = frozenset(_SEND.tolist())
#: Largest table the deadlock walk runs on (a Python walk over blocking receives); SimGrid's own deadlock
#: report (parsed by waitlab.simulator.smpi) covers larger ones.
MAX_WALK_OPS = 2_000_000


def _op(ops: OpTable, i: int) -> str:
    return f"{ACTIONS[int(ops.code[i])]} (operation {int(ops.seq[i])} of rank {int(ops.rank[i])})"


def _members(ops: OpTable, comms: npt.NDArray[np.int32]) -> pd.DataFrame:
    """(comm, rank, pos) of every member of the communicators ``comms`` (0: the world), ``pos`` its rank in it."""
    groups = [np.arange(ops.n_ranks) if c == 0 else np.asarray(ops.comms[c - 1]) for c in comms.tolist()]
    sizes = np.array([g.size for g in groups], np.int64)
    return pd.DataFrame({"comm": np.repeat(comms, sizes), "rank": np.concatenate(groups),
                         "pos": np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)})


def _on(ops: OpTable, comm: int) -> str:
    """How a message names communicator ``comm``: nothing for the world, else ``on comm=<members>``."""
    return "" if comm == 0 else " on comm=" + ",".join(map(str, ops.comms[comm - 1]))


def collective_mismatch(ops: OpTable) -> str | None:
    """The first place where a rank's collectives on a communicator differ from those of the communicator's rank 0
    (action, order or root), else ``None``.  Each communicator (``ops.comm``: 0 the world, ``k`` the members
    ``ops.comms[k - 1]``) is checked over its own members and calls only."""
    sel = np.isin(ops.code, _COLLECTIVE)
    if not sel.any():
        return None
    df = pd.DataFrame({"comm": ops.comm[sel].astype(np.int64), "rank": ops.rank[sel].astype(np.int64),
                       "seq": ops.seq[sel], "code": ops.code[sel].astype(int),
                       "root": np.where(is_rooted(ops.code[sel]), ops.peer[sel], -1)})
    df = df.sort_values(["comm", "rank", "seq"], kind="stable")
    df["k"] = df.groupby(["comm", "rank"]).cumcount()
    mem = _members(ops, np.unique(df["comm"].to_numpy()))
    counts = df.groupby(["comm", "rank"]).size().rename("count")
    mem = mem.merge(counts, left_on=["comm", "rank"], right_index=True, how="left").fillna({"count": 0})
    ref = mem[mem["pos"] == 0][["comm", "rank", "count"]].rename(columns={"rank": "rank_0", "count": "count_0"})
    mem = mem.merge(ref, on="comm")
    ref_calls = df.merge(ref[["comm", "rank_0"]], left_on=["comm", "rank"], right_on=["comm", "rank_0"])
    other = df.merge(ref_calls[["comm", "k", "code", "root", "rank_0"]], on=["comm", "k"], suffixes=("", "_0"))
    diff = other[(other["rank"] != other["rank_0"]) & ((other["code"] != other["code_0"])
                                                         | (other["root"] != other["root_0"]))]
    short = mem[mem["count"] != mem["count_0"]].copy()
    short["k"] = np.minimum(short["count"], short["count_0"])  # first collective one side of each pair lacks
    short, diff = short.sort_values(["k", "comm", "pos"]), diff.sort_values(["k", "comm", "rank"])
    if not len(short) and not len(diff):
        return None
    if len(short) and (not len(diff) or short["k"].iloc[0] <= diff["k"].iloc[0]):
        row = short.iloc[0]
        c, r, r0, k = int(row["comm"]), int(row["rank"]), int(row["rank_0"]), int(row["k"])
        n, n0, on = int(row["count"]), int(row["count_0"]), _on(ops, c)
        if n < n0:
            name = ACTIONS[int(ref_calls[(ref_calls["comm"] == c) & (ref_calls["k"] == k)]["code"].iloc[0])]
            return f"rank {r} makes {n} collective calls{on}, rank {r0} makes {n0}: rank {r} never calls {name} " \
                   f"(rank {r0}'s collective #{k + 1}{on})"
        name = ACTIONS[int(df[(df["comm"] == c) & (df["rank"] == r) & (df["k"] == k)]["code"].iloc[0])]
        return f"rank {r0} makes {n0} collective calls{on}, rank {r} makes {n}: rank {r0} never calls {name} " \
               f"(rank {r}'s collective #{k + 1}{on})"
    row = diff.iloc[0]
    r, r0, k, on = int(row["rank"]), int(row["rank_0"]), int(row["k"]), _on(ops, int(row["comm"]))
    name, name0 = ACTIONS[int(row["code"])], ACTIONS[int(row["code_0"])]
    if name != name0:
        return f"rank {r} calls {name} as its collective #{k + 1}{on} where rank {r0} calls {name0}"
    return f"rank {r} calls {name} #{k + 1}{on} with root {int(row['root'])}, rank {r0} with root " \
           f"{int(row['root_0'])}"


#: Where an operation is, as a message names it: its row -> e.g. "operation 3 of rank 1" or "line 7".
Where = Callable[[int], str]
#: A problem found at a row: (row, problem, fix).
Found = tuple[int, str, str]
_WAIT_FIX = "a wait reads 'wait <source> <destination> <tag>' of an isend or irecv posted before it on its rank"


def _operation(ops: OpTable) -> Where:
    return lambda i: f"operation {int(ops.seq[i])} of rank {int(ops.rank[i])}"


def wait_problem(ops: OpTable, where: Where | None = None) -> Found | None:
    """The first ``wait`` that completes no request as SimGrid's replay sees it, else ``None``.

    SimGrid 3.32's replay (``RequestStorage`` of ``smpi_replay.cpp``) keeps a rank's pending requests per (source,
    destination, tag) in posting order (a rank's isend to itself and irecv from itself share one list); a ``wait``
    completes the oldest one of its key, a ``waitall`` every pending request of the rank (a ``waitall`` named after a
    call, a ``sendRecv`` line's, completes only that call's requests, which no wait completes), and a ``test`` that
    completes a request (the last of a run right after it that no wait of its key follows) takes it off too.  A wait
    that finds nothing pending makes the replay abort ("action wait not preceded by any irecv or isend") or do
    nothing, while the matcher (:func:`waitlab.simulator.matching.request_pairs`) would pair it with an older request
    or refuse it.  ``where`` names a row (default: its operation and rank).
    """
    name = where or _operation(ops)
    waits = np.flatnonzero(ops.code == CODE["wait"])
    if not waits.size:
        return None
    req = np.flatnonzero(np.isin(ops.code, _NONBLOCKING_P2P) & (ops.name < 0))
    tests = np.flatnonzero((ops.code == CODE["test"]) & (ops.peer >= 0))
    rows = np.concatenate((req, waits, tests)).astype(np.int64)
    typ = np.concatenate((np.zeros(req.size, np.int8), np.ones(waits.size, np.int8),
                          np.full(tests.size, 2, np.int8)))
    rank, peer = ops.rank[rows].astype(np.int64), ops.peer[rows].astype(np.int64)
    recv = np.concatenate((np.isin(ops.code[req], _RECV), ops.value2[rows[req.size:]] != 0))
    towards = (recv & (peer != rank)).astype(np.int8)  # (source, destination) as seen from the rank
    tag = channel_tags(ops)[rows].astype(np.int64)  # a channel is also its communicator
    waitall = np.flatnonzero((ops.code == CODE["waitall"]) & (ops.name < 0))
    epoch = np.searchsorted(waitall, rows).astype(np.int64)
    order = np.lexsort((rows, tag, towards, peer, rank))
    rows, typ, epoch = rows[order], typ[order], epoch[order]
    key = [rank[order], peer[order], towards[order], tag[order]]
    new_key = np.ones(rows.size, bool)
    new_key[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in key])
    keep = (typ != 2) | completing_tests(typ, new_key, epoch)
    key_id = (np.cumsum(new_key) - 1)[keep]
    rows, typ, epoch = rows[keep], typ[keep], epoch[keep]
    step = np.where(typ != 0, 1, -1).astype(np.int64)
    # the balance (completions - requests) of the key over the whole rank, and within each waitall epoch
    new_key = np.ones(rows.size, bool)
    new_key[1:] = key_id[1:] != key_id[:-1]
    new_epoch = new_key.copy()
    new_epoch[1:] |= epoch[1:] != epoch[:-1]
    total, in_epoch = np.cumsum(step), np.cumsum(step)
    total -= (total - step)[np.flatnonzero(new_key)][np.cumsum(new_key) - 1]
    in_epoch -= (in_epoch - step)[np.flatnonzero(new_epoch)][np.cumsum(new_epoch) - 1]
    bad = (typ == 1) & (in_epoch > 0)
    if not bad.any():
        return None
    j = int(np.flatnonzero(bad)[np.argmin(rows[bad])])
    i = int(rows[j])
    r, p, t, is_recv = int(ops.rank[i]), int(ops.peer[i]), int(ops.tag[i]), bool(ops.value2[i] != 0)
    text = f"wait {p if is_recv else r} {r if is_recv else p} {t}"
    same = np.flatnonzero(key_id == key_id[j])
    later = same[(same > j) & (typ[same] == 0)]
    if total[j] > 0 and later.size:
        k = int(rows[later[0]])
        return i, f"{text} completes the {ACTIONS[int(ops.code[k])]} of {name(k)}, which is posted after it", \
            f"move the wait after its request; {_WAIT_FIX}"
    if total[j] > 0:
        kind = ("isend to or irecv from itself" if p == r else f"irecv from rank {p}" if is_recv
                else f"isend to rank {p}")
        return i, (f"{text} completes no pending request: rank {r} posted no {kind} with tag {t} that is still "
                   "pending for it (a wait completes the oldest request of its partner and tag still pending)"), \
            f"post the request before the wait, or remove the wait; {_WAIT_FIX}"
    # the matcher would give it an older request, which the replay's waitall completed
    earlier = same[(same < j) & (typ[same] == 0) & (epoch[same] < epoch[j])]
    k = int(rows[earlier[-1]])
    between = int(waitall[np.searchsorted(waitall, i) - 1])
    return i, (f"{text} completes the {ACTIONS[int(ops.code[k])]} of {name(k)}, which the waitall of "
               f"{name(between)} already completed"), \
        "remove the wait (a waitall completes every request pending on its rank) or move the waitall after it; " \
        "'waitlab capture' writes the waitall of a measured program as the waits of its requests"


def v_count_mismatch(action: str, send: npt.NDArray[np.int64], recv: npt.NDArray[np.int64],
                     root: npt.NDArray[np.int64]) -> tuple[int, int, int, int, int] | None:
    """The first ``(b, i, j, sent, expected)`` where call ``b`` of a v-collective moves other bytes (``sent``) from
    rank i to rank j than rank j expects from rank i (``expected``; SMPI then aborts with MPI_ERR_TRUNCATE or
    hangs), else ``None``.

    ``send[b, i, j]`` is what rank i's call ``b`` says it sends to rank j (gatherv and allgatherv: its one send
    count at j = root and j = i); ``recv[b, j, i]`` what rank j's call says it receives from rank i; ``root[b]`` the
    root of a gatherv or scatterv (only its receive counts, or send counts, count).  For ``reducescatter`` (every
    rank gives the same receive counts) ``expected`` is rank 0's count for rank j, ``sent`` rank i's.

    >>> s = np.array([[[10, 20], [10, 20]]]); v_count_mismatch("alltoallv", s, s, np.array([-1]))
    (0, 0, 1, 20, 10)
    """
    n = send.shape[1]
    if action == "reducescatter":
        sent, got = recv, np.broadcast_to(recv[:, :1, :], recv.shape)
        bad = sent != got
    else:
        sent = send
        if action == "allgatherv":  # rank i sends its one block to every rank
            sent = np.broadcast_to(np.diagonal(send, axis1=1, axis2=2)[:, :, None], send.shape)
        got = recv.transpose(0, 2, 1)
        bad = sent != got
        peer = np.arange(n)
        if action == "gatherv":
            bad = bad & (peer[None, None, :] == root[:, None, None])
        elif action == "scatterv":
            bad = bad & (peer[None, :, None] == root[:, None, None])
    first = np.flatnonzero(bad.ravel())
    if not first.size:
        return None
    b, i, j = np.unravel_index(int(first[0]), bad.shape)
    return int(b), int(i), int(j), int(sent[b, i, j]), int(got[b, i, j])


def v_count_text(action: str, k: int, i: int, j: int, sent: int, expected: int, other: str) -> tuple[str, str]:
    """(problem, fix) of :func:`v_count_mismatch`'s finding in rank i's ``k``-th ``action``; ``other`` names the call
    of the other rank (rank j's, or rank 0's for reducescatter)."""
    if action == "reducescatter":
        return (f"rank {i}'s reducescatter #{k + 1} gives rank {j} a receive count of {sent} bytes where rank 0's "
                f"({other}) gives {expected}: every rank must give the same receive counts",
                "give every rank's reducescatter the same receive counts")
    return (f"rank {i}'s {action} #{k + 1} sends {sent} bytes to rank {j}, but rank {j}'s ({other}) expects "
            f"{expected} bytes from rank {i} (SMPI would stop with MPI_ERR_TRUNCATE)",
            f"make what rank {i}'s line sends to rank {j} equal what rank {j}'s line receives from rank {i} "
            "(count x datatype size)")


def _numbered(ops: OpTable, codes: np.ndarray, src: np.ndarray, dst: np.ndarray) -> pd.DataFrame:
    sel = np.isin(ops.code, codes)
    df = pd.DataFrame({"src": src[sel], "dst": dst[sel], "tag": ops.tag[sel], "channel": channel_tags(ops)[sel],
                       "bytes": ops.value[sel], "row": np.flatnonzero(sel), "seq": ops.seq[sel]})
    df = df.sort_values(["src", "dst", "channel", "seq"], kind="stable")
    df["k"] = df.groupby(["src", "dst", "channel"]).cumcount()
    return df


def message_mismatch(ops: OpTable) -> str | None:
    """The first send without its receive, receive without its send, or receive smaller than its send."""
    if (ops.code == CODE["sendRecv"]).any():
        return None  # a sendRecv row does not say its source: SMPI checks those
    sends = _numbered(ops, _SEND, ops.rank, ops.peer)
    recvs = _numbered(ops, _RECV, ops.peer, ops.rank)
    if not len(sends) and not len(recvs):
        return None
    m = sends.merge(recvs, on=["src", "dst", "channel", "k"], how="outer", suffixes=("_s", "_r"), indicator=True)
    m["tag"] = m["tag_s"].fillna(m["tag_r"])
    bad = m[(m["_merge"] != "both") | (m["bytes_r"] < m["bytes_s"])].copy()
    if not len(bad):
        return None
    bad["order"] = np.where(bad["_merge"] == "right_only", bad["row_r"], bad["row_s"])
    row = bad.sort_values("order").iloc[0]
    src, dst, tag = int(row["src"]), int(row["dst"]), int(row["tag"])
    if row["_merge"] == "left_only":
        return f"rank {src}'s {_op(ops, int(row['row_s']))} to rank {dst} with tag {tag} has no matching receive " \
               f"on rank {dst}"
    if row["_merge"] == "right_only":
        return f"rank {dst}'s {_op(ops, int(row['row_r']))} from rank {src} with tag {tag} has no matching send " \
               f"on rank {src}"
    return f"rank {src}'s {_op(ops, int(row['row_s']))} sends {row['bytes_s']:g} bytes to rank {dst} (tag {tag}) " \
           f"but the matching receive takes only {row['bytes_r']:g} (MPI_ERR_TRUNCATE)"


def certain_deadlock(ops: OpTable) -> str | None:
    """Ranks that block in receives on each other even with every send buffered, else ``None``."""
    if len(ops) > MAX_WALK_OPS or (ops.code == CODE["sendRecv"]).any():
        return None
    order = np.lexsort((ops.seq, ops.rank))
    starts = np.searchsorted(ops.rank[order], np.arange(ops.n_ranks + 1))
    blocking = {CODE["recv"], CODE["waitall"], CODE["wait"]}
    pc = starts[:-1].copy()
    posted: dict[tuple[int, int, int], int] = {}   # sends posted per (src, dst, tag)
    taken: dict[tuple[int, int, int], int] = {}    # of those, matched by receives
    pending: list[deque[tuple[int, int, int]]] = [deque() for _ in range(ops.n_ranks)]  # irecvs not yet waited on
    code, peer, tag = ops.code[order], ops.peer[order], channel_tags(ops)[order]  # a channel is also its communicator
    value2 = ops.value2[order]

    def matched(key: tuple[int, int, int]) -> bool:
        return posted.get(key, 0) > taken.get(key, 0)

    progress = True
    while progress:
        progress = False
        for r in range(ops.n_ranks):
            while pc[r] < starts[r + 1]:
                i = pc[r]
                c = int(code[i])
                if c in _SEND_SET:
                    key = (r, int(peer[i]), int(tag[i]))
                    posted[key] = posted.get(key, 0) + 1
                elif c == CODE["irecv"]:
                    pending[r].append((int(peer[i]), r, int(tag[i])))
                elif c in blocking:
                    if c == CODE["recv"]:
                        need = [(int(peer[i]), r, int(tag[i]))]
                    elif c == CODE["waitall"]:
                        need = list(pending[r])
                    else:
                        need = [pending[r][0]] if value2[i] == 1.0 and pending[r] else []
                    if not all(matched(k) for k in need):
                        break
                    for k in need:
                        taken[k] = taken.get(k, 0) + 1
                    if c == CODE["waitall"]:
                        pending[r].clear()
                    elif c == CODE["wait"] and need:
                        pending[r].popleft()
                pc[r] += 1
                progress = True
    stuck = [r for r in range(ops.n_ranks) if pc[r] < starts[r + 1]]
    if not stuck:
        return None
    parts = []
    for r in stuck[:4]:
        i = pc[r]
        parts.append(f"rank {r} in {ACTIONS[int(code[i])]} (operation {int(ops.seq[order][i])}"
                     + (f", from rank {int(peer[i])}, tag {int(ops.tag[order[i]])})" if code[i] == CODE["recv"]
                        else ")"))
    more = f" and {len(stuck) - 4} more ranks" if len(stuck) > 4 else ""
    return "deadlock even with buffered sends: " + "; ".join(parts) + more


def first_mismatch(ops: OpTable) -> tuple[str, str] | None:
    """``(what, problem)`` of the first of :func:`collective_mismatch` ("collectives"), :func:`message_mismatch`
    ("messages") and :func:`certain_deadlock` ("deadlock") that finds one, else ``None``."""
    for what, check in (("collectives", collective_mismatch), ("messages", message_mismatch),
                        ("deadlock", certain_deadlock)):
        problem = check(ops)
        if problem is not None:
            return what, problem
    return None
