"""One sweep per folder: an exclusive ``flock`` on ``OUT/.sweep.lock`` while a sweep runs."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from waitlab.errors import InputError
from waitlab.experiments.run_folder import write_error

__all__ = ["LOCK", "sweep_lock"]

LOCK = ".sweep.lock"


@contextmanager
def sweep_lock(out: Path) -> Iterator[Path]:
    """Hold ``out/.sweep.lock`` (an exclusive ``flock``, the file holding this process's PID) while the block runs.

    A second sweep into the same folder is refused with the holder's PID.  The operating system releases the
    lock when its holder dies however it dies (``kill -9`` included), so a lock file left behind is simply
    taken over.
    """
    lock = out / LOCK
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            raise write_error(exc, out, "sweep folder") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise InputError(str(out), "(sweep folder)", f"is in use by another sweep (PID {holder})",
                             f"wait for it to finish, stop it (kill {holder}), or use another -o") from None
        try:  # the file we locked must still be the one at the path (a finishing holder unlinks it)
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError as exc:
        os.close(fd)
        raise write_error(exc, out, "sweep folder") from None
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)  # unlinked while still held: a waiting sweep then retries on a new file
        os.close(fd)
