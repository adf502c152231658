"""A hybrid MPI+OpenMP Score-P trace (each rank: a master thread making the MPI calls and OpenMP worker threads):
``waitlab analyze`` reads each rank's MPI location and leaves the threads out (said in one note line); a replay
(``waitlab import-otf2``) still refuses the threads in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

otf2 = pytest.importorskip("otf2")
from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole  # noqa: E402

from waitlab.cli import main  # noqa: E402

OFF = 10**12  # Score-P's timestamps do not start at 0


def _t(s: float) -> int:
    return OFF + round(s * 10**9)


def _hybrid(folder: Path, n: int = 2, nt: int = 3) -> Path:
    """``n`` ranks of ``nt`` threads; only the masters call MPI.  Rank 0 sends at 5.0 s, rank 1 receives from 4.0 s
    (Late Sender 1.0 s); barrier entered at 6.0 and 8.0 s, left at 8.1 s (Wait at Barrier 2.0 s on rank 0)."""
    with otf2.writer.open(str(folder), timer_resolution=10**9) as tr:
        d = tr.definitions
        node = d.system_tree_node("node0")
        groups = [d.location_group(f"MPI Rank {r}", system_tree_parent=node) for r in range(n)]
        locs = {(r, t): d.location("Master thread" if t == 0 else f"OMP thread {t}", type=LocationType.CPU_THREAD,
                                   group=groups[r]) for r in range(n) for t in range(nt)}
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=[locs[r, 0] for r in range(n)])
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=list(range(n))))
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.OPENMP, members=list(locs.values()))
        teams = [d.comm(f"team {r}", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.OPENMP,
                                                  members=[r * nt + t for t in range(nt)])) for r in range(n)]
        reg = {name: d.region(name, region_role=role, paradigm=par) for name, role, par in (
            ("main", RegionRole.FUNCTION, Paradigm.COMPILER), ("work", RegionRole.FUNCTION, Paradigm.COMPILER),
            ("!$omp parallel", RegionRole.PARALLEL, Paradigm.OPENMP), ("MPI_Init", RegionRole.FUNCTION, Paradigm.MPI),
            ("MPI_Send", RegionRole.POINT2POINT, Paradigm.MPI), ("MPI_Recv", RegionRole.POINT2POINT, Paradigm.MPI),
            ("MPI_Barrier", RegionRole.BARRIER, Paradigm.MPI), ("MPI_Finalize", RegionRole.FUNCTION, Paradigm.MPI))}
        w = {k: tr.event_writer_from_location(v) for k, v in locs.items()}
        for r in range(n):
            m = w[r, 0]
            m.enter(_t(0.0), reg["main"])
            m.enter(_t(0.0), reg["MPI_Init"])
            m.leave(_t(1.0), reg["MPI_Init"])
            m.thread_fork(_t(1.0), Paradigm.OPENMP, nt)
            for t in range(nt):
                w[r, t].thread_team_begin(_t(1.0), teams[r])
                w[r, t].enter(_t(1.0), reg["!$omp parallel"])
                w[r, t].enter(_t(1.0), reg["work"])
                w[r, t].leave(_t(1.0 + (t + 1) * 0.5), reg["work"])
                w[r, t].leave(_t(3.0), reg["!$omp parallel"])
                w[r, t].thread_team_end(_t(3.0), teams[r])
            m.thread_join(_t(3.0), Paradigm.OPENMP)
            if r == 0:
                m.enter(_t(5.0), reg["MPI_Send"])
                m.mpi_send(_t(5.0), 1, world, 0, 8)
                m.leave(_t(5.1), reg["MPI_Send"])
            else:
                m.enter(_t(4.0), reg["MPI_Recv"])
                m.mpi_recv(_t(5.2), 0, world, 0, 8)
                m.leave(_t(5.2), reg["MPI_Recv"])
            m.enter(_t(6.0 if r == 0 else 8.0), reg["MPI_Barrier"])
            m.mpi_collective_begin(_t(6.0 if r == 0 else 8.0))
            m.mpi_collective_end(_t(8.1), CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0)
            m.leave(_t(8.1), reg["MPI_Barrier"])
            m.enter(_t(8.2), reg["MPI_Finalize"])
            m.leave(_t(8.3), reg["MPI_Finalize"])
            m.leave(_t(8.3), reg["main"])
    return folder / "traces.otf2"


def test_analyze_reads_each_ranks_master_thread_and_import_still_refuses(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    anchor = _hybrid(tmp_path / "hyb")
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "out"), "--no-png"]) == 0
    out = capsys.readouterr().out
    # 2 ranks x 2 worker threads = 4 locations; each master's ThreadFork, ThreadTeamBegin, ThreadTeamEnd, ThreadJoin:
    # 4 records per rank, 8 in all (the workers' own team records are on their locations, not read)
    note = [ln for ln in out.splitlines() if ln.startswith("note:")]
    assert note == ["note: 4 worker threads' locations and 8 OpenMP/thread records were not analyzed: waitlab "
                    "analyzes MPI waits (each rank's MPI calls, on its master thread)"]
    assert note[0] in (tmp_path / "out" / "summary.txt").read_text().splitlines()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["wait_by_pattern"] == pytest.approx({"late_sender": 1.0, "wait_at_barrier": 2.0})
    code = main(["import-otf2", str(anchor), "-o", str(tmp_path / "imp")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err and "Traceback" not in err
    assert "location 1 ('OMP thread 1' of 'MPI Rank 0'): is a second thread of an MPI process: threads" in err
    assert not (tmp_path / "imp").exists()
