"""A run's largest Parquet files encoded in the background while the run is still being finished (issue 25).

A real program's operation table exists before its event table is built, and the event table before its wait
states and summary: when the run is going to be written to a results folder (``waitlab run -o``), one background
thread encodes ``ops.parquet`` while the main thread builds the event table, and a second one ``events.parquet`` as
soon as that table exists (not after ``ops.parquet``) while the main thread finds the wait states, and the first of
them free then ``waits.parquet`` (pyarrow encodes without Python's lock, so the threads share the machine's cores).
:func:`waitlab.experiments.results.write_result` then writes the bytes it finds ready, if they were encoded from
the very tables (the same objects) and metadata it writes; anything else it encodes itself, as before.  Each file
is encoded by one thread in one pass, so its bytes are those :func:`waitlab.simulator.export.write_table` writes
(tested).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from waitlab.models.ops import OpTable
from waitlab.simulator.chrome_trace import Chunks
from waitlab.simulator.export import ROW_GROUP_ROWS, parquet_options, repeating_columns


def write_ops(ops: OpTable, where: Path | pa.NativeFile, metadata: dict[str, Any]) -> None:
    """The operation table as Parquet (a file or an Arrow output stream); names and rank count in its metadata."""
    meta = {b"waitlab": json.dumps({**metadata, "n_ranks": ops.n_ranks, "names": list(ops.names),
                                    "comms": [list(c) for c in ops.comms]}, sort_keys=True).encode()}
    schema = pa.schema([pa.field(c, pa.from_numpy_dtype(getattr(ops, c).dtype), nullable=False)  # numpy: no nulls
                        for c in OpTable.COLUMNS],
                       metadata=meta)
    repeating = repeating_columns({c: getattr(ops, c) for c in OpTable.COLUMNS})
    with pq.ParquetWriter(where, schema, **parquet_options(schema, repeating)) as writer:  # a row group at a time
        for start in range(0, max(len(ops), 1), ROW_GROUP_ROWS):
            part = pa.table({c: getattr(ops, c)[start:start + ROW_GROUP_ROWS] for c in OpTable.COLUMNS},
                            schema=schema)
            writer.write_table(part, row_group_size=ROW_GROUP_ROWS)


def encode_ops(ops: OpTable, metadata: dict[str, Any]) -> pa.Buffer:
    """The bytes :func:`write_ops` writes, in memory."""
    sink = pa.BufferOutputStream()
    write_ops(ops, sink, metadata)
    return sink.getvalue()


#: What a background encoder makes: a file's bytes (a Chrome trace's: its pieces, in order).
Encoded: TypeAlias = pa.Buffer | memoryview | Chunks


@dataclass(frozen=True)
class _Job:
    tables: tuple[object, ...]  # the tables encoded (compared by identity)
    metadata: str  # the metadata as JSON when the job started
    encoded: Future[Encoded]


class Prewritten:
    """Files of one run being encoded in the background (one thread per file), taken by name when the folder is written.

    Examples
    --------
    >>> import pandas as pd
    >>> from waitlab.simulator.export import encode_table
    >>> df, meta = pd.DataFrame({"x": [1, 2]}), {"run": 1}
    >>> pre = Prewritten()
    >>> pre.start("t.parquet", df, meta, lambda: encode_table(df, meta))
    >>> pre.close()
    >>> pre.take("t.parquet", df, meta).result() == encode_table(df, meta)
    True
    >>> pre.take("t.parquet", df, meta) is None  # taken once: the writer encodes it again
    True
    """

    def __init__(self) -> None:
        # ops, events; then waits and the Chrome trace
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="waitlab-prewrite")
        self._jobs: dict[str, _Job] = {}

    def start(self, name: str, table: object | tuple[object, ...], metadata: dict[str, Any],
              encode: Callable[[], Encoded]) -> None:
        """Encode file ``name`` of ``table`` (or of a tuple of tables) with ``metadata`` in the background (a thread
        of its own while two run)."""
        self._jobs[name] = _Job(_as_tuple(table), json.dumps(metadata, sort_keys=True), self._pool.submit(encode))

    def __reduce__(self) -> tuple[type[Prewritten], tuple[()]]:
        """A copy (pickled with its run: process pools, caches) has no jobs: its writer encodes every file."""
        return (Prewritten, ())

    def close(self) -> None:
        """No more jobs: the thread ends when the started ones are done."""
        self._pool.shutdown(wait=False)

    def take(self, name: str, table: object | tuple[object, ...], metadata: dict[str, Any]
             ) -> Future[Encoded] | None:
        """The bytes of file ``name`` to come (``.result()``: an encoder's error is raised there) if they are
        encoded from ``table`` itself (each of a tuple's tables) and the same metadata, else ``None``."""
        job = self._jobs.pop(name, None)
        if job is None or job.metadata != json.dumps(metadata, sort_keys=True):
            return None
        tables = _as_tuple(table)
        same = len(job.tables) == len(tables) and all(a is b for a, b in zip(job.tables, tables, strict=True))
        return job.encoded if same else None


def _as_tuple(table: object | tuple[object, ...]) -> tuple[object, ...]:
    """The tables a job is made from: a tuple of them, or one table."""
    return table if isinstance(table, tuple) else (table,)
