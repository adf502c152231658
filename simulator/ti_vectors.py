"""Per-peer byte counts of v-collectives in time-independent traces: kept by occurrence, written as SMPI lines.

A v-collective's (``alltoallv``, ``gatherv``, ``allgatherv``, ``scatterv``, ``reducescatter``) per-peer counts do
not fit an operation row: :class:`VectorStore` keeps them keyed by (rank, action code, occurrence of that code on
the rank), a key that survives perturbations and counterfactual re-runs; :func:`v_line` writes one such operation
as the line SimGrid 3.32's replay reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpTable

#: Datatype id of MPI_BYTE in SimGrid 3.32 traces (v-collective counts are bytes).
BYTE_DT = "6"


@dataclass
class VectorStore:
    """Per-peer byte counts of v-collectives, keyed by (rank, action code, occurrence on that rank).

    The key survives perturbations (they insert local operations only) and
    counterfactual re-runs, unlike a row number.
    """

    data: dict[tuple[int, int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = field(
        default_factory=dict)

    def __len__(self) -> int:
        return len(self.data)

    def put(self, rank: int, code: int, k: int, send: npt.ArrayLike, recv: npt.ArrayLike) -> None:
        """Store the counts of the ``k``-th ``code`` operation of ``rank``."""
        self.data[(rank, code, k)] = (np.asarray(send, np.int64), np.asarray(recv, np.int64))

    def get(self, rank: int, code: int, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        return self.data.get((rank, code, k))



def occurrence(ops: OpTable) -> npt.NDArray[np.int64]:
    """For each row, how many earlier rows of the same rank have the same action code."""
    return occurrence_of(ops.rank, ops.code, ops.seq)


def occurrence_of(rank: npt.NDArray[np.int32], code: npt.NDArray[np.int8], seq: npt.NDArray[np.int32]
                ) -> npt.NDArray[np.int64]:
    key = rank.astype(np.int64) * 256 + code.astype(np.int64)
    order = np.lexsort((seq, key))
    k = np.empty(rank.size, np.int64)
    sk = key[order]
    start = np.ones(sk.size, bool)
    start[1:] = sk[1:] != sk[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(sk.size), 0))
    k[order] = np.arange(sk.size) - first
    return k


def _fmt_counts(a: npt.NDArray[np.int64]) -> str:
    return " ".join(str(int(x)) for x in a)


def _uniform(total: float, n: int) -> npt.NDArray[np.int64]:
    base = round(total) // n if n else 0
    out = np.full(n, base, np.int64)
    if n:
        out[: round(total) - base * n] += 1
    return out


def v_line(action: str, rank: int, value: float, value2: float, peer: int, n: int,
            vec: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None) -> str:
    if vec is None:  # no per-peer counts known: spread the bytes evenly
        send, recv = _uniform(value, n), _uniform(value2 if action != "reducescatter" else value, n)
    else:
        send, recv = vec
    b = BYTE_DT
    # Scalar counts (a rank's own send count, its receive count) come from the row: the per-peer vectors
    # of a non-root rank may be all zero (MPI reads them at the root only).
    if action == "alltoallv":
        return f"alltoallv {int(send.sum())} {_fmt_counts(send)} {int(recv.sum())} {_fmt_counts(recv)} {b} {b}"
    if action == "gatherv":
        return f"gatherv {round(value)} {_fmt_counts(recv)} {_check_root(action, rank, peer, n)} {b} {b}"
    if action == "allgatherv":
        return f"allgatherv {round(value)} {_fmt_counts(recv)} {b} {b}"
    if action == "scatterv":
        return f"scatterv {_fmt_counts(send)} {round(value2)} {_check_root(action, rank, peer, n)} {b} {b}"
    return f"reducescatter {_fmt_counts(recv)} {value2!r} {b}"


def _check_root(action: str, rank: int, root: int, n: int) -> int:
    if not 0 <= root < n:
        raise InputError("operations", f"rank {rank} {action}", f"root {root} is outside 0..{n - 1}",
                         "give the root rank as the operation's peer")
    return root
