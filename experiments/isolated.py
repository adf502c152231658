"""One call in a Python process of its own: the local executor's unit of work.

:class:`PointProcesses` runs every submitted call ``fn(*args)`` in a fresh ``python -m
waitlab.experiments.isolated`` child, in a process group of its own; a thread of this process waits for it.  Each
point of a sweep (or counterfactual re-run of a diagnosis) drives its own ``smpirun`` subprocess anyway, so the
threads only wait; the children isolate everything else:

- an error of one call (any exception, a crash, an out-of-memory kill) fails that call only; it comes back as
  the call's exception (waitlab's errors pickle; any other becomes a :class:`~waitlab.errors.SimulationError`
  with its type and message);
- :meth:`PointProcesses.stop` (the first Ctrl-C) cancels the calls not started and ends the running ones:
  SIGTERM first (the child removes its partial results folder and ends its SimGrid run), SIGKILL after a grace
  period;
- no ``__main__`` is re-imported: scripts without an ``if __name__ == "__main__":`` guard, code read from
  stdin and notebooks work as well as the command line (``fn`` must be an importable function, as waitlab's are).

The protocol: the parent writes ``pickle((fn, args, kwargs))`` (8-byte length first) to the child's stdin;
the child writes ``pickle(("ok", value))`` or ``pickle(("error", exception))`` the same way to its original
stdout (its ``print`` output goes to stderr) and waits for the next call; it exits when its stdin closes.
Each pool thread keeps its child for the next call, so the imports are paid once per thread.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from waitlab.errors import Interrupted, SimulationError, WaitlabError
from waitlab.simulator.smpi import die_with_parent

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


@dataclass
class _Child:
    """One worker process: its pipes and the file collecting its stderr."""

    proc: subprocess.Popen[bytes]
    err: Any


def _read_exact(fh: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = fh.read(n - len(data))
        if not chunk:
            return data
        data += chunk
    return data


class PointProcesses(ThreadPoolExecutor):
    """An executor whose calls run in child Python processes, each in a process group of its own (module doc).

    Each thread of the pool owns one child and reuses it for its next call (the imports are paid once); a child
    that died is replaced for the next call.

    Parameters
    ----------
    max_workers : int
        Calls running at once.
    """

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="waitlab-point")
        self._stopping = threading.Event()
        self._local = threading.local()
        self._children: list[_Child] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return super().submit(self._call, fn, args, kwargs)

    def _child(self) -> _Child:
        child: _Child | None = getattr(self._local, "child", None)
        if child is not None and child.proc.poll() is None:
            return child
        err = tempfile.TemporaryFile(prefix="waitlab-point-err-")
        proc = subprocess.Popen([sys.executable, "-m", "waitlab.experiments.isolated"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, start_new_session=True,
                                preexec_fn=die_with_parent)  # before exec: no window for a kill -9
        child = _Child(proc, err)
        self._local.child = child
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
            self._children.append(child)
        return child

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        if self._stopping.is_set():
            raise Interrupted("stopped before it started", signal.SIGINT)
        payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        child = self._child()
        proc = child.proc
        assert proc.stdin is not None and proc.stdout is not None
        child.err.seek(0)
        child.err.truncate()
        try:
            proc.stdin.write(struct.pack("<Q", len(payload)) + payload)
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        head = _read_exact(proc.stdout, 8)
        data = _read_exact(proc.stdout, struct.unpack("<Q", head)[0]) if len(head) == 8 else b""
        if data:
            status, value = pickle.loads(data)
            if status == "ok":
                return value
            raise value
        code = proc.wait()
        if self._stopping.is_set():
            raise Interrupted("stopped while it ran", signal.SIGINT)
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        words = _last_words(child.err)
        raise SimulationError(f"the worker process {how}" + (f"; its last words: {words}" if words else "")
                              + (" (SIGKILL without a message is usually the out-of-memory killer: run "
                                 "fewer points at once)" if code == -signal.SIGKILL and not words else ""))

    def stop(self, grace: float = GRACE) -> None:
        """Cancel the calls not started; SIGTERM the children, SIGKILL what is left after ``grace`` seconds."""
        self._stopping.set()
        super().shutdown(wait=False, cancel_futures=True)
        with _LIVE_LOCK:
            procs = [c.proc for c in self._children]
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the pool down; with ``wait``, let the idle children exit (their stdin closes) and reap them."""
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        if not wait:
            return
        with _LIVE_LOCK:
            children, self._children = self._children, []
        for child in children:
            try:
                if child.proc.stdin is not None:
                    child.proc.stdin.close()
            except OSError:
                pass
            try:
                child.proc.wait(timeout=GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(child.proc.pid, signal.SIGKILL)
                child.proc.wait()
            if child.proc.stdout is not None:
                child.proc.stdout.close()
            child.err.close()
            with _LIVE_LOCK:
                _LIVE.pop(child.proc.pid, None)


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        if isinstance(exc, WaitlabError):
            return SimulationError(str(exc))
        return SimulationError(f"{type(exc).__name__}: {exc}")


def child_main() -> int:
    """The child's side: read calls from stdin until it closes; write each outcome to the original stdout."""
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() of a call goes to stderr, never into the results
    source = sys.stdin.buffer
    try:
        while True:
            head = _read_exact(source, 8)
            if len(head) < 8:
                return 0
            fn, args, kwargs = pickle.loads(_read_exact(source, struct.unpack("<Q", head)[0]))
            try:
                outcome: tuple[str, Any] = ("ok", fn(*args, **kwargs))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                outcome = ("error", _picklable(exc))
            data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
            result.write(struct.pack("<Q", len(data)) + data)
            result.flush()
    except KeyboardInterrupt:  # SIGTERM from the parent: the call's cleanup ran on the way here
        return 128 + signal.SIGTERM


if __name__ == "__main__":
    raise SystemExit(child_main())
