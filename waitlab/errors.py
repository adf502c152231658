"""Errors that reach the user as one clear message, never as a traceback.

Every error names *where* (file and field), *what* was wrong, and *the fix*.
The CLI prints ``str(error)`` and exits with status 2 (bad input) or 3
(simulation failure).
"""

from __future__ import annotations

import difflib
import errno
import resource
from collections.abc import Iterable
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


def unknown_name(file: str, field: str, name: object, allowed: Iterable[object], fix: str,
                 what: str = "key") -> InputError:
    """The error of an unknown key (or section, ``what``) ``name`` of a file: with the allowed name it looks like
    (difflib), else ``fix`` (which lists what is allowed).  Every reader of waitlab's TOML files says it this way.

    >>> str(unknown_name("p.toml", "topology.tapper", "tapper", ["kind", "taper"], "allowed keys: kind, taper"))
    "p.toml: topology.tapper: unknown key 'tapper' (did you mean 'taper'?) (fix: rename tapper to taper)"
    >>> str(unknown_name("p.toml", "colour", "colour", ["kind", "taper"], "allowed keys: kind, taper"))
    'p.toml: colour: unknown key (fix: allowed keys: kind, taper)'
    """
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    if close:
        return InputError(file, field, f"unknown {what} {str(name)!r} (did you mean {close[0]!r}?)",
                          f"rename {name} to {close[0]}")
    return InputError(file, field, f"unknown {what}", fix)


class SimulationError(WaitlabError):
    """SimGrid (smpirun, smpicxx, a replay) failed; carries SimGrid's own words."""

    exit_code = 3


class EnvironmentProblem(WaitlabError):
    """A required tool (smpirun, smpicxx, python3-simgrid) is missing."""

    exit_code = 4


class Interrupted(Picklable, KeyboardInterrupt):
    """A command stopped by SIGINT, SIGTERM or SIGHUP; the message says what was kept and how to resume.

    It is a :class:`KeyboardInterrupt`, so code that stops on Ctrl-C stops on it too; the command line exits
    with ``128 + signum`` (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

    >>> err = Interrupted("sweep s: 3 of 12 points kept", 15)
    >>> err.exit_code, str(err)
    (143, 'sweep s: 3 of 12 points kept')
    """

    def __init__(self, message: str, signum: int = 2) -> None:
        self.signum = int(signum)
        self.exit_code = 128 + self.signum
        super().__init__(message)


def note_removed(exc: BaseException, folder: object) -> None:
    """Record on an interruption (a :class:`KeyboardInterrupt`) what unfinished output it stopped and that was
    removed (a results folder, or the new files of a rewrite: ``the new out/run/otf2``), so that the command line's
    account names it, and names none when none was (:func:`removed_by`); the first record (the innermost writer's)
    is kept."""
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
    errno.ENAMETOOLONG: ("a name or the path is too long for the file system (a name holds at most 255 bytes, and "
                         "waitlab first writes under a hidden name up to 30 characters longer)",
                         "use a shorter output name or path (-o)"),
    errno.EMFILE: ("too many open files", "raise 'ulimit -n'"),
    errno.EIO: ("the disk reported an input/output error", "check the disk or write elsewhere (-o)"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose another output path (-o)"),
    errno.EEXIST: ("something that is not a folder (a file, or a symbolic link to nothing or to itself) is in the "
                   "path where a folder is needed", "move it away, or choose another output path (-o)"),
    errno.ELOOP: ("the path goes through a loop of symbolic links", "fix or remove the link, or choose another "
                  "output path (-o)"),
}

#: Causes :func:`write_error` knows for errors that are not always a failed write (:func:`is_write_failure` leaves
#: them out: a missing input file raises the same error).
PATH_CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOENT: ("a folder of the path is missing, or was removed while waitlab wrote into it (by another command "
                   "writing the same output?)", "run the command again, and one command at a time per output folder"),
}


def write_error(exc: OSError, folder: object, what: str = "output folder") -> WriteError:
    """The one error for a failed write: names ``folder``, the operating system's words and the real cause.

    >>> str(write_error(OSError(errno.ENOSPC, "No space left on device"), "out"))
    'out: (output folder): writing failed: No space left on device: the disk is full (fix: free disk space or \
write to another disk (-o))'
    """
    meaning, fix = WRITE_CAUSES.get(exc.errno or 0) or PATH_CAUSES.get(exc.errno or 0) or (
        "", "free disk space or choose another location (-o)")
    words = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(str(folder), f"({what})", f"writing failed: {words}" + (f": {meaning}" if meaning else ""),
                      fix, exc.errno or 0)


def is_write_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an operating-system write failure :func:`write_error` knows (disk full, permissions...)."""
    return isinstance(exc, OSError) and (exc.errno or 0) in WRITE_CAUSES


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the process ran out of memory: a :class:`MemoryError`, an :class:`ImportError` of an
    extension module the loader could not map (``failed to map segment from shared object`` under ``ulimit -v``),
    or a thread that could not start (its stack) under a virtual-memory limit.

    >>> out_of_memory(ImportError("/x/_core.so: failed to map segment from shared object"))
    True
    >>> out_of_memory(ImportError("No module named 'otf2'")), out_of_memory(MemoryError())
    (False, True)
    """
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    if isinstance(exc, ImportError):
        return "failed to map segment" in text or ("cannot allocate memory" in text and "static tls" not in text)
    return isinstance(exc, RuntimeError) and "can't start new thread" in text and _memory_limit() is not None


def _memory_limit() -> int | None:
    """The process's virtual-memory limit in bytes (``ulimit -v``), None when there is none."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def out_of_memory_text(exc: BaseException) -> str:
    """The one line of a command that ran out of memory (:func:`out_of_memory`); a virtual-memory limit
    (``ulimit -v``) in force is named, as the likely cause.

    >>> out_of_memory_text(MemoryError())[:60]
    'out of memory (MemoryError: no detail): the command needs mo'
    """
    limit = _memory_limit()
    where = (f"than the virtual-memory limit allows ('ulimit -v' {limit >> 10}: {limit / 2**20:,.0f} MiB)"
             if limit is not None else "than this machine has left")
    fix = "raise or lift 'ulimit -v', or run fewer ranks or steps" if limit is not None else \
        "fewer ranks or steps, or a machine with more memory"
    return (f"out of memory ({type(exc).__name__}: {str(exc)[:200] or 'no detail'}): the command needs more memory "
            f"{where} (fix: {fix}; runs of 4,096 ranks or more are estimated first unless --no-resource-check)")
