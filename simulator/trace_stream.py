"""A shared trace streamed into SMPI while it simulates, through a named pipe (FIFO), instead of written first.

SimGrid's replay reads a shared trace (a one-line index) sequentially, with ``std::ifstream``, as its ranks need
actions; a FIFO in the trace file's place gives it the same lines, so the simulated times are the same bytes.
Formatting the lines (a few hundred thousand per second, in Python) then overlaps SimGrid's own start-up and
simulation instead of preceding them.  :func:`feed` writes the lines as SMPI reads them; it never blocks on the
pipe for longer than a tick, so it notices when SMPI ended (or failed) without reading, and keeps the caller's
time limit and progress reports.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Bytes a pipe holds (Linux's ``F_SETPIPE_SZ``; up to ``/proc/sys/fs/pipe-max-size``, 1 MiB by default): fewer
#: wake-ups than the default 64 KiB.  Best effort: a smaller pipe is as correct.
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@dataclass
class TraceStream:
    """A shared trace to stream: its index (what ``smpirun -replay`` is given), the FIFO the index names, and the
    trace's text in chunks (formatted when asked for).  ``seconds`` is the time spent formatting them."""

    index: Path
    fifo: Path
    chunks: Iterator[str]
    seconds: float = field(default=0.0)


def feed(stream: TraceStream, running: Callable[[], bool], deadline: float | None,
         meanwhile: Callable[[], object] | None = None, tick: float = 0.1) -> None:
    """Write ``stream``'s chunks into its FIFO as the reading process (SMPI) takes them.

    Returns when every chunk is written, or early, without an error, when the reader is gone (``running()`` is
    false, or the pipe broke) or ``deadline`` (:func:`time.perf_counter`) passed: the caller's wait for the process
    then reports what happened, in SimGrid's words.  ``meanwhile`` is called about every ``tick`` seconds.  An
    error formatting the trace (a bad operation) is raised as it is.
    """
    first = _next(stream)  # formatted while SimGrid starts (it opens the trace once its platform is loaded)
    fd = _open_writer(stream.fifo, running, deadline, meanwhile, tick)
    if fd is None:
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        next_check = time.perf_counter() + tick
        while True:
            text, first = (first, None) if first is not None else (_next(stream), None)
            if text is None:
                return
            data = memoryview(text.encode())
            while data:
                try:
                    data = data[os.write(fd, data):]
                except BlockingIOError:  # the pipe is full: SMPI is simulating what it read
                    poller.poll(int(tick * 1000))
                except BrokenPipeError:  # SMPI ended without reading the rest (it failed)
                    return
                if time.perf_counter() >= next_check:
                    if not _still(running, deadline, meanwhile):
                        return
                    next_check = time.perf_counter() + tick
    finally:
        os.close(fd)


def _next(stream: TraceStream) -> str | None:
    """The stream's next chunk (``None`` after the last), its formatting time counted."""
    t = time.perf_counter()
    text = next(stream.chunks, None)
    stream.seconds += time.perf_counter() - t
    return text


def _open_writer(fifo: Path, running: Callable[[], bool], deadline: float | None,
                 meanwhile: Callable[[], object] | None, tick: float) -> int | None:
    """The FIFO opened for writing (non-blocking) once SMPI opened it for reading; ``None`` if it ended first."""
    wait = 0.001
    next_check = time.perf_counter() + tick
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet (SimGrid is loading the platform)
                raise
        time.sleep(wait)
        wait = min(2 * wait, 0.02)
        if not running() or (deadline is not None and time.perf_counter() >= deadline):
            return None
        if meanwhile is not None and time.perf_counter() >= next_check:
            meanwhile()
            next_check = time.perf_counter() + tick


def _still(running: Callable[[], bool], deadline: float | None, meanwhile: Callable[[], object] | None) -> bool:
    """Whether to go on waiting for the reader (it runs, time is left); calls ``meanwhile`` if so."""
    if not running() or (deadline is not None and time.perf_counter() >= deadline):
        return False
    if meanwhile is not None:
        meanwhile()
    return True
