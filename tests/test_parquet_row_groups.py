"""Tables written one Parquet row group at a time (issue 15) have pyarrow's own bytes and read back whole; the
writer's settings (issue 25: no dictionary on numbers, delta-encoded integers, byte-split floats, columns without a
missing value required) are pinned."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from waitlab.simulator.export import parquet_options, read_table, write_table


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({
        "rank": rng.integers(0, 64, n).astype(np.int32),
        "op": pd.Categorical.from_codes(rng.integers(0, 3, n), categories=["send", "recv", "barrier"]),
        "enter": rng.uniform(0, 1, n),
        "match": rng.integers(-1, 1000, n),
        "flag": rng.uniform(0, 1, n) < 0.5,
        # missing values: a category (code -1) and a float (NaN) are nulls in the file, as pyarrow writes them
        "kind": pd.Categorical.from_codes(rng.integers(-1, 2, n), categories=["a", "b"]),
        "excess": np.where(rng.uniform(0, 1, n) < 0.1, np.nan, 1.0),
        "label": np.array(["x", "y"], dtype=object)[rng.integers(0, 2, n)],
    })


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("rows", [1, 999, 1000, 1001, 4000])
@pytest.mark.parametrize("text", [False, True])
def test_row_groups_give_pyarrows_bytes(tmp_path: Path, rows: int, text: bool) -> None:
    """Numeric and categorical columns are converted column by column; a text column sends the row group through
    pandas' conversion: both give pyarrow's bytes."""
    df = _frame(rows) if text else _frame(rows).drop(columns="label")
    meta = {"ranks": 64, "scenario": "row-groups"}
    write_table(df, tmp_path / "ours.parquet", meta, csv=False, row_group_rows=1000)
    # the independent method: pyarrow converts the whole table, then writes it in row groups of the same size
    table = pa.Table.from_pandas(df, preserve_index=False)
    # columns without a missing value are required (no definition levels): ``kind`` and ``excess`` have some
    table = table.cast(pa.schema([f.with_nullable(table.column(f.name).null_count > 0) for f in table.schema],
                                 metadata=table.schema.metadata))
    schema_meta = {**(table.schema.metadata or {}), b"waitlab": b'{"ranks": 64, "scenario": "row-groups"}'}
    pq.write_table(table.replace_schema_metadata(schema_meta), tmp_path / "whole.parquet", row_group_size=1000,
                   compression="zstd", use_dictionary=["op", "kind"],
                   write_statistics=["rank", "enter", "match", "flag", "excess", "label"][:6 if text else 5],
                   column_encoding={"rank": "BYTE_STREAM_SPLIT", "enter": "BYTE_STREAM_SPLIT",
                                    "match": "BYTE_STREAM_SPLIT",
                                    # excess repeats (1.0 or NaN): plain once 2 values are at most 1 in 8 of them
                                    "excess": "PLAIN" if rows >= 16 else "BYTE_STREAM_SPLIT"})
    assert _sha(tmp_path / "ours.parquet") == _sha(tmp_path / "whole.parquet")
    assert pq.ParquetFile(tmp_path / "ours.parquet").metadata.num_row_groups == -(-rows // 1000)
    back, got_meta = read_table(tmp_path / "ours.parquet")
    pd.testing.assert_frame_equal(back, df)
    assert got_meta == meta


def test_small_tables_keep_their_csv(tmp_path: Path) -> None:
    df = _frame(2500)
    write_table(df, tmp_path / "t.parquet", {}, row_group_rows=1000)
    csv = pd.read_csv(tmp_path / "t.csv")
    assert csv["op"].tolist() == df["op"].astype(str).tolist()
    np.testing.assert_array_equal(csv["match"].to_numpy(), df["match"].to_numpy())


def test_writer_settings_are_pinned(tmp_path: Path) -> None:
    """The settings chosen for speed and size (docs/performance.md, issue 25), read back from the file: zstd on
    every column, a dictionary on the categorical column only, every number split into byte streams but a
    floating-point column whose values repeat (``excess``: 1.0 or missing), which is plain, min/max statistics on
    the numeric columns only."""
    df = _frame(5000)
    write_table(df, tmp_path / "t.parquet", {}, csv=False, row_group_rows=1000)
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata
    want = {"rank": "BYTE_STREAM_SPLIT", "op": "RLE_DICTIONARY", "kind": "RLE_DICTIONARY",
            "enter": "BYTE_STREAM_SPLIT", "excess": "PLAIN", "match": "BYTE_STREAM_SPLIT"}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            assert col.compression == "ZSTD"
            name = col.path_in_schema
            assert want.get(name, "PLAIN") in col.encodings, (name, col.encodings)
            assert (col.dictionary_page_offset is not None) == (name in ("op", "kind"))
            assert col.is_stats_set == (name not in ("op", "kind"))
    assert parquet_options(pa.Table.from_pandas(df).schema)["use_dictionary"] == ["op", "kind"]


def test_same_table_same_bytes(tmp_path: Path) -> None:
    """Deterministic output: the same table and metadata written twice (one row group and several) give the same
    bytes."""
    df = _frame(4000)
    for rows in (1000, 10_000):
        write_table(df, tmp_path / "a.parquet", {"seed": 1}, csv=False, row_group_rows=rows)
        write_table(df.copy(), tmp_path / "b.parquet", {"seed": 1}, csv=False, row_group_rows=rows)
        assert _sha(tmp_path / "a.parquet") == _sha(tmp_path / "b.parquet")


def test_columns_without_missing_values_are_required(tmp_path: Path) -> None:
    """A required Parquet column has no definition levels (max level 0); a column with a missing value keeps them."""
    df = _frame(2500)
    write_table(df, tmp_path / "t.parquet", {}, csv=False, row_group_rows=1000)  # row groups
    write_table(df.iloc[:10], tmp_path / "small.parquet", {}, csv=False)  # one pyarrow write
    for name in ("t.parquet", "small.parquet"):
        schema = pq.ParquetFile(tmp_path / name).schema
        levels = {schema.column(i).name: schema.column(i).max_definition_level for i in range(len(schema))}
        assert levels == {"rank": 0, "op": 0, "enter": 0, "match": 0, "flag": 0, "kind": 1, "excess": 1, "label": 0}
    empty = pd.DataFrame({"x": pd.Series([], dtype=object), "y": np.zeros(0)})
    write_table(empty, tmp_path / "empty.parquet", {}, csv=False)  # Arrow's null type stays nullable
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0
