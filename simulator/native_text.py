"""ctypes binding of ``native/waitlab_text.cpp``: rows of text filled from numpy columns by a template, in C++ (issue
25: the Chrome trace of a run, ~20 numbers per record, was a fifth of waitlab's own work around a program run; issue
41: the time-independent trace's lines, one Python string per operation, were the largest part of a replay's work
before SMPI).

A template is a sequence of parts (:class:`Lit`, :class:`Int`, :class:`Us`, :class:`Label`, :class:`IfInt`,
:class:`IfRepr`, :class:`Text`); :func:`text_rows` fills it for every row and joins the rows by ``sep`` (``",\\n"``
by default).

>>> import numpy as np
>>> print(text_rows([Lit('{"ts":'), Us(np.array([1234, -1])), IfInt(',"n":', np.array([5, 6]),
...                  np.array([True, False])), Lit(',"k":'), Label(np.array([1, 0]), ['"a"', '"b"']), Lit("}")], 2))
{"ts":1.2342,"n":5,"k":"b"},
{"ts":-1.9992,"k":"a"}
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.simulator.build import text_library_file
from waitlab.simulator.native_tables import ptr

_LIT, _INT, _US, _LABEL, _IFINT, _TEXT, _IFREPR = range(7)  # the part kinds of native/waitlab_text.cpp
_REPR_CHARS = 24  # the longest repr of a float (-1.7976931348623157e+308)
_INT_CHARS = 20  # the longest int64 in decimal (-9223372036854775808)


@dataclass(frozen=True)
class Lit:
    """A constant text."""

    text: str


@dataclass(frozen=True)
class Int:
    """An integer column in decimal (Python's ``str`` of each value)."""

    values: npt.ArrayLike


@dataclass(frozen=True)
class Us:
    """Integer nanoseconds as microseconds ``"q.rrr2"`` (:func:`waitlab.simulator.chrome_trace.us_text`)."""

    ns: npt.ArrayLike


@dataclass(frozen=True)
class Label:
    """The text ``labels[code]`` of each row's code (every code in ``range(len(labels))``)."""

    codes: npt.ArrayLike
    labels: Sequence[str]


@dataclass(frozen=True)
class IfInt:
    """``text`` and the row's integer in decimal where ``mask`` holds, else nothing."""

    text: str
    values: npt.ArrayLike
    mask: npt.ArrayLike


@dataclass(frozen=True)
class IfRepr:
    """``text`` and the row's float as Python's ``repr`` writes it where ``mask`` holds, else nothing.

    >>> import numpy as np
    >>> text_rows([IfRepr("x=", np.array([0.1, 5e8, 1e16, 1e-5]), np.array([True, True, True, False]))], 4, sep="|")
    'x=0.1|x=500000000.0|x=1e+16|'
    """

    text: str
    values: npt.ArrayLike
    mask: npt.ArrayLike


@dataclass(frozen=True)
class Text:
    """A text of each row: ``texts[j]`` on row ``rows[j]`` (``rows`` ascending), nothing on the other rows."""

    rows: npt.ArrayLike
    texts: Sequence[str]


Part = Lit | Int | Us | Label | IfInt | IfRepr | Text


class _Texts(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_void_p), ("offsets", ctypes.c_void_p), ("n", ctypes.c_int64)]


@lru_cache(maxsize=1)
def text_library() -> ctypes.CDLL:
    """``native/waitlab_text.cpp``, built (and cached) on first use."""
    dll = ctypes.CDLL(str(text_library_file()))
    p = ctypes.c_void_p
    dll.wl_text_rows.restype = ctypes.c_int64
    dll.wl_text_rows.argtypes = [ctypes.c_int64, ctypes.c_int32, p, p, p, p, p, p, p, ctypes.c_char_p, ctypes.c_int64,
                                 p, ctypes.c_int64]
    return dll


class _Builder:
    """The arrays of one call: int64 and float64 columns, uint8 masks, text tables (kept alive until the call
    returns)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.columns: list[npt.NDArray[Any]] = []
        self.masks: list[npt.NDArray[np.uint8]] = []
        self.tables: list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]] = []

    def column(self, values: npt.ArrayLike, dtype: type = np.int64) -> int:
        v: npt.NDArray[Any] = np.ascontiguousarray(values, dtype=dtype)
        if v.shape != (self.n,):
            raise ValueError(f"a column of {v.size} values for {self.n} rows")
        self.columns.append(v)
        return len(self.columns) - 1

    def mask(self, values: npt.ArrayLike) -> int:
        m = np.ascontiguousarray(values, dtype=np.bool_).view(np.uint8)
        if m.shape != (self.n,):
            raise ValueError(f"a mask of {m.size} values for {self.n} rows")
        self.masks.append(m)
        return len(self.masks) - 1

    def table(self, texts: Sequence[bytes], lengths: npt.NDArray[np.int64] | None = None) -> tuple[int, int]:
        """A text table (its index) and its longest entry; ``lengths``: the entries' lengths, when some are empty
        rows not in ``texts`` (a :class:`Text`)."""
        if lengths is None:
            lengths = np.fromiter((len(t) for t in texts), np.int64, len(texts))
        offsets = np.zeros(lengths.size + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(texts) or b"\0", np.uint8)
        self.tables.append((data, offsets))
        return len(self.tables) - 1, int(lengths.max(initial=0))


def text_rows(parts: Sequence[Part], n: int, sep: str = ",\n") -> str:
    """The ``n`` rows of the template ``parts``, joined by ``sep`` (no separator after the last; at most 8 bytes)."""
    return bytes(text_bytes(parts, n, sep)).decode("utf-8")


def text_bytes(parts: Sequence[Part], n: int, sep: str = ",\n") -> memoryview:
    """:func:`text_rows` encoded as UTF-8, a view of the buffer it was written in (for a file: not copied, not
    decoded)."""
    if n == 0:
        return memoryview(b"")
    build = _Builder(n)
    plan: list[tuple[int, int, int, int]] = []
    separator = sep.encode()
    row_bytes, extra = len(separator), 0  # upper bound of the text: n rows of at most row_bytes, plus extra
    for part in parts:
        if isinstance(part, Lit):
            t, longest = build.table([part.text.encode()])
            plan.append((_LIT, t, 0, 0))
            row_bytes += longest
        elif isinstance(part, Int):
            plan.append((_INT, build.column(part.values), 0, 0))
            row_bytes += _INT_CHARS
        elif isinstance(part, Us):
            plan.append((_US, build.column(part.ns), 0, 0))
            row_bytes += _INT_CHARS + 5  # ".rrr2"
        elif isinstance(part, Label):
            encoded = [s.encode() for s in part.labels]
            t, _ = build.table(encoded)
            codes = build.columns[build.column(part.codes)]
            plan.append((_LABEL, len(build.columns) - 1, t, 0))
            sizes = np.fromiter((len(e) for e in encoded), np.int64, len(encoded))
            # each row's own label (a sub-communicator's member list can be 100 kB long: not n times the longest)
            extra += int(sizes[codes[(codes >= 0) & (codes < sizes.size)]].sum())
        elif isinstance(part, IfInt):
            t, longest = build.table([part.text.encode()])
            plan.append((_IFINT, build.column(part.values), build.mask(part.mask), t))
            row_bytes += longest + _INT_CHARS
        elif isinstance(part, IfRepr):
            t, longest = build.table([part.text.encode()])
            plan.append((_IFREPR, build.column(part.values, np.float64), build.mask(part.mask), t))
            row_bytes += longest + _REPR_CHARS
        else:
            encoded = [s.encode() for s in part.texts]
            lengths = np.zeros(n, np.int64)
            lengths[np.asarray(part.rows, np.int64)] = [len(e) for e in encoded]
            t, _ = build.table(encoded, lengths)
            plan.append((_TEXT, t, 0, 0))
            extra += int(lengths.sum())
    return _fill(build, plan, separator, n * row_bytes + extra + 64)


def _fill(build: _Builder, plan: list[tuple[int, int, int, int]], sep: bytes, cap: int) -> memoryview:
    kind, a, b, c = (np.array([p[i] for p in plan], np.int32) for i in range(4))
    columns = (ctypes.c_void_p * max(len(build.columns), 1))(*(ptr(x) for x in build.columns))
    masks = (ctypes.c_void_p * max(len(build.masks), 1))(*(ptr(x) for x in build.masks))
    tables = (_Texts * max(len(build.tables), 1))(*(_Texts(ptr(d), ptr(o), o.size - 1) for d, o in build.tables))
    out = np.empty(cap, np.uint8)
    if len(sep) > 8:
        raise ValueError(f"a separator of {len(sep)} bytes (at most 8)")
    written = text_library().wl_text_rows(build.n, len(plan), *(ptr(x) for x in (kind, a, b, c)), columns, masks,
                                          tables, sep, len(sep), ptr(out), cap)
    if written < 0:  # a code outside its labels (the caller's error), or the bound above is wrong
        raise SimulationError("cannot write the rows of a text table: a label code is outside its labels")
    return out.data[:written]
