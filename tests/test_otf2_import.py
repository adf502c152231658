"""OTF2 import (issue 25): a Score-P trace of a real MPI run, waitlab's own export, and bad archives.

Expected values come from ``otf2-print`` (OTF2's own reader, independent of waitlab's C reader) and, for
the round trip, from the run the trace was exported from.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab import api
from waitlab.errors import InputError
from waitlab.models.ops import ACTIONS, CODE
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_ops

try:
    import otf2
    from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole

    from waitlab.simulator.otf2_import import read_otf2
    HAVE_OTF2 = shutil.which("otf2-print") is not None and shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
pytestmark = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / otf2-tools / a C compiler not installed")

SCOREP = Path(__file__).parent / "data" / "scorep_ping_pong" / "traces.otf2"


def _print_events(anchor: Path) -> dict[int, list[tuple[str, int, str]]]:
    """Per location: (record, timestamp, rest of the line) as otf2-print shows them."""
    out = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True).stdout
    per: dict[int, list[tuple[str, int, str]]] = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) >= 3 and parts[0].isupper() and parts[1].isdigit() and parts[2].isdigit():
            per.setdefault(int(parts[1]), []).append((parts[0], int(parts[2]), parts[3] if len(parts) > 3 else ""))
    return per


def _resolution(anchor: Path) -> int:
    out = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("CLOCK_PROPERTIES"))
    return int(line.split("Ticks per Seconds:")[1].split(",")[0])


def test_scorep_trace_reads_as_otf2_print_shows_it():
    ops = records_to_ops(read_otf2(SCOREP), cpu_ratio=2.0)
    per = _print_events(SCOREP)
    res = _resolution(SCOREP)
    assert ops.n_ranks == len(per) == 2
    assert ops.names == ("main",)  # Score-P's "int main(int, char**)" under its canonical name
    for loc, records in per.items():
        mine = ops.rank == loc
        for record, code in (("MPI_SEND", "send"), ("MPI_RECV", "recv")):
            expected = [(int(rest.split("Length: ")[1]), int(rest.split("Tag: ")[1].split(",")[0]))
                        for rec, _, rest in records if rec == record]
            rows = mine & (ops.code == CODE[code])
            assert list(zip(ops.value[rows].astype(int).tolist(), ops.tag[rows].tolist(), strict=True)) == expected
            assert (ops.peer[rows] == 1 - loc).all()
        # compute: time outside MPI calls between MPI_Init's end and MPI_Finalize's start, times cpu_ratio
        inside, busy, t_last, on = 0, 0, None, False
        for rec, t, rest in records:
            if rec not in ("ENTER", "LEAVE") or "MPI_" not in rest:
                continue
            if rec == "LEAVE" and "MPI_Init" in rest:
                on, t_last = True, t
            elif rec == "ENTER" and "MPI_Finalize" in rest:
                busy += t - t_last
                break
            elif rec == "ENTER" and on:
                busy += t - t_last
                inside += 1
            elif rec == "LEAVE" and on:
                t_last = t
        assert inside == 18  # MPI_Comm_size, MPI_Comm_rank, 8 sends and 8 receives per rank
        np.testing.assert_allclose(ops.value[mine & (ops.code == CODE["compute"])].sum(), 2.0 * busy / res,
                                   rtol=1e-12)
        seq = [ACTIONS[c] for c in ops.code[mine]]
        assert seq[0] == "enter" and seq[-1] == "leave"


@pytest.mark.simgrid
@pytest.mark.parametrize("platform", ["dawning_5000a", "sunway_taihulight"])
def test_scorep_trace_replays_with_waits_in_its_regions(tmp_path, platform):
    shutil.copytree(SCOREP.parent, tmp_path / "exp")
    (tmp_path / "s.toml").write_text(f'[scenario]\nname = "scorep"\nranks = 2\n[platform]\nname = "{platform}"\n'
                                     '[application]\nkind = "otf2"\ntrace = "exp/traces.otf2"\n')
    run = api.run(tmp_path / "s.toml", tmp_path / "out")
    waits = run.result.waits
    assert len(waits) > 0 and waits["wait"].sum() > 0
    assert set(waits["region"].astype(str)) == {"main"}
    assert set(waits["pattern"].astype(str)) <= {"late_sender", "late_receiver"}
    diag = api.diagnose(tmp_path / "out")
    regions = {r for m in diag.models for r in m.blame()["region"].astype(str)}
    assert "main" in regions


APPS = {
    "stencil": 'kind = "stencil"\ndims = 2\nsteps = 3\ncompute_seconds = 0.01\n[[application.imbalance]]\n'
               'region = "Stencil"\nranks = [1]\ndistribution = "constant"\nmagnitude = 0.005\n',
    "wavefront": 'kind = "wavefront"\nsteps = 2\nblocks = 2\ncompute_seconds = 0.01\n[[application.imbalance]]\n'
                 'region = "Sweep"\nranks = [0]\ndistribution = "constant"\nmagnitude = 0.02\n',
}


@pytest.mark.simgrid
@pytest.mark.parametrize("app", sorted(APPS))
def test_round_trip_run_export_import_replay(tmp_path, app):
    head = '[scenario]\nname = "rt"\nranks = 4\nseed = 1\n[platform]\nname = "dawning_5000a"\n[application]\n'
    (tmp_path / "a.toml").write_text(head + APPS[app])
    first = api.run(tmp_path / "a.toml", tmp_path / "run1").result
    api.export(tmp_path / "run1", ("otf2",))
    (tmp_path / "b.toml").write_text(head + 'kind = "otf2"\ntrace = "run1/otf2/traces.otf2"\n')
    second = api.run(tmp_path / "b.toml", tmp_path / "run2").result
    a = first.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    b = second.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    both = pd.concat({"a": a, "b": b}, axis=1)
    assert both.notna().all().all() and len(both) >= 3
    assert (both["a"] > 0).all()
    np.testing.assert_allclose(both["b"], both["a"], rtol=1e-3)
    assert set(second.events["region"].astype(str)) == set(first.events["region"].astype(str))


# ---- bad archives: written with OTF2's own writer ----

def _archive(folder: Path, n: int, body, members=None) -> Path:
    """An OTF2 archive of ``n`` MPI ranks; ``body(writers, defs)`` writes the events."""
    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        node = d.system_tree_node("machine")
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                           group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(n)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=list(range(n))))
        sub = d.comm("half", group=d.group("half", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                           members=members or [0]))
        regions = {name: d.region(name, region_role=role, paradigm=par) for name, role, par in (
            ("MPI_Allreduce", RegionRole.COLL_ALL2ALL, Paradigm.MPI),
            ("MPI_Send", RegionRole.POINT2POINT, Paradigm.MPI), ("solve", RegionRole.FUNCTION, Paradigm.USER))}
        body([trace.event_writer_from_location(x) for x in locs], regions, world, sub)
    return folder / "traces.otf2"


def _allreduce(w, t, reg, comm) -> None:
    w.enter(t, reg["MPI_Allreduce"])
    w.mpi_collective_begin(t)
    w.mpi_collective_end(t + 10, CollectiveOp.ALLREDUCE, comm, 0xFFFFFFFF, 64, 64)
    w.leave(t + 10, reg["MPI_Allreduce"])


def test_threads_are_refused_naming_the_first_record(tmp_path):
    def body(ws, reg, world, sub):
        for w in ws:
            w.enter(0, reg["solve"])
            w.leave(100, reg["solve"])
        ws[1].omp_fork(150, 4)
        for w in ws:
            _allreduce(w, 200, reg, world)

    anchor = _archive(tmp_path / "t", 2, body)
    with pytest.raises(Otf2Unreplayable, match=r"record OmpFork \(threads") as exc:  # the record written, by name
        records_to_ops(read_otf2(anchor))
    assert exc.value.where == "rank 1"


def test_sub_communicator_collective_keeps_its_communicator(tmp_path):
    # an allreduce of ranks 3 and 1 (communicator-rank order) only: 64 bytes each way in Score-P's accounting are
    # 2 messages of 32 bytes (all_to_all within its 2 members); ranks 0 and 2 have no collective
    def body(ws, reg, world, sub):
        for w in (ws[3], ws[1]):
            _allreduce(w, 0, reg, sub)

    anchor = _archive(tmp_path / "s", 4, body, members=[3, 1])
    ops = records_to_ops(read_otf2(anchor))
    assert ops.comms == ((3, 1),)
    rows = np.flatnonzero(ops.code == CODE["allreduce"])
    assert ops.rank[rows].tolist() == [1, 3] and ops.comm[rows].tolist() == [1, 1]
    assert ops.value[rows].tolist() == [32.0, 32.0]


def test_world_collective_counts_invert_scorep_accounting(tmp_path):
    def body(ws, reg, world, sub):
        for w in ws:
            _allreduce(w, 0, reg, world)  # 64 bytes sent and received per rank over 4 ranks: 16 bytes each

    ops = records_to_ops(read_otf2(_archive(tmp_path / "w", 4, body)))
    rows = ops.code == CODE["allreduce"]
    assert rows.sum() == 4 and (ops.value[rows] == 16).all()


def _scenario(tmp_path: Path, anchor: str, ranks: int = 2) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f'[scenario]\nname = "bad"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                    f'[application]\nkind = "otf2"\ntrace = "{anchor}"\n')
    return path


def _one_line(exc: InputError, *words: str) -> None:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    for w in words:
        assert w in text


def test_truncated_archive_is_one_line(tmp_path):
    shutil.copytree(SCOREP.parent, tmp_path / "exp")
    evt = tmp_path / "exp" / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:400])
    with pytest.raises(InputError) as exc:
        api.run(_scenario(tmp_path, "exp/traces.otf2"))
    _one_line(exc.value, "traces.otf2", "truncated")


def test_unmatched_message_and_rank_count_are_one_line(tmp_path):
    def body(ws, reg, world, sub):
        ws[0].enter(0, reg["MPI_Send"])
        ws[0].mpi_send(0, 1, world, 3, 8)
        ws[0].leave(5, reg["MPI_Send"])
        ws[1].enter(0, reg["solve"])
        ws[1].leave(5, reg["solve"])

    _archive(tmp_path / "u", 2, body)
    with pytest.raises(InputError) as exc:
        api.run(_scenario(tmp_path, "u/traces.otf2"))
    _one_line(exc.value, "traces.otf2", "send")
    with pytest.raises(InputError) as exc:
        api.run(_scenario(tmp_path, "u/traces.otf2", ranks=3))
    _one_line(exc.value, "ranks = 2")
    with pytest.raises(InputError) as exc:
        api.run(_scenario(tmp_path, "missing/traces.otf2"))
    _one_line(exc.value, "application.trace", "does not exist")


def test_sendrecv_and_single_waits_become_replayable_operations(tmp_path):
    def body(ws, reg, world, sub):
        for me, w in enumerate(ws):
            other = 1 - me
            w.enter(0, reg["MPI_Send"])  # an MPI_Sendrecv-like call: both records in one MPI call
            w.mpi_send(1, other, world, 7, 32)
            w.mpi_recv(9, other, world, 7, 32)
            w.leave(10, reg["MPI_Send"])
            w.enter(20, reg["MPI_Send"])  # isend + irecv, each completed by its own wait
            w.mpi_isend(20, other, world, 8, 64, 100)
            w.mpi_irecv_request(21, 101)
            w.leave(22, reg["MPI_Send"])
            w.enter(30, reg["MPI_Send"])
            w.mpi_irecv(31, other, world, 8, 64, 101)
            w.leave(32, reg["MPI_Send"])
            w.enter(40, reg["MPI_Send"])
            w.mpi_isend_complete(41, 100)
            w.leave(42, reg["MPI_Send"])

    ops = records_to_ops(read_otf2(_archive(tmp_path / "sr", 2, body)))
    for r in (0, 1):
        mine = ops.rank == r
        names = [ACTIONS[c] for c in ops.code[mine] if ACTIONS[c] != "compute"]
        assert names == ["isend", "irecv", "wait", "wait", "isend", "irecv", "wait", "wait"]
        rows = np.flatnonzero(mine & (ops.code == CODE["wait"]))
        # waits name their request: (partner, tag, completes a receive)
        assert [(int(ops.peer[i]), int(ops.tag[i]), float(ops.value2[i])) for i in rows] == \
            [(1 - r, 7, 0.0), (1 - r, 7, 1.0), (1 - r, 8, 1.0), (1 - r, 8, 0.0)]
        comp = ops.value[mine & (ops.code == CODE["compute"])]
        np.testing.assert_allclose(comp, [10e-9, 8e-9, 8e-9])  # the gaps between the MPI calls (1 ns ticks)


def test_nonblocking_collective_is_booked_where_it_completes(tmp_path):
    def body(ws, reg, world, sub):
        for me, w in enumerate(ws):
            w.enter(0, reg["MPI_Allreduce"])  # MPI_Iallreduce
            w.non_blocking_collective_request(1, 500)
            w.leave(2, reg["MPI_Allreduce"])
            w.enter(2, reg["solve"])
            w.leave(50 + 10 * me, reg["solve"])
            w.enter(50 + 10 * me, reg["MPI_Send"])  # the MPI_Wait completing it
            w.non_blocking_collective_complete(70, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 32, 32, 500)
            w.leave(70, reg["MPI_Send"])

    ops = records_to_ops(read_otf2(_archive(tmp_path / "nbc", 2, body)))
    for r in (0, 1):
        mine = ops.rank == r
        assert [ACTIONS[c] for c in ops.code[mine] if ACTIONS[c] != "compute"] == ["enter", "leave", "allreduce"]
        assert ops.value[mine & (ops.code == CODE["allreduce"])].tolist() == [16.0]
        # compute: 2 ns before the solve, the solve, none inside MPI calls
        np.testing.assert_allclose(ops.value[mine & (ops.code == CODE["compute"])].sum(), (48 + 10 * r) * 1e-9)


def test_irecv_carries_the_size_of_a_small_message(tmp_path):
    """An ``MPI_Irecv`` of a 4-byte message: the irecv operation has the 4 bytes its completion record received
    (``MpiIrecv``), not the request id (101) that its ``MpiIrecvRequest`` holds; the isend's size is its own."""
    def body(ws, reg, world, sub):
        ws[0].enter(0, reg["MPI_Send"])
        ws[0].mpi_isend(1, 1, world, 3, 4, 100)
        ws[0].mpi_isend_complete(2, 100)
        ws[0].leave(3, reg["MPI_Send"])
        ws[1].enter(0, reg["MPI_Send"])
        ws[1].mpi_irecv_request(1, 101)
        ws[1].leave(2, reg["MPI_Send"])
        ws[1].enter(10, reg["MPI_Send"])
        ws[1].mpi_irecv(11, 0, world, 3, 4, 101)
        ws[1].leave(12, reg["MPI_Send"])

    ops = records_to_ops(read_otf2(_archive(tmp_path / "small", 2, body)))
    recv = np.flatnonzero(ops.code == CODE["irecv"])
    assert [(int(ops.rank[i]), float(ops.value[i]), int(ops.peer[i]), int(ops.tag[i])) for i in recv] == \
        [(1, 4.0, 0, 3)]
    send = np.flatnonzero(ops.code == CODE["isend"])
    assert [(int(ops.rank[i]), float(ops.value[i]), int(ops.peer[i])) for i in send] == [(0, 4.0, 1)]


def test_nonblocking_collective_posted_right_after_a_blocking_call(tmp_path):
    """An ``MPI_Iallreduce`` posted at the very tick its rank left an ``MPI_Send`` (``MPI_Recv``): the send and the
    receive stay blocking operations of their own call, and the all-reduce is booked where it completes."""
    def body(ws, reg, world, sub):
        for me, w in enumerate(ws):
            w.enter(0, reg["MPI_Send"])
            if me == 0:
                w.mpi_send(1, 1, world, 5, 16)
            else:
                w.mpi_recv(9, 0, world, 5, 16)
            w.leave(10, reg["MPI_Send"])
            w.enter(10, reg["MPI_Allreduce"])  # posted at the tick the blocking call left
            w.non_blocking_collective_request(10, 600)
            w.leave(11, reg["MPI_Allreduce"])
            w.enter(11, reg["solve"])
            w.leave(40, reg["solve"])
            w.enter(40, reg["MPI_Send"])  # the MPI_Wait completing it
            w.non_blocking_collective_complete(45, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 8, 8, 600)
            w.leave(45, reg["MPI_Send"])

    ops = records_to_ops(read_otf2(_archive(tmp_path / "post", 2, body)))
    for r, first in ((0, "send"), (1, "recv")):
        mine = ops.rank == r
        assert [ACTIONS[c] for c in ops.code[mine] if ACTIONS[c] != "compute"] == [first, "enter", "leave", "allreduce"]
        assert ops.value[mine & (ops.code == CODE[first])].tolist() == [16.0]
        # 8 bytes sent per rank over 2 ranks: 4 bytes each (Score-P's accounting, as for a blocking all-reduce)
        assert ops.value[mine & (ops.code == CODE["allreduce"])].tolist() == [4.0]
        # compute: the solve's 29 ns, nothing inside the MPI calls
        np.testing.assert_allclose(ops.value[mine & (ops.code == CODE["compute"])].sum(), 29e-9)
