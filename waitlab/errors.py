"""Errors that reach the user as one clear message, never as a traceback.

Every error names *where* (file and field), *what* was wrong, and *the fix*.
The CLI prints ``str(error)`` and exits with status 2 (bad input) or 3
(simulation failure).
"""

from __future__ import annotations

import errno
from typing import Any


def problem_text(where: str, problem: str, fix: str = "") -> str:
    """The one spelling of every input problem: ``WHERE: PROBLEM (fix: FIX)``.

    >>> problem_text("steps", "must be >= 1, got 0", "set steps = 1")
    'steps: must be >= 1, got 0 (fix: set steps = 1)'
    """
    return f"{where}: {problem}" + (f" (fix: {fix})" if fix else "")


def rebuild_error(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickle an error without calling its ``__init__`` (whose parameters differ from ``args``)."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class Picklable:
    """Mixin of exceptions whose ``__init__`` takes other parameters than the message: they survive ``pickle``.

    ``BaseException.__reduce__`` re-creates an exception as ``cls(*args)``, with ``args = (message,)``; an
    ``__init__`` of four parameters then raises ``TypeError`` in the process that unpickles it (a worker's
    error killed the whole process pool).  Here the exception is rebuilt from its ``args`` and attributes.

    >>> import pickle
    >>> err = pickle.loads(pickle.dumps(InputError("a.toml", "steps", "must be >= 1")))
    >>> (type(err).__name__, err.field, str(err))
    ('InputError', 'steps', 'a.toml: steps: must be >= 1')
    """

    def __reduce__(self) -> tuple[Any, ...]:
        assert isinstance(self, BaseException)
        return (rebuild_error, (type(self), self.args, dict(self.__dict__)))


class WaitlabError(Picklable, Exception):
    """Base class of every error waitlab reports to the user."""

    exit_code = 2


class InputError(WaitlabError):
    """A scenario, platform, trace or noise file is malformed.

    Parameters
    ----------
    file : str
        Path (or name) of the offending file.
    field : str
        Dotted key or ``line N`` inside the file.
    problem : str
        What is wrong.
    fix : str
        What the user should write instead.

    Examples
    --------
    >>> str(InputError("a.toml", "platform.nodes", "must be > 0, got -1", "set nodes = 4"))
    'a.toml: platform.nodes: must be > 0, got -1 (fix: set nodes = 4)'
    """

    def __init__(self, file: str, field: str, problem: str, fix: str = "") -> None:
        self.file = str(file)
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(problem_text(f"{self.file}: {field}", problem, fix))


class SimulationError(WaitlabError):
    """SimGrid (smpirun, smpicxx, a replay) failed; carries SimGrid's own words."""

    exit_code = 3


class EnvironmentProblem(WaitlabError):
    """A required tool (smpirun, smpicxx, python3-simgrid) is missing."""

    exit_code = 4


class Interrupted(Picklable, KeyboardInterrupt):
    """A command stopped by SIGINT or SIGTERM; the message says what was kept and how to resume.

    It is a :class:`KeyboardInterrupt`, so code that stops on Ctrl-C stops on it too; the command line exits
    with ``128 + signum`` (130 for SIGINT, 143 for SIGTERM).

    >>> err = Interrupted("sweep s: 3 of 12 points kept", 15)
    >>> err.exit_code, str(err)
    (143, 'sweep s: 3 of 12 points kept')
    """

    def __init__(self, message: str, signum: int = 2) -> None:
        self.signum = int(signum)
        self.exit_code = 128 + self.signum
        super().__init__(message)


def note_removed(exc: BaseException, folder: object) -> None:
    """Record on an interruption (a :class:`KeyboardInterrupt`) the unfinished results folder it stopped and that
    was removed, so that the command line's account names it, and names none when none was (:func:`removed_by`)."""
    if isinstance(exc, KeyboardInterrupt):
        exc.__dict__.setdefault("removed_folder", str(folder))


def removed_by(exc: BaseException) -> str | None:
    """The unfinished results folder an interruption removed (:func:`note_removed`), or None.

    >>> exc = Interrupted("", 2)
    >>> removed_by(exc), (note_removed(exc, "out/run"), removed_by(exc))[1]
    (None, 'out/run')
    """
    folder = exc.__dict__.get("removed_folder")
    return str(folder) if folder is not None else None


class WriteError(InputError):
    """A file or folder could not be written (disk full, quota, permissions, read-only file system, ...).

    ``unwritable`` tells a sweep that no further point can be written either, so it starts no more;
    ``errno`` is the operating system's error number.
    """

    unwritable = True

    def __init__(self, file: str, field: str, problem: str, fix: str = "", errno: int = 0) -> None:
        super().__init__(file, field, problem, fix)
        self.errno = errno


#: The operating system's reasons a write fails: errno -> (what it means, the fix).
WRITE_CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("the disk is full", "free disk space or write to another disk (-o)"),
    errno.EDQUOT: ("your disk quota is used up", "free space within your quota or write elsewhere (-o)"),
    errno.EACCES: ("you may not write there", "choose a folder you can write (-o) or fix its permissions"),
    errno.EPERM: ("you may not write there", "choose a folder you can write (-o) or fix its permissions"),
    errno.EROFS: ("it is on a read-only file system", "write to a writable disk (-o)"),
    errno.EFBIG: ("a file grew past the file-size limit (ulimit -f)", "raise the limit or write elsewhere"),
    errno.ENAMETOOLONG: ("a path is too long", "use a shorter output path (-o)"),
    errno.EMFILE: ("too many open files", "raise 'ulimit -n'"),
    errno.EIO: ("the disk reported an input/output error", "check the disk or write elsewhere (-o)"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose another output path (-o)"),
}


def write_error(exc: OSError, folder: object, what: str = "output folder") -> WriteError:
    """The one error for a failed write: names ``folder``, the operating system's words and the real cause.

    >>> str(write_error(OSError(errno.ENOSPC, "No space left on device"), "out"))
    'out: (output folder): writing failed: No space left on device: the disk is full (fix: free disk space or \
write to another disk (-o))'
    """
    meaning, fix = WRITE_CAUSES.get(exc.errno or 0, ("", "free disk space or choose another location (-o)"))
    words = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(str(folder), f"({what})", f"writing failed: {words}" + (f": {meaning}" if meaning else ""),
                      fix, exc.errno or 0)


def is_write_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an operating-system write failure :func:`write_error` knows (disk full, permissions...)."""
    return isinstance(exc, OSError) and (exc.errno or 0) in WRITE_CAUSES
