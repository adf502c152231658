"""Parquet files encoded in the background before the results folder is written (issue 25): the same bytes."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from waitlab.experiments import pipeline, results
from waitlab.experiments.prewrite import Prewritten, encode_ops, write_ops
from waitlab.experiments.scenario import load_scenario
from waitlab.simulator.export import encode_table, write_table

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _table(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({
        "rank": rng.integers(0, 8, n).astype(np.int32),
        "enter": np.cumsum(rng.random(n)),
        "kind": pd.Categorical(rng.choice(["mpi", "compute", "region"], n)),
        "send_row": rng.integers(-1, n, n).astype(np.int32),
    })  # fmt: skip


@pytest.mark.parametrize(("rows", "group"), [(50, 1024), (1000, 256)])  # one row group; four
def test_an_encoded_table_is_the_file_write_table_writes(tmp_path: Path, rows: int, group: int):
    df, meta = _table(rows), {"scenario": "x", "seed": 1}
    write_table(df, tmp_path / "a.parquet", meta, csv=False, row_group_rows=group, int64=["send_row"])
    encoded = encode_table(df, meta, row_group_rows=group, int64=["send_row"])
    assert bytes(encoded) == (tmp_path / "a.parquet").read_bytes()
    write_table(df, tmp_path / "b.parquet", meta, row_group_rows=group, int64=["send_row"], encoded=encoded)
    assert (tmp_path / "b.parquet").read_bytes() == (tmp_path / "a.parquet").read_bytes()
    # the CSV beside a small table is written from the table itself, as without encoded bytes
    assert (tmp_path / "b.csv").is_file() == (rows <= 200_000)


def test_a_job_is_taken_only_for_the_same_table_and_metadata():
    df, meta = _table(20), {"seed": 1}
    pre = Prewritten()
    pre.start("t.parquet", df, meta, lambda: encode_table(df, meta))
    pre.start("u.parquet", df, meta, lambda: encode_table(df, meta))
    pre.start("v.parquet", df, meta, lambda: encode_table(df, meta))
    pre.close()
    assert pre.take("t.parquet", df.copy(), meta) is None  # an equal table, not the same one
    assert pre.take("u.parquet", df, {"seed": 2}) is None  # other metadata
    assert pre.take("w.parquet", df, meta) is None  # never started
    job = pre.take("v.parquet", df, meta)
    assert job is not None and bytes(job.result()) == bytes(encode_table(df, meta))
    assert pre.take("v.parquet", df, meta) is None  # taken once


def test_a_job_of_several_tables_is_taken_only_for_the_same_ones():
    # trace.json is made from the events and the waits: both must be the tables the writer has
    events, waits, meta = _table(20), _table(5), {"seed": 1}
    pre = Prewritten()
    for name in ("a", "b", "c"):
        pre.start(name, (events, waits), meta, lambda: memoryview(b"trace"))
    pre.close()
    assert pre.take("a", (events, waits.copy()), meta) is None  # equal waits, not the same table
    assert pre.take("b", events, meta) is None  # the events alone
    job = pre.take("c", (events, waits), meta)
    assert job is not None and bytes(job.result()) == b"trace"


def test_a_pickled_copy_has_no_jobs():
    df, meta = _table(5), {}
    pre = Prewritten()
    pre.start("t.parquet", df, meta, lambda: encode_table(df, meta))
    pre.close()
    copy = pickle.loads(pickle.dumps(pre))  # a run sent to or from another process
    assert copy.take("t.parquet", df, meta) is None
    assert pre.take("t.parquet", df, meta) is not None


def test_an_encoder_error_is_raised_when_taken():
    df, meta = _table(5), {}

    def broken() -> Any:
        raise OSError("disk full")

    pre = Prewritten()
    pre.start("t.parquet", df, meta, broken)
    pre.close()
    job = pre.take("t.parquet", df, meta)
    assert job is not None
    with pytest.raises(OSError, match="disk full"):
        job.result()


@pytest.mark.simgrid
def test_a_prewritten_folder_is_byte_identical_to_one_written_after_the_run(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    sc = load_scenario(EXAMPLES / "stencil_late_rank.toml")
    plain = pipeline.run(sc)
    early = pipeline.run(sc, prewrite=True)
    assert plain.result.prewritten is None and early.result.prewritten is not None
    res = early.result
    # the encoders' bytes are those of the writers
    write_ops(res.ops, tmp_path / "ops.parquet", res.metadata)
    assert bytes(encode_ops(res.ops, res.metadata)) == (tmp_path / "ops.parquet").read_bytes()
    # the folder written from the background's bytes (used: recorded) equals the one encoded while writing
    used: list[str] = []
    write = results.write_table

    def recording(df: pd.DataFrame, path: Path, *a: Any, **k: Any) -> None:
        if k.get("encoded") is not None:
            used.append(path.name)
        write(df, path, *a, **k)

    write_o = results.write_ops

    def recording_ops(ops: Any, path: Path, meta: Any, encoded: Any = None) -> None:
        if encoded is not None:
            used.append(path.name)
        write_o(ops, path, meta, encoded)

    write_c = results.write_chrome_trace

    def recording_chrome(*a: Any, encoded: Any = None, **k: Any) -> bool:
        if encoded is not None:
            used.append(a[3].name)
        return write_c(*a, encoded=encoded, **k)

    monkeypatch.setattr(results, "write_table", recording)
    monkeypatch.setattr(results, "write_ops", recording_ops)
    monkeypatch.setattr(results, "write_chrome_trace", recording_chrome)
    for name, run in (("plain", plain), ("early", early)):
        (tmp_path / name).mkdir()
        results.write_run(run, tmp_path / name)
    assert sorted(used) == ["events.parquet", "ops.parquet", "trace.json", "waits.parquet"]

    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                if p.is_file() and p.name != "timing.json"}

    a, b = files(tmp_path / "plain"), files(tmp_path / "early")
    assert pickle.loads(pickle.dumps(early)).result.summary == early.result.summary  # a written run still pickles
    assert sorted(a) == sorted(b) and len(a) >= 12
    assert [name for name in a if a[name] != b[name]] == []
