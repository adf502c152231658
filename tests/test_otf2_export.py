"""OTF2 export read back by the OTF2 tools' own reader, `otf2-print` (issue 14)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from waitlab.errors import EnvironmentProblem
from waitlab.models.ops import OpBuilder
from waitlab.simulator.otf2_export import write_otf2

try:
    import otf2  # noqa: F401
    HAVE_OTF2 = shutil.which("otf2-print") is not None
except ImportError:
    HAVE_OTF2 = False
needs_otf2 = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / otf2-tools not installed (scripts/bootstrap.sh)")


def _records(anchor) -> tuple[Counter, dict[str, list[int]]]:
    out = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True, timeout=60).stdout
    counts: Counter = Counter()
    times: dict[str, list[int]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isupper() and parts[1].isdigit() and parts[2].isdigit():
            counts[parts[0]] += 1
            times.setdefault(parts[1], []).append(int(parts[2]))
    return counts, times


def _program(n: int) -> OpBuilder:
    b = OpBuilder(n)
    ranks = np.arange(n)
    for s in range(2):
        b.add("enter", ranks, step=s, region="solve")
        b.add("compute", ranks, step=s, value=[0.01 + 0.005 * (r == 1) for r in range(n)], region="solve")
        b.add("leave", ranks, step=s, region="solve")
        b.add("isend", ranks, step=s, peer=(ranks + 1) % n, tag=1, value=2048)
        b.add("irecv", ranks, step=s, peer=(ranks - 1) % n, tag=1, value=2048)
        b.add("waitall", ranks, step=s)
        b.add("send", 0, step=s, peer=2, tag=5, value=64)
        b.add("recv", 2, step=s, peer=0, tag=5, value=64)
        b.add("bcast", ranks, step=s, value=128, peer=0)
        b.add("allreduce", ranks, step=s, value=8, value2=8)
    return b


@pytest.mark.simgrid
@needs_otf2
def test_otf2_print_reads_every_mpi_event(replay, tmp_path):
    events, waits = replay(_program(4).build())
    anchor = write_otf2(events, waits, {"scenario": "otf2-test", "seed": 1}, tmp_path / "otf2")
    counts, times = _records(anchor)
    op = events["op"].astype(str)
    mpi = events[events["kind"] == "mpi"]
    coll = int(mpi["op"].isin(["bcast", "allreduce"]).sum())
    # expected counts straight from the event table: one region visit per row, one MPI record per message end
    # plus the frame of a measured run on each of the 4 ranks: program begin/end, MPI_Init and MPI_Finalize
    assert counts["ENTER"] == counts["LEAVE"] == len(events) + 2 * 4
    assert counts["PROGRAM_BEGIN"] == counts["PROGRAM_END"] == 4
    assert counts["MPI_SEND"] == (op == "send").sum() == 2
    assert counts["MPI_RECV"] == (op == "recv").sum() == 2
    assert counts["MPI_ISEND"] == counts["MPI_ISEND_COMPLETE"] == (op == "isend").sum() == 8
    assert counts["MPI_IRECV_REQUEST"] == counts["MPI_IRECV"] == (op == "irecv").sum() == 8
    assert counts["MPI_COLLECTIVE_BEGIN"] == counts["MPI_COLLECTIVE_END"] == coll == 16
    n_mpi_records = sum(v for k, v in counts.items() if k.startswith("MPI_"))
    non_blocking = int(op.isin(["isend", "irecv"]).sum())
    # each MPI row has one record, each non-blocking one a second at completion, each collective begin+end
    assert n_mpi_records == len(mpi) - int((op == "waitall").sum()) + non_blocking + coll
    assert sorted(times) == ["0", "1", "2", "3"]
    for loc, ts in times.items():
        assert ts == sorted(ts), f"timestamps of location {loc} go back"
    assert max(max(ts) for ts in times.values()) == round(events["exit"].max() * 1e9)


def test_missing_bindings_is_one_clear_message(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "otf2", None)
    with pytest.raises(EnvironmentProblem, match="apt-get install python3-otf2"):
        write_otf2(None, None, {}, tmp_path / "x")  # type: ignore[arg-type]


def _fields(anchor, record: str) -> list[str]:
    out = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True, timeout=60).stdout
    return [line for line in out.splitlines() if line.split()[:1] == [record]]


@pytest.mark.simgrid
@needs_otf2
def test_receives_carry_their_size_and_waits_are_metrics(replay, tmp_path):
    events, waits = replay(_program(4).build())
    assert len(waits) > 0
    placement = pd.DataFrame({"rank": [0, 1, 2, 3], "node": [0, 0, 1, 1]})
    anchor = write_otf2(events, waits, {"scenario": "otf2-test"}, tmp_path / "otf2", placement=placement)
    # every receive record carries the message's size (the program: 64-byte sends, 2048-byte isends)
    recv = _fields(anchor, "MPI_RECV") + _fields(anchor, "MPI_IRECV")
    lengths = sorted(int(line.split("Length:")[1].split()[0].rstrip(",")) for line in recv)
    assert lengths == [64] * 2 + [2048] * 8
    sends = _fields(anchor, "MPI_SEND") + _fields(anchor, "MPI_ISEND")
    assert sorted(int(line.split("Length:")[1].split()[0].rstrip(",")) for line in sends) == lengths
    # one wait_state metric record per wait state, carrying its seconds (to the nanosecond at most 1e-9 off)
    metrics = _fields(anchor, "METRIC")
    assert len(metrics) == len(waits) + int((events["excess"] > 0).sum())
    defs = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    # the system tree: machine -> node 0 / node 1 -> ranks (placement.csv of a run)
    nodes = [line for line in defs.splitlines() if line.startswith("SYSTEM_TREE_NODE ")]
    assert len(nodes) == 3 and sum("Parent: UNDEFINED" in line for line in nodes) == 1
    groups = [line for line in defs.splitlines() if line.startswith("LOCATION_GROUP ")]
    assert sum("Parent: \"node::node 1\"" in line for line in groups) == 2
    assert sum("Parent: \"node::node 0\"" in line for line in groups) == 2


@pytest.mark.simgrid
@needs_otf2
def test_two_exports_are_byte_identical(replay, tmp_path):
    events, waits = replay(_program(3).build())
    files = []
    for k in (1, 2):
        folder = tmp_path / f"e{k}" / "otf2"
        write_otf2(events, waits, {"scenario": "same"}, folder)
        files.append({str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()})
    assert files[0].keys() == files[1].keys() and len(files[0]) >= 4
    assert files[0] == files[1]
