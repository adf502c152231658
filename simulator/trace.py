"""Write an :class:`~waitlab.models.ops.OpTable` as SMPI time-independent trace files.

One file per rank (``rank<r>.txt``) and an index file listing them, which is
what ``smpirun -replay INDEX`` expects.  Every rank's trace starts with
``init`` and ends with ``finalize``; every line ends with a newline (SMPI
silently drops a last line without one).  Compute durations are converted from
seconds to flops with the core speed of the rendered platform, printed with
``repr`` so the conversion is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from waitlab.errors import InputError
from waitlab.models.ops import ACTIONS, CODE, OpTable

_Row = tuple[int, float, float, int, int, str]
_Formatter = Callable[[_Row], str]


def _count(x: float) -> str:
    return str(round(x))


_FORMATS: dict[str, _Formatter] = {
    "send": lambda r: f"send {r[3]} {r[4]} {_count(r[1])}",
    "isend": lambda r: f"isend {r[3]} {r[4]} {_count(r[1])}",
    "recv": lambda r: f"recv {r[3]} {r[4]} {_count(r[1])}",
    "irecv": lambda r: f"irecv {r[3]} {r[4]} {_count(r[1])}",
    # wait src dst tag; value2 = 1 when it completes a receive (peer is then the source)
    "wait": lambda r: (f"wait {r[3]} {r[0]} {r[4]}" if r[2] else f"wait {r[0]} {r[3]} {r[4]}"),
    "waitall": lambda r: "waitall",
    "barrier": lambda r: "barrier",
    "bcast": lambda r: f"bcast {_count(r[1])} {max(r[3], 0)} 0",
    "reduce": lambda r: f"reduce {_count(r[1])} {r[2]!r} {max(r[3], 0)} 0",
    "allreduce": lambda r: f"allreduce {_count(r[1])} {r[2]!r}",
    "alltoall": lambda r: f"alltoall {_count(r[1])} {_count(r[2])}",
    "gather": lambda r: f"gather {_count(r[1])} {_count(r[2])} {max(r[3], 0)}",
    "scatter": lambda r: f"scatter {_count(r[1])} {_count(r[2])} {max(r[3], 0)}",
    "allgather": lambda r: f"allgather {_count(r[1])} {_count(r[2])}",
    "scan": lambda r: f"scan {_count(r[1])} {r[2]!r}",
    "exscan": lambda r: f"exscan {_count(r[1])} {r[2]!r}",
    "sleep": lambda r: f"sleep {r[1]!r}",
    "enter": lambda r: f"enter {r[5]}",
    "leave": lambda r: f"leave {r[5]}",
    "overhead": lambda r: f"overhead {r[1]!r}",
    "noise": lambda r: f"noise {r[1]!r}",
    "delay": lambda r: f"delay {r[1]!r}",
    "swap": lambda r: f"swap {r[1]!r}",
    "flush": lambda r: f"flush {_count(r[1])} {r[2]!r}",
}


def format_lines(ops: OpTable, core_speed: float) -> list[str]:
    """One TI trace line (without the rank prefix and newline) per operation.

    Examples
    --------
    >>> from waitlab.models.ops import OpBuilder
    >>> b = OpBuilder(2)
    >>> b.add("compute", [0, 1], value=0.5, region="a")
    >>> b.add("send", 0, peer=1, value=8, tag=3)
    >>> b.add("recv", 1, peer=0, value=8, tag=3)
    >>> format_lines(b.build(), core_speed=1e9)
    ['compute 500000000.0', 'send 1 3 8', 'compute 500000000.0', 'recv 0 3 8']
    """
    names = ops.names
    for nm in names:
        if not nm or any(ch.isspace() for ch in nm):
            raise InputError("scenario", f"region name {nm!r}", "region names cannot be empty or contain spaces",
                             "use '_' or '>' instead of spaces")
    if len(ops) and (ops.value < 0).any():
        bad = int(np.flatnonzero(ops.value < 0)[0])
        raise InputError("scenario", f"rank {ops.rank[bad]} operation {ops.seq[bad]}",
                         f"negative value {ops.value[bad]} for {ACTIONS[ops.code[bad]]}",
                         "durations and sizes must be >= 0")
    lines: list[str] = [""] * len(ops)
    ranks = ops.rank.tolist()
    values = ops.value.tolist()
    values2 = ops.value2.tolist()
    peers = ops.peer.tolist()
    tags = ops.tag.tolist()
    name_ids = ops.name.tolist()
    for code in np.unique(ops.code).tolist():
        action = ACTIONS[code]
        idx = np.flatnonzero(ops.code == code).tolist()
        if action == "compute":
            for i in idx:
                lines[i] = f"compute {values[i] * core_speed!r}"
            continue
        fmt = _FORMATS.get(action)
        if fmt is None:
            raise InputError("scenario", f"operation {action}", "this action cannot be written to a trace yet",
                             f"use one of: {', '.join(sorted([*_FORMATS, 'compute']))}")
        for i in idx:
            nid = name_ids[i]
            lines[i] = fmt((ranks[i], values[i], values2[i], peers[i], tags[i], names[nid] if nid >= 0 else ""))
    return lines


def write_trace(ops: OpTable, core_speed: float, folder: Path) -> Path:
    """Write per-rank trace files and the index; return the index path."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = format_lines(ops, core_speed)
    counts = ops.per_rank_counts()
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    index_lines = []
    for r in range(ops.n_ranks):
        path = folder / f"rank{r}.txt"
        prefix = f"{r} "
        body = "".join(prefix + ln + "\n" for ln in lines[bounds[r]:bounds[r + 1]])
        path.write_text(f"{r} init\n{body}{r} finalize\n")
        index_lines.append(str(path.resolve()))
    index = folder / "index.txt"
    index.write_text("\n".join(index_lines) + "\n")
    return index


#: Codes of the actions the writer adds around every rank's operations.
FRAME_CODES = (CODE["init"], CODE["finalize"])
