"""The one writer path of reports, exports and pictures: refused up front when the folder cannot be written, no
partial files left when writing fails, one error naming the folder and the real cause.

Results folders of runs and sweep points have their own atomic path
(:func:`waitlab.experiments.run_folder.results_folder`); both map operating-system failures through
:func:`waitlab.errors.write_error`.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from waitlab.errors import InputError, WaitlabError, is_write_failure, write_error

#: File types matplotlib writes that waitlab offers for pictures.
PICTURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_picture_path(path: Path, field: str = "--png") -> None:
    """Refuse a picture path whose suffix is not one of :data:`PICTURE_SUFFIXES`, or an existing folder."""
    if Path(path).suffix.lower() not in PICTURE_SUFFIXES:
        raise InputError("(command line)", field, f"{str(path)[:120]!r} does not end in "
                         f"{', '.join(PICTURE_SUFFIXES)}", "name the picture e.g. comparison.png")
    if Path(path).is_dir():
        raise InputError("(command line)", field, f"{str(path)[:120]!r} is a folder", "give a file name ending in .png")


#: Free bytes below which a failed write is blamed on a full disk (libraries that hide the OS error, e.g. OTF2).
NEARLY_FULL = 1 << 20


def probe_writable(folder: Path, what: str = "output folder") -> None:
    """Raise :class:`~waitlab.errors.WriteError` unless a file can be created in ``folder`` (the real OS cause)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".waitlab-probe-", dir=folder)
    except OSError as exc:
        raise write_error(exc, folder, what) from None
    os.close(fd)
    os.unlink(name)


@contextmanager
def guarded_output(target: Path, what: str = "output folder", *, file: bool = False) -> Iterator[Path]:
    """The one writer path of reports, exports and pictures: every write into ``target`` goes through it.

    ``target`` is a folder (``file=False``) or a file (``file=True``, its folder is checked).  Before the block
    the folder is created and probed (a non-writable or read-only folder is refused with the real cause); if the
    block fails, what it created is removed (a folder created here goes entirely), and an operating-system
    write failure (disk full, quota, permissions, read-only, ...) becomes one
    :class:`~waitlab.errors.WriteError` naming the folder.  Yields the folder.
    """
    folder = Path(target).parent if file else Path(target)
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, folder, what) from None
    probe_writable(folder, what)
    before = {p.name for p in folder.iterdir()}
    try:
        yield folder
    except BaseException as exc:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            for p in folder.iterdir():
                if p.name not in before:
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        if is_write_failure(exc):
            assert isinstance(exc, OSError)
            raise write_error(exc, folder, what) from None
        if isinstance(exc, Exception) and not isinstance(exc, WaitlabError) and _nearly_full(folder):
            raise write_error(OSError(errno.ENOSPC, f"No space left on device ({type(exc).__name__}: {exc})"),
                              folder, what) from None
        raise


def _nearly_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < NEARLY_FULL
    except OSError:
        return False


