"""A program's ``MPI_Waitany`` and ``MPI_Waitsome`` keep their names (round 24, tester's ``nbwaitany.c``).

The measurement layer records each request they complete as a ``wait`` row (what the matching and the wait rules
read: ``op`` is unchanged), and before this fix those rows carried no call name, so every output named the call
``MPI_Wait``: "Wait by operation: MPI_Wait 0.2 s", the call paths, blame, report.html, and the OTF2 export's region.
Now their ``wait`` rows carry ``call`` = ``MPI_Waitany`` / ``MPI_Waitsome``, as ``MPI_Sendrecv``'s parts carry
``MPI_Sendrecv``, and the outputs that name calls read it; ``MPI_Test*`` completions are left as they were.

``programs/waitany_names.c`` (and its Fortran twin ``waitany_names.f90``), 2 ranks, by hand: rank 0 posts receives
of tags 1, 2, 3 at 0 s and completes them with ``MPI_Waitany``, ``MPI_Waitany``, ``MPI_Waitsome``; rank 1 computes
0.1 s before each of its sends.  Rank 0 waits 0.1 s in each call (late sender; the later two 0.1 s less the previous
message's transfer, under a microsecond): 0.2 s in ``MPI_Waitany``, 0.1 s in ``MPI_Waitsome``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from program_scenarios import PROGRAMS, needs_smpi, program_scenario

import waitlab
from waitlab.cli import main
from waitlab.experiments.scalasca_check import compare_waits, scout_run_folder
from waitlab.models.analysis.callpaths import call_paths
from waitlab.models.analysis.waitstates import make_events
from waitlab.simulator.scalasca import find_scalasca, read_cubex

try:
    import otf2

    from waitlab.simulator.otf2_export import write_otf2
    HAVE_OTF2 = True
except ImportError:
    HAVE_OTF2 = False
needs_otf2 = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 not installed (scripts/bootstrap.sh)")
HAVE_FORTRAN = shutil.which("smpif90") is not None and shutil.which("gfortran") is not None
needs_fortran = pytest.mark.skipif(not HAVE_FORTRAN, reason="smpif90/gfortran not installed (apt-get install gfortran)")

TOL = 1e-5  # the later waits: 0.1 s less a message's transfer (under a microsecond)
CALLS = ["", "", "", "MPI_Waitany", "MPI_Waitany", "MPI_Waitsome"]  # rank 0: three irecvs, then the three calls
MPI_WAIT = re.compile(r"MPI_Wait\b")  # the name the program never called (not MPI_Waitany / MPI_Waitsome)


def _regions(anchor: Path, rank: int) -> list[str]:
    """The MPI regions rank ``rank`` enters, in order (the OTF2 reader), without the frame (Init, Finalize)."""
    names = []
    with otf2.reader.open(str(anchor)) as trace:
        for loc, ev in trace.events:
            if loc.name == f"rank {rank}" and type(ev).__name__ == "Enter" and ev.region.name.startswith("MPI_"):
                names.append(ev.region.name)
    return [n for n in names if n not in ("MPI_Init", "MPI_Finalize")]


def _check_run(events: pd.DataFrame, waits: pd.DataFrame) -> None:
    """The call column, the unchanged ops and the waits of waitany_names (C or Fortran), by hand."""
    mpi = events[events["kind"] == "mpi"]
    rank0 = mpi[mpi["rank"] == 0]
    assert rank0["op"].astype(str).tolist() == ["irecv"] * 3 + ["wait"] * 3  # what the matching reads: as before
    assert rank0["call"].astype(str).tolist() == CALLS
    assert set(events.loc[events["rank"] == 1, "call"].astype(str)) == {""}
    assert waits[["rank", "pattern", "op"]].astype(str).values.tolist() == [
        ["0", "late_sender", "waitany"], ["0", "late_sender", "waitany"], ["0", "late_sender", "waitsome"]]
    assert waits["wait"].tolist() == pytest.approx([0.1, 0.1, 0.1], abs=TOL)
    assert float(waits["wait"].iloc[0]) == pytest.approx(0.1, abs=1e-9)  # entered at 0 s, the send at 0.1 s


@pytest.fixture(scope="module")
def c_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("waitany_names")
    if not shutil.which("smpirun"):
        pytest.skip("SimGrid SMPI (smpirun, smpicc) is not installed")
    out = tmp / "run"
    waitlab.run(program_scenario(tmp, "waitany_names.c"), out, png=False, chrome=True)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Without SimGrid: the OTF2 export of hand-made rows
# ---------------------------------------------------------------------------------------------------------------

@needs_otf2
def test_consecutive_waitany_rows_are_two_calls_in_the_otf2_export(tmp_path: Path) -> None:
    # rank 0 posts two irecvs at 0 s and completes them with two MPI_Waitany over [0, 1] and [1, 2] s; rank 1 sends at
    # 1 and 2 s.  Each wait row is its own MPI_Waitany visit (grouped as a sendrecv's parts, they were one [0, 2] s
    # call, whose second receive Scalasca would time from 0 s: 2 s of late sender where waitlab has 1 s)
    ev = make_events(rank=[0, 0, 0, 0, 1, 1], op=["irecv", "irecv", "wait", "wait", "send", "send"],
                     enter=[0.0, 0.0, 0.0, 1.0, 1.0, 2.0], exit=[0.0, 0.0, 1.0, 2.0, 1.0, 2.0],
                     match=[0, 1, 0, 1, 0, 1], done=[2, 3, -1, -1, 4, 5], peer=[1, 1, 1, 1, 0, 0],
                     nbytes=[0, 0, 0, 0, 8, 8], recv_bytes=[8, 8, 0, 0, 0, 0])
    ev["call"] = pd.Categorical(["", "", "MPI_Waitany", "MPI_Waitany", "", ""])
    for c in ("tag", "comm", "parent", "cause"):
        ev[c] = -1 if c in ("parent", "cause") else 0
    ev["excess"] = 0.0
    waits = pd.DataFrame({"event": [2, 3], "rank": [0, 0], "pattern": ["late_sender"] * 2, "op": ["waitany"] * 2,
                          "wait": [1.0, 1.0], "peer_rank": [1, 1]})
    anchor = write_otf2(ev, waits, {}, tmp_path / "otf2")
    assert _regions(anchor, 0) == ["MPI_Irecv", "MPI_Irecv", "MPI_Waitany", "MPI_Waitany"]
    assert _regions(anchor, 1) == ["MPI_Send", "MPI_Send"]


# ---------------------------------------------------------------------------------------------------------------
# Real programs under SMPI
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_smpi
def test_waitany_and_waitsome_are_named_in_every_output(c_run: Path) -> None:
    ev = pd.read_parquet(c_run / "events.parquet")
    waits = pd.read_parquet(c_run / "waits.parquet")
    _check_run(ev, waits)
    summary = (c_run / "summary.txt").read_text()
    assert "wait by MPI operation: waitany 0.2000 s (66.7%), waitsome 0.1000 s (33.3%)" in summary
    assert list(json.loads((c_run / "summary.json").read_text())["wait_by_op"]) == ["waitany", "waitsome"]
    cp = call_paths(ev)
    assert sorted({cp.names[c] for c, k in zip(cp.code, ev["kind"], strict=True) if k == "mpi"}) == \
        ["MPI_Irecv", "MPI_Send", "MPI_Waitany", "MPI_Waitsome"]
    slices = [e["name"] for e in json.loads((c_run / "trace.json").read_text())["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "mpi" and e.get("tid") == 0]
    assert slices == ["irecv"] * 3 + ["waitany", "waitany", "waitsome"]  # the Chrome trace's slices of rank 0

    assert main(["diagnose", str(c_run), "--no-png", "-q"]) == 0
    md = (c_run / "diagnosis" / "diagnosis.md").read_text()
    js = (c_run / "diagnosis" / "diagnosis.json").read_text()
    html = (c_run / "report.html").read_text()
    assert "Wait by operation: MPI_Waitany 0.2 s, MPI_Waitsome 0.1 s" in md
    assert "every wait in MPI_Waitany, MPI_Waitsome" in md
    assert "`MPI_Waitany`" in md and "MPI_Waitany" in js and "waitany" in html
    for text in (md, js, html):
        assert not MPI_WAIT.search(text)


@pytest.mark.simgrid
@needs_smpi
@needs_otf2
def test_otf2_export_names_the_regions_and_analyzes_to_the_same_waits(c_run: Path, tmp_path: Path) -> None:
    assert main(["export", str(c_run), "--otf2", "-o", str(tmp_path / "exp"), "-q"]) == 0
    anchor = tmp_path / "exp" / "otf2" / "traces.otf2"
    assert _regions(anchor, 0) == ["MPI_Irecv"] * 3 + ["MPI_Waitany", "MPI_Waitany", "MPI_Waitsome"]
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    got = pd.read_parquet(tmp_path / "an" / "waits.parquet")
    ours = pd.read_parquet(c_run / "waits.parquet")
    assert got[["rank", "pattern"]].astype(str).values.tolist() == ours[["rank", "pattern"]].astype(str).values.tolist()
    assert got["wait"].tolist() == pytest.approx(ours["wait"].tolist(), abs=1e-9)  # the export's ns rounding


@pytest.mark.simgrid
@pytest.mark.scalasca
@needs_smpi
@needs_otf2
def test_scalasca_books_the_late_senders_in_mpi_waitany_and_mpi_waitsome(c_run: Path, tmp_path: Path) -> None:

    prefix, reason = find_scalasca()
    if prefix is None or importlib.util.find_spec("pycubexr") is None:
        pytest.skip(f"Scalasca / pycubexr not available: {reason}")
    cubex = scout_run_folder(c_run, out=tmp_path / "exp", timeout=600)
    cmp = compare_waits(pd.read_parquet(c_run / "waits.parquet"), cubex)
    assert cmp[["pattern", "rank"]].astype(str).values.tolist() == [["late_sender", "0"]]
    assert float(cmp["scalasca"].iloc[0]) == pytest.approx(float(cmp["waitlab"].iloc[0]), abs=3e-9)
    table = read_cubex(cubex)
    ls = table[(table["metric"] == "mpi_latesender") & (table["seconds"] > 0)]
    by_call = dict(zip(ls["callpath"].astype(str), ls["seconds"], strict=True))
    assert by_call == pytest.approx({"waitlab>MPI_Waitany": 0.2, "waitlab>MPI_Waitsome": 0.1}, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_capture_of_waitany_and_waitsome_passes_its_replay_check(c_run: Path, tmp_path: Path) -> None:
    index = waitlab.capture(program_scenario(tmp_path, "waitany_names.c"), tmp_path / "cap")
    check = json.loads((index.parent / "capture.json").read_text())["replay_check"]
    live = pd.read_parquet(c_run / "waits.parquet")["wait"].sum()
    assert check["live"]["wait late_sender"] == pytest.approx(float(live), abs=1e-9)
    assert check["replay"] == pytest.approx(check["live"], rel=1e-6)


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_waitany_and_waitsome_are_named(tmp_path: Path) -> None:
    assert (PROGRAMS / "waitany_names.f90").is_file()
    res = waitlab.run(program_scenario(tmp_path, "waitany_names.f90"), tmp_path / "run", png=False).result
    _check_run(res.events, res.waits)
    assert "wait by MPI operation: waitany 0.2000 s (66.7%), waitsome 0.1000 s (33.3%)" in \
        (tmp_path / "run" / "summary.txt").read_text()
