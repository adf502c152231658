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
import stat
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from waitlab.errors import InputError, WaitlabError, is_write_failure, note_removed, write_error

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
        note_removed(exc, target)  # an interruption's account names what it removed
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


class Replacement:
    """The files of one :func:`replaced_files` block: each final name and the temporary file written for it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.staged: dict[str, Path] = {}
        self.current: str | None = None  # the file being written or renamed (named by an error)

    def path(self, name: str) -> Path:
        """Where to write ``folder/name``: a hidden file beside it (same folder, so the rename is atomic), with the
        same suffix (matplotlib chooses the format by it)."""
        final = Path(name)
        tmp = self.folder / f".{final.stem}.{uuid.uuid4().hex[:8]}.partial-{os.getpid()}{final.suffix}"
        self.staged[name] = tmp
        self.current = name
        return tmp


@contextmanager
def replaced_files(folder: Path, what: str = "file") -> Iterator[Replacement]:
    """Rewrite files of an existing folder whole or not at all (``report.html``, ``diagnosis.json``, ...).

    Each file is written to the temporary path :meth:`Replacement.path` gives, beside it; when the block ends
    without an error they are renamed over their final names, in the order they were asked for.  A reader (or a
    later command) therefore finds each file complete, old or new.  When the block fails (disk full, ``ulimit -f``,
    a crash of the drawing code), the temporary files are removed and every old file stays as it was; an
    operating-system write failure becomes one :class:`~waitlab.errors.WriteError` naming the file being written.
    A file keeps the permissions of the one it replaces.
    """
    rep = Replacement(Path(folder))
    try:
        yield rep
        for name, tmp in rep.staged.items():
            rep.current = name
            final = rep.folder / name
            try:
                os.chmod(tmp, stat.S_IMODE(final.stat().st_mode))
            except OSError:  # no old file (or not ours to read): the new one's own permissions
                pass
            os.replace(tmp, final)
    except BaseException as exc:
        for tmp in rep.staged.values():
            tmp.unlink(missing_ok=True)
        if is_write_failure(exc):
            assert isinstance(exc, OSError)
            raise write_error(exc, rep.folder / rep.current if rep.current else rep.folder, what) from None
        raise
