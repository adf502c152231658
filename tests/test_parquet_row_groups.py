"""Tables written one Parquet row group at a time (issue 15) have pyarrow's own bytes and read back whole."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from waitlab.simulator.export import read_table, write_table


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({
        "rank": rng.integers(0, 64, n).astype(np.int32),
        "op": pd.Categorical.from_codes(rng.integers(0, 3, n), categories=["send", "recv", "barrier"]),
        "enter": rng.uniform(0, 1, n),
        "match": rng.integers(-1, 1000, n),
    })


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("rows", [1, 999, 1000, 1001, 4000])
def test_row_groups_give_pyarrows_bytes(tmp_path: Path, rows: int) -> None:
    df = _frame(rows)
    meta = {"ranks": 64, "scenario": "row-groups"}
    write_table(df, tmp_path / "ours.parquet", meta, csv=False, row_group_rows=1000)
    # the independent method: pyarrow converts the whole table, then writes it in row groups of the same size
    table = pa.Table.from_pandas(df, preserve_index=False)
    schema_meta = {**(table.schema.metadata or {}), b"waitlab": b'{"ranks": 64, "scenario": "row-groups"}'}
    pq.write_table(table.replace_schema_metadata(schema_meta), tmp_path / "whole.parquet", compression="zstd",
                   row_group_size=1000)
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
