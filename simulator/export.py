"""Tables as files: Parquet (with the run's metadata) and CSV (the Chrome/Perfetto trace: :mod:`.chrome_trace`).

A table is written from an Arrow table (a run's, without pandas) or from a pandas DataFrame (its pandas schema is
kept in the file); the same columns give the same file contents either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from waitlab.models import columns
from waitlab.models.columns import Table, is_arrow, text_array, widened

if TYPE_CHECKING:
    import pandas as pd

#: Event tables larger than this are written as Parquet only (no CSV copy).
CSV_MAX_ROWS = 200_000
#: Rows the CSV writer formats per batch (pyarrow's default: 1,024): the same bytes, 15% less CPU on a 195,000-row
#: wait-state table (68 -> 57 ms, best of five; issue 25).
CSV_BATCH_ROWS = 32 * 1024
#: Values the Parquet writer takes per batch (pyarrow's default: 1,024).  The same bytes (its pages are cut by size
#: either way), 10% less CPU on a 1.2 M-event table (0.217 -> 0.196 s, median of 6; issue 25).
WRITE_BATCH_ROWS = 64 * 1024
#: Rows per Parquet row group (pyarrow's default), written one at a time by :func:`write_table`.
ROW_GROUP_ROWS = 1024 * 1024


def parquet_options(schema: pa.Schema, repeating: Collection[str] = ()) -> dict[str, Any]:
    """The Parquet writer settings of every table waitlab writes (issue 25: half the CPU time, half the bytes).

    zstd compression; a dictionary only for dictionary (categorical) columns, whose values repeat by design;
    numbers are not tried against a dictionary (pyarrow's default tries one on every column, and times, row
    references and sequence numbers are nearly all distinct): every number is split into byte streams (its high
    bytes repeat from row to row, which zstd then takes almost whole).  For integers this is the format's 2024
    addition (parquet-format 2.11); before, integers were delta-encoded: the event table of a 4.2 M-event run
    took 0.73 CPU s and 30.2 MB that way, 0.55 s and 23.2 MB split (message ids: 4.89 -> 0.31 MB).  Column
    statistics (min/max per row group, for readers that skip row groups) are written for the numeric columns only:
    on a categorical column they cost a pass over every row's label.  Read back by pyarrow (17 and later), DuckDB
    (2.0) and polars (2.1), checked on that run's table.  Floating-point columns named in ``repeating``
    (:func:`repeating_columns`: values that repeat, such as a program's operation values, durations and byte
    counts) are written plain instead: zstd then finds each repeated value whole, where the split scatters it over
    eight streams (the operations' values of a 2.3 M-operation run: 35 -> 10 ms, 0.79 -> 0.07 MB).

    >>> kind = pa.dictionary(pa.int8(), pa.string())
    >>> o = parquet_options(pa.schema([("t", pa.float64()), ("n", pa.int32()), ("k", kind)]))
    >>> o["use_dictionary"], o["column_encoding"], o["write_statistics"]
    (['k'], {'t': 'BYTE_STREAM_SPLIT', 'n': 'BYTE_STREAM_SPLIT'}, ['t', 'n'])
    >>> parquet_options(pa.schema([("t", pa.float64()), ("n", pa.int32())]), repeating=["t"])["column_encoding"]
    {'t': 'PLAIN', 'n': 'BYTE_STREAM_SPLIT'}
    """
    encoding = {f.name: "PLAIN" if f.name in repeating and pa.types.is_floating(f.type) else "BYTE_STREAM_SPLIT"
                for f in schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)}
    categorical = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    return {"compression": "zstd", "use_dictionary": categorical, "column_encoding": encoding,
            "write_statistics": [f.name for f in schema if f.name not in categorical],
            "write_batch_size": WRITE_BATCH_ROWS}


#: Values :func:`repeating_columns` looks at per column (evenly spaced), and the largest share of distinct ones
#: among them for the column to count as repeating.
REPEAT_SAMPLE = 4096
REPEAT_DISTINCT = 1 / 8


def repeating_columns(columns: Mapping[str, Any]) -> list[str]:
    """The floating-point columns (numpy arrays) whose values repeat: of :data:`REPEAT_SAMPLE` values evenly spaced
    over the column, at most one in eight distinct (a property of the data: the same table gives the same answer).

    >>> repeating_columns({"bytes": np.repeat([8.0, 32768.0], 5000), "t": np.linspace(0, 1, 10000),
    ...                    "n": np.zeros(10, np.int32)})
    ['bytes']
    """
    out = []
    for name, values in columns.items():
        if isinstance(values, np.ndarray) and values.dtype.kind == "f" and len(values):
            sample = np.sort(values[::max(1, len(values) // REPEAT_SAMPLE)])  # (np.unique imports numpy.ma)
            known = sample[~np.isnan(sample)]  # NaN last; all NaN count as one value, as np.unique counts them
            distinct = (1 + int(np.count_nonzero(known[1:] != known[:-1])) if known.size else 0) + int(
                known.size < sample.size)
            if distinct <= REPEAT_DISTINCT * len(sample):
                out.append(name)
    return out


def required(schema: pa.Schema, with_nulls: set[str] | frozenset[str] = frozenset()) -> pa.Schema:
    """``schema`` with every field but ``with_nulls`` marked required (not nullable).

    A required Parquet column has no definition levels: its writer skips a level per value (about a fifth of
    the encoding time of the event table, issue 25) and its readers read the same values.  A column is written
    nullable only when it has a missing value (pandas' NaN in a float column, a missing category) or no type of
    its own (an empty column of Arrow's null type).

    >>> required(pa.schema([("t", pa.float64()), ("x", pa.float64())]), {"x"})
    t: double not null
    x: double
    """
    return pa.schema([f.with_nullable(f.name in with_nulls or pa.types.is_null(f.type)) for f in schema],
                     metadata=schema.metadata)


def _with_waitlab(schema: pa.Schema, metadata: dict[str, Any]) -> dict[bytes, bytes]:
    """The schema's metadata (pandas') with waitlab's run metadata under the key ``waitlab``."""
    meta = dict(schema.metadata or {})
    meta[b"waitlab"] = json.dumps(metadata, sort_keys=True).encode()
    return meta


def _widened(df: pd.DataFrame, int64: Sequence[str]) -> pd.DataFrame:
    """``df`` with the integer columns ``int64`` (those present) as int64 (a shallow copy; others shared)."""
    cols = [c for c in int64 if c in df and df[c].dtype != np.int64]
    return df.astype({c: np.int64 for c in cols}) if cols else df


def _arrow_rows(df: pd.DataFrame, start: int, stop: int, schema: pa.Schema, int64: Sequence[str]) -> pa.Table:
    """Rows ``start:stop`` of ``df`` as an Arrow table of ``schema``: numpy and categorical columns are converted
    column by column (what ``pa.Table.from_pandas`` gives, without its inference on every call: a third of its
    time), any other column type through ``from_pandas``."""
    import pandas as pd  # ``df`` is pandas': pandas is loaded

    arrays = []
    for f in schema:
        col = df[f.name]
        if isinstance(col.dtype, pd.CategoricalDtype) and pa.types.is_dictionary(f.type):
            codes = col.cat.codes.to_numpy()[start:stop]
            missing = codes < 0
            arrays.append(pa.DictionaryArray.from_arrays(
                pa.array(codes, f.type.index_type, mask=missing if missing.any() else None),
                pa.array(col.cat.categories.to_numpy(), f.type.value_type), ordered=f.type.ordered))
        elif isinstance(col.dtype, np.dtype) and col.dtype.kind in "iufb":
            arrays.append(pa.array(col.to_numpy()[start:stop], f.type, from_pandas=True))  # NaN -> null, as pandas
        else:
            return pa.Table.from_pandas(_widened(df.iloc[start:stop], int64), schema=schema, preserve_index=False)
    return pa.Table.from_arrays(arrays, schema=schema)


def _as_written(table: pa.Table, int64: Sequence[str]) -> pa.Table:
    """An Arrow table's columns as a pandas DataFrame of the same columns is written (``pa.Table.from_pandas``):
    the integer columns named in ``int64`` as int64, a floating-point NaN as a missing value, text as
    ``large_string`` (pandas' string columns); other columns shared, not copied.

    >>> t = _as_written(pa.table({"n": pa.array([1], pa.int32()), "x": [float("nan")], "s": ["a"]}), ["n"])
    >>> [str(f.type) for f in t.schema], t.column("x").null_count
    (['int64', 'double', 'large_string'], 1)
    """
    for i, f in enumerate(table.schema):
        col = table.column(i)
        if f.name in int64 and pa.types.is_integer(f.type) and f.type != pa.int64():
            col = _each_chunk(col, lambda a: widened(a, pa.int64()), pa.int64())
        elif pa.types.is_floating(f.type) and len(col) and np.isnan(v := columns.values(table, f.name)).any():
            col = columns.arrow_array(v, missing=np.isnan(v))  # NaN (and null) -> null
        elif pa.types.is_string(f.type):
            col = _each_chunk(col, lambda a: text_array(a, large=True), pa.large_string())
        else:
            continue
        table = table.set_column(i, f.name, col)
    return table


def _each_chunk(col: pa.ChunkedArray, convert: Callable[[pa.Array], pa.Array], type: pa.DataType
                ) -> pa.ChunkedArray:
    """``convert`` of each chunk of ``col`` (pyarrow's ``cast`` loads its compute module: 0.07 s a run)."""
    return pa.chunked_array([convert(c) for c in col.chunks], type)


def _csv_columns(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary (categorical) columns as their labels, as the CSV holds them."""
    return pa.Table.from_arrays(
        [_each_chunk(table.column(i), lambda a: text_array(a, pa.types.is_large_string(a.type.value_type)),
                     f.type.value_type) if pa.types.is_dictionary(f.type)
         else table.column(i) for i, f in enumerate(table.schema)], names=table.column_names)


def write_table(df: Table, path: Path, metadata: dict[str, Any], csv: bool = True,
                row_group_rows: int = ROW_GROUP_ROWS, int64: Sequence[str] = ()) -> None:
    """Write ``df`` (an Arrow table or a pandas DataFrame) as Parquet (metadata under the key ``waitlab``) and,
    optionally, CSV beside it.

    The Parquet file is written one row group of ``row_group_rows`` rows at a time, each converted from
    its slice of ``df`` just before it is written, so no Arrow copy of the whole table is held; the bytes
    are those of ``pyarrow.parquet.write_table`` with the same row group size and :func:`parquet_options`.  Columns
    named in ``int64`` are written as int64 whatever their type in memory (the event table's row references).
    An Arrow table is written as the DataFrame of the same columns (:func:`_as_written`), without its pandas
    schema; the CSV's bytes are the same.
    """
    write_parquet(df, path, metadata, row_group_rows, int64)
    if csv and len(df) <= CSV_MAX_ROWS:
        # pyarrow's C++ writer: ~10x faster than pandas; categoricals are written as their labels
        table = _as_written(df, int64) if is_arrow(df) else pa.Table.from_pandas(_widened(df, int64),
                                                                                 preserve_index=False)
        pacsv.write_csv(_csv_columns(table), path.with_suffix(".csv"),
                        pacsv.WriteOptions(batch_size=CSV_BATCH_ROWS))


def write_parquet(df: Table, where: Path | pa.NativeFile, metadata: dict[str, Any],
                  row_group_rows: int = ROW_GROUP_ROWS, int64: Sequence[str] = ()) -> None:
    """The Parquet part of :func:`write_table`, into a file or an Arrow output stream (the same bytes)."""
    if is_arrow(df):
        table = _as_written(df, int64)
        schema = required(table.schema, {f.name for f in table.schema if table.column(f.name).null_count})
        schema = schema.with_metadata(_with_waitlab(schema, metadata))
        parts: Iterator[pa.Table] = (pa.Table.from_arrays(table.slice(start, row_group_rows).columns, schema=schema)
                                     for start in range(0, max(len(table), 1), row_group_rows))
    elif len(df) <= row_group_rows:
        table = pa.Table.from_pandas(_widened(df, int64), preserve_index=False)
        schema = required(table.schema, {f.name for f in table.schema if table.column(f.name).null_count})
        table = table.cast(schema).replace_schema_metadata(_with_waitlab(schema, metadata))
        schema = table.schema
        parts = iter([table])
    else:
        schema = pa.Schema.from_pandas(_widened(df.iloc[:1], int64), preserve_index=False)
        schema = required(schema, {c for c in schema.names if df[c].hasnans})
        schema = schema.with_metadata(_with_waitlab(schema, metadata))
        parts = (_arrow_rows(df, start, start + row_group_rows, schema, int64)
                 for start in range(0, len(df), row_group_rows))
    with pq.ParquetWriter(where, schema, **parquet_options(schema, _repeating(df))) as writer:
        for part in parts:
            writer.write_table(part, row_group_size=row_group_rows)
            del part


def read_table(path: Path, int32: Collection[str] = ()) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a table written by :func:`write_table` and its waitlab metadata.

    Each column becomes its own block and Arrow's copy is freed column by column as it is converted
    (``split_blocks``, ``self_destruct``): a 7.2 M-event table peaks at 1.2 GB instead of 1.7 GB and converts in
    0.9 s of CPU instead of 2.2 s.  Columns named in ``int32`` (written as int64 by :func:`write_table`'s ``int64``)
    are read back as int32, as they were in memory, when the table has fewer than 2**31 rows (an event table's row
    references: 115 MB less at 7.2 M events)."""
    table = pq.read_table(path)
    if table.num_rows < 2**31:
        for c in int32:
            if c in table.column_names and table.schema.field(c).type == pa.int64():
                table = table.set_column(table.column_names.index(c), c, table.column(c).cast(pa.int32()))
    meta = json.loads((table.schema.metadata or {}).get(b"waitlab", b"{}"))
    return table.to_pandas(split_blocks=True, self_destruct=True), meta


def _repeating(df: Table) -> list[str]:
    """:func:`repeating_columns` of ``df``'s floating-point columns (numpy ones of a DataFrame)."""
    if is_arrow(df):
        return repeating_columns({c: columns.values(df, c) for c in columns.names(df)
                                  if pa.types.is_floating(df.schema.field(c).type)})
    return repeating_columns({c: df[c].to_numpy() for c in df.columns
                              if isinstance(df[c].dtype, np.dtype) and df[c].dtype.kind == "f"})
