"""OTF2 import (r21): synchronous sends keep their semantics, a missing ``traces.def`` is named, and a nonblocking
collective completed in ``MPI_Wait`` is booked as a nonblocking completion (its call's entry is not its arrival).

The archives are written by hand with OTF2's own writer, as Score-P lays them out (tests/otf2_archives.py); the
expected operations and seconds are counted from the records written below.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from otf2_archives import score_p_ranks

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping
from waitlab.models.vocabulary import ACTIONS, CODE

try:
    import otf2
    from otf2.enums import CollectiveOp, Paradigm, RegionRole

    from waitlab.models.otf2_ops import records_to_ops, records_to_timed_ops
    from waitlab.simulator.otf2_import import read_otf2
    HAVE_OTF2 = shutil.which("otf2-print") is not None and shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
pytestmark = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / otf2-tools / a C compiler not installed")

MS = 1_000_000  # ticks of a millisecond (1 ns ticks)
MPI_REGIONS = ("MPI_Init", "MPI_Finalize", "MPI_Ssend", "MPI_Issend", "MPI_Send", "MPI_Recv", "MPI_Wait",
               "MPI_Ibarrier", "MPI_Barrier")


def _archive(folder: Path, body: Any, n: int = 2) -> Path:
    """An ``n``-rank archive (1 ns ticks) with the regions :data:`MPI_REGIONS`; ``body(writers, regions, world)``."""
    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, n)
        regions = {r: d.region(r, region_role=RegionRole.FUNCTION, paradigm=Paradigm.MPI, source_file="MPI")
                   for r in MPI_REGIONS}
        body([trace.event_writer_from_location(x) for x in locs], regions, world)
    return folder / "traces.otf2"


def _call(w: Any, reg: dict[str, Any], name: str, t0: int, t1: int, record: Any = None) -> None:
    w.enter(t0, reg[name])
    if record is not None:
        record()
    w.leave(t1, reg[name])


def _sync_sends(ws: list[Any], reg: dict[str, Any], world: Any) -> None:
    """Rank 0: MPI_Ssend of 8 bytes at 0, then MPI_Issend of 16 bytes and its MPI_Wait; rank 1 computes 1 s, then
    receives both (MPI_Recv)."""
    s, r = ws
    _call(s, reg, "MPI_Ssend", 0, 1000 * MS + 10, lambda: s.mpi_send(0, 1, world, 7, 8))
    _call(s, reg, "MPI_Issend", 1000 * MS + 20, 1000 * MS + 30, lambda: s.mpi_isend(1000 * MS + 25, 1, world, 8, 16,
                                                                                        42))
    _call(s, reg, "MPI_Wait", 1000 * MS + 40, 1000 * MS + 60, lambda: s.mpi_isend_complete(1000 * MS + 55, 42))
    _call(r, reg, "MPI_Recv", 1000 * MS, 1000 * MS + 10, lambda: r.mpi_recv(1000 * MS + 10, 0, world, 7, 8))
    _call(r, reg, "MPI_Recv", 1000 * MS + 50, 1000 * MS + 60, lambda: r.mpi_recv(1000 * MS + 60, 0, world, 8, 16))


def _mpi_ops(ops: Any, rank: int) -> list[tuple[str, float, int, int]]:
    rows = np.flatnonzero((ops.rank == rank) & (ops.code != CODE["compute"]))
    return [(ACTIONS[int(ops.code[i])], float(ops.value[i]), int(ops.peer[i]), int(ops.tag[i])) for i in rows]


# ---- 1. MPI_Ssend / MPI_Issend --------------------------------------------------------------------------------

def test_sends_in_ssend_and_issend_regions_are_synchronous(tmp_path: Path) -> None:
    ops = records_to_ops(read_otf2(_archive(tmp_path / "a", _sync_sends)))
    assert _mpi_ops(ops, 0) == [("ssend", 8.0, 1, 7), ("issend", 16.0, 1, 8), ("wait", 0.0, 1, 8)]
    assert _mpi_ops(ops, 1) == [("recv", 8.0, 0, 7), ("recv", 16.0, 0, 8)]


def test_a_plain_send_stays_a_send(tmp_path: Path) -> None:
    def body(ws: list[Any], reg: dict[str, Any], world: Any) -> None:
        _call(ws[0], reg, "MPI_Send", 0, 10, lambda: ws[0].mpi_send(5, 1, world, 1, 8))
        _call(ws[1], reg, "MPI_Recv", 0, 20, lambda: ws[1].mpi_recv(20, 0, world, 1, 8))

    ops = records_to_ops(read_otf2(_archive(tmp_path / "a", body)))
    assert _mpi_ops(ops, 0) == [("send", 8.0, 1, 1)]


def test_import_writes_the_synchronous_sends(tmp_path: Path) -> None:
    anchor = _archive(tmp_path / "a", _sync_sends)
    api.import_otf2(anchor, tmp_path / "imp", platform="okita_myrinet")
    lines = [ln.split()[1:] for ln in (tmp_path / "imp" / "rank0.txt").read_text().splitlines()
             if ln and not ln.startswith("#") and ln.split()[1] != "compute"]  # the 10 ns between the calls
    assert [ln[0] for ln in lines] == ["init", "ssend", "issend", "wait", "finalize"]
    assert lines[1] == ["ssend", "1", "7", "8"] and lines[2] == ["issend", "1", "8", "16"]


def test_analyze_finds_the_late_receiver_of_a_synchronous_send(tmp_path: Path) -> None:
    """As recorded: the MPI_Ssend entered at 0 waits for the receive entered at 1 s (Late Receiver 1 s; the
    issend's wait left at 1000 ms + 60 ns, after its receive was entered at + 50 ns: 40 ns, entered + 20 ns)."""
    anchor = _archive(tmp_path / "a", _sync_sends)
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    waits = pd.read_parquet(tmp_path / "an" / "waits.parquet")
    lr = waits[waits["pattern"].astype(str) == "late_receiver"]
    assert lr["wait"].sum() == pytest.approx(1.0, abs=1e-6)
    events = pd.read_parquet(tmp_path / "an" / "events.parquet")
    assert {"ssend", "issend"} <= set(events["op"].astype(str))


@pytest.mark.simgrid
def test_replay_of_an_ssend_waits_for_its_late_receiver(tmp_path: Path) -> None:
    """kind = "otf2": the 8-byte MPI_Ssend (eager as a plain send) waits for rank 1's receive, posted after 1 s of
    compute: Late Receiver 1 s (to SMPI's latency of a few microseconds)."""
    anchor = _archive(tmp_path / "a", _sync_sends)
    sc = from_mapping({"scenario": {"name": "ssend", "ranks": 2}, "platform": {"name": "okita_myrinet"},
                       "application": {"kind": "otf2", "trace": str(anchor)}}, str(tmp_path / "s.toml"))
    api.run(sc, tmp_path / "run", png=False)
    waits = pd.read_parquet(tmp_path / "run" / "waits.parquet")
    lr = waits[waits["pattern"].astype(str) == "late_receiver"]
    assert lr["wait"].max() == pytest.approx(1.0, abs=1e-3)


# ---- 7. a missing traces.def ----------------------------------------------------------------------------------

def test_missing_global_definitions_are_named(tmp_path: Path) -> None:
    anchor = _archive(tmp_path / "a", _sync_sends)
    anchor.with_suffix(".def").unlink()
    with pytest.raises(InputError) as info:
        read_otf2(anchor)
    err = info.value
    assert err.file == str(tmp_path / "a" / "traces.def")
    assert "is missing" in err.problem and "global definition reader" not in str(err)
    assert "traces.def" in err.fix and "\n" not in str(err)


def test_a_junk_anchor_without_definitions_is_not_an_archive(tmp_path: Path) -> None:
    (tmp_path / "junk.otf2").write_text("not an archive\n")
    with pytest.raises(InputError) as info:
        read_otf2(tmp_path / "junk.otf2")
    assert "cannot be read as OTF2" in info.value.problem


# ---- 8. a nonblocking collective completed in MPI_Wait --------------------------------------------------------

def _ibarrier(score_p: bool) -> Any:
    """Rank 0 posts an MPI_Ibarrier at 1 ms and waits for it from 2 ms; rank 1 posts at 10 ms and reaches its
    MPI_Wait at 20 ms.  The barrier completes at 10 ms + 100 ns on rank 0 (when rank 1 posted), at 20 ms + 100 ns on
    rank 1.  Score-P records NonBlockingCollectiveRequest/Complete; waitlab's export MpiCollectiveBegin/End in the
    MPI_Wait."""
    def body(ws: list[Any], reg: dict[str, Any], world: Any) -> None:
        for me, w in enumerate(ws):
            post, wait, done = (1 * MS, 2 * MS, 10 * MS + 100) if me == 0 else (10 * MS, 20 * MS, 20 * MS + 100)
            _call(w, reg, "MPI_Init", 0, 0)
            _call(w, reg, "MPI_Ibarrier", post, post + 10,
                  (lambda w=w, post=post: w.non_blocking_collective_request(post + 5, 900)) if score_p else None)
            if score_p:
                _call(w, reg, "MPI_Wait", wait, done, lambda w=w, done=done: w.non_blocking_collective_complete(
                    done, CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0, 900))
            else:
                _call(w, reg, "MPI_Wait", wait, done, lambda w=w, wait=wait, done=done: (
                    w.mpi_collective_begin(wait), w.mpi_collective_end(done, CollectiveOp.BARRIER, world,
                                                                         0xFFFFFFFF, 0, 0)))
            _call(w, reg, "MPI_Finalize", 30 * MS, 30 * MS)
    return body


@pytest.mark.parametrize("score_p", [True, False], ids=["scorep", "mpi_collective_in_wait"])
def test_collective_completed_in_mpi_wait_is_a_nonblocking_completion(tmp_path: Path, score_p: bool) -> None:
    anchor = _archive(tmp_path / "a", _ibarrier(score_p))
    ops, t0, t1 = records_to_timed_ops(read_otf2(anchor))
    barrier = np.flatnonzero(ops.code == CODE["barrier"])
    assert ops.tag[barrier].tolist() == [1, 1]  # each rank's first nonblocking completion
    np.testing.assert_allclose(t0[barrier], [0.002, 0.020])  # the MPI_Wait calls
    np.testing.assert_allclose(t1[barrier], [0.0100001, 0.0200001])
    # the replay runs it as the blocking barrier (no post: no request serial on the TI line)
    replayed = records_to_ops(read_otf2(anchor))
    assert replayed.tag[replayed.code == CODE["barrier"]].tolist() == [0, 0]
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    summary = json.loads((tmp_path / "an" / "summary.json").read_text())
    assert not summary.get("impossible_collectives")


def test_a_blocking_barrier_keeps_tag_zero(tmp_path: Path) -> None:
    def body(ws: list[Any], reg: dict[str, Any], world: Any) -> None:
        for me, w in enumerate(ws):
            _call(w, reg, "MPI_Barrier", me * MS, 1 * MS + 5, lambda w=w, me=me: (
                w.mpi_collective_begin(me * MS), w.mpi_collective_end(1 * MS + 5, CollectiveOp.BARRIER, world,
                                                                      0xFFFFFFFF, 0, 0)))

    ops = records_to_timed_ops(read_otf2(_archive(tmp_path / "a", body)))[0]
    assert ops.tag[ops.code == CODE["barrier"]].tolist() == [0, 0]
