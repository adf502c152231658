"""Read the replay extension's binary log a chunk at a time (issue 15: memory linear in the output only).

The replay extension writes each rank's records together, rank after rank: ``init``, one record per action
of the trace, ``finalize``.  For such a log the position of every record is known before reading it, so
each chunk is checked (rank and action code at every position) and its times are scattered straight into
the output arrays: the log itself is never held, only one chunk of it.  A log in any other order or with
a problem returns ``None``; the caller then reads it whole, sorts it and names the problem.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from waitlab.models.vocabulary import CODE

LOG_DTYPE = np.dtype([("rank", "<i4"), ("code", "<i4"), ("t_enter", "<f8"), ("t_exit", "<f8")])

#: Records read at a time (24 bytes each: 24 MiB per chunk).
LOG_CHUNK_RECORDS = 1 << 20

Times = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]


def log_records(path: Path) -> int:
    """Number of whole records in the log file."""
    return path.stat().st_size // LOG_DTYPE.itemsize


def stream_rank_ordered(path: Path, code: npt.NDArray[np.int8], rank: npt.NDArray[np.int32], n_ranks: int,
                        chunk_records: int = LOG_CHUNK_RECORDS) -> Times | None:
    """Enter and exit times of the operations (``code``, ``rank`` in (rank, seq) order) and each rank's start
    (``init`` exit) time, read chunk by chunk from a log written rank after rank.

    Returns ``None`` when the log is not exactly ``init``, the operations' actions and ``finalize`` of rank
    0, then of rank 1, ... (another order, a missing or foreign record): the caller reads it whole.
    """
    per_rank = np.bincount(rank, minlength=n_ranks).astype(np.int64)
    if per_rank.size != n_ranks:
        return None
    expected = per_rank + 2  # init and finalize frame every rank
    total = int(expected.sum())
    if log_records(path) != total:
        return None
    starts = np.concatenate(([0], np.cumsum(expected)[:-1]))
    ends = starts + expected - 1
    t_enter = np.empty(code.size)
    t_exit = np.empty(code.size)
    start = np.empty(n_ranks)
    with path.open("rb") as f:
        for a in range(0, total, chunk_records):
            chunk = np.fromfile(f, dtype=LOG_DTYPE, count=min(chunk_records, total - a))
            pos = np.arange(a, a + chunk.size, dtype=np.int64)
            r = np.searchsorted(starts, pos, side="right") - 1  # the rank owning each position
            if not np.array_equal(chunk["rank"], r):
                return None
            is_init = pos == starts[r]
            is_fin = pos == ends[r]
            body = ~(is_init | is_fin)
            row = pos[body] - 2 * r[body] - 1  # operation row: earlier ranks' frames and this rank's init
            if not (np.all(chunk["code"][is_init] == CODE["init"]) and np.all(chunk["code"][is_fin] ==
                                                                               CODE["finalize"])
                    and np.array_equal(chunk["code"][body], code[row])):
                return None
            t_enter[row] = chunk["t_enter"][body]
            t_exit[row] = chunk["t_exit"][body]
            start[r[is_init]] = chunk["t_exit"][is_init]
    return t_enter, t_exit, start
