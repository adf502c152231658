"""The one writer path of reports, exports and pictures: refused up front when the folder cannot be written, no
partial files left when writing fails, one error naming the folder and the real cause.

Results folders of runs and sweep points have their own atomic path
(:func:`waitlab.experiments.run_folder.results_folder`); both map operating-system failures through
:func:`waitlab.errors.write_error`.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

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
            note_removed(exc, folder)  # an interruption's account names what it removed, and only that
        else:
            new = [p for p in folder.iterdir() if p.name not in before]
            for p in new:
                remove_path(p)
            if new:
                note_removed(exc, ", ".join(map(str, new)))
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


def remove_path(path: Path) -> None:
    """Remove a file or a folder (not what a symbolic link points to); what cannot be removed stays."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


class Replacement:
    """The files of one :func:`replaced_files` block: each final name and the temporary file written for it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.staged: dict[str, Path] = {}
        self.current: str | None = None  # the file being written or renamed (named by an error)

    def hidden(self, name: str) -> Path:
        """A new hidden name beside ``folder/name`` (same folder, so a rename is atomic), with the same suffix."""
        final = Path(name)
        return self.folder / f".{final.stem}.{uuid.uuid4().hex[:8]}.partial-{os.getpid()}{final.suffix}"

    def path(self, name: str) -> Path:
        """Where to write ``folder/name`` (a file, or a folder such as an OTF2 archive): a hidden path beside it,
        with the same suffix (matplotlib chooses the format by it)."""
        tmp = self.hidden(name)
        self.staged[name] = tmp
        self.current = name
        return tmp

    def discard(self, name: str) -> None:
        """Leave ``folder/name`` as it is after all: the block wrote nothing for it (what it began is removed)."""
        tmp = self.staged.pop(name, None)
        if tmp is not None:
            remove_path(tmp)


def _described(folder: Path, names: list[str]) -> str:
    """What an interrupted :func:`replaced_files` block removed, said after "new" when an older one stays.

    >>> _described(Path("out/run"), ["otf2"]), _described(Path("out/board"), ["a.md", "a.csv"])
    ('out/run/otf2', 'the output in out/board (a.md, a.csv)')
    """
    new = "new " if any(os.path.lexists(folder / n) for n in names) else ""
    if len(names) == 1:
        return f"the {new}{folder / names[0]}" if new else str(folder / names[0])
    return f"the {new}output in {folder} ({', '.join(names)})"


@contextmanager
def replaced_files(folder: Path, what: str = "file") -> Iterator[Replacement]:
    """Rewrite files of an existing folder whole or not at all (``report.html``, ``diagnosis.json``, an export's
    ``trace.json`` and ``otf2/`` archive, ...).

    Each file (or folder) is written to the temporary path :meth:`Replacement.path` gives, beside it; when the block
    ends without an error they are renamed over their final names, in the order they were asked for (an old folder
    is first renamed aside, and removed once the new one is in place).  A reader (or a later command) therefore
    finds each file complete, old or new.  When the block fails or is interrupted (disk full, ``ulimit -f``, a crash
    of the drawing code, Ctrl-C), the temporary files are removed and every old file stays as it was; an
    interruption's account names the new files it removed (:func:`~waitlab.errors.note_removed`), and an
    operating-system write failure becomes one :class:`~waitlab.errors.WriteError` naming the file being written.
    A file keeps the permissions of the one it replaces.
    """
    rep = Replacement(Path(folder))
    done: set[str] = set()
    aside: dict[str, Path] = {}  # an old folder being replaced by a new one: where it waits until the new one is in
    try:
        yield rep
        for name, tmp in rep.staged.items():
            rep.current = name
            final = rep.folder / name
            try:
                os.chmod(tmp, stat.S_IMODE(final.stat().st_mode))
            except OSError:  # no old file (or not ours to read): the new one's own permissions
                pass
            if _is_folder(tmp) and _is_folder(final):  # rename(2) does not replace a folder that holds files
                aside[name] = rep.hidden(name)
                os.replace(final, aside[name])
            os.replace(tmp, final)
            done.add(name)
    except BaseException as exc:
        for name, old in aside.items():  # stopped between the two renames: the old folder goes back
            if name not in done and not os.path.lexists(rep.folder / name):
                try:
                    os.replace(old, rep.folder / name)
                except OSError:  # it stays where it is, hidden, rather than being lost
                    pass
        removed = [n for n, tmp in rep.staged.items() if n not in done and os.path.lexists(tmp)]
        for name, tmp in rep.staged.items():
            if name not in done:
                remove_path(tmp)
        if removed:
            note_removed(exc, _described(rep.folder, removed))
        if is_write_failure(exc):
            assert isinstance(exc, OSError)
            raise write_error(exc, rep.folder / rep.current if rep.current else rep.folder, what) from None
        raise
    finally:
        for name, old in aside.items():  # the old folders the new ones replaced
            if name in done:
                remove_path(old)


def jsonable(x: Any) -> Any:
    """``x`` with what JSON cannot hold made plain: numpy scalars as Python numbers, keys as text, tuples as lists,
    NaN as null and infinities as ``"inf"`` / ``"-inf"`` (the results folder's JSON files).

    >>> jsonable({1: (np.float64(0.5), float("nan"), float("-inf"))})
    {'1': [0.5, None, '-inf']}
    """
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x
