"""Read a user's input file once, turning every way it can be bad into one :class:`~waitlab.errors.InputError`.

Missing, a folder, unreadable, larger than a sane limit, not UTF-8, not TOML, nested too deeply: each is one
line naming the file and the fix.  Used for scenario, sweep and platform TOML files, noise signatures, traces
and program sources, so that every reader says the same thing the same way.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

from waitlab.errors import InputError

#: Largest TOML input read (bytes): larger files are refused before parsing.
MAX_TOML_BYTES = 16 << 20
#: Deepest nesting of arrays, tables and objects in a TOML or JSON file waitlab reads (its own files nest 4 deep).
MAX_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
#: What of a TOML text holds no nesting: multi-line, basic and literal strings, comments.
_TOML_INERT = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')


def path_argument(value: object, name: str, what: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`, or one :class:`InputError` naming the argument ``name`` when a Python
    caller passed something else (a number, ``None``, a dict) or the text of a file instead of its path.

    >>> path_argument("runs/a", "folder", "results folder")
    PosixPath('runs/a')
    >>> path_argument(5, "folder", "results folder")
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: (python call): folder: must be the path of a results folder (str or pathlib.Path), \
got int (fix: pass the results folder's path)
    """
    if isinstance(value, str) and "\n" in value:
        raise InputError("(python call)", name, f"is a text of {len(value.splitlines())} lines, not the path of a "
                         f"{what}", "save the text to a file and pass the file's path")
    if not isinstance(value, str | os.PathLike):
        raise InputError("(python call)", name, f"must be the path of a {what} (str or pathlib.Path), got "
                         f"{type(value).__name__}", f"pass the {what}'s path")
    return Path(value)


def check_bool(name: str, value: object) -> None:
    """Refuse a flag of a Python call that is not True or False (``force="no"`` is true), naming the argument.

    >>> check_bool("force", True)
    >>> check_bool("force", "no")
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: (python call): force: must be True or False, got 'no' (fix: e.g. force=False)
    """
    if not isinstance(value, bool):
        raise InputError("(python call)", name, f"must be True or False, got {value!r}", f"e.g. {name}=False")


def not_a_file(path: Path) -> str:
    """What ``path`` is when it is not a regular file, said the way an error says it.

    >>> not_a_file(Path("/nonexistent.toml")), not_a_file(Path("/")), not_a_file(Path("/dev/null"))
    ('does not exist', 'is a folder', 'is not a regular file (a device, pipe or socket)')
    """
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a folder"
    return "is not a regular file (a device, pipe or socket)"


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


def _bracket_depth(text: str) -> int:
    import numpy as np  # not on the way to a run's stage

    raw = np.frombuffer(text.encode("utf-8", "replace"), np.uint8)
    step = np.isin(raw, (0x5B, 0x7B)).astype(np.int64) - np.isin(raw, (0x5D, 0x7D))
    return int(np.cumsum(step).max(initial=0))


def json_depth(text: str) -> int:
    """Deepest nesting of ``[`` and ``{`` in a JSON text (strings skipped), counted without parsing it.

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    """
    return _bracket_depth(_JSON_STRING.sub('""', text))


def toml_text_depth(text: str) -> int:
    """Deepest nesting of arrays and inline tables in a TOML text (strings and comments skipped), counted
    without parsing it.

    >>> toml_text_depth('a = [[1], {b = "[[["}]  # [[[[')
    2
    """
    return _bracket_depth(_TOML_INERT.sub("", text))


def parse_json(text: str, file: str, what: str, fix: str = "", quiet: bool = False) -> Any:
    """``json.loads`` of a file's text; nesting deeper than :data:`MAX_DEPTH` and every syntax error are one
    :class:`InputError` (``quiet``: without the parser's words)."""
    fix = fix or f"give a {what} file written by waitlab"
    if json_depth(text) > MAX_DEPTH:
        raise InputError(file, "(file)", f"nests arrays or objects more than {MAX_DEPTH} deep: not a {what}", fix)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        words = "" if quiet else f" ({str(exc)[:200]})"
        raise InputError(file, "(file)", f"cannot be read as JSON{words}", fix) from None


def read_json(path: str | Path, what: str, max_bytes: int = MAX_TOML_BYTES, fix: str = "") -> Any:
    """A JSON file, read with bounds (size, encoding, nesting) before parsing: one :class:`InputError` otherwise."""
    try:
        text = read_text(path, what, max_bytes)
    except InputError as exc:
        if not fix or exc.field != "(encoding)":
            raise
        raise InputError(exc.file, exc.field, exc.problem, fix) from None
    return parse_json(text, str(path), what, fix)


def toml_depth(data: Any) -> int:
    """Deepest nesting of tables and arrays in parsed TOML, walked without recursion.

    >>> toml_depth({"a": {"b": [1, {"c": 2}]}})
    4
    """
    deepest, todo = 0, [(data, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth + 1)
            if depth + 1 > MAX_DEPTH:
                break
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def read_toml(path: str | Path, what: str = "scenario") -> dict[str, Any]:
    """Parse a TOML file (``-``: standard input); every way the file can be bad is one :class:`InputError`."""
    if str(path) == "-":  # relative paths inside it are then relative to the working folder
        text = sys.stdin.read(MAX_TOML_BYTES + 1)
        if len(text) > MAX_TOML_BYTES:
            raise InputError("(stdin)", "(file)", f"is larger than {MAX_TOML_BYTES} bytes", f"give a {what} .toml file")
        path = "(stdin)"
    else:
        text = read_text(path, what, MAX_TOML_BYTES)
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one): not TOML, and not content
    if "\0" in text:
        raise InputError(str(path), "(syntax)", "holds NUL bytes: not a TOML text file", f"give a {what} .toml file")
    if text.count("[") + text.count("{") > MAX_DEPTH and toml_text_depth(text) > MAX_DEPTH:
        raise InputError(str(path), "(syntax)", f"nests arrays or inline tables more than {MAX_DEPTH} deep",
                         f"a {what} file nests a few levels; flatten it")
    if text.count(".") > MAX_DEPTH:  # a dotted key of thousands of parts: refused before the parser nests them
        for no, line in enumerate(text.splitlines(), 1):
            if line.split("=", 1)[0].count(".") > MAX_DEPTH:
                raise InputError(str(path), f"line {no}", f"a key nests more than {MAX_DEPTH} tables deep (dotted "
                                 "key)", f"a {what} file nests a few levels; flatten it")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), "(syntax)", f"not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except RecursionError:
        raise InputError(str(path), "(syntax)", "nested too deeply", "flatten the arrays") from None
    if toml_depth(data) > MAX_DEPTH:
        raise InputError(str(path), "(syntax)", f"nests tables, arrays or dotted keys more than {MAX_DEPTH} deep",
                         f"a {what} file nests a few levels; flatten it")
    return data
