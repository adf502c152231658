"""Read a user's input file once, turning every way it can be bad into one :class:`~waitlab.errors.InputError`.

Missing, a folder, unreadable, larger than a sane limit, not UTF-8, not TOML, nested too deeply: each is one
line naming the file and the fix.  Used for scenario, sweep and platform TOML files, noise signatures, traces
and program sources, so that every reader says the same thing the same way.
"""

from __future__ import annotations

import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

from waitlab.errors import InputError

#: Largest TOML input read (bytes): larger files are refused before parsing.
MAX_TOML_BYTES = 16 << 20


def read_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of ``path``; a clear :class:`InputError` if it is missing, a folder, unreadable or too large.

    >>> read_bytes("/nonexistent.toml", "scenario", 10)
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: /nonexistent.toml: (file): does not exist (fix: check the path)
    """
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "(file)", "does not exist", "check the path")
    if p.is_dir():
        raise InputError(str(p), "(file)", "is a folder", f"give the path of a {what} file")
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block, /dev/zero never ends
            raise InputError(str(p), "(file)", "is not a regular file (a device, pipe or socket)",
                             f"give the path of a {what} file")
        if st.st_size > max_bytes:
            raise InputError(str(p), "(file)", f"is {st.st_size} bytes; a {what} file is at most {max_bytes}",
                             "check that this is the right file")
        with open(p, "rb") as fh:  # at most one byte past the limit, whatever the file claims
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InputError(str(p), "(file)", f"is more than {max_bytes} bytes; a {what} file is at most "
                             f"{max_bytes}", "check that this is the right file")
        return data
    except PermissionError:
        raise InputError(str(p), "(file)", "cannot be read (permission denied)", "make it readable") from None
    except OSError as exc:
        raise InputError(str(p), "(file)", f"cannot be read: {exc.strerror}", "check the file") from None


def read_text(path: str | Path, what: str, max_bytes: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``(encoding)`` error otherwise)."""
    raw = read_bytes(path, what, max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(str(path), "(encoding)", f"not UTF-8 text (line {line}, byte {exc.start})",
                         f"save the {what} file as UTF-8") from None


def read_toml(path: str | Path, what: str = "scenario") -> dict[str, Any]:
    """Parse a TOML file (``-``: standard input); every way the file can be bad is one :class:`InputError`."""
    if str(path) == "-":  # relative paths inside it are then relative to the working folder
        text = sys.stdin.read(MAX_TOML_BYTES + 1)
        if len(text) > MAX_TOML_BYTES:
            raise InputError("(stdin)", "(file)", f"is larger than {MAX_TOML_BYTES} bytes", f"give a {what} .toml file")
        path = "(stdin)"
    else:
        text = read_text(path, what, MAX_TOML_BYTES)
    if "\0" in text:
        raise InputError(str(path), "(syntax)", "holds NUL bytes: not a TOML text file", f"give a {what} .toml file")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), "(syntax)", f"not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except RecursionError:
        raise InputError(str(path), "(syntax)", "nested too deeply", "flatten the arrays") from None
