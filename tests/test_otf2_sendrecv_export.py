"""A program's ``MPI_Sendrecv`` in the OTF2 export: one ``MPI_Sendrecv`` region, as Score-P records it.

waitlab runs a sendrecv as isend + irecv + waitall (the event table's rows, each with ``call`` = ``MPI_Sendrecv``).
Before this fix the export wrote those parts as ``MPI_Isend`` / ``MPI_Irecv`` / ``MPI_Waitall`` regions: Vampir and
Scalasca showed an ``MPI_Waitall`` the program never called, the wait-state metric sat in it, and ``waitlab analyze``
of the export named the wait ``waitall`` instead of ``sendRecv``.  Now the call is one region ``MPI_Sendrecv``
(Enter at the call's start, Leave at its end) holding an ``MpiSend`` and an ``MpiRecv`` and the call's metrics.

Expected values are by hand: ``programs/sendrecv.c`` is a ring of 4 ranks where rank 0 works 0.2 s before its
sendrecv, so rank 1 waits 0.2 s for rank 0's message (late sender), nobody else waits (tests/test_sendrecv_names.py).
"""

from __future__ import annotations

import importlib.util
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from program_scenarios import PROGRAMS, needs_smpi

import waitlab
from waitlab.cli import main
from waitlab.models.analysis.waitstates import make_events

try:
    import otf2

    from waitlab.simulator.otf2_export import write_otf2
    HAVE_OTF2 = True
except ImportError:
    HAVE_OTF2 = False
needs_otf2 = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 not installed (scripts/bootstrap.sh)")
TOL = 1e-4
PARTS = ("MPI_Isend", "MPI_Irecv", "MPI_Waitall")  # what waitlab runs, never a call of the program


def _calls(anchor: Path) -> dict[int, list[dict[str, Any]]]:
    """Per rank, its regions in order of entry: name, enter / leave tick, and the records and metrics directly
    inside (``(record type, time, peer)`` and ``(metric name, time, value)``), read with the OTF2 reader."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    stacks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    with otf2.reader.open(str(anchor)) as trace:
        for loc, ev in trace.events:
            r = int(loc.name.split()[1])
            name = type(ev).__name__
            if name == "Enter":
                visit = {"name": ev.region.name, "enter": ev.time, "leave": None, "records": [], "metrics": []}
                out[r].append(visit)
                stacks[r].append(visit)
            elif name == "Leave":
                visit = stacks[r].pop()
                assert visit["name"] == ev.region.name
                visit["leave"] = ev.time
            elif name == "Metric":
                stacks[r][-1]["metrics"].append((ev.metric.member.name, ev.time, ev.values[0]))
            elif name in ("MpiSend", "MpiRecv", "MpiIsend", "MpiIrecv", "MpiIrecvRequest", "MpiIsendComplete"):
                stacks[r][-1]["records"].append((name, ev.time, getattr(ev, "receiver", getattr(ev, "sender", -1))))
    return out


@needs_otf2
def test_sendrecv_parts_are_one_region_with_send_and_recv_by_hand(tmp_path: Path) -> None:
    # rank 0: compute 1 s, then a sendrecv with rank 1 over [1.0, 1.5] s; rank 1 enters its sendrecv at 0 s and waits
    # 1 s for rank 0's message (late sender, on its waitall row 6), then leaves at 1.5 s
    ev = make_events(rank=[0, 0, 0, 0, 1, 1, 1], op=["compute", "isend", "irecv", "waitall", "isend", "irecv",
                                                      "waitall"],
                     enter=[0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], exit=[1.0, 1.0, 1.0, 1.5, 0.0, 0.0, 1.5],
                     match=[-1, 0, 1, -1, 1, 0, -1], done=[-1, 3, 3, -1, 6, 6, -1], peer=[-1, 1, 1, -1, 0, 0, -1],
                     nbytes=[0, 8, 0, 0, 8, 0, 0], recv_bytes=[0, 0, 8, 0, 0, 8, 0])
    ev["call"] = pd.Categorical([""] + ["MPI_Sendrecv"] * 6)
    for c in ("tag", "comm", "parent", "cause"):
        ev[c] = -1 if c in ("parent", "cause") else 0
    ev["excess"] = 0.0
    waits = pd.DataFrame({"event": [6], "rank": [1], "pattern": ["late_sender"], "op": ["sendRecv"], "wait": [1.0],
                          "peer_rank": [0]})
    anchor = write_otf2(ev, waits, {}, tmp_path / "otf2")
    calls = _calls(anchor)
    mpi = {r: [c for c in v if c["name"] not in ("MPI_Init", "MPI_Finalize", "waitlab", "compute")]
           for r, v in calls.items()}
    assert [c["name"] for c in mpi[0]] == ["MPI_Sendrecv"] and [c["name"] for c in mpi[1]] == ["MPI_Sendrecv"]
    s0, s1 = mpi[0][0], mpi[1][0]
    assert (s0["enter"], s0["leave"]) == (1_000_000_000, 1_500_000_000)
    assert (s1["enter"], s1["leave"]) == (0, 1_500_000_000)
    # Score-P's order: the send at the call's start, the receive when it completes (the waitall's end)
    assert s0["records"] == [("MpiSend", 1_000_000_000, 1), ("MpiRecv", 1_500_000_000, 1)]
    assert s1["records"] == [("MpiSend", 0, 0), ("MpiRecv", 1_500_000_000, 0)]
    assert s1["metrics"] == [("wait_state", 1_500_000_000, 1.0)]  # the wait in the call, not in a waitall
    assert s0["metrics"] == []


def _scenario(tmp_path: Path) -> Path:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text('[scenario]\nname = "sendrecv"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                        f'[application]\nkind = "program"\nsources = ["{PROGRAMS / "sendrecv.c"}"]\n')
    return scenario


@pytest.mark.simgrid
@needs_smpi
@needs_otf2
def test_program_sendrecv_exports_as_mpi_sendrecv_and_analyzes_back_as_sendrecv(tmp_path: Path) -> None:
    out = tmp_path / "run"
    waitlab.run(_scenario(tmp_path), out, png=False)
    assert main(["export", str(out), "--otf2", "-o", str(tmp_path / "exp"), "-q"]) == 0
    anchor = tmp_path / "exp" / "otf2" / "traces.otf2"
    calls = _calls(anchor)
    assert sorted(calls) == [0, 1, 2, 3]
    for r, visits in calls.items():
        names = [v["name"] for v in visits]
        assert names.count("MPI_Sendrecv") == 1, (r, names)  # one sendrecv per rank in the program
        assert not set(PARTS) & set(names), (r, names)
        sr = next(v for v in visits if v["name"] == "MPI_Sendrecv")
        # a ring: rank r sends to r + 1 and receives from r - 1 (ranks of MPI_COMM_WORLD)
        assert [(k, p) for k, _, p in sr["records"]] == [("MpiSend", (r + 1) % 4), ("MpiRecv", (r - 1) % 4)]
        assert sr["enter"] <= sr["records"][0][1] <= sr["records"][1][1] <= sr["leave"]
    (wait_metric,) = [m for v in calls[1] for m in v["metrics"] if m[0] == "wait_state"]
    assert wait_metric[2] == pytest.approx(0.2, abs=TOL)
    assert wait_metric[1] == next(v for v in calls[1] if v["name"] == "MPI_Sendrecv")["leave"]

    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "-q"]) == 0
    waits = pd.read_parquet(tmp_path / "an" / "waits.parquet")
    # by hand: rank 1 waits 0.2 s for rank 0 in its sendrecv, as the run itself found (late sender)
    assert waits[["rank", "pattern", "op"]].astype(str).values.tolist() == [["1", "late_sender", "sendRecv"]]
    assert float(waits["wait"].iloc[0]) == pytest.approx(0.2, abs=TOL)


@pytest.mark.simgrid
@pytest.mark.scalasca
@needs_smpi
@needs_otf2
def test_scalasca_finds_the_late_sender_in_the_exported_sendrecv(tmp_path: Path) -> None:
    from waitlab.experiments.scalasca_check import scout_run_folder
    from waitlab.simulator.scalasca import find_scalasca, read_cubex, scalasca_waits

    prefix, reason = find_scalasca()
    if prefix is None or importlib.util.find_spec("pycubexr") is None or shutil.which("otf2-print") is None:
        pytest.skip(f"Scalasca / pycubexr not available: {reason}")
    out = tmp_path / "run"
    waitlab.run(_scenario(tmp_path), out, png=False)
    got = scalasca_waits(read_cubex(scout_run_folder(out, timeout=600)))
    got = got[got["seconds"] > 0]
    # by hand: rank 1's 0.2 s late sender, nothing else (the MPI_Sendrecv region is a blocking receive to scout)
    assert got[["pattern", "rank"]].astype(str).values.tolist() == [["late_sender", "1"]]
    assert float(got["seconds"].iloc[0]) == pytest.approx(0.2, abs=TOL)
