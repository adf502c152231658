"""Row references of the event table: int32 in memory, int64 in the files (issue 15, waitlab's memory at scale)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from waitlab.models.columns import frame
from waitlab.models.ops import OpBuilder
from waitlab.simulator.export import read_table, write_table
from waitlab.simulator.timeline import ROW_REFERENCES, build_events


def _events() -> pd.DataFrame:
    b = OpBuilder(2)
    b.add("enter", [0, 1], region="A")
    b.add("compute", [0, 1], value=[1.0, 2.0], excess=[0.0, 1.0])
    b.add("leave", [0, 1], region="A")
    b.add("send", 0, peer=1, value=4, tag=7)
    b.add("recv", 1, peer=0, value=4, tag=7)
    b.add("allreduce", [0, 1], value=8, value2=1.0)
    ops = b.build()
    # times: every operation one second, back to back on each rank
    t = np.concatenate([np.arange(n, dtype=float) for n in ops.per_rank_counts()])
    events = build_events(ops, t, t + 1.0)  # an Arrow table: its row references int32 too
    assert all(events.schema.field(c).type == "int32" for c in ROW_REFERENCES)
    return frame(events)


def test_row_references_are_int32_in_memory_and_int64_in_files(tmp_path: Path) -> None:
    ev = _events()
    for c in ROW_REFERENCES:
        assert ev[c].dtype == np.int32, c
    # hand-checked rows: rank 0 = region A (0), compute (1), send (2), allreduce (3); rank 1 = 4..7
    assert ev["parent"].tolist() == [-1, 0, -1, -1, -1, 4, -1, -1]
    assert ev["done"].tolist()[2] == 2 and ev["done"].tolist()[6] == 6  # blocking send and recv complete themselves
    assert ev["match"].tolist()[2] == ev["match"].tolist()[6] >= 0  # one message id
    assert ev["cause"].tolist()[5] == 0  # rank 1's compute carries ledger row 0
    for rows in (100, 3):  # one row group, and several
        path = tmp_path / f"events{rows}.parquet"
        write_table(ev, path, {"x": 1}, csv=False, row_group_rows=rows, int64=ROW_REFERENCES)
        schema = pq.read_schema(path)
        for c in ROW_REFERENCES:
            assert schema.field(c).type == "int64", c
        back, meta = read_table(path)
        assert meta == {"x": 1}
        for c in ev.columns:
            assert back[c].tolist() == ev[c].tolist(), c
        again, _ = read_table(path, int32=ROW_REFERENCES)  # as they were in memory
        for c in ev.columns:
            assert again[c].dtype == ev[c].dtype and again[c].tolist() == ev[c].tolist(), c
    assert ev["match"].dtype == np.int32  # writing did not change the table
