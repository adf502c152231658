"""Valid but unusual, and malformed, OTF2 archives read by ``waitlab analyze`` and ``waitlab import-otf2``.

Each archive is written by hand with the OTF2 bindings as Score-P lays it out (:class:`Archive`: a master thread per
rank in its own location group, MPI regions of paradigm MPI with the source file ``MPI``, ``MPI_Init``,
``MPI_Finalize``, ``ProgramBegin``/``ProgramEnd``: what Scalasca needs to read it).  Expected waits are counted by
hand with Scalasca 2.6's definitions (``src/scout/generator/MPI.pattern``): Late Sender = E_send - E_recv in a blocking
receive or wait, never in an ``MPI_Test*`` call (``is_mpi_testx``); Late Receiver only in blocking sends and waits.
Where Scalasca reads the archive, its ``scout.mpi`` is run on it too (skipped, saying why, where it is absent).
Times in the comments are seconds (1 ns ticks).
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from waitlab.cli import main
from waitlab.models.ops import CODE
from waitlab.simulator.scalasca import find_scalasca, read_cubex, run_scout, scalasca_waits

try:
    import otf2
    from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole

    from waitlab.models.otf2_ops import Otf2Inconsistent, records_to_ops, records_to_timed_ops
    from waitlab.simulator.otf2_import import read_otf2
    HAVE_READER = shutil.which("cc") is not None
except ImportError:
    HAVE_READER = False
pytestmark = pytest.mark.skipif(not HAVE_READER, reason="python3-otf2 / a C compiler not installed")

UNDEFINED = 0xFFFFFFFF  # OTF2's "no root"


def T(seconds: float) -> int:
    """Ticks (1 ns) of ``seconds``."""
    return round(seconds * 1e9)


class Archive:
    """A Score-P-like archive being written (module docstring) of ``n`` ranks on one host, 1 ns ticks."""

    def __init__(self, folder: Path, n: int, *, contexts: bool = False) -> None:
        self.folder = folder
        self._cm = otf2.writer.open(str(folder), timer_resolution=10**9)
        self.trace = self._cm.__enter__()
        d = self.d = self.trace.definitions
        node = d.system_tree_node("node0")
        self.locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                                group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(n)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=self.locs)
        self.world = self.comm("MPI_COMM_WORLD", list(range(n)))
        self.self_comm = d.comm("MPI_COMM_SELF", group=d.group("", group_type=GroupType.COMM_SELF,
                                                                  paradigm=Paradigm.MPI, members=[]))
        self.w = [self.trace.event_writer_from_location(x) for x in self.locs]
        self.contexts = contexts  # enter and leave as CallingContextEnter / Leave (SCOREP_ENABLE_UNWINDING=true)
        self._regions: dict[str, Any] = {}
        self._ctx: dict[str, Any] = {}
        self._main = d.region("main", region_role=RegionRole.ARTIFICIAL, paradigm=Paradigm.MEASUREMENT_SYSTEM)

    def comm(self, name: str, members: list[int]) -> Any:
        return self.d.comm(name, group=self.d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                    members=members))

    def region(self, name: str, paradigm: Any = None) -> Any:
        if name not in self._regions:
            mpi = name.startswith("MPI_") if paradigm is None else paradigm == Paradigm.MPI
            self._regions[name] = (
                self.d.region(name, canonical_name=name, region_role=RegionRole.POINT2POINT, source_file="MPI",
                              paradigm=Paradigm.MPI) if mpi else
                self.d.region(name, canonical_name=name, region_role=RegionRole.FUNCTION,
                              paradigm=paradigm or Paradigm.USER))
        return self._regions[name]

    def enter(self, r: int, t: float, name: str) -> None:
        if self.contexts:
            if name not in self._ctx:
                self._ctx[name] = self.d.calling_context(self.region(name), None, None)
            self.w[r].calling_context_enter(T(t), self._ctx[name], 1)
        else:
            self.w[r].enter(T(t), self.region(name))

    def leave(self, r: int, t: float, name: str) -> None:
        if self.contexts:
            self.w[r].calling_context_leave(T(t), self._ctx[name])
        else:
            self.w[r].leave(T(t), self.region(name))

    def call(self, r: int, name: str, t0: float, t1: float, *records: Callable[[Any], None]) -> None:
        """An MPI call of rank ``r`` from ``t0`` to ``t1``; ``records(writer)`` write its records."""
        self.enter(r, t0, name)
        for write in records:
            write(self.w[r])
        self.leave(r, t1, name)

    def init(self, t0: float = 0.0, t1: float = 0.1) -> None:
        for r, w in enumerate(self.w):
            w.program_begin(T(t0), self._main.name, [])
            self.call(r, "MPI_Init", t0, t1)

    def send(self, r: int, t0: float, t1: float, peer: int, tag: int, size: int, comm: Any = None) -> None:
        c = comm or self.world
        self.call(r, "MPI_Send", t0, t1, lambda w: w.mpi_send(T(t0), peer, c, tag, size))

    def recv(self, r: int, t0: float, t1: float, peer: int, tag: int, size: int, comm: Any = None) -> None:
        c = comm or self.world
        self.call(r, "MPI_Recv", t0, t1, lambda w: w.mpi_recv(T(t1), peer, c, tag, size))

    def close(self, t0: float, t1: float) -> Path:
        for r, w in enumerate(self.w):
            self.call(r, "MPI_Finalize", t0, t1)
            w.program_end(T(t1), 0)
        self._cm.__exit__(None, None, None)
        return self.folder / "traces.otf2"


def _isend(t: float, peer: int, comm: Any, tag: int, size: int, request: int) -> Callable[[Any], None]:
    return lambda w: w.mpi_isend(T(t), peer, comm, tag, size, request)


def _request_test(t: float, request: int) -> Callable[[Any], None]:
    return lambda w: w.mpi_request_test(T(t), request)


def _collective_begin(t: float) -> Callable[[Any], None]:
    return lambda w: w.mpi_collective_begin(T(t))


def _analyze(anchor: Path, out: Path) -> dict[tuple[str, int], float]:
    assert main(["analyze", str(anchor), "-o", str(out), "--no-png", "-q"]) == 0
    w = pd.read_parquet(out / "waits.parquet")
    g = w.groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return {(str(p), int(r)): float(v) for (p, r), v in g.items() if v > 0}


def _scout(anchor: Path, ranks: int, copy: Path) -> dict[tuple[str, int], float]:
    """Scalasca 2.6's waits per (pattern, rank) on a copy of the archive; skips where Scalasca is absent."""

    prefix, reason = find_scalasca()
    if prefix is None:
        pytest.skip(reason)
    if importlib.util.find_spec("pycubexr") is None:
        pytest.skip("pycubexr is not installed (pip install 'waitlab[scalasca]')")
    shutil.copytree(anchor.parent, copy)
    table = scalasca_waits(read_cubex(run_scout(copy / anchor.name, ranks, prefix=prefix, timeout=300)))
    return {(str(p), int(r)): float(s) for p, r, s in table.itertuples(index=False) if s > 0}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Run ``argv``: it fails with one line (no traceback) holding every needle, and leaves no output folder."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not Path(argv[argv.index("-o") + 1]).exists()
    return err


def _both_refuse(anchor: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    _refused(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"], capsys, *needles)
    _refused(["import-otf2", str(anchor), "-o", str(tmp_path / "ti"), "-q"], capsys, *needles)


# 1. Calling contexts (Score-P with unwinding) -------------------------------------------------------------------------

def _late_sender_pair(folder: Path, contexts: bool) -> Path:
    """Rank 0 in MPI_Recv from 0.5 to 1.1 s, rank 1 enters MPI_Send at 1.0 s: Late Sender 0.5 s on rank 0."""
    a = Archive(folder, 2, contexts=contexts)
    a.init()
    a.recv(0, 0.5, 1.1, 1, 7, 8)
    a.send(1, 1.0, 1.01, 0, 7, 8)
    return a.close(2.0, 2.1)


def test_calling_context_records_are_read_as_their_regions(tmp_path: Path) -> None:
    """Score-P with SCOREP_ENABLE_UNWINDING=true records every region's enter and leave as CallingContextEnter /
    Leave; the region is the calling context's.  Read before as nothing (3 events, 0 wait states for 2.1 s)."""
    ctx = _late_sender_pair(tmp_path / "ctx", contexts=True)
    plain = _late_sender_pair(tmp_path / "plain", contexts=False)
    waits = _analyze(ctx, tmp_path / "an")
    assert waits == {("late_sender", 0): pytest.approx(0.5, abs=1e-9)}
    # the same operations, with the same times, as the Enter/Leave form of the same trace
    (a, ta, xa), (b, tb, xb) = records_to_timed_ops(read_otf2(ctx)), records_to_timed_ops(read_otf2(plain))
    for col in ("rank", "code", "value", "peer", "tag"):
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col))
    np.testing.assert_allclose(ta, tb)
    np.testing.assert_allclose(xa, xb)
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    recv = ev[ev["op"] == "recv"]
    assert recv["enter"].tolist() == pytest.approx([0.5]) and recv["exit"].tolist() == pytest.approx([1.1])
    # Scalasca 2.6 crashes on calling-context records; on the Enter/Leave form it finds the same wait
    assert _scout(plain, 2, tmp_path / "scout") == waits


# 1b. MPI records outside every MPI call ------------------------------------------------------------------------------

@pytest.mark.parametrize("frame", ["none", "user_region", "mpi_named_user_region"])
def test_an_mpi_record_outside_every_call_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     frame: str) -> None:
    """An MPI record no MPI region frames has no call times: it was an operation of no length (a wait of none)."""
    a = Archive(tmp_path / "a", 2)
    a.init()
    if frame == "none":  # rank 0's MpiRecv at 1.1 s in no region at all
        a.w[0].mpi_recv(T(1.1), 1, a.world, 7, 8)
    else:  # inside a user region, or in a region named MPI_Recv whose paradigm is not MPI
        name = "solve" if frame == "user_region" else "MPI_Recv"
        a.enter(0, 0.5, name) if frame == "user_region" else a.w[0].enter(T(0.5), a.region(name, Paradigm.USER))
        a.w[0].mpi_recv(T(1.1), 1, a.world, 7, 8)
        a.leave(0, 1.1, name) if frame == "user_region" else a.w[0].leave(T(1.1), a.region(name, Paradigm.USER))
    a.send(1, 1.0, 1.01, 0, 7, 8)
    anchor = a.close(2.0, 2.1)
    where = {"none": "outside every MPI call:", "user_region": "inside the region solve, which is not an MPI region",
             "mpi_named_user_region": "inside the region MPI_Recv, which is not an MPI region"}[frame]
    _both_refuse(anchor, tmp_path, capsys, "rank 0: record MpiRecv at 1.100000000 s is outside every MPI call",
                 where, "cannot time it", "record the run again with the MPI calls' regions")
    with pytest.raises(Otf2Inconsistent):
        records_to_ops(read_otf2(anchor))


# 2. MPI_COMM_SELF is a communicator of its own ------------------------------------------------------------------------

@pytest.mark.parametrize("self_size", [10, 20])
def test_messages_to_self_on_comm_self_and_world_match_apart(tmp_path: Path, self_size: int) -> None:
    """Rank 0 sends to itself on MPI_COMM_SELF (tag 5, 10 B or 20 B) at 0.2 s and on MPI_COMM_WORLD (tag 5, 20 B) at
    0.3 s, then receives the WORLD message (0.4 s) before the SELF one (0.5 s): legal, the communicators differ.
    Rank 1 does the same on its own MPI_COMM_SELF.  MPI_COMM_SELF once was MPI_COMM_WORLD: 10 B were refused as
    inconsistent (MPI_ERR_TRUNCATE), 20 B were paired wrongly without a word."""
    a = Archive(tmp_path / "a", 2)
    a.init()
    for r in (0, 1):
        # the peer on MPI_COMM_SELF is its rank 0 (the rank itself); on MPI_COMM_WORLD the rank's own number
        a.call(r, "MPI_Isend", 0.2, 0.21, lambda w: w.mpi_isend(T(0.2), 0, a.self_comm, 5, self_size, 1))
        a.call(r, "MPI_Isend", 0.3, 0.31, _isend(0.3, r, a.world, 5, 20, 2))
        a.recv(r, 0.4, 0.41, r, 5, 20, comm=a.world)
        a.recv(r, 0.5, 0.51, 0, 5, self_size, comm=a.self_comm)  # the peer on MPI_COMM_SELF: rank 0 of it
        a.call(r, "MPI_Waitall", 0.6, 0.61, lambda w: w.mpi_isend_complete(T(0.61), 1),
               lambda w: w.mpi_isend_complete(T(0.61), 2))
    anchor = a.close(1.0, 1.1)
    assert _analyze(anchor, tmp_path / "an") == {}  # every message was sent before its receive
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    for r in (0, 1):
        rows = ev[(ev["rank"] == r) & ev["op"].isin(["isend", "recv"])].sort_values("enter")
        isend_self, isend_world, recv_world, recv_self = (rows.iloc[i] for i in range(4))
        assert recv_world["match"] == isend_world["match"] and recv_self["match"] == isend_self["match"]
        assert recv_world["match"] != recv_self["match"]
        assert isend_self["comm"] != isend_world["comm"] == 0 and recv_self["comm"] == isend_self["comm"]
    ops = records_to_timed_ops(read_otf2(anchor))[0]
    assert set(ops.comms) == {(0,), (1,)}  # each rank's MPI_COMM_SELF: a communicator of one member
    # the replay's trace keeps them apart too: one tag per (communicator, tag)
    assert main(["import-otf2", str(anchor), "-o", str(tmp_path / "ti"), "-q"]) == 0
    lines = [ln.split() for ln in (tmp_path / "ti" / "rank0.txt").read_text().splitlines()
             if ln.split()[1:2] in (["isend"], ["recv"])]
    assert [(ln[1], ln[4]) for ln in lines] == [("isend", str(self_size)), ("isend", "20"), ("recv", "20"),
                                               ("recv", str(self_size))]
    assert lines[0][3] == lines[3][3] != lines[1][3] == lines[2][3]  # the tags written: SELF's, WORLD's


# 3. No Late Sender in a successful MPI_Test ---------------------------------------------------------------------------

def _test_loop(folder: Path, test: str) -> Path:
    """Rank 0: MPI_Irecv (request 1) at 0.2 s, then a polling loop of unsuccessful ``test`` calls (each holding
    MpiRequestTest); the last, from 1.2 to 1.21 s, completes the receive, whose sender (rank 1) enters MPI_Send at
    1.205 s.  Then rank 1: MPI_Isend (request 2, tag 2, 1 MiB) at 1.3 s completed by a ``test`` from 1.4 to 1.5 s,
    while rank 0 enters its MPI_Recv of it at 1.45 s.  Then rank 0's MPI_Recv (tag 3) from 1.6 to 1.9 s, whose
    sender enters MPI_Send at 1.8 s: Late Sender 0.2 s."""
    a = Archive(folder, 2)
    a.init()
    a.call(0, "MPI_Irecv", 0.2, 0.205, lambda w: w.mpi_irecv_request(T(0.2), 1))
    for k in range(9):
        t = 0.3 + 0.1 * k
        a.call(0, test, t, t + 0.01, _request_test(t + 0.005, 1))
    a.call(0, test, 1.2, 1.21, lambda w: w.mpi_irecv(T(1.21), 1, a.world, 0, 8, 1))
    a.send(1, 1.205, 1.206, 0, 0, 8)
    a.call(1, "MPI_Isend", 1.3, 1.31, lambda w: w.mpi_isend(T(1.3), 0, a.world, 2, 1 << 20, 2))
    a.call(1, test, 1.4, 1.5, lambda w: w.mpi_isend_complete(T(1.5), 2))
    a.recv(0, 1.45, 1.46, 1, 2, 1 << 20)
    a.recv(0, 1.6, 1.9, 1, 3, 8)
    a.send(1, 1.8, 1.81, 0, 3, 8)
    return a.close(2.0, 2.1)


@pytest.mark.parametrize("test", ["MPI_Test", "MPI_Testany", "MPI_Testsome", "MPI_Testall"])
def test_no_late_sender_or_receiver_is_booked_in_a_test(tmp_path: Path, test: str) -> None:
    """By hand, with Scalasca's rule: the successful test waits for nobody (Late Sender in it would be
    1.205 - 1.2 = 0.005 s; Late Receiver in rank 1's test min(1.45, 1.5) - 1.4 = 0.05 s): only the blocking
    MPI_Recv's Late Sender, 1.8 - 1.6 = 0.2 s."""
    anchor = _test_loop(tmp_path / "a", test)
    waits = _analyze(anchor, tmp_path / "an")
    assert waits == {("late_sender", 0): pytest.approx(0.2, abs=1e-9)}
    # the completion spans its test and is named after it (the outputs say "test", not "wait")
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    done = ev[(ev["op"] == "wait")].sort_values("enter")
    assert done["call"].astype(str).tolist() == [test, test]
    assert done["enter"].tolist() == pytest.approx([1.2, 1.4]) and done["exit"].tolist() == pytest.approx([1.21, 1.5])
    # a replay runs the completion as a wait, which blocks: it carries no call name there
    ops = records_to_ops(read_otf2(anchor))
    assert (ops.name[ops.code == CODE["wait"]] == -1).all() and test not in ops.names
    if test == "MPI_Test":
        assert _scout(anchor, 2, tmp_path / "scout") == waits


# 4. A collective on MPI_COMM_SELF and a cancelled request are read ----------------------------------------------------

def test_a_collective_on_comm_self_waits_for_no_one(tmp_path: Path) -> None:
    """Rank 2 of 4 calls MPI_Allreduce on MPI_COMM_SELF (8 B) from 1.0 to 1.1 s, as PETSc and HDF5 do: one rank, no
    wait (it was refused: "cannot be replayed", a list naming allreduce among the collectives that can)."""
    a = Archive(tmp_path / "a", 4)
    a.init()
    a.call(2, "MPI_Allreduce", 1.0, 1.1, lambda w: w.mpi_collective_begin(T(1.0)),
           lambda w: w.mpi_collective_end(T(1.1), CollectiveOp.ALLREDUCE, a.self_comm, UNDEFINED, 8, 8))
    for r in range(4):  # a barrier on MPI_COMM_WORLD, rank 3 last at 1.5 s: Wait at Barrier 0.3 s on ranks 0, 1, 2
        t0 = 1.5 if r == 3 else 1.2
        a.call(r, "MPI_Barrier", t0, 1.6, _collective_begin(t0),
               lambda w: w.mpi_collective_end(T(1.6), CollectiveOp.BARRIER, a.world, UNDEFINED, 0, 0))
    anchor = a.close(2.0, 2.1)
    waits = _analyze(anchor, tmp_path / "an")
    assert waits == {("wait_at_barrier", r): pytest.approx(0.3, abs=1e-9) for r in range(3)}
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    ar = ev[ev["op"] == "allreduce"]
    assert ar["rank"].tolist() == [2] and ar["bytes"].tolist() == [8] and ar["comm"].tolist() != [0]
    assert records_to_timed_ops(read_otf2(anchor))[0].comms == ((2,),)
    assert main(["import-otf2", str(anchor), "-o", str(tmp_path / "ti"), "-q"]) == 0
    assert "allreduce 8 0.0 comm=2" in (tmp_path / "ti" / "rank2.txt").read_text()
    assert _scout(anchor, 4, tmp_path / "scout") == waits


@pytest.mark.parametrize("where", ["MPI_Cancel", "MPI_Wait"])
def test_a_cancelled_receive_moves_no_message(tmp_path: Path, where: str) -> None:
    """Rank 0 posts MPI_Irecv (request 5, any source) at 0.5 s and cancels it, the idiom of a shutdown; Score-P
    records MpiRequestCancelled where the request completes (the MPI_Wait after MPI_Cancel), a hand-written archive
    may in MPI_Cancel.  Then rank 0 is in MPI_Recv from 1.0 to 1.5 s and rank 1 enters MPI_Send at 1.2 s: Late
    Sender 0.2 s, and nothing of the cancelled receive (it was refused: "cannot be replayed")."""
    a = Archive(tmp_path / "a", 2)
    a.init()
    a.call(0, "MPI_Irecv", 0.5, 0.51, lambda w: w.mpi_irecv_request(T(0.5), 5))
    if where == "MPI_Cancel":
        a.call(0, "MPI_Cancel", 0.6, 0.61, lambda w: w.mpi_request_cancelled(T(0.6), 5))
    else:
        a.call(0, "MPI_Cancel", 0.6, 0.61)
        a.call(0, "MPI_Wait", 0.7, 0.71, lambda w: w.mpi_request_cancelled(T(0.71), 5))
    a.recv(0, 1.0, 1.5, 1, 7, 8)
    a.send(1, 1.2, 1.3, 0, 7, 8)
    anchor = a.close(2.0, 2.1)
    waits = _analyze(anchor, tmp_path / "an")
    assert waits == {("late_sender", 0): pytest.approx(0.2, abs=1e-9)}
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    assert ev.loc[(ev["rank"] == 0) & ~ev["op"].isin(["compute", "region"]), "op"].astype(str).tolist() == ["recv"]
    ops = records_to_ops(read_otf2(anchor))  # the replay: the same (no irecv, no wait)
    assert not ops.mask(("irecv", "wait")).any()
    assert _scout(anchor, 2, tmp_path / "scout") == waits


def test_a_cancellation_of_no_request_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = Archive(tmp_path / "a", 2)
    a.init()
    a.call(0, "MPI_Wait", 0.7, 0.71, lambda w: w.mpi_request_cancelled(T(0.71), 9))
    anchor = a.close(2.0, 2.1)
    _both_refuse(anchor, tmp_path, capsys, "rank 0: record MpiRequestCancelled cancels request 9, which no "
                 "MpiIrecvRequest or MpiIsend before it posted")


# 5. A root outside its communicator -----------------------------------------------------------------------------------

@pytest.mark.parametrize("root", [9, 4])
def test_a_collective_root_outside_its_communicator_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               root: int) -> None:
    """An MPI_Bcast on MPI_COMM_WORLD (4 ranks) with root 9 (or 4) was read as root 3 without a word."""
    a = Archive(tmp_path / "a", 4)
    a.init()
    for r in range(4):
        a.call(r, "MPI_Bcast", 2.0, 2.5, lambda w: w.mpi_collective_begin(T(2.0)),
               lambda w: w.mpi_collective_end(T(2.5), CollectiveOp.BCAST, a.world, root, 0, 64))
    anchor = a.close(3.0, 3.1)
    _both_refuse(anchor, tmp_path, capsys, f"rank 0: MPI_Bcast (record MpiCollectiveEnd) names root {root}, which "
                 "is outside its communicator 0 (4 members)")


# 6. Wording: missing and misplaced files, a rank without events, a process the MPI group does not list ----------------

def test_missing_or_misplaced_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _late_sender_pair(tmp_path / "base", contexts=False)

    def variant(name: str, change: Callable[[Path], None]) -> Path:
        shutil.copytree(base.parent, tmp_path / name)
        change(tmp_path / name)
        return tmp_path / name / "traces.otf2"

    def folder_for(path: Path) -> None:
        path.unlink()
        path.mkdir()

    def loop(path: Path) -> None:
        path.unlink()
        path.symlink_to(path.name)

    no_evt = variant("no_evt", lambda p: (p / "traces" / "1.evt").unlink())
    _both_refuse(no_evt, tmp_path, capsys, f"{no_evt.parent / 'traces' / '1.evt'}: (file): is missing: it holds the "
                 "events of rank 1 (location 1)", "copy the whole archive")
    no_dir = variant("no_dir", lambda p: shutil.rmtree(p / "traces"))
    _both_refuse(no_dir, tmp_path, capsys, f"{no_dir.parent / 'traces'}: (folder): is missing: it holds the events "
                 "of every rank")
    dir_def = variant("dir_def", lambda p: folder_for(p / "traces.def"))
    _both_refuse(dir_def, tmp_path, capsys, "traces.def: (file): is a folder, where the file holding the archive's "
                 "definitions should be")
    dir_evt = variant("dir_evt", lambda p: folder_for(p / "traces" / "1.evt"))
    _both_refuse(dir_evt, tmp_path, capsys, "1.evt: (file): is a folder, where the file holding a rank's events "
                 "should be")
    looped = variant("loop", lambda p: loop(p / "traces" / "1.evt"))
    _both_refuse(looped, tmp_path, capsys, "1.evt: (file): is a symbolic link that cannot be followed")


def test_a_rank_without_events_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 2 of 3 recorded nothing (its trace lost): analyzed as idle, and the summary says so in one line."""
    a = Archive(tmp_path / "a", 3)
    for r in (0, 1):
        a.w[r].program_begin(0, a._main.name, [])
        a.call(r, "MPI_Init", 0.0, 0.1)
    a.recv(0, 0.5, 1.1, 1, 7, 8)
    a.send(1, 1.0, 1.01, 0, 7, 8)
    for r in (0, 1):
        a.call(r, "MPI_Finalize", 2.0, 2.1)
    a._cm.__exit__(None, None, None)
    assert main(["analyze", str(tmp_path / "a" / "traces.otf2"), "-o", str(tmp_path / "an"), "--no-png"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note:")]
    assert notes == ["note: rank 2 recorded no events (its trace was probably lost): its whole time counts as idle"]
    # its whole time is idle: the makespan, 2.0 s (to the last operation's end, rank 0's compute up to MPI_Finalize)
    ranks = pd.read_parquet(tmp_path / "an" / "ranks.parquet").set_index("rank")
    assert ranks.loc[2, "idle"] == pytest.approx(2.0) and ranks.loc[2, ["compute", "wait"]].sum() == 0


def test_a_process_outside_the_mpi_location_group_is_refused(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A third process ("MPI Rank 2", its own location group) has events, but the MPI location group lists 2 ranks:
    not a worker thread (import-otf2 said so, analyze left it out as one), an inconsistent archive."""
    with otf2.writer.open(str(tmp_path / "a"), timer_resolution=10**9) as trace:
        d = trace.definitions
        node = d.system_tree_node("node0")
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                           group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(3)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs[:2])
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=[0, 1]))
        reg = d.region("MPI_Barrier", region_role=RegionRole.BARRIER, paradigm=Paradigm.MPI)
        for i, loc in enumerate(locs):
            w = trace.event_writer_from_location(loc)
            w.enter(T(0.1 * i), reg)
            w.mpi_collective_begin(T(0.1 * i))
            w.mpi_collective_end(T(1), CollectiveOp.BARRIER, world, UNDEFINED, 0, 0)
            w.leave(T(1), reg)
    _both_refuse(tmp_path / "a" / "traces.otf2", tmp_path, capsys, "location 2 ('Master thread' of 'MPI Rank 2'): "
                 "holds events, but its process is none of the 2 MPI ranks the archive's MPI location group lists")
