"""A program's ``MPI_Sendrecv`` is named as the program called it (issue 42).

waitlab runs a sendrecv as isend + irecv + waitall (how SMPI runs it; the matching and the wait states need the
parts), but the outputs that name calls -- blame and critical-path labels, call paths, wait by operation,
diagnosis.md/json, report.html -- say ``MPI_Sendrecv``, never ``MPI_Waitall`` (a call the program never makes).

``programs/sendrecv.c``: a ring of 4 ranks; rank 0 runs 0.2 s of injected work (``WAITLAB_INJECT``) before its
``MPI_Sendrecv``, the others enter theirs at 0 s.  By hand: rank 1 receives from rank 0, so it waits 0.2 s (late
sender) in its sendrecv; ranks 2 and 3 receive from ranks 1 and 2, which sent at 0 s: no wait.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from otf2_archives import two_rank_archive
from program_scenarios import PROGRAMS, needs_smpi

import waitlab
from waitlab.cli import main
from waitlab.models.analysis.callpaths import call_paths
from waitlab.models.analysis.critical_path import critical_path
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.models.vocabulary import CODE
from waitlab.simulator.ti_trace import parse_ti_trace

TOL = 1e-4
PARTS = ("MPI_Waitall", "MPI_Isend", "MPI_Irecv")  # what waitlab runs, never a name the program sees


PENDING_OVER_SENDRECV = """#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, a = 0, b = 0, c = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Request q;
  if (r == 0) {
    MPI_Irecv(&c, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &q);
    MPI_Sendrecv(&a, 1, MPI_INT, 1, 1, &b, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Waitall(1, &q, MPI_STATUSES_IGNORE);
  } else {
    MPI_Sendrecv(&a, 1, MPI_INT, 0, 2, &b, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    smpi_execute_benched(0.2);
    MPI_Send(&c, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
"""


@pytest.mark.simgrid
@needs_smpi
def test_a_sendrecv_does_not_complete_the_programs_pending_irecv(tmp_path: Path) -> None:
    # rank 0's irecv (tag 5) is completed by its own MPI_Waitall, after the sendrecv: rank 1 sends at 0.2 s, so rank
    # 0 waits 0.2 s in that waitall (late sender), none in the sendrecv (by hand)
    (tmp_path / "p.c").write_text(PENDING_OVER_SENDRECV)
    (tmp_path / "s.toml").write_text('[scenario]\nname = "pending"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                                     '[application]\nkind = "program"\nsources = ["p.c"]\n')
    res = waitlab.run(tmp_path / "s.toml").result
    ev, waits = res.events, res.waits
    rows0 = ev[(ev["rank"] == 0) & (ev["kind"] == "mpi")]
    assert rows0["op"].astype(str).tolist() == ["irecv", "isend", "irecv", "waitall", "waitall"]
    assert int(rows0["done"].iloc[0]) == int(rows0.index[4])  # the program's waitall, not the sendrecv's
    assert waits[["rank", "op"]].astype(str).values.tolist() == [["0", "waitall"]]
    assert float(waits["wait"].iloc[0]) == pytest.approx(0.2, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_program_sendrecv_is_named_mpi_sendrecv(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(f'[scenario]\nname = "sendrecv"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                        f'[application]\nkind = "program"\nsources = ["{PROGRAMS / "sendrecv.c"}"]\n')
    out = tmp_path / "run"
    waitlab.run(scenario, out, png=False, chrome=True)
    ev = pd.read_parquet(out / "events.parquet")
    mpi = ev[ev["kind"] == "mpi"]
    # the matching still sees the parts; each part says which call of the program it belongs to
    assert mpi["op"].astype(str).tolist() == ["isend", "irecv", "waitall"] * 4
    assert set(mpi["call"].astype(str)) == {"MPI_Sendrecv"}
    assert set(ev.loc[ev["kind"] != "mpi", "call"].astype(str)) == {""}
    waits = pd.read_parquet(out / "waits.parquet")
    assert waits[["rank", "pattern", "op"]].astype(str).values.tolist() == [["1", "late_sender", "sendRecv"]]
    assert float(waits["wait"].iloc[0]) == pytest.approx(0.2, abs=TOL)
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["wait_by_op"]) == ["sendRecv"]
    slices = [e["name"] for e in json.loads((out / "trace.json").read_text())["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "mpi"]
    assert slices == ["sendRecv"] * 12  # the Chrome trace's slices: the call, not its parts

    assert main(["diagnose", str(out), "--no-png", "-q"]) == 0
    md = (out / "diagnosis" / "diagnosis.md").read_text()
    js = (out / "diagnosis" / "diagnosis.json").read_text()
    html = (out / "report.html").read_text()
    assert "Wait by operation: MPI_Sendrecv 0.2 s" in md
    assert "every wait in MPI_Sendrecv" in md  # H-CWP-DM (earliest) looks at the sendrecv's waits (point to point)
    assert "Hotspots (>= 1% of the time): `MPI_Sendrecv`" in md
    assert "| `MPI_Sendrecv` |" in md  # the critical path by region
    diag = json.loads(js)
    assert "MPI_Sendrecv" in diag["models"]["hcwpdm"]["hotspots"]
    assert "MPI_Sendrecv" in [r["region"] for r in diag["critical_path"]["by_region"]]
    assert "MPI_Sendrecv" in html
    for text in (md, js, html):
        for part in PARTS:
            assert part not in text


def test_call_names_label_call_paths_and_critical_path_by_hand() -> None:
    # rank 0: compute 1 s, then a sendrecv to/from rank 1 (isend, irecv, waitall) that takes 0.5 s; rank 1 enters
    # its sendrecv at 0 s and waits 1 s in the waitall for rank 0's message (late sender), then 0.5 s as rank 0.
    # Critical path (1.5 s): rank 0's compute (1 s), then the sendrecv (0.5 s).
    ev = make_events(rank=[0, 0, 0, 0, 1, 1, 1], op=["compute", "isend", "irecv", "waitall", "isend", "irecv",
                                                      "waitall"],
                     enter=[0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], exit=[1.0, 1.0, 1.0, 1.5, 0.0, 0.0, 1.5],
                     match=[-1, 0, 1, -1, 1, 0, -1], done=[-1, 3, 3, -1, 6, 6, -1], peer=[-1, 1, 1, -1, 0, 0, -1])
    ev["call"] = pd.Categorical([""] + ["MPI_Sendrecv"] * 6)
    waits = wait_states(ev)
    assert waits[["rank", "op"]].astype(str).values.tolist() == [["1", "sendRecv"]]
    assert float(waits["wait"].iloc[0]) == 1.0
    cp = call_paths(ev)
    assert [cp.names[c] for c in cp.code] == ["(top level)"] + ["MPI_Sendrecv"] * 6  # one call path per call
    by_region = critical_path(ev, waits).by_region
    assert dict(zip(by_region["region"], by_region["seconds"], strict=True)) == {"compute": 1.0, "MPI_Sendrecv": 0.5}
    # without the column, the same rows are named after their parts (traces that say nothing more)
    plain = ev.drop(columns="call")
    assert sorted({call_paths(plain).names[c] for c in call_paths(plain).code}) == \
        ["(top level)", "MPI_Irecv", "MPI_Isend", "MPI_Waitall"]
    assert wait_states(plain)["op"].astype(str).tolist() == ["waitall"]


def _sendrecv_archive(folder: Path) -> Path:
    """A 2-rank OTF2 archive as Score-P records an MPI_Sendrecv (1 ns ticks): the send and receive records inside
    one ``MPI_Sendrecv`` region visit.  Rank 0 enters its call at 110 ns, rank 1 at 150 ns; both leave at 200 ns.
    (None of the Score-P traces of tests/data enters MPI_Sendrecv: they only define the region.)"""
    def body(writers: list[Any], reg: dict[str, Any], world: Any) -> None:
        for me, w in enumerate(writers):
            w.enter(100, reg["MPI_Comm_rank"])
            w.leave(105, reg["MPI_Comm_rank"])
            w.enter(110 + 40 * me, reg["MPI_Sendrecv"])
            w.mpi_send(111 + 40 * me, 1 - me, world, 7, 32)
            w.mpi_recv(190, 1 - me, world, 7, 32)
            w.leave(200, reg["MPI_Sendrecv"])
    return two_rank_archive(folder, body)


def test_otf2_import_names_a_recorded_sendrecv_mpi_sendrecv(tmp_path: Path) -> None:
    if shutil.which("otf2-print") is None or shutil.which("cc") is None:
        pytest.skip("otf2-tools / a C compiler not installed")
    archive = _sendrecv_archive(tmp_path / "sr")
    out = tmp_path / "an"
    assert main(["analyze", str(archive), "-o", str(out), "--no-png", "-q"]) == 0
    ev = pd.read_parquet(out / "events.parquet")
    mpi = ev[ev["kind"] == "mpi"]
    assert mpi["op"].astype(str).tolist() == ["isend", "irecv", "wait", "wait"] * 2  # what the matching reads
    assert set(mpi["call"].astype(str)) == {"MPI_Sendrecv"}
    # rank 0 waits in its receive's wait for rank 1 to enter: 150 - 110 = 40 ns (late sender), in its sendrecv
    waits = pd.read_parquet(out / "waits.parquet")
    assert waits[["rank", "pattern", "op"]].astype(str).values.tolist() == [["0", "late_sender", "sendRecv"]]
    assert float(waits["wait"].iloc[0]) == pytest.approx(40e-9)
    md = (out / "diagnosis" / "diagnosis.md").read_text()
    js = (out / "diagnosis" / "diagnosis.json").read_text()
    html = (out / "report.html").read_text()
    assert "Wait by operation: MPI_Sendrecv 4e-08 s" in md
    assert "MPI_Sendrecv" in js and "MPI_Sendrecv" in html
    for text in (md, js, html):
        for part in ("MPI_Wait", "MPI_Isend", "MPI_Irecv"):  # MPI_Wait also rules out MPI_Waitall
            assert part not in text


def test_ti_trace_sendrecv_is_named_mpi_sendrecv(tmp_path: Path) -> None:
    # SMPI's -trace-ti writes one sendRecv line per call; waitlab runs it as isend, irecv, waitall
    (tmp_path / "t.txt").write_text("0 init\n1 init\n0 sendRecv 2 1 3 1\n1 sendRecv 3 0 2 0\n"
                                    "0 finalize\n1 finalize\n")
    (tmp_path / "index").write_text("t.txt\n")
    ops = parse_ti_trace(tmp_path / "index", flops_per_second=1e9).ops
    mpi = np.flatnonzero(np.isin(ops.code, [CODE["isend"], CODE["irecv"], CODE["waitall"]]))
    assert mpi.size == 6 and {ops.names[i] for i in ops.name[mpi].tolist()} == {"MPI_Sendrecv"}
    assert (ops.name[~np.isin(np.arange(len(ops)), mpi)] == -1).all()
