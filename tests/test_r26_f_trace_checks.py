"""Session 26, tester t2's findings on recorded OTF2 archives: timestamps that go backwards within a location,
crossed regions and collectives of non-members (or on a communicator listing a rank twice) are refused at read time
in one line naming the archive (exit 2, nothing written); a bcast root that records 0 bytes received still sends (the
Late Broadcast is decided on the root's bytes sent, as in Scalasca 2.6); a receive done before its send was entered
is said in the impossible-timeline line.  The archives are written here with python3-otf2's writer (a backwards
timestamp, which the writer refuses, is patched into the event file afterwards); expected values are by hand."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from otf2_archives import communicator, score_p_ranks

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError, SimulationError
from waitlab.models.analysis.timeline_check import impossible_collectives, impossible_line
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.ops import CODE, OpBuilder
from waitlab.simulator.timeline import collective_instances

otf2 = pytest.importorskip("otf2")
if shutil.which("cc") is None:
    pytest.skip("no C compiler for the OTF2 event reader", allow_module_level=True)
from otf2.enums import CollectiveOp, Paradigm, RegionRole  # noqa: E402

from waitlab.models.otf2_ops import records_to_ops  # noqa: E402
from waitlab.simulator.otf2_import import read_otf2  # noqa: E402

NS = 10**9  # ticks per second of the archives below
DOCS = Path(__file__).resolve().parent.parent / "docs"


def _archive(folder: Path, n: int, body: Callable[[list[Any], dict[str, Any], Any, Any], None],
             pair: list[int] | None = None) -> Path:
    """An archive of ``n`` Score-P-like ranks (1 ns ticks) with a communicator ``pair`` (default [0, 1]) besides
    MPI_COMM_WORLD; ``body(writers, regions, world, pair)`` writes the events.  Returns the anchor file."""
    with otf2.writer.open(str(folder), timer_resolution=NS) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, n)
        sub = communicator(d, "pair", pair or [0, 1])
        regions = {name: d.region(name, region_role=role, paradigm=par) for name, role, par in (
            ("MPI_Send", RegionRole.POINT2POINT, Paradigm.MPI), ("MPI_Recv", RegionRole.POINT2POINT, Paradigm.MPI),
            ("MPI_Barrier", RegionRole.BARRIER, Paradigm.MPI), ("MPI_Bcast", RegionRole.COLL_ONE2ALL, Paradigm.MPI),
            ("A", RegionRole.FUNCTION, Paradigm.USER), ("B", RegionRole.FUNCTION, Paradigm.USER))}
        body([trace.event_writer_from_location(x) for x in locs], regions, world, sub)
    return folder / "traces.otf2"


def _call(w: Any, reg: dict[str, Any], name: str, t0: float, t1: float, record: Callable[[int], None]) -> None:
    w.enter(round(t0 * NS), reg[name])
    record(round(t0 * NS))
    w.leave(round(t1 * NS), reg[name])


def _message(ws: list[Any], reg: dict[str, Any], world: Any, send: tuple[float, float],
             recv: tuple[float, float]) -> None:
    """Rank 0 sends 8 bytes (tag 1) to rank 1 in MPI_Send over ``send``; rank 1 receives in MPI_Recv over ``recv``."""
    _call(ws[0], reg, "MPI_Send", *send, lambda t: ws[0].mpi_send(t, 1, world, 1, 8))
    ws[1].enter(round(recv[0] * NS), reg["MPI_Recv"])
    ws[1].mpi_recv(round(recv[1] * NS), 0, world, 1, 8)
    ws[1].leave(round(recv[1] * NS), reg["MPI_Recv"])


def _barrier(w: Any, reg: dict[str, Any], comm: Any, t0: float, t1: float) -> None:
    w.enter(round(t0 * NS), reg["MPI_Barrier"])
    w.mpi_collective_begin(round(t0 * NS))
    w.mpi_collective_end(round(t1 * NS), CollectiveOp.BARRIER, comm, 0xFFFFFFFF, 0, 0)
    w.leave(round(t1 * NS), reg["MPI_Barrier"])


def _analyze(anchor: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["analyze", str(anchor), "-o", str(out), "--no-png", "-q"])
    return code, capsys.readouterr().err.strip()


def _one_line(err: str, *words: str) -> None:
    assert "\n" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


# ---- 1. time goes backwards within a location ----

def test_a_timestamp_going_backwards_is_refused_naming_file_rank_and_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # rank 0's MPI_Send enters at 0.2 s (the Enter and MpiSend share that timestamp record) and leaves at 0.3 s;
    # the patch moves that timestamp to 2 s: the Leave at 0.3 s then comes after a record at 2 s (times since the
    # trace's first record, rank 1's Enter at 0 s)
    anchor = _archive(tmp_path / "a", 2, lambda ws, reg, world, pair: _message(ws, reg, world, (0.2, 0.3), (0.0, 0.3)))
    ok = read_otf2(anchor)  # as written: in time order, read
    assert ok.time.tolist() == sorted(ok.time[ok.rank == 0].tolist()) + sorted(ok.time[ok.rank == 1].tolist())
    evt = tmp_path / "a" / "traces" / "0.evt"
    raw = evt.read_bytes()
    stamp = b"\x05" + struct.pack("<Q", 200_000_000)  # OTF2's timestamp record: type 5, then the ticks
    assert raw.count(stamp) == 1
    evt.write_bytes(raw.replace(stamp, b"\x05" + struct.pack("<Q", 2 * NS)))
    with pytest.raises(InputError) as exc:
        read_otf2(anchor)
    _one_line(str(exc.value), str(evt), "rank 0", "record Leave of MPI_Send at 0.300000000 s",
              "MpiSend at 2.000000000 s", "time order")
    code, err = _analyze(anchor, tmp_path / "out", capsys)
    assert code == 2 and not (tmp_path / "out").exists()
    _one_line(err, "0.evt", "rank 0", "MpiSend")
    assert main(["import-otf2", str(anchor), "-o", str(tmp_path / "imp")]) == 2
    assert not (tmp_path / "imp").exists()


# ---- 2. a bcast root that records 0 bytes received ----

@pytest.mark.parametrize("root_received", [0, 8])
def test_late_broadcast_is_decided_on_the_roots_bytes_sent(tmp_path: Path, root_received: int) -> None:
    # 3 ranks, 8-byte bcast from root 0 (Score-P's accounting: the root sends 3 x 8 bytes, each other rank receives
    # 8); the root enters at 1.0 s, ranks 1 and 2 at 0.2 and 0.5 s, all leave at 1.1 s.  Late Broadcast by hand
    # (Scalasca: the root's entry minus one's own): rank 1 0.8 s, rank 2 0.5 s, whatever the root records received
    def body(ws: list[Any], reg: dict[str, Any], world: Any, pair: Any) -> None:
        for r, (t0, sent, got) in enumerate(((1.0, 24, root_received), (0.2, 0, 8), (0.5, 0, 8))):
            ws[r].enter(round(t0 * NS), reg["MPI_Bcast"])
            ws[r].mpi_collective_begin(round(t0 * NS))
            ws[r].mpi_collective_end(round(1.1 * NS), CollectiveOp.BCAST, world, 0, sent, got)
            ws[r].leave(round(1.1 * NS), reg["MPI_Bcast"])

    anchor = _archive(tmp_path / "b", 3, body)
    waits = api.run(api.recorded_scenario(anchor)).result.waits
    lb = waits[waits["pattern"] == "late_broadcast"].groupby("rank")["wait"].sum()
    assert lb.round(9).to_dict() == {1: 0.8, 2: 0.5}
    ops = records_to_ops(read_otf2(anchor))  # the replay: every rank broadcasts the same 8 bytes
    assert ops.value[ops.code == CODE["bcast"]].tolist() == [8.0, 8.0, 8.0]


# ---- 3. crossed regions ----

def test_crossed_regions_are_refused_at_read_time_with_exit_2(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    def body(ws: list[Any], reg: dict[str, Any], world: Any, pair: Any) -> None:
        ws[0].enter(0, reg["A"])  # the trace's first record: times in messages are since it
        ws[0].enter(int(0.2 * NS), reg["B"])
        ws[0].leave(int(0.3 * NS), reg["A"])  # A left while B, entered inside it, is open
        ws[0].leave(int(0.4 * NS), reg["B"])
        for w in ws:
            _barrier(w, reg, world, 0.5, 0.6)

    anchor = _archive(tmp_path / "c", 2, body)
    code, err = _analyze(anchor, tmp_path / "out", capsys)
    assert code == 2 and not (tmp_path / "out").exists()
    _one_line(err, str(anchor), "rank 0", "regions cross", "Leave of A at 0.300000000 s comes while B, the innermost "
              "region open (entered at 0.200000000 s)")
    assert main(["import-otf2", str(anchor), "-o", str(tmp_path / "imp")]) == 2  # no unreplayable trace written
    _one_line(capsys.readouterr().err.strip(), str(anchor), "rank 0", "regions cross")
    assert not (tmp_path / "imp").exists()


# ---- 4. a collective of a non-member, a communicator listing a rank twice ----

def test_a_collective_recorded_by_a_non_member_is_refused_naming_it(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def body(ws: list[Any], reg: dict[str, Any], world: Any, pair: Any) -> None:
        for w in ws:  # ranks 0, 1 and 2 on the communicator of ranks 0 and 1
            _barrier(w, reg, pair, 0.5, 0.6)

    anchor = _archive(tmp_path / "n", 3, body)
    code, err = _analyze(anchor, tmp_path / "out", capsys)
    assert code == 2 and not (tmp_path / "out").exists()
    _one_line(err, str(anchor), "rank 2: records MPI_Barrier", "communicator", "[0, 1]", "do not include rank 2")


def test_a_communicator_listing_a_rank_twice_is_refused_naming_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def body(ws: list[Any], reg: dict[str, Any], world: Any, pair: Any) -> None:
        for w in ws[:2]:
            _barrier(w, reg, pair, 0.5, 0.6)

    anchor = _archive(tmp_path / "d", 3, body, pair=[0, 1, 1])
    code, err = _analyze(anchor, tmp_path / "out", capsys)
    assert code == 2 and not (tmp_path / "out").exists()
    _one_line(err, str(anchor), "communicator", "lists rank 1 twice")


def test_collective_instances_name_the_non_member_and_the_duplicate() -> None:
    b = OpBuilder(3)
    b.add("barrier", [0, 1, 2], comm=b.comm_id([0, 1]))  # rank 2 is not a member
    with pytest.raises(SimulationError, match=r"^rank 2 calls 1 collectives on the communicator of world ranks "
                       r"\[0, 1\], of which it is not a member"):
        collective_instances(b.build())
    b = OpBuilder(3)
    b.add("barrier", [0, 1], comm=b.comm_id([0, 1, 1]))
    with pytest.raises(SimulationError, match=r"world ranks \[0, 1, 1\] lists rank 1 twice"):
        collective_instances(b.build())


# ---- 5. docs: the nonblocking-collective agreement holds for waitlab's export only ----

def test_diagnosis_page_says_scalasca_books_nothing_on_score_p_nonblocking_records() -> None:
    text = " ".join((DOCS / "diagnosis.md").read_text().split())
    bullet = text.split("*Non-blocking collectives*")[1].split("- *")[0]
    assert "and both tools book the wait there" not in bullet
    assert "NonBlockingCollectiveComplete" in bullet and "Scalasca books none" in bullet


# ---- 6. a receive done before its send was entered ----

def test_a_receive_done_before_its_send_is_an_impossible_timeline() -> None:
    # message 0: blocking recv 0.1-0.3 s, send entered at 0.5 s: 0.2 s; message 1: irecv at 1.0 s completed by the
    # wait (row 5) leaving at 1.2 s, isend entered at 1.6 s: 0.4 s, the worst; message 2: a possible one
    ev = make_events(rank=[0, 0, 0, 1, 1, 1, 1], op=["send", "isend", "send", "recv", "irecv", "wait", "recv"],
                     enter=[0.5, 1.6, 2.0, 0.1, 1.0, 1.1, 1.9], exit=[0.51, 1.6, 2.1, 0.3, 1.0, 1.2, 2.1],
                     match=[0, 1, 2, 0, 1, 1, 2], done=[0, 1, 2, 3, 5, 5, 6], peer=[1, 1, 1, 0, 0, 0, 0])
    found = impossible_collectives(ev)
    assert found == [{"op": "message", "instances": 2, "of": 3, "worst_gap": pytest.approx(0.4), "worst_instance": 1,
                      "sender": 0, "receiver": 1}]
    assert impossible_line(found) == ("impossible timeline: message: 2 of 3 messages have their receive done before "
                                      "their send was entered (worst gap 0.4 s, message 1 from rank 0 to rank 1)")
    fine = make_events(rank=[0, 1], op=["send", "recv"], enter=[2.0, 1.9], exit=[2.1, 2.1], match=[0, 0], done=[0, 1],
                       peer=[1, 0])
    assert impossible_collectives(fine) == []


def test_an_archive_whose_receive_ends_before_its_send_says_so(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    anchor = _archive(tmp_path / "r", 2, lambda ws, reg, world, pair: _message(ws, reg, world, (0.5, 0.51),
                                                                                (0.1, 0.3)))
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "out"), "--no-png"]) == 0
    capsys.readouterr()
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert ("impossible timeline: message: 1 of 1 message has its receive done before its send was entered (worst "
            "gap 0.2 s, message 0 from rank 0 to rank 1)") in summary


def test_accelerator_stream_locations_left_out_are_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Tester t2, finding 7: a GPU (accelerator-stream) location of a rank, with events, is not analyzed (its kernels
    and copies are not MPI) and is now said in the run's note, as worker threads are; the late sender is unchanged:
    rank 1 receives from 0.1 s, rank 0 sends at 0.5 s, 0.4 s by hand."""
    from otf2.enums import LocationType

    anchor = tmp_path / "gpu"
    with otf2.writer.open(str(anchor), timer_resolution=NS) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, 2)
        regions = {name: d.region(name, region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
                   for name in ("MPI_Send", "MPI_Recv")}
        kernel = d.region("saxpy_kernel", region_role=RegionRole.FUNCTION, paradigm=Paradigm.CUDA)
        stream = d.location("CUDA[0:7]", type=LocationType.ACCELERATOR_STREAM, group=locs[0].group)
        ws = [trace.event_writer_from_location(x) for x in locs]
        _message(ws, regions, world, send=(0.5, 0.5001), recv=(0.1, 0.5002))
        gpu = trace.event_writer_from_location(stream)
        gpu.enter(round(0.2 * NS), kernel)
        gpu.leave(round(0.3 * NS), kernel)
    code = main(["analyze", str(anchor / "traces.otf2"), "-o", str(tmp_path / "out"), "--no-png"])
    out = capsys.readouterr().out
    assert code == 0 and "1 GPU/accelerator-stream locations were not analyzed" in out, out
    run = api.load_run(tmp_path / "out")
    assert float(run.waits["wait"].sum()) == pytest.approx(0.4, abs=1e-9)
