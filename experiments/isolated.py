"""One call in a Python process of its own: the local executor's unit of work.

:class:`PointProcesses` runs every submitted call ``fn(*args)`` in a fresh ``python -m
waitlab.experiments.isolated`` child, in a process group of its own; a thread of this process waits for it.  Each
point of a sweep (or counterfactual re-run of a diagnosis) drives its own ``smpirun`` subprocess anyway, so the
threads only wait; the child isolates everything else:

- an error of one call (any exception, a crash, an out-of-memory kill) fails that call only; it comes back as
  the call's exception (waitlab's errors pickle; any other becomes a :class:`~waitlab.errors.SimulationError`
  with its type and message);
- :meth:`PointProcesses.stop` (the first Ctrl-C) cancels the calls not started and ends the running ones:
  SIGTERM first (the child removes its partial results folder and ends its SimGrid run), SIGKILL after a grace
  period;
- no ``__main__`` is re-imported: scripts without an ``if __name__ == "__main__":`` guard, code read from
  stdin and notebooks work as well as the command line (``fn`` must be an importable function, as waitlab's are).

The protocol: the parent writes ``pickle((fn, args, kwargs))`` to the child's stdin; the child writes
``pickle(("ok", value))`` or ``pickle(("error", exception))`` to its original stdout (its ``print`` output goes
to stderr) and exits 0.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import FrameType
from typing import Any, TypeVar

from waitlab.errors import Interrupted, SimulationError, WaitlabError
from waitlab.simulator.smpi import worker_dies_with_parent

T = TypeVar("T")

#: Seconds a child gets after SIGTERM to clean up (its SimGrid run, its partial folder) before SIGKILL.
GRACE = 4.0

_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()


def kill_children() -> None:
    """SIGKILL the process group of every running child (the second Ctrl-C: no cleanup, exit at once)."""
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _last_words(fh: Any, n: int = 2000) -> str:
    """The last non-empty line among the last ``n`` bytes of the open file ``fh``."""
    try:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - n))
        text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class PointProcesses(ThreadPoolExecutor):
    """An executor whose every call runs in a child Python process of its own process group (see module doc).

    Parameters
    ----------
    max_workers : int
        Calls running at once.
    """

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="waitlab-point")
        self._stopping = threading.Event()
        self._mine: set[int] = set()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:  # type: ignore[override]
        return super().submit(self._call, fn, args, kwargs)

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        if self._stopping.is_set():
            raise Interrupted("stopped before it started", signal.SIGINT)
        payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        with tempfile.TemporaryFile(prefix="waitlab-point-err-") as err, \
                tempfile.TemporaryFile(prefix="waitlab-point-out-") as out:
            # the input goes through a file too: a pipe would block a large payload until the child reads it
            with tempfile.TemporaryFile(prefix="waitlab-point-in-") as inp:
                inp.write(payload)
                inp.seek(0)
                proc = subprocess.Popen([sys.executable, "-m", "waitlab.experiments.isolated"], stdin=inp,
                                        stdout=out, stderr=err, start_new_session=True)
            with _LIVE_LOCK:
                _LIVE[proc.pid] = proc
                self._mine.add(proc.pid)
            try:
                code = proc.wait()
            finally:
                with _LIVE_LOCK:
                    _LIVE.pop(proc.pid, None)
                    self._mine.discard(proc.pid)
            out.seek(0)
            data = out.read()
            if code == 0 and data:
                status, value = pickle.loads(data)
                if status == "ok":
                    return value  # type: ignore[no-any-return]
                raise value
            if self._stopping.is_set():
                raise Interrupted("stopped while it ran", signal.SIGINT)
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
            words = _last_words(err)
            raise SimulationError(f"the worker process {how}" + (f"; its last words: {words}" if words else "")
                                  + (" (SIGKILL without a message is usually the out-of-memory killer: run "
                                     "fewer points at once)" if code == -signal.SIGKILL and not words else ""))

    def stop(self, grace: float = GRACE) -> None:
        """Cancel the calls not started; SIGTERM the running ones, SIGKILL what is left after ``grace`` seconds."""
        self._stopping.set()
        self.shutdown(wait=False, cancel_futures=True)
        with _LIVE_LOCK:
            pids = list(self._mine)
        for pid in pids:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with _LIVE_LOCK:
                if not self._mine & set(pids):
                    return
            time.sleep(0.05)
        for pid in pids:
            _signal_group(pid, signal.SIGKILL)

    def running_pids(self) -> list[int]:
        """PIDs of the children running now."""
        with _LIVE_LOCK:
            return sorted(self._mine)


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any error of a third-party exception's pickling
        if isinstance(exc, WaitlabError):
            return SimulationError(str(exc))
        return SimulationError(f"{type(exc).__name__}: {exc}")


def child_main() -> int:
    """The child's side: read the call from stdin, run it, write the outcome to the original stdout."""
    worker_dies_with_parent()
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    result_fd = os.dup(1)
    os.dup2(2, 1)  # print() of the call goes to stderr, never into the result
    fn, args, kwargs = pickle.loads(sys.stdin.buffer.read())
    try:
        outcome: tuple[str, Any] = ("ok", fn(*args, **kwargs))
    except KeyboardInterrupt:
        return 128 + signal.SIGTERM
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as the call's error
        outcome = ("error", _picklable(exc))
    with os.fdopen(result_fd, "wb") as fh:
        fh.write(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    raise SystemExit(child_main())
