"""Point-to-point messages are matched per communicator (MPI's rule): a send on a duplicate of MPI_COMM_WORLD never
meets a receive on MPI_COMM_WORLD, though both have the same ranks, source, destination and tag.

The scenario of every test (compared with Scalasca 2.6's scout on the same archive): rank 0 sends tag 0 on ``dupA``
(a duplicate of MPI_COMM_WORLD) at 0.1 s, then tag 0 on MPI_COMM_WORLD at 0.9 s; rank 1 receives on MPI_COMM_WORLD
from 0.2 s, then on ``dupA`` at 0.91 s.  The first receive takes the MPI_COMM_WORLD message: Late Sender
0.9 - 0.2 = 0.7 s by hand (scout: 0.7 s), on rank 1's first receive; the second receive waits for nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from otf2_archives import communicator, score_p_ranks
from program_scenarios import needs_smpi, program_scenario, trace_scenario

from waitlab import api
from waitlab.cli import main
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate
from waitlab.models.ops import OpBuilder, channel_tags
from waitlab.simulator.matching import ANY_TAG, match_messages, resolve_any_tag
from waitlab.simulator.trace import format_lines, write_trace

TOL = 1e-4
BIG = 1 << 20


def _crossing_archive(folder: Path, world_bytes: int = 8) -> Path:
    """The module docstring's archive (1 ns ticks), as Score-P records it: the ``dupA`` message is 8 bytes, the
    MPI_COMM_WORLD one ``world_bytes``."""
    otf2 = pytest.importorskip("otf2")
    from otf2.enums import Paradigm, RegionRole  # optional: Debian's python3-otf2

    def t(s: float) -> int:
        return round(s * 1e9)

    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, 2, "node7")
        dup = communicator(d, "dupA", [0, 1])
        reg = {n: d.region(n, region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
               for n in ("MPI_Send", "MPI_Recv", "MPI_Comm_rank")}
        w0, w1 = (trace.event_writer_from_location(x) for x in locs)
        for w in (w0, w1):  # both ranks start at 0
            w.enter(0, reg["MPI_Comm_rank"])
            w.leave(t(0.00001), reg["MPI_Comm_rank"])
        for te, tl, comm, nbytes in ((0.1, 0.1001, dup, 8), (0.9, 0.9001, world, world_bytes)):
            w0.enter(t(te), reg["MPI_Send"])
            w0.mpi_send(t(te), 1, comm, 0, nbytes)
            w0.leave(t(tl), reg["MPI_Send"])
        for te, tl, comm, nbytes in ((0.2, 0.9002, world, world_bytes), (0.91, 0.9101, dup, 8)):
            w1.enter(t(te), reg["MPI_Recv"])
            w1.mpi_recv(t(tl), 0, comm, 0, nbytes)
            w1.leave(t(tl), reg["MPI_Recv"])
        for w in (w0, w1):
            w.enter(t(1.0), reg["MPI_Comm_rank"])
            w.leave(t(1.00001), reg["MPI_Comm_rank"])
    return folder / "traces.otf2"


def _late_sender_on_first_receive(waits: pd.DataFrame, events: pd.DataFrame) -> None:
    """One Late Sender of 0.7 s (by hand), on rank 1's receive entered at 0.2 s."""
    assert waits["pattern"].astype(str).tolist() == ["late_sender"]
    assert int(waits["rank"].iloc[0]) == 1
    assert float(waits["wait"].iloc[0]) == pytest.approx(0.7, abs=TOL)
    assert float(events.loc[int(waits["event"].iloc[0]), "enter"]) == pytest.approx(0.2, abs=TOL)


@pytest.mark.parametrize("world_bytes", [8, BIG])
def test_analyze_matches_messages_per_communicator(tmp_path: Path, world_bytes: int) -> None:
    # before: 0 s of late sender (8 bytes: the first receive paired with the dupA send), or the archive refused as
    # inconsistent (1 MiB: "MPI_ERR_TRUNCATE", the 1 MiB send paired with the 8-byte receive)
    anchor = _crossing_archive(tmp_path / "a", world_bytes)
    out = tmp_path / "an"
    assert main(["analyze", str(anchor), "-o", str(out), "--no-png", "-q"]) == 0
    ev = pd.read_parquet(out / "events.parquet")
    _late_sender_on_first_receive(pd.read_parquet(out / "waits.parquet"), ev)
    p2p = ev[ev["op"].astype(str).isin(["send", "recv"])]
    # sends in order dupA, world; receives world, dupA; each pair has its communicator, the two are distinct
    comm = p2p.groupby("rank")["comm"].apply(list).to_dict()
    assert comm[0][1] == comm[1][0] == 0 and comm[0][0] == comm[1][1] != 0
    assert p2p["tag"].tolist() == [0, 0, 0, 0]  # the program's own tags
    match = p2p.groupby("rank")["match"].apply(list).to_dict()
    assert match[0] == match[1][::-1]


@pytest.mark.simgrid
@needs_smpi
def test_import_otf2_replays_messages_on_their_communicators(tmp_path: Path) -> None:
    # before: import-otf2 refused the archive (MPI_ERR_TRUNCATE); the trace pairs (communicator, tag) by its own tag
    anchor = _crossing_archive(tmp_path / "a", BIG)
    index, _ = api.import_otf2(anchor, tmp_path / "t", platform="dawning_5000a")
    text = (tmp_path / "t" / "rank0.txt").read_text() + (tmp_path / "t" / "rank1.txt").read_text()
    # (communicator, tag) pairs (0, 0) and (dupA, 0) -> tags 0 and 1
    assert "0 send 1 1 8\n" in text and f"0 send 1 0 {BIG}\n" in text
    assert f"1 recv 0 0 {BIG}\n" in text and "1 recv 0 1 8\n" in text
    rep = simulate(trace_scenario(index, 2))
    # the replay's late sender: 0.7 s less the transfer of the 8-byte message SMPI had already delivered... none:
    # the receive of MPI_COMM_WORLD waits for the 0.9 s send
    w = rep.waits
    assert w["pattern"].astype(str).tolist() == ["late_sender"]
    assert float(w["wait"].iloc[0]) == pytest.approx(0.7, abs=1e-3)


def test_channel_tags_give_each_communicator_and_tag_its_own_tag() -> None:
    b = OpBuilder(2)
    b.add("send", 0, peer=1, value=8, tag=5, comm=1)
    b.add("send", 0, peer=1, value=8, tag=5)
    b.add("isend", 0, peer=1, value=8, tag=9, comm=1)
    b.add("wait", 0, peer=1, tag=9, comm=1)
    b.add("recv", 1, peer=0, value=8, tag=5)
    b.add("recv", 1, peer=0, value=8, tag=5, comm=1)
    b.add("recv", 1, peer=0, value=8, tag=9, comm=1)
    ops = b.build()
    # pairs (0, 5) -> 0, (1, 5) -> 1, (1, 9) -> 2 (sorted by communicator, then tag)
    assert channel_tags(ops).tolist() == [1, 0, 2, 2, 0, 1, 2]
    m = match_messages(ops).tolist()  # rank 1's first receive takes the world send, its second the dupA one
    assert m[0] == m[5] and m[1] == m[4] and m[2] == m[3] == m[6] and len({m[0], m[1], m[2]}) == 3
    assert format_lines(ops, 1e9) == ["send 1 1 8", "send 1 0 8", "isend 1 2 8", "wait 0 1 2",
                                      "recv 0 0 8", "recv 0 1 8", "recv 0 2 8"]


def test_any_tag_receive_takes_a_message_of_its_own_communicator() -> None:
    # rank 0 sends tag 4 on MPI_COMM_WORLD, then tag 6 on communicator 1; rank 1 receives MPI_ANY_TAG on communicator
    # 1 (MPI: the tag 6 message, the only one there), then tag 4 on MPI_COMM_WORLD
    b = OpBuilder(2)
    b.add("send", 0, peer=1, value=8, tag=4)
    b.add("send", 0, peer=1, value=8, tag=6, comm=1)
    b.add("recv", 1, peer=0, value=8, tag=ANY_TAG, comm=1)
    b.add("recv", 1, peer=0, value=8, tag=4)
    ops = b.build()
    resolve_any_tag(ops)
    assert ops.tag.tolist() == [4, 6, 6, 4]
    m = match_messages(ops).tolist()
    assert m[0] == m[3] and m[1] == m[2] and m[0] != m[1]


@pytest.mark.parametrize("comm", [0, 1])
def test_trace_of_one_communicators_messages_keeps_its_tags(tmp_path: Path, comm: int) -> None:
    # p2p on one communicator only (MPI_COMM_WORLD, or one other): written byte for byte as before, tags as they are
    b = OpBuilder(3)
    sub = b.comm_id([2, 0])
    b.add("compute", [0, 1, 2], value=0.5)
    b.add("send", 0, peer=1, value=8, tag=3, comm=comm)
    b.add("isend", 0, peer=2, value=16, tag=7, comm=comm)
    b.add("wait", 0, peer=2, tag=7, comm=comm)
    b.add("recv", 1, peer=0, value=8, tag=3, comm=comm)
    b.add("irecv", 2, peer=0, value=16, tag=7, comm=comm)
    b.add("wait", 2, peer=0, value2=1.0, tag=7, comm=comm)
    b.add("barrier", [0, 2], comm=sub)
    ops = b.build()
    assert channel_tags(ops) is ops.tag
    index = write_trace(ops, 1e9, tmp_path / "t", relative=True)
    files = [tmp_path / "t" / f for f in index.read_text().split()]
    assert [f.read_text() for f in files] == [
        "0 init\n0 compute 500000000.0\n0 send 1 3 8\n0 isend 2 7 16\n0 wait 0 2 7\n0 barrier comm=2,0\n0 finalize\n",
        "1 init\n1 compute 500000000.0\n1 recv 0 3 8\n1 finalize\n",
        "2 init\n2 compute 500000000.0\n2 irecv 0 7 16\n2 wait 0 2 7\n2 barrier comm=2,0\n2 finalize\n"]


def _mpi(res: Any) -> pd.DataFrame:
    ev = res.events
    return ev[ev["op"].astype(str).isin(["send", "recv"])]


@pytest.mark.simgrid
@needs_smpi
def test_program_with_a_duplicate_of_world_and_its_capture(tmp_path: Path) -> None:
    # programs/dup_comm_crossing.c: the module docstring's scenario, the world message 1 MiB (before: 0 s of late
    # sender, the world receive paired with the dupA send)
    sc = program_scenario(tmp_path, "dup_comm_crossing.c", ranks=2)
    res = simulate(sc)
    _late_sender_on_first_receive(res.waits, res.events)
    p2p = _mpi(res)
    comm = p2p.groupby("rank")["comm"].apply(list).to_dict()
    assert comm[0][1] == comm[1][0] == 0 and comm[0][0] == comm[1][1] != 0
    assert p2p["bytes"].tolist() == [8, BIG, 0, 0] and p2p["recv_bytes"].tolist() == [0, 0, BIG, 8]
    index = capture(sc, tmp_path / "cap")
    check = json.loads((tmp_path / "cap" / "capture.json").read_text())["replay_check"]
    assert check["live"] == pytest.approx(check["replay"], rel=1e-3, abs=1e-9)
    assert "0 send 1 1 8\n" in (tmp_path / "cap" / "rank0.txt").read_text()  # dupA's tag 0 written as 1
    rep = simulate(trace_scenario(index, 2))
    _late_sender_on_first_receive(rep.waits, rep.events)
    assert np.array_equal(_mpi(rep)["recv_bytes"].to_numpy(), [0, 0, BIG, 8])
