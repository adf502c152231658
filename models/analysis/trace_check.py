"""Checks of an operation table before SMPI replays it: collectives agree, messages pair up, no certain deadlock.

SimGrid meets a broken trace with a crash ("malloc_consolidate(): invalid chunk size") or a bare deadlock; these
checks name the first mismatch instead.  All of them are over the world communicator (the only one a TI trace
has):

- every rank calls the same collectives in the same order, with the same root;
- the k-th send from p to q with tag t pairs with the k-th receive posted by q from p with tag t (MPI's
  non-overtaking order), and the receive is not smaller than the send (MPI_ERR_TRUNCATE);
- a walk of the blocking receives that finds ranks waiting on each other even when every send is buffered
  (eager) and every collective lets ranks through: such a deadlock happens in every MPI, SMPI included.

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

import numpy as np
import pandas as pd

from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import ACTIONS, CODE, COLLECTIVE_ACTIONS, RECV_ACTIONS, SEND_ACTIONS, codes_of, is_rooted

_COLLECTIVE = codes_of(sorted(COLLECTIVE_ACTIONS))
_SEND = codes_of(SEND_ACTIONS)  # send, isend, ssend, issend
_RECV = codes_of(RECV_ACTIONS)
_SEND_SET = frozenset(_SEND.tolist())
#: Largest table the deadlock walk runs on (a Python walk over blocking receives); SimGrid's own deadlock
#: report (parsed by waitlab.simulator.smpi) covers larger ones.
MAX_WALK_OPS = 2_000_000


def _op(ops: OpTable, i: int) -> str:
    return f"{ACTIONS[int(ops.code[i])]} (operation {int(ops.seq[i])} of rank {int(ops.rank[i])})"


def collective_mismatch(ops: OpTable) -> str | None:
    """The first place where a rank's collectives differ from rank 0's (action, order or root), else ``None``."""
    sel = np.isin(ops.code, _COLLECTIVE)
    if not sel.any():
        return None
    df = pd.DataFrame({"rank": ops.rank[sel], "seq": ops.seq[sel], "code": ops.code[sel].astype(int),
                       "root": np.where(is_rooted(ops.code[sel]), ops.peer[sel], -1)})
    df = df.sort_values(["rank", "seq"], kind="stable")
    df["k"] = df.groupby("rank").cumcount()
    counts = np.bincount(df["rank"].to_numpy(), minlength=ops.n_ranks)
    ref = df[df["rank"] == 0].set_index("k")
    other = df[df["rank"] != 0].merge(ref[["code", "root"]], left_on="k", right_index=True, suffixes=("", "_0"))
    diff = other[(other["code"] != other["code_0"]) | (other["root"] != other["root_0"])]
    first_diff = int(diff["k"].min()) if len(diff) else None
    short = np.flatnonzero(counts != counts[0])
    gap = np.minimum(counts[short], counts[0])  # first collective index one side of each pair lacks
    first_short = int(gap.min()) if short.size else None
    if first_diff is None and first_short is None:
        return None
    if first_short is not None and (first_diff is None or first_short <= first_diff):
        k = first_short
        r = int(short[gap == k][0])
        if counts[r] < counts[0]:
            name = ACTIONS[int(ref.loc[k, "code"])]
            return f"rank {r} makes {counts[r]} collective calls, rank 0 makes {counts[0]}: rank {r} never calls " \
                   f"{name} (rank 0's collective #{k + 1})"
        row = df[(df["rank"] == r) & (df["k"] == k)].iloc[0]
        return f"rank 0 makes {counts[0]} collective calls, rank {r} makes {counts[r]}: rank 0 never calls " \
               f"{ACTIONS[int(row['code'])]} (rank {r}'s collective #{k + 1})"
    assert first_diff is not None
    k = first_diff
    row = diff[diff["k"] == k].iloc[0]
    r = int(row["rank"])
    name, name0 = ACTIONS[int(row["code"])], ACTIONS[int(row["code_0"])]
    if name != name0:
        return f"rank {r} calls {name} as its collective #{k + 1} where rank 0 calls {name0}"
    return f"rank {r} calls {name} #{k + 1} with root {int(row['root'])}, rank 0 with root {int(row['root_0'])}"


def _numbered(ops: OpTable, codes: np.ndarray, src: np.ndarray, dst: np.ndarray) -> pd.DataFrame:
    sel = np.isin(ops.code, codes)
    df = pd.DataFrame({"src": src[sel], "dst": dst[sel], "tag": ops.tag[sel], "bytes": ops.value[sel],
                       "row": np.flatnonzero(sel), "seq": ops.seq[sel]})
    df = df.sort_values(["src", "dst", "tag", "seq"], kind="stable")
    df["k"] = df.groupby(["src", "dst", "tag"]).cumcount()
    return df


def message_mismatch(ops: OpTable) -> str | None:
    """The first send without its receive, receive without its send, or receive smaller than its send."""
    if (ops.code == CODE["sendRecv"]).any():
        return None  # a sendRecv row does not say its source: SMPI checks those
    sends = _numbered(ops, _SEND, ops.rank, ops.peer)
    recvs = _numbered(ops, _RECV, ops.peer, ops.rank)
    if not len(sends) and not len(recvs):
        return None
    m = sends.merge(recvs, on=["src", "dst", "tag", "k"], how="outer", suffixes=("_s", "_r"), indicator=True)
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
    code, peer, tag = ops.code[order], ops.peer[order], ops.tag[order]
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
                     + (f", from rank {int(peer[i])}, tag {int(tag[i])})" if code[i] == CODE["recv"] else ")"))
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
