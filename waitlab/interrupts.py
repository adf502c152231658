"""One waitlab command's session: its own scratch folder, and Ctrl-C handled in two steps.

- Scratch: every temporary file of the command (and of its worker processes and SimGrid runs, through
  ``TMPDIR``) goes to ``$TMPDIR/waitlab-scratch-<pid>/``, removed when the command ends, however it ends.  A
  folder left by a process that was killed (``kill -9``) is removed by the next waitlab command.
- Signals: the first Ctrl-C (or SIGTERM, or SIGHUP: the terminal closed, the ssh connection dropped) raises
  :class:`~waitlab.errors.Interrupted` (a :class:`KeyboardInterrupt` carrying the signal), so results folders
  being written are removed, no more work is dispatched and SimGrid runs are stopped; a second signal exits at
  once (status 128 + signal: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), killing the worker processes;
  SimGrid runs die with their parent (``PR_SET_PDEATHSIG``, see :mod:`waitlab.simulator.smpi`).  A SIGHUP the
  command was started ignoring (``nohup``) stays ignored.  Outside the session, the ``waitlab`` command
  (:mod:`waitlab.entry`) ends at once on a signal, with the same status.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from waitlab.errors import Interrupted
from waitlab.experiments.isolated import kill_children
from waitlab.experiments.leftovers import pid_alive

PREFIX = "waitlab-scratch-"


def clean_stale_scratch(base: Path) -> list[Path]:
    """Remove ``waitlab-scratch-PID`` folders in ``base`` whose process no longer runs."""
    removed: list[Path] = []
    try:
        entries = list(base.glob(f"{PREFIX}*"))
    except OSError:
        return removed
    for p in entries:
        pid = p.name.removeprefix(PREFIX)
        if pid.isdigit() and not pid_alive(int(pid)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def stop_signals() -> tuple[int, ...]:
    """The signals that stop a command cleanly: SIGINT, SIGTERM, and SIGHUP unless it is ignored (``nohup``)."""
    hup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hup)


def _stop_now(scratch: Path, signum: int) -> None:
    print("waitlab: interrupted twice: stopping now", file=sys.stderr, flush=True)
    kill_children()
    for child in multiprocessing.active_children():
        child.kill()
    shutil.rmtree(scratch, ignore_errors=True)
    os._exit(128 + signum)


@contextmanager
def session() -> Iterator[Path]:
    """Run a command with its own scratch folder and two-step Ctrl-C handling; yield the scratch folder."""
    base = Path(tempfile.gettempdir())
    clean_stale_scratch(base)
    scratch = base / f"{PREFIX}{os.getpid()}"
    try:
        scratch.mkdir(exist_ok=True)
    except OSError:  # an unwritable TMPDIR: leave it to the code that needs scratch to say so
        yield base
        return
    old_env, old_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)
    interrupts = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            _stop_now(scratch, signum)
        raise Interrupted("", signum)  # empty: the command's own message, or the CLI's generic one

    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in stop_signals()} if main else {}
    try:
        yield scratch
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
        tempfile.tempdir = old_tempdir
        shutil.rmtree(scratch, ignore_errors=True)
