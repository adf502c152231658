"""The trace is formatted and written a chunk of operations at a time (issue 15): the files do not depend on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.models.ops import CODE, OpBuilder, OpTable
from waitlab.simulator import trace
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import write_trace


def _ops() -> OpTable:
    b = OpBuilder(3)
    everyone = [0, 1, 2]
    for step in range(2):
        b.add("enter", everyone, step=step, region="Work")
        b.add("compute", everyone, step=step, value=[0.5, 0.25, 0.125])
        b.add("leave", everyone, step=step, region="Work")
        b.add("send", 0, step=step, peer=1, value=8, tag=step)
        b.add("recv", 1, step=step, peer=0, value=8, tag=step)
        b.add("alltoallv", everyone, step=step, value=6, value2=6)
        b.add("allreduce", everyone, step=step, value=8, value2=1e3)
    return b.build()


def _vectors() -> VectorStore:
    v = VectorStore()
    for r in range(3):
        for k in range(2):
            v.put(r, CODE["alltoallv"], k, [1, 2, 3], [3, 2, 1])
    return v


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.txt")) if p.name != "index.txt"}


@pytest.mark.parametrize("shared", [True, False])
def test_chunked_trace_equals_one_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool) -> None:
    ops = _ops()
    rows = np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))
    write_trace(ops, 1e9, tmp_path / "whole", rows=rows, vectors=_vectors(), shared=shared)
    for chunk in (1, 2, 5):
        monkeypatch.setattr(trace, "TRACE_CHUNK_ROWS", chunk)
        write_trace(ops, 1e9, tmp_path / f"c{chunk}", rows=rows, vectors=_vectors(), shared=shared)
        assert _files(tmp_path / f"c{chunk}") == _files(tmp_path / "whole")


def test_shared_trace_order_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Superstep, then rank, then sequence, written by hand for two ranks; the region markers left out."""
    b = OpBuilder(2)
    b.add("enter", [0, 1], region="A")
    b.add("compute", [0, 1], value=[1.0, 2.0])
    b.add("leave", [0, 1], region="A")
    b.add("barrier", [0, 1])
    b.add("send", 0, peer=1, value=4, tag=7)
    b.add("recv", 1, peer=0, value=4, tag=7)
    ops = b.build()
    rows = np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))
    monkeypatch.setattr(trace, "TRACE_CHUNK_ROWS", 3)
    write_trace(ops, 10.0, tmp_path, rows=rows, shared=True)
    assert (tmp_path / "trace.txt").read_text() == (
        "0 init\n1 init\n"
        "0 compute 10.0\n0 barrier\n1 compute 20.0\n1 barrier\n"  # superstep 0 ends with the barrier
        "0 send 1 7 4\n1 recv 0 7 4\n"  # superstep 1
        "0 finalize\n1 finalize\n"
    )
