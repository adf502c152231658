"""Start waitlab as a user would (its own session, a marked environment) and watch its processes.

Shared by the interruption, sweep-survival and Dask-cluster tests: every process a test starts carries
``WAITLAB_TEST_MARK=<uuid>`` in its environment, so the test can find (and at the end kill) exactly
its own descendants, however they were spawned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command) of every running process whose environment holds ``mark``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if mark.encode() in (d / "environ").read_bytes():
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if cmd:  # a zombie waiting for its parent to reap it is not running
                    found.append((int(d.name), cmd))
        except OSError:
            continue
    return found


def wait_for(predicate: Callable[[], object], timeout: float) -> bool:
    """Poll ``predicate`` every 50 ms until it is true (True) or ``timeout`` seconds pass (False)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``waitlab ARGS`` in ``tmp_path`` in a session of its own; return it and its mark."""
    token = uuid.uuid4().hex
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, WAITLAB_TEST_MARK=token, TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen([sys.executable, "-m", "waitlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, start_new_session=True)
    return proc, f"WAITLAB_TEST_MARK={token}"


def cleanup(proc: subprocess.Popen[str], mark: str) -> None:
    """Kill every process carrying ``mark`` and reap ``proc``."""
    for pid, _ in marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.communicate()
