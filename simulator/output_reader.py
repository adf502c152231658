"""Reading smpirun's output while it runs: bounded in memory, with the progress of a long replay on the side."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO


class OutputReader:
    """Reads a process's output in a thread, keeping at most ``limit`` bytes (``None``: all of it).

    ``ended`` is set at the end of the output (the process closed it, normally by exiting) or as soon as the
    output passed the limit (``over``); beyond the limit the rest is read and dropped, so the process never
    blocks on a full pipe.  ``ended_at`` is when (:func:`time.perf_counter`), seen by the reading thread: the
    process's end even when the thread that waits for it was busy with other work then.
    """

    def __init__(self, stream: IO[bytes], limit: int | None) -> None:
        self.limit = limit
        self.size = 0
        self.over = False
        self.ended = threading.Event()
        self.ended_at: float | None = None
        self._chunks: list[bytes] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while chunk := self._stream.read1(1 << 16):  # type: ignore[attr-defined]
                if self.limit is not None and self.size + len(chunk) > self.limit:
                    if not self.over:
                        self._chunks.append(chunk[: self.limit - self.size])
                        self.size = self.limit
                        self.over = True
                        self._end()
                    continue
                self._chunks.append(chunk)
                self.size += len(chunk)
        except (OSError, ValueError):  # the pipe was closed under us
            pass
        finally:
            self._end()

    def _end(self) -> None:
        if not self.ended.is_set():
            self.ended_at = time.perf_counter()
            self.ended.set()

    def join(self) -> None:
        self._thread.join()
        self._stream.close()

    def text(self) -> str:
        """What was kept, decoded (bytes that are not UTF-8 are replaced, never an error)."""
        text = b"".join(self._chunks).decode("utf-8", errors="replace")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as a text-mode pipe reads it


#: Seconds between two calls of a waiting loop's ``meanwhile`` (a replay's progress is read once per
#: :func:`waitlab.simulator.progress.interval`; its reports are throttled to that interval whatever the tick).
MEANWHILE_TICK = 0.1


def wait_for_output(reader: OutputReader, t0: float, timeout: float | None,
                    meanwhile: Callable[[], object] | None = None, tick: float | None = None) -> bool:
    """Wait for the end of the output (``True``) or the time limit (``False``), calling ``meanwhile()`` every
    ``tick`` seconds (default :data:`MEANWHILE_TICK`) while it waits."""
    deadline = None if timeout is None else t0 + timeout
    every = None if meanwhile is None else (tick or MEANWHILE_TICK)
    while True:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return False
        step = left if every is None else (every if left is None else min(every, left))
        if reader.ended.wait(step):
            return True
        if meanwhile is not None:
            meanwhile()
