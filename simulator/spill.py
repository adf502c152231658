"""Large operation tables kept on disk, memory-mapped, instead of in the process's own memory (issue 15).

A run of tens of millions of operations holds its :class:`~waitlab.models.ops.OpTable` from generation to the
results folder, while SMPI (its own process) needs most of the machine.  :func:`spill_ops` writes each column to
a ``.npy`` file, maps it read-only and unlinks the file at once: the mapping keeps the data, the kernel holds it
as clean file pages that it can drop under memory pressure and read back on the next access, and nothing is
left on disk when the table is garbage-collected (or the process dies).  Every reader of the table works
unchanged (the columns are read-only numpy arrays).
"""

from __future__ import annotations

import ctypes
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from waitlab.models.ops import OpTable

#: Tables of at least this many operations are memory-mapped (smaller ones gain nothing worth the disk write).
SPILL_MIN_OPS = 1 << 22


def spill_ops(ops: OpTable, folder: Path | None = None, min_ops: int | None = None) -> OpTable:
    """``ops`` with its columns memory-mapped from unlinked files in ``folder`` (default: the temporary folder).

    Tables shorter than ``min_ops`` (default :data:`SPILL_MIN_OPS`), tables already mapped, and tables that
    cannot be written (no room) come back as they are.  The caller drops its reference to ``ops`` so that
    its memory is freed.

    >>> from waitlab.models.ops import OpBuilder
    >>> b = OpBuilder(2)
    >>> b.add("compute", [0, 1], value=[0.5, 0.25])
    >>> t = spill_ops(b.build(), min_ops=0)
    >>> isinstance(t.value, np.memmap), t.value.tolist(), t.value.flags.writeable
    (True, [0.5, 0.25], False)
    """
    limit = SPILL_MIN_OPS if min_ops is None else min_ops
    if len(ops) < limit or len(ops) == 0 or isinstance(ops.rank, np.memmap):
        return ops
    cols = {}
    try:
        with tempfile.TemporaryDirectory(prefix="waitlab-ops-", dir=folder) as tmp:
            for c in OpTable.COLUMNS:
                path = Path(tmp) / f"{c}.npy"
                np.save(path, getattr(ops, c))
                cols[c] = np.load(path, mmap_mode="r")
                path.unlink()  # the mapping keeps the data; nothing stays on disk after it
    except OSError:  # no room (disk full, file-size limit): keep the table in memory; the trace, written next,
        return ops   # names the problem if there is one
    return OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, comms=ops.comms, **cols)


def release_free_memory() -> bool:
    """Hand the memory the process has freed back to the operating system (glibc's ``malloc_trim``).

    glibc keeps freed small and medium blocks in its heap for reuse; after generating and writing a large
    trace that is gigabytes the SMPI process, started next, cannot use.  Returns whether it was done
    (``False`` on a C library without ``malloc_trim``).
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` from the process's own symbols (``None`` elsewhere); looked up once."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim
