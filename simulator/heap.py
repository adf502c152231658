"""Memory made ready while an SMPI stage runs, for the work after it (issue 25: waitlab's own work around a run).

After a program's SMPI stage, waitlab builds its tables (records, operations, message links, events: about
:data:`BYTES_PER_RECORD` bytes per record of the measurement layer) in memory the process has never used.  On a
virtual machine the first touch of such memory is slow: the guest kernel and then the hypervisor each fault the
page in (measured here: 200 MB of new memory took 0.23-0.25 s to touch, 400 MB in a fresh process 0.52-0.62 s, the
same memory touched again 0.02 s).  In a 1.66 M-event run, 0.56-0.64 s of the 1.1-1.3 s after the stage were system
time, nearly all of it page faults.

While the stage runs, this process only waits for ``smpirun``.  :class:`Reserve` uses that time: the measurement
layer keeps its record count in ``WAITLAB_OUT/count`` (``native/waitlab_pmpi.c``), and the waiting thread
(:func:`waitlab.simulator.program_run.run_program`, reading it with
:func:`~waitlab.simulator.progress.read_layer_count`) touches heap memory in step with it (:data:`BYTES_PER_RECORD`
per record, at most :data:`STEP_BYTES` per tick, never more than a quarter of the memory available) and hands it
back to glibc's heap, which is told to keep it (no trim, no ``mmap`` for large blocks) until the run's results are
written: the arrays made after the stage then land in memory that is already there.  Nothing is simulated
differently: the reserve only changes where the process's arrays are.  Threads started inside the block (the preload
thread, the background encoders, the results folder's writers) allocate from the same heap (:func:`_one_arena`).

Only with glibc (``mallopt``); elsewhere a reserve does nothing.  Used through :func:`reserving` (a context manager
around a whole run, set by ``waitlab run``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import numpy as np

from waitlab.simulator.spill import release_free_memory

#: Bytes the work after a program's stage needs per layer record.  Measured: without a reserve the process grew by
#: 404 MB after the stage of a 2.08 M-record run (``bsp.c``, 16 ranks x 13,000 steps), 194 B per record; from the
#: arrays, about 0.8 operation rows per record x (86 B of ``OpTable`` columns, times and flags + 24 B of links
#: + 110 B of event columns) = 176 B.  A reserve of 128 B per record left 20,000 faults after that stage (8,000 at
#: 192 B), and one of 512 B held 1.06 GB for no fewer faults.
BYTES_PER_RECORD = 192
#: Most memory touched per tick of the waiting loop (a stage that ends is kept waiting at most this long: ~0.05 s).
STEP_BYTES = 64 << 20
#: Share of the memory available (``MemAvailable``) a reserve may hold at most.
MAX_SHARE = 0.25
#: glibc's ``mallopt`` parameters and their defaults (``malloc.h``).
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
_DEFAULT_TRIM, _DEFAULT_MMAP_MAX = 128 * 1024, 65536

_ACTIVE: ContextVar[Reserve | None] = ContextVar("waitlab_heap_reserve", default=None)


class Reserve:
    """Heap memory touched ahead of need and kept in the process (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: bytes touched so far (the largest block handed back to the heap)
        self.size = 0

    def grow_to(self, nbytes: int) -> int:
        """Touch heap memory up to ``min(nbytes, limit)`` bytes, at most :data:`STEP_BYTES` more; the bytes held.

        glibc is told to keep it until the end of the :func:`reserving` block (at once if there is none)."""
        target = min(nbytes, self.limit, self.size + STEP_BYTES)
        if target <= self.size or not _keep_heap():
            return self.size
        block = np.empty(target, np.uint8)  # from the heap's top (no mmap): numpy asks for huge pages on it
        block[::4096] = 0  # one write per page faults it in
        del block  # back to the heap, which keeps it
        self.size = target
        if active() is None:  # not inside a run's block: nothing would give it back
            _default_heap()
        return self.size


def active() -> Reserve | None:
    """The reserve of this thread of control's run (``None``: nobody asked for one)."""
    return _ACTIVE.get()


@contextmanager
def reserving() -> Iterator[Reserve | None]:
    """Runs inside this block make their after-stage memory ready while SMPI runs (``None`` without glibc: nothing
    is reserved).  At the end of the outermost block glibc's defaults come back (a fixed trim threshold of 128 KiB)
    and the heap's free memory is handed back to the system.  glibc's settings are the process's: a block ending
    in one thread ends another thread's reserve too (its memory is then only handed back early)."""
    outer = active()
    if outer is not None or _mallopt() is None:
        yield outer
        return
    reserve = Reserve(int(MAX_SHARE * _available()))
    _one_arena()
    token = _ACTIVE.set(reserve)
    try:
        yield reserve
    finally:
        _ACTIVE.reset(token)
        _default_heap()


#: Whether glibc is keeping freed memory for a reserve (its settings are the process's).
_KEEPING = [False]


def _one_arena() -> None:
    """Threads started from now on allocate from the heap the reserve is touched in (glibc's main arena), not from
    an arena of their own (new memory, faulted in after the stage).

    The preload thread, the background encoders and the results folder's writers all start after the reserve's block
    begins; with an arena each they faulted in 40 MB after the stage of a 1.66 M-event run (``bsp.c``: 10,400-11,800
    page faults against 1,100-1,500 with one arena, system time 0.18-0.24 s against 0.13-0.15 s, peak memory
    758-792 MiB against 698-733 MiB). glibc fixes its arena limit the first time it needs one more arena than it has
    (``arena_get2``), so the setting holds for the rest of the process: ``waitlab run`` is one run in a fresh process,
    and the API reserves only when asked (``ready_memory``).
    """
    mallopt = _mallopt()
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, 1)


def _keep_heap() -> bool:
    """Tell glibc to keep freed memory and serve large blocks from the heap; ``False`` without glibc."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    if not _KEEPING[0]:
        mallopt(_M_MMAP_MAX, 0)
        mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)
        _KEEPING[0] = True
    return True


def _default_heap() -> None:
    """glibc's defaults back, and the heap's free memory handed back to the system (after :func:`_keep_heap`).

    The memory is handed back on a thread of its own: ``malloc_trim`` took 0.005-0.015 s after a 2 M-record run, which
    the command's end waited for (a process that ends first needs no trim; a daemon thread does not hold it up).
    """
    mallopt = _mallopt()
    if mallopt is None or not _KEEPING[0]:
        return
    mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
    mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
    _KEEPING[0] = False
    threading.Thread(target=release_free_memory, name="waitlab-heap-release", daemon=True).start()


def _available() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (0 where there is none: no reserve)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@lru_cache(maxsize=1)
def _mallopt() -> Any:
    """glibc's ``mallopt`` (``None`` elsewhere)."""
    if os.name != "posix":
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn
