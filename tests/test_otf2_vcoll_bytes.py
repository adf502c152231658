"""``waitlab analyze`` of an OTF2 archive keeps each rank's own bytes in its v-collectives.

A replay (``import-otf2``, ``kind = "otf2"``) gives every rank of a v-collective instance the same count (SMPI needs
ranks that agree); the recorded path once did too, so a gatherv rank that sent nothing became a late sender and a
scatterv rank that received nothing waited for the late root (found against Scalasca 2.6, 5 ranks:
early_reduce 0.4 and late_broadcast 1.2 where Scalasca books 0.2 and 0.6).

The archive is written by hand, as Score-P records these calls (``MpiCollectiveEnd``: the rank's bytes sent and
received). Expected waits by hand (docs/diagnosis.md): a root waits for the last member that sends it bytes (Early
Reduce), a member that receives bytes waits for the root (Late Broadcast), a member that receives nothing waits for
no root. Times in microseconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from otf2_archives import score_p_ranks

from waitlab.cli import main
from waitlab.models.ops import CODE

try:
    import otf2
    from otf2.enums import CollectiveOp, Paradigm, RegionRole

    from waitlab.models.otf2_ops import records_to_ops, records_to_timed_ops
    from waitlab.simulator.otf2_import import read_otf2
    HAVE_READER = shutil.which("cc") is not None
except ImportError:
    HAVE_READER = False
pytestmark = pytest.mark.skipif(not HAVE_READER, reason="python3-otf2 / a C compiler not installed")

UNDEFINED = 0xFFFFFFFF  # OTF2's "no root"
US = 1000  # ticks (1 ns) per microsecond
#: Per rank: (enter, leave) in us, bytes sent, bytes received, for three instances (8-byte elements).
#: A: MPI_Gatherv to root 2, counts {2, 0, 2, 3, 2}; rank 3 enters 200 000 us late; root receives 9 x 8 = 72.
#: B: MPI_Gatherv to root 2, counts {2, 2, 2, 2, 0}; rank 4 enters 200 000 us late but sends nothing.
#: C: MPI_Scatterv from root 0 (300 000 us late), counts {1, 0, 2, 3, 0}: the root sends 6 x 8 = 48.
GATHERV_A = [((0, 1), 16, 0), ((0, 1), 0, 0), ((0, 200_001), 16, 72), ((200_000, 200_001), 24, 0), ((0, 1), 16, 0)]
GATHERV_B = [((1e6, 1e6 + 1), 16, 0), ((1e6, 1e6 + 1), 16, 0), ((1e6, 1e6 + 1), 16, 64), ((1e6, 1e6 + 1), 16, 0),
             ((1.2e6, 1.2e6 + 1), 0, 0)]
SCATTERV_C = [((2.3e6, 2.3e6 + 1), 48, 8), ((2e6, 2e6 + 1), 0, 0), ((2e6, 2.3e6 + 1), 0, 16),
              ((2e6, 2.3e6 + 1), 0, 24), ((2e6, 2e6 + 1), 0, 0)]
#: D: MPI_Allgatherv, counts {1, 2, 0, 1, 1}, nobody late: a rank sends its block to all 5 (5 x 8 x count) and
#: receives 5 x 8 = 40.  E: MPI_Alltoallv, rank r sends 4 elements to r ^ 1 only (rank 4: nothing).
ALLGATHERV_D = [((3e6, 3e6 + 1), 5 * 8 * c, 40) for c in (1, 2, 0, 1, 1)]
ALLTOALLV_E = [((4e6, 4e6 + 1), b, b) for b in (32, 32, 32, 32, 0)]


def _archive(folder: Path) -> Path:
    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, 5)
        reg = {n: d.region(n, region_role=role, paradigm=Paradigm.MPI) for n, role in (
            ("MPI_Gatherv", RegionRole.COLL_ALL2ONE), ("MPI_Scatterv", RegionRole.COLL_ONE2ALL),
            ("MPI_Allgatherv", RegionRole.COLL_ALL2ALL), ("MPI_Alltoallv", RegionRole.COLL_ALL2ALL))}
        ws = [trace.event_writer_from_location(x) for x in locs]
        for region, op, root, rows in ((reg["MPI_Gatherv"], CollectiveOp.GATHERV, 2, GATHERV_A),
                                       (reg["MPI_Gatherv"], CollectiveOp.GATHERV, 2, GATHERV_B),
                                       (reg["MPI_Scatterv"], CollectiveOp.SCATTERV, 0, SCATTERV_C),
                                       (reg["MPI_Allgatherv"], CollectiveOp.ALLGATHERV, UNDEFINED, ALLGATHERV_D),
                                       (reg["MPI_Alltoallv"], CollectiveOp.ALLTOALLV, UNDEFINED, ALLTOALLV_E)):
            for w, ((t0, t1), sent, got) in zip(ws, rows, strict=True):
                w.enter(int(t0 * US), region)
                w.mpi_collective_begin(int(t0 * US))
                w.mpi_collective_end(int(t1 * US), op, world, root, sent, got)
                w.leave(int(t1 * US), region)
    return folder / "traces.otf2"


def _pattern_waits(folder: Path) -> dict[tuple[str, int], float]:
    w = pd.read_parquet(folder / "waits.parquet")
    g = w.groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return {(str(p), int(r)): float(v) for (p, r), v in g.items() if v > 0}


def test_analyze_keeps_each_ranks_bytes_in_v_collectives(tmp_path: Path) -> None:
    anchor = _archive(tmp_path / "a")
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    waits = _pattern_waits(tmp_path / "an")
    # A: root 2 waits from 0 until rank 3 enters (0.2 s); B: rank 4 sends nothing, so no wait for it;
    # C: ranks 2 and 3 receive bytes and wait 0.3 s for root 0; ranks 1 and 4 receive nothing and wait for no root
    assert waits.keys() == {("early_reduce", 2), ("late_broadcast", 2), ("late_broadcast", 3)}
    assert waits["early_reduce", 2] == pytest.approx(0.2, abs=1e-6)
    assert waits["late_broadcast", 2] == pytest.approx(0.3, abs=1e-6)
    assert waits["late_broadcast", 3] == pytest.approx(0.3, abs=1e-6)
    # the event table's bytes are the recorded ones, rank by rank (D, E: nobody late, no wait)
    ev = pd.read_parquet(tmp_path / "an" / "events.parquet")
    ev = ev[ev["op"].isin(["gatherv", "scatterv", "allgatherv", "alltoallv"])]
    ev = ev.sort_values(["rank", "enter"])
    want = {r: [(s, g) for _, s, g in (GATHERV_A[r], GATHERV_B[r], SCATTERV_C[r], ALLGATHERV_D[r], ALLTOALLV_E[r])]
            for r in range(5)}
    got = {int(r): list(zip(grp["bytes"].tolist(), grp["recv_bytes"].tolist(), strict=True))
           for r, grp in ev.groupby("rank")}
    assert got == want


def test_the_replay_of_the_same_archive_keeps_equal_counts(tmp_path: Path) -> None:
    """What SMPI replays: one count per instance, every rank the same (the instance's bytes sent and received
    summed over its ranks, averaged, over its N = 5 blocks): A 72 / 5 = 14.4 -> 14, B 64 / 5 = 12.8 -> 13,
    C 48 / 5 = 9.6 -> 10; the recorded read keeps the v-collectives and each rank's bytes."""
    rec = read_otf2(_archive(tmp_path / "a"))
    ops = records_to_ops(rec)
    assert not ops.mask(("gatherv", "scatterv")).any()
    gather, scatter = np.flatnonzero(ops.code == CODE["gather"]), np.flatnonzero(ops.code == CODE["scatter"])
    assert ops.value[gather].tolist() == [14.0, 13.0] * 5 and ops.value2[gather].tolist() == [14.0, 13.0] * 5
    assert ops.value[scatter].tolist() == [10.0] * 5 and ops.value2[scatter].tolist() == [10.0] * 5
    timed = records_to_timed_ops(rec)[0]
    rows = np.flatnonzero(timed.code == CODE["scatterv"])
    # scatterv: value = bytes the rank sends (the root's sum), value2 = bytes it receives
    assert timed.value[rows].tolist() == [48.0, 0.0, 0.0, 0.0, 0.0]
    assert timed.value2[rows].tolist() == [8.0, 0.0, 16.0, 24.0, 0.0]
