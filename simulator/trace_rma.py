"""One-sided MPI (RMA) in time-independent traces: waitlab's TI lines, their writer, reader and capture check.

SimGrid 3.32's TI replay has no RMA action (``smpi_replay.cpp`` registers none).  waitlab's replay extension
(``native/waitlab_replay_rma.cpp``) runs these lines with SMPI's own window implementation, on windows of
``MPI_COMM_WORLD`` (``<win>``: the rank's k-th window; ``<target>``, ``<m>``: world ranks):

=================================================  ==========================================================
line                                               operation-table row
=================================================  ==========================================================
``win_create <win> <bytes>``                       value = window bytes, tag = win
``win_free <win>``, ``win_complete <win>``,        tag = win
``win_wait <win>``
``win_fence <win> <assert>``                       value2 = the assert bits (``MPI_MODE_NOPRECEDE`` skips a barrier)
``put|get|accumulate <target> <win> <bytes>``      peer = target, value = bytes, tag = win
``win_lock|win_lock_shared|win_unlock <target>     peer = target, tag = win
<win>``
``win_lock_all <win>``, ``win_unlock_all <win>``   tag = win
``win_flush|win_flush_local <target> <win>``       peer = target (-1: every rank), tag = win
``win_post|win_start <win> <m0>,<m1>,...``         value = group size, tag = win, comm = the group (``ops.comms``)
``win_group <member> <win>``                       peer = member (the measurement layer's record of the group)
=================================================  ==========================================================

Other one-sided calls (get-accumulate, fetch-and-op, compare-and-swap, request-based operations) are refused at capture
by :func:`check_rma_replayable`, naming the first such record (windows on other communicators are refused by the
program run itself, :mod:`waitlab.simulator.rma_records`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import ACTIONS, CODE, RMA_ACTIONS, lut

#: One-sided actions with a TI form, run by waitlab's replay extension.
RMA_TI_ACTIONS = ("win_create", "win_free", "win_fence", "win_post", "win_start", "win_complete", "win_wait",
                  "win_group", "win_lock", "win_lock_shared", "win_unlock", "win_lock_all", "win_unlock_all",
                  "win_flush", "win_flush_local", "put", "get", "accumulate")
#: Lines whose first argument is a world rank (target or group member; -1: every rank for a flush), then the window.
_TARGETED = ("put", "get", "accumulate", "win_lock", "win_lock_shared", "win_unlock", "win_group", "win_flush",
             "win_flush_local")
_MOVES = ("put", "get", "accumulate")
#: Lines that end with their group's members.
_GROUPED = ("win_post", "win_start")
#: The group of a post/start with no member.
_EMPTY = "-"
_NOT_REPLAYED = lut(a for a in RMA_ACTIONS if a not in RMA_TI_ACTIONS)
_IS_GROUPED = lut(_GROUPED)


def _ints(values: npt.NDArray[np.float64]) -> list[int]:
    return np.rint(values).astype(np.int64).tolist()


def format_rma(action: str, ops: OpTable, idx: npt.NDArray[np.int64]) -> list[str]:
    """The TI lines of rows ``idx`` of ``ops``, all of one-sided action ``action`` (one of :data:`RMA_TI_ACTIONS`).

    Examples
    --------
    >>> from waitlab.models.ops import OpBuilder
    >>> b = OpBuilder(2)
    >>> b.add("put", 0, peer=1, value=64, tag=0)
    >>> ops = b.build()
    >>> format_rma("put", ops, np.array([0]))
    ['put 1 0 64']
    """
    win = ops.tag[idx].tolist()
    if action == "win_create":
        return [f"{action} {w} {b}" for w, b in zip(win, _ints(ops.value[idx]), strict=True)]
    if action in _MOVES:
        return [f"{action} {t} {w} {b}"
                for t, w, b in zip(ops.peer[idx].tolist(), win, _ints(ops.value[idx]), strict=True)]
    if action in _TARGETED:
        return [f"{action} {t} {w}" for t, w in zip(ops.peer[idx].tolist(), win, strict=True)]
    if action == "win_fence":
        return [f"{action} {w} {a}" for w, a in zip(win, _ints(ops.value2[idx]), strict=True)]
    if action in _GROUPED:
        comm = ops.comm[idx].tolist()
        if min(comm, default=1) < 1:
            i = int(idx[comm.index(min(comm))])
            raise InputError("scenario", f"rank {ops.rank[i]} operation {ops.seq[i]}",
                             f"{action} has no group (ops.comm names none)", "capture the program again")
        groups = [",".join(map(str, ops.comms[c - 1])) or _EMPTY for c in comm]
        return [f"{action} {w} {g}" for w, g in zip(win, groups, strict=True)]
    return [f"{action} {w}" for w in win]


def parse_rma(action: str, args: list[str], world: int) -> tuple[float, float, int, int, tuple[int, ...] | None]:
    """The row of one line's arguments ``args``: (value, value2, peer, tag, group or ``None``).

    Raises :class:`ValueError` with a one-line problem for a malformed line.
    """
    def num(i: int, what: str) -> int:
        if i >= len(args):
            raise ValueError(f"{action} needs its {what} (argument {i + 1})")
        try:
            return int(args[i])
        except ValueError:
            raise ValueError(f"{action}: {what} {args[i]!r} is not an integer") from None

    def rank(i: int, what: str) -> int:
        r = num(i, what)
        if not 0 <= r < world:
            raise ValueError(f"{action}: {what} {r} is outside 0..{world - 1}")
        return r

    if action in _TARGETED:
        flush_all = action.startswith("win_flush") and num(0, "target rank") == -1
        peer = -1 if flush_all else rank(0, "target rank" if action != "win_group" else "group member")
        return (float(num(2, "bytes")) if action in _MOVES else 0.0), 0.0, peer, num(1, "window"), None
    win = num(0, "window")
    if action == "win_create":
        return float(num(1, "window bytes")), 0.0, -1, win, None
    if action == "win_fence":
        return 0.0, (float(num(1, "assert")) if len(args) > 1 else 0.0), -1, win, None
    if action in _GROUPED:
        if len(args) < 2:
            raise ValueError(f"{action} needs its group: {action} <win> <world rank>,<world rank>,...")
        try:
            members = () if args[1] == _EMPTY else tuple(int(m) for m in args[1].split(","))
        except ValueError:
            raise ValueError(f"{action}: bad group {args[1]!r} (write <world rank>,<world rank>,...)") from None
        if any(not 0 <= m < world for m in members) or len(set(members)) != len(members):
            raise ValueError(f"{action}: group {args[1]!r} must list distinct world ranks 0..{world - 1}")
        return float(len(members)), 0.0, -1, win, members
    return 0.0, 0.0, -1, win, None


def check_rma_replayable(ops: OpTable, origin: str) -> None:
    """Refuse, naming the first such record, one-sided calls the replay extension cannot run (windows on other
    communicators than ``MPI_COMM_WORLD`` or a duplicate are refused by the program run itself)."""
    bad = np.flatnonzero(_NOT_REPLAYED[ops.code])
    if bad.size:
        i = int(bad[0])
        raise InputError(origin, "application (capture)",
                         f"rank {ops.rank[i]} operation {ops.seq[i]} is one-sided MPI ({ACTIONS[ops.code[i]]}) and "
                         f"waitlab's replay runs only {', '.join(RMA_TI_ACTIONS)}, so this capture could not replay",
                         'run the program itself (kind = "program"): waitlab measures every one-sided call')


def with_rma_groups(ops: OpTable) -> OpTable:
    """``ops`` with every ``win_post``/``win_start`` row's ``comm`` naming its group (from the ``win_group`` rows the
    measurement layer writes after it, ``value`` of them), so a trace line can carry the group."""
    rows = np.flatnonzero(_IS_GROUPED[ops.code])
    if rows.size == 0:
        return ops
    comms = {m: k + 1 for k, m in enumerate(ops.comms)}
    comm = ops.comm.copy()
    is_group = ops.code == CODE["win_group"]
    for i, n in zip(rows.tolist(), _ints(ops.value[rows]), strict=True):  # one per epoch: few rows
        after = slice(i + 1, i + 1 + n)
        members = tuple(int(p) for p in ops.peer[after])
        if len(members) != n or not (is_group[after].all() and (ops.rank[after] == ops.rank[i]).all()):
            raise InputError("scenario", f"rank {ops.rank[i]} operation {ops.seq[i]}",
                             f"{ACTIONS[ops.code[i]]} is not followed by its {n} win_group records",
                             "capture the program again")
        comm[i] = comms.setdefault(members, len(comms) + 1)
    return OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger,
                   comms=tuple(sorted(comms, key=comms.__getitem__)), **{**ops.columns(), "comm": comm})
