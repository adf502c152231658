"""The columns of a table, held by pyarrow or by pandas: what the run path reads and builds without pandas.

``waitlab run`` keeps its tables (events, wait states, the rank budget, the placement, the ledger) as
``pyarrow.Table``: pyarrow writes them (Parquet, CSV) and is loaded anyway, where importing pandas alone costs
0.2-0.3 s of every command (docs/performance.md).  The same analyses take a pandas ``DataFrame`` (a results folder
read back, a table a user made, the tests' hand-made tables) and give one back: a function reads its input's
columns here as numpy arrays, builds its output with :func:`table` and returns it in its input's kind
(``like=``).  A categorical column (pandas ``Categorical``, Arrow dictionary) is its integer codes (-1: missing) and
its categories, in their order; :func:`frame` gives the pandas view users know (``RunResult.events``).

pyarrow's own conversions between numpy and Arrow (``pa.array``, ``Array.to_numpy``, ``np.asarray`` of an array,
``fill_null``) import pandas when it is installed (pyarrow's pandas shim checks every object against pandas' types),
so the columns cross here through their buffers (:func:`arrow_array`, :func:`numpy_array`: Arrow's columnar format,
the same bytes without a copy for numbers); code reached with Arrow tables on a run's path uses these and never
those.

>>> t = table({"rank": np.array([0, 1], np.int32), "op": Coded(np.array([1, 0]), ["send", "recv"])})
>>> t.num_rows, has(t, "op"), has(t, "peer")
(2, True, False)
>>> codes(t, "op")[0].tolist(), codes(t, "op")[1]
([1, 0], ['send', 'recv'])
>>> values(t, "rank").tolist()
[0, 1]
>>> f = frame(t)
>>> list(f["op"]), str(f["rank"].dtype)
(['recv', 'send'], 'int32')
>>> codes(f, "op")[1], values(table({"x": np.zeros(1)}, like=f), "x").tolist()
(['send', 'recv'], [0.0])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

#: A table of named columns: an Arrow table (the run path) or a pandas DataFrame (everything read back or hand-made).
Table = Union[pa.Table, "pd.DataFrame"]


class Coded(NamedTuple):
    """A categorical column: each row's code into ``categories`` (-1: missing)."""

    codes: npt.NDArray[np.integer[Any]]
    categories: Sequence[str]


def is_arrow(t: Table) -> bool:
    """Whether ``t`` is an Arrow table (else a pandas DataFrame)."""
    return isinstance(t, pa.Table)


def names(t: Table) -> list[str]:
    """The column names, in order."""
    return list(t.column_names) if is_arrow(t) else [str(c) for c in t.columns]


def has(t: Table, name: str) -> bool:
    """Whether ``t`` has the column ``name``."""
    return name in (t.column_names if is_arrow(t) else t.columns)


def _array(t: pa.Table, name: str) -> pa.Array:
    col = t.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


#: numpy's name of each Arrow number type whose name differs (the others are spelt alike: ``int32``, ``uint8``).
_NUMPY_NAME = {"double": "float64", "float": "float32", "halffloat": "float16"}


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_]:
    """Each value's validity (Arrow's bitmap, least significant bit first)."""
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def _texts(arr: pa.Array) -> list[str]:
    """A string array's values (null: ``""``)."""
    return ["" if v is None else str(v) for v in arr.to_pylist()]


def numpy_array(arr: pa.Array) -> npt.NDArray[Any]:
    """An Arrow array as numpy, from its buffers: numbers as a read-only view (a number column with missing values:
    float64 with NaN there, as pyarrow and pandas give it), booleans unpacked, text as an object array, a dictionary
    array as its labels.

    >>> numpy_array(arrow_array(np.array([1.5, 2.0]))).tolist(), numpy_array(arrow_array(np.array([True, False])))
    ([1.5, 2.0], array([ True, False]))
    >>> numpy_array(arrow_array(np.array(["a", "bc"], dtype=object))).tolist()
    ['a', 'bc']
    """
    t = arr.type
    if pa.types.is_dictionary(t):
        labels = np.array([*_texts(arr.dictionary), None], dtype=object)  # the last: a missing label
        idx = numpy_array(arr.indices)
        return labels[np.where(np.isnan(idx), -1, idx).astype(np.intp) if idx.dtype.kind == "f" else idx]
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return np.array(arr.to_pylist(), dtype=object)
    if pa.types.is_boolean(t):
        bits = np.frombuffer(arr.buffers()[1], np.uint8)
        return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise TypeError(f"no numpy view of an Arrow {t} column here")
    dtype = np.dtype(_NUMPY_NAME.get(str(t), str(t)))
    buf = arr.buffers()[1]
    out = np.frombuffer(buf, dtype, count=len(arr), offset=arr.offset * dtype.itemsize) if len(arr) else np.zeros(
        0, dtype)
    if arr.null_count:
        out = out.astype(np.float64)
        out[~_valid(arr)] = np.nan
    return out


def arrow_array(values: npt.ArrayLike, type: pa.DataType | None = None,
                missing: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """A numpy array (numbers, booleans, text) as an Arrow array through its buffers (numbers without a copy);
    ``type``: a number type to cast to; ``missing``: rows to mark null (text: ``None`` is missing too).

    >>> arrow_array(np.array(["a", None], dtype=object)).to_pylist(), arrow_array(np.array([1, 2]), pa.int32(),
    ...                                                                           np.array([False, True])).to_pylist()
    (['a', None], [1, None])
    """
    v = np.asarray(values)
    if v.dtype.kind in "OUS":
        items = v.tolist()
        none = np.array([x is None for x in items], bool) if v.dtype.kind == "O" else np.zeros(len(items), bool)
        if missing is not None:
            none |= np.asarray(missing, bool)
        data = [b"" if gone else str(x).encode() for x, gone in zip(items, none.tolist(), strict=True)]
        offsets = np.zeros(len(data) + 1, np.int64)
        np.cumsum([len(b) for b in data], out=offsets[1:])
        big = offsets[-1] >= 1 << 31
        n_none = int(np.count_nonzero(none))
        arr: pa.Array = (pa.LargeStringArray if big else pa.StringArray).from_buffers(
            len(data), pa.py_buffer(offsets if big else offsets.astype(np.int32)), pa.py_buffer(b"".join(data)),
            pa.py_buffer(np.packbits(~none, bitorder="little")) if n_none else None, n_none)
        return arr
    validity = None
    if missing is not None and missing.any():
        validity = pa.py_buffer(np.packbits(~np.asarray(missing, bool), bitorder="little"))
    n_null = int(np.count_nonzero(missing)) if validity is not None and missing is not None else 0
    if v.dtype.kind == "b":
        return pa.Array.from_buffers(pa.bool_(), len(v), [validity, pa.py_buffer(np.packbits(v, bitorder="little"))],
                                     null_count=n_null)
    if type is not None:
        v = v.astype(np.dtype(_NUMPY_NAME.get(str(type), str(type))), copy=False)
    v = np.ascontiguousarray(v)
    return pa.Array.from_buffers(pa.from_numpy_dtype(v.dtype), len(v), [validity, pa.py_buffer(v)],
                                 null_count=n_null)


def text_array(arr: pa.Array, large: bool = False) -> pa.Array:
    """A dictionary or text array as plain text (``large``: Arrow's ``large_string``), made from its buffers: what
    ``arr.cast(pa.string())`` gives without pyarrow's compute module (0.07 s to import on every run).

    >>> a = coded_array(Coded(np.array([1, -1, 0, 1]), ["x", "long"]))
    >>> text_array(a).to_pylist(), str(text_array(a, large=True).type)
    (['long', None, 'x', 'long'], 'large_string')
    """
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        if pa.types.is_large_string(arr.type) == large:
            return arr
        offsets, data = _text_buffers(arr)
        n_null, valid = arr.null_count, _valid(arr) if arr.null_count else None
        rows = np.arange(len(arr))
    else:
        if not pa.types.is_dictionary(arr.type):
            raise TypeError(f"no text of an Arrow {arr.type} column")
        offsets, data = _text_buffers(arr.dictionary)
        idx = numpy_array(arr.indices)
        valid = ~np.isnan(idx) if idx.dtype.kind == "f" else None
        rows = np.where(valid, idx, 0).astype(np.int64) if valid is not None else idx.astype(np.int64)
        n_null = 0 if valid is None else int(np.count_nonzero(~valid))
    lengths = (offsets[1:] - offsets[:-1])[rows]
    if valid is not None:
        lengths[~valid] = 0
    out_offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    gather = np.repeat(offsets[:-1][rows] - out_offsets[:-1], lengths) + np.arange(out_offsets[-1])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None and n_null else None
    big = large or out_offsets[-1] >= 1 << 31
    return (pa.LargeStringArray if big else pa.StringArray).from_buffers(
        len(rows), pa.py_buffer(out_offsets if big else out_offsets.astype(np.int32)), pa.py_buffer(data[gather]),
        bitmap, n_null)


def _text_buffers(arr: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """A text array's value offsets (int64) and bytes."""
    wide = pa.types.is_large_string(arr.type)
    _, off, data = arr.buffers()
    offsets = np.frombuffer(off, np.int64 if wide else np.int32, count=len(arr) + 1, offset=arr.offset * (
        8 if wide else 4)).astype(np.int64) if off is not None else np.zeros(len(arr) + 1, np.int64)
    return offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def widened(arr: pa.Array, type: pa.DataType) -> pa.Array:
    """An integer array as the wider integer ``type`` (nulls kept), from its buffers (no compute module).

    >>> widened(arrow_array(np.array([1, 2], np.int32)), pa.int64()).type
    DataType(int64)
    """
    v = numpy_array(arr)
    missing = np.isnan(v) if v.dtype.kind == "f" else None
    return arrow_array(np.where(missing, 0, v) if missing is not None else v, type, missing)


def is_coded(t: Table, name: str) -> bool:
    """Whether the column ``name`` is categorical (Arrow dictionary, pandas ``Categorical``)."""
    if is_arrow(t):
        return pa.types.is_dictionary(t.schema.field(name).type)
    import pandas as pd  # the table is pandas': pandas is loaded

    return isinstance(t[name].dtype, pd.CategoricalDtype)


def values(t: Table, name: str) -> npt.NDArray[Any]:
    """The column ``name`` as a numpy array (a view where the library allows: copy before writing into it); a
    categorical column gives its labels (object array: prefer :func:`codes`)."""
    if not is_arrow(t):
        return np.asarray(t[name].to_numpy())
    return numpy_array(_array(t, name))


def codes(t: Table, name: str) -> tuple[npt.NDArray[np.integer[Any]], list[str]]:
    """A categorical column's codes (-1: missing) and categories; any other column is made categorical here
    (its distinct values, sorted, as text)."""
    if is_arrow(t):
        arr = _array(t, name)
        if not pa.types.is_dictionary(arr.type):  # as pandas.Categorical makes it: sorted values, missing -1
            v = numpy_array(arr)
            gone = np.array([x is None for x in v.tolist()], bool) if v.dtype.kind == "O" else np.isnan(v) \
                if v.dtype.kind == "f" else np.zeros(len(v), bool)
            out = np.full(len(v), -1, np.int64)
            cats, inverse = np.unique(v[~gone].astype(str) if v.dtype.kind == "O" else v[~gone], return_inverse=True)
            out[~gone] = inverse.reshape(-1)
            return out, [str(c) for c in cats.tolist()]
        idx = numpy_array(arr.indices)
        if idx.dtype.kind == "f":  # missing codes
            idx = np.where(np.isnan(idx), -1, idx).astype(np.int64)
        return idx, _texts(arr.dictionary)
    import pandas as pd  # the table is pandas': pandas is loaded

    col = t[name]
    cat = col.array if isinstance(col.dtype, pd.CategoricalDtype) else pd.Categorical(col)
    return np.asarray(cat.codes), [str(c) for c in cat.categories]


def _index_type(n: int) -> pa.DataType:
    return pa.int8() if n < 1 << 7 else pa.int16() if n < 1 << 15 else pa.int32()


def coded_array(c: Coded) -> pa.DictionaryArray:
    """A categorical column as an Arrow dictionary array (missing where the code is negative)."""
    cats = list(c.categories)
    idx = np.asarray(c.codes)
    missing = idx < 0
    return pa.DictionaryArray.from_arrays(arrow_array(np.where(missing, 0, idx), _index_type(len(cats)), missing),
                                          arrow_array(np.array(cats, dtype=object)))


def table(cols: Mapping[str, npt.NDArray[Any] | Coded], like: Table | None = None) -> Table:
    """A table of ``cols`` (numpy arrays, :class:`Coded` categoricals): a pandas DataFrame when ``like`` is one,
    else an Arrow table."""
    if like is not None and not is_arrow(like):
        import pandas as pd  # ``like`` is pandas': pandas is loaded

        return pd.DataFrame({k: pd.Categorical.from_codes(np.asarray(v.codes), categories=list(v.categories))
                             if isinstance(v, Coded) else v for k, v in cols.items()})
    return pa.table({k: coded_array(v) if isinstance(v, Coded) else arrow_array(v) for k, v in cols.items()})


def frame(t: Table) -> pd.DataFrame:
    """``t`` as a pandas DataFrame (categoricals as ``Categorical``; a DataFrame is returned as is).  Its number
    columns are views of the Arrow table's buffers (``split_blocks``: no copy, 10 times faster; read-only, as pandas'
    copy-on-write leaves them), so a run's tables and their DataFrames do not take the memory twice."""
    return t.to_pandas(split_blocks=True) if is_arrow(t) else t


def take(t: Table, name: str, rows: npt.NDArray[np.integer[Any]]) -> npt.NDArray[Any] | Coded:
    """The column ``name`` at ``rows``, categorical columns as :class:`Coded` (their categories kept)."""
    if is_coded(t, name):
        c, cats = codes(t, name)
        return Coded(c[rows], cats)
    return values(t, name)[rows]


def take_rows(t: pa.Table, rows: npt.NDArray[np.integer[Any]] | npt.NDArray[np.bool_]) -> pa.Table:
    """The rows ``rows`` (indices, or a mask) of an Arrow table, column by column through numpy (pyarrow's
    ``filter`` and ``take`` load its compute module: 0.07 s a run); categorical columns keep their categories.

    >>> t = table({"x": np.array([1.0, 2.0, 3.0]), "k": Coded(np.array([0, 1, 0]), ["a", "b"])})
    >>> take_rows(t, np.array([True, False, True])).to_pydict()
    {'x': [1.0, 3.0], 'k': ['a', 'a']}
    """
    idx = np.flatnonzero(rows) if np.asarray(rows).dtype == np.bool_ else np.asarray(rows, np.int64)
    out = {}
    for name in t.column_names:
        col = take(t, name, idx)
        kind = t.schema.field(name).type
        arr = _array(t, name)
        missing = ~_valid(arr)[idx] if arr.null_count and not isinstance(col, Coded) else None
        if isinstance(col, Coded):
            out[name] = coded_array(col)
        elif col.dtype.kind in "iufb" and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            out[name] = arrow_array(np.where(missing, 0, col) if missing is not None else col, kind, missing)
        else:
            out[name] = arrow_array(col, missing=missing)
    return pa.table(out)


def text_columns(t: Table) -> Table:
    """``t`` with its categorical columns as plain text (an Arrow table's dictionary columns; a DataFrame as is)."""
    if not is_arrow(t):
        return t
    return pa.Table.from_arrays([pa.chunked_array([text_array(c, pa.types.is_large_string(f.type.value_type))
                                                   for c in t.column(i).chunks], f.type.value_type)
                                 if pa.types.is_dictionary(f.type) else t.column(i)
                                 for i, f in enumerate(t.schema)], names=t.column_names)
