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


def log_records(path: Path) -> int:
    """Number of whole records in the log file."""
    return path.stat().st_size // LOG_DTYPE.itemsize


def stream_times(path: Path, code: npt.NDArray[np.int8], rank: npt.NDArray[np.int32], n_ranks: int,
                 logged: npt.NDArray[np.bool_] | None = None, chunk_records: int = LOG_CHUNK_RECORDS
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
    """Enter and exit times of every operation (``code``, ``rank`` in (rank, seq) order), read chunk by chunk from a
    log written rank after rank that holds the operations where ``logged`` (``None``: all of them).

    An operation left out of the log (a region marker: it takes no simulated time) enters and exits when the
    record before its place does: the rank's previous logged action, or its ``init``.  Operation ``i`` reads
    record ``c_i + 2 r_i``, ``c_i`` the logged operations up to ``i`` (itself included) and ``r_i`` its rank (each
    earlier rank's ``init`` and ``finalize``, and the rank's own ``init``, come before), which for an operation
    left out is the record before its place.

    Returns ``None`` when the log is not exactly ``init``, the logged operations' actions and ``finalize`` of rank
    0, then of rank 1, ... (another order, a missing or foreign record), or when the operations are not in rank
    order: the caller reads the log whole.

    >>> import tempfile
    >>> log = np.array([(0, CODE["init"], 0.0, 1.0), (0, CODE["compute"], 1.0, 2.5), (0, CODE["finalize"], 3.0, 3.0),
    ...                 (1, CODE["init"], 0.0, 0.5), (1, CODE["finalize"], 3.0, 3.0)], LOG_DTYPE)
    >>> code = np.array([CODE["enter"], CODE["compute"], CODE["leave"], CODE["enter"]], np.int8)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     log.tofile(Path(tmp) / "log")
    ...     te, tx = stream_times(Path(tmp) / "log", code, np.array([0, 0, 0, 1], np.int32), 2,
    ...                           logged=np.array([False, True, False, False]))
    >>> te.tolist(), tx.tolist()
    ([1.0, 1.0, 2.5, 0.5], [1.0, 2.5, 2.5, 0.5])
    """
    n = code.size
    n_logged = n if logged is None else int(np.count_nonzero(logged))
    total = n_logged + 2 * n_ranks  # init and finalize frame every rank
    if log_records(path) != total:
        return None
    if n and (int(rank[0]) < 0 or int(rank[-1]) >= n_ranks or not bool(np.all(rank[1:] >= rank[:-1]))):
        return None
    # the record of each operation (non-decreasing), and of each rank's init (starts) and finalize (ends)
    if logged is None:
        before = np.arange(n + 1, dtype=np.int64)  # logged operations before each row, and in all
    else:
        before = np.empty(n + 1, np.int64)
        before[0] = 0
        np.cumsum(logged, out=before[1:])
    rec = before[1:] + 2 * rank.astype(np.int64)
    first = np.searchsorted(rank, np.arange(n_ranks + 1, dtype=rank.dtype))  # each rank's first row
    starts = before[first[:-1]] + 2 * np.arange(n_ranks, dtype=np.int64)
    ends = before[first[1:]] + 2 * np.arange(n_ranks, dtype=np.int64) + 1
    del before, first
    t_enter = np.empty(n)
    t_exit = np.empty(n)
    with path.open("rb") as f:
        for a in range(0, total, chunk_records):
            chunk = np.fromfile(f, dtype=LOG_DTYPE, count=min(chunk_records, total - a))
            if a + chunk.size != min(a + chunk_records, total):  # the file became shorter
                return None
            b = a + chunk.size
            r0, r1 = int(np.searchsorted(ends, a)), int(np.searchsorted(starts, b))  # the ranks of the chunk
            held = np.minimum(ends[r0:r1] + 1, b) - np.maximum(starts[r0:r1], a)  # records of each rank in it
            if not np.array_equal(chunk["rank"], np.repeat(np.arange(r0, r1, dtype=np.int32), held)):
                return None
            log_code = chunk["code"]
            init = starts[r0:r1]
            fin = ends[r0:r1]
            if not (np.all(log_code[init[init >= a] - a] == CODE["init"])
                    and np.all(log_code[fin[fin < b] - a] == CODE["finalize"])):
                return None
            lo, hi = np.searchsorted(rec, [a, b])  # the operations whose record is in the chunk
            at = rec[lo:hi] - a
            wrong = log_code[at] != code[lo:hi]
            if logged is not None:
                wrong &= logged[lo:hi]
            if wrong.any():
                return None
            np.take(chunk["t_enter"], at, out=t_enter[lo:hi], mode="clip")  # (in range: no check, no buffer)
            np.take(chunk["t_exit"], at, out=t_exit[lo:hi], mode="clip")
            if logged is not None:  # left out: the exit of the record before
                np.copyto(t_enter[lo:hi], t_exit[lo:hi], where=~logged[lo:hi])
    return t_enter, t_exit
