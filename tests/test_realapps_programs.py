"""Real MPI programs (issue 5) run with SMPI: the measurement layer, regions and call sites, injected
perturbations, capture and replay, failures and limits (tests marked ``simgrid``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from program_scenarios import (
    HAVE_SMPI,
    PROGRAMS,
    needs_smpi,
    program_scenario,
    source_line,
    trace_scenario,
)

from waitlab.api import run as run_scenario
from waitlab.errors import InputError, SimulationError
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.ops import CAUSE_KINDS, CODE, Ledger, OpBuilder, OpTable
from waitlab.simulator.program_run import ProgramError

# ---------------------------------------------------------------------------------------------------------------
# With SimGrid
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize("x", [0.25, 0.0125])
def test_execute_benched_before_send_gives_exact_late_sender_wait(tmp_path: Path, x: float) -> None:

    sc = program_scenario(tmp_path, "late_sender.c", args=[repr(x)])
    real = simulate(sc)
    w = real.waits
    ls = w[(w["pattern"] == "late_sender") & (w["rank"] == 1)]
    assert len(ls) == 1 and ls["op"].iloc[0] == "recv"
    assert abs(ls["wait"].iloc[0] - x) < 1e-6
    # the synthetic model of the same program on the same platform
    b = OpBuilder(n_ranks=2)
    b.add("compute", 0, value=x)
    b.add("send", 0, peer=1, tag=7, value=32)
    b.add("recv", 1, peer=0, tag=7, value=32)
    synth_sc = from_mapping({"scenario": {"name": "synthetic", "ranks": 2}, "platform": {"name": "dawning_5000a"},
                             "application": {"kind": "pingpong", "steps": 1}}, "<test>")
    synth = simulate(synth_sc, ops=b.build())
    sw = synth.waits
    assert abs(sw[sw["pattern"] == "late_sender"]["wait"].iloc[0] - ls["wait"].iloc[0]) < 1e-6
    # the unannotated program's compute is named after its two call sites (MPI_Init and MPI_Send lines)
    src = PROGRAMS / "late_sender.c"
    name = f"@late_sender.c:{source_line(src, 'MPI_Init(')}-{source_line(src, 'MPI_Send(')}"
    ev = real.events
    comp = ev[(ev["rank"] == 0) & (ev["kind"] == "compute")]
    assert list(comp["region"]) == [name] and comp["exit"].iloc[0] - comp["enter"].iloc[0] == pytest.approx(x)
    assert real.metadata["application_kind"] == "program"


@pytest.fixture(scope="module")
def bsp_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not HAVE_SMPI:
        pytest.skip("SimGrid SMPI is not installed")

    tmp = tmp_path_factory.mktemp("bsp")
    sc = program_scenario(tmp, "bsp.c", ranks=4, args=["3"])
    return sc, simulate(sc)


@pytest.mark.simgrid
def test_region_markers_nest_with_their_times(bsp_run: Any) -> None:
    _sc, res = bsp_run
    ev = res.events
    regions = ev[ev["kind"] == "region"]
    for r in range(4):
        mine = regions[regions["rank"] == r]
        steps = mine[mine["region"] == "step"]
        solves = mine[mine["region"] == "solve"]
        halos = mine[mine["region"] == "halo"]
        assert len(steps) == len(solves) == len(halos) == 3
        assert (steps["depth"] == 0).all() and (solves["depth"] == 1).all() and (halos["depth"] == 1).all()
        assert set(solves["path"]) == {"step>solve"} and set(halos["path"]) == {"step>halo"}
        assert list(steps["step"]) == [0, 1, 2]
        for s in range(3):
            step_row = steps.index[s]
            assert ev.loc[solves.index[s], "parent"] == step_row and ev.loc[halos.index[s], "parent"] == step_row
            dur = solves["exit"].iloc[s] - solves["enter"].iloc[s]
            assert dur == pytest.approx(1e-3 * (1 + r) * (1 + s % 2), abs=1e-9)
            assert steps["enter"].iloc[s] <= solves["enter"].iloc[s] <= halos["enter"].iloc[s]
            assert halos["exit"].iloc[s] <= steps["exit"].iloc[s]
        # MPI calls inside the halo region carry it as their region
        halo_mpi = ev[(ev["rank"] == r) & (ev["path"] == "step>halo") & (ev["kind"] == "mpi")]
        assert [str(o) for o in halo_mpi["op"]] == ["irecv", "isend", "waitall"] * 3
    w = res.waits
    assert (w["wait"] > 0).all()
    assert set(w["pattern"]) >= {"wait_at_nxn", "late_sender"}
    # the wildcard receives of rank 0 got their actual sources
    recv = ev[(ev["rank"] == 0) & (ev["op"] == "recv")]
    assert sorted(recv["peer"]) == [1, 2, 3] and (recv["match"] >= 0).all()


@pytest.mark.simgrid
def test_unannotated_code_gets_call_site_regions(bsp_run: Any) -> None:
    _sc, res = bsp_run
    ev = res.events
    src = PROGRAMS / "bsp.c"
    step_end, bcast, send = (source_line(src, s) for s in ('WAITLAB_REGION_END("step")', "MPI_Bcast(", "MPI_Send("))
    sites = ev[(ev["kind"] == "region") & ev["region"].astype(str).str.startswith("@")]
    names = set(sites["region"].astype(str))
    # compute between the last recorded call (the end of region "step") and the bcast, then before the send
    assert names == {f"@bsp.c:{step_end}-{bcast}", f"@bsp.c:{bcast}-{send}"}
    assert (sites["depth"] == 0).all()  # only outside user regions ("auto")
    inside = ev[(ev["kind"] == "compute") & (ev["path"] == "step>solve")]
    assert len(inside) == 12


@pytest.mark.simgrid
def test_layer_injects_perturbations_into_the_running_program(bsp_run: Any) -> None:

    sc, base = bsp_run
    delay = 5e-4

    def perturb(_sc: Scenario, ops: OpTable, _platform: Any) -> OpTable:
        rows = np.flatnonzero(ops.mask(["allreduce"]) & (ops.rank == 1))
        led = Ledger(rank=np.ones(rows.size, np.int32), region=np.full(rows.size, -1, np.int32),
                     step=np.zeros(rows.size, np.int32), seconds=np.full(rows.size, delay),
                     kind=np.full(rows.size, CAUSE_KINDS.index("overhead"), np.int8))
        return ops.with_inserted({"rank": ops.rank[rows], "code": np.full(rows.size, CODE["overhead"], np.int8),
                                  "value": np.full(rows.size, delay), "excess": np.full(rows.size, delay),
                                  "cause": np.arange(rows.size, dtype=np.int64)},
                                 ops.seq[rows].astype(np.int64), ledger=led)

    target = perturb(sc, base.ops, None)
    res = simulate(sc, target)
    assert len(res.ops) == len(target) and np.array_equal(res.ops.code, target.code)
    assert np.array_equal(res.ops.cause, target.cause) and len(res.ops.ledger) == 3
    ev, ev0 = res.events, base.events
    over = ev[ev["kind"] == "overhead"]
    assert len(over) == 3 and (over["rank"] == 1).all()
    assert np.allclose(over["exit"] - over["enter"], delay)
    # each overhead runs right before its allreduce, which rank 1 therefore enters `delay` later
    a1 = ev[(ev["rank"] == 1) & (ev["op"] == "allreduce")]["enter"].to_numpy()
    assert np.allclose(a1 - over["exit"].to_numpy(), 0.0)
    assert np.allclose(a1 - ev0[(ev0["rank"] == 1) & (ev0["op"] == "allreduce")]["enter"].to_numpy(), delay)
    assert res.waits["wait"].sum() != pytest.approx(base.waits["wait"].sum())
    # counterfactual: the same operations without the injected causes reproduce the unperturbed waits
    cf = simulate(sc, ops=res.ops.without_causes(np.ones(len(res.ops.ledger), bool)))
    assert cf.waits["wait"].sum() == pytest.approx(base.waits["wait"].sum(), rel=1e-9, abs=1e-12)


@pytest.mark.simgrid
def test_capture_then_replay_gives_the_same_waits(bsp_run: Any, tmp_path: Path) -> None:

    sc, real = bsp_run
    index = capture(sc, tmp_path / "cap")
    assert (tmp_path / "cap" / "capture.json").is_file() and index.name == "index.txt"
    text = (tmp_path / "cap" / "rank1.txt").read_text()
    assert "1 enter solve\n" in text and "1 waitall\n" in text
    rep = simulate(trace_scenario(index, 4))
    total = real.waits["wait"].sum()
    assert total > 0
    assert abs(rep.waits["wait"].sum() - total) <= 0.01 * total
    per = real.waits.groupby("pattern", observed=True)["wait"].sum()
    rper = rep.waits.groupby("pattern", observed=True)["wait"].sum()
    assert np.allclose(per.sort_index(), rper.sort_index(), rtol=0.01)
    # what-if: the same trace on another platform replays (and changes the waits)
    other = simulate(trace_scenario(index, 4, "deepcomp_7000"))
    assert len(other.events) == len(rep.events)
    # a folder that exists is kept unless forced
    with pytest.raises(InputError, match="already exists"):
        capture(sc, tmp_path / "cap")


@pytest.mark.simgrid
def test_smpi_capture_of_wildcard_receives_is_refused_clearly(bsp_run: Any, tmp_path: Path) -> None:

    sc, _ = bsp_run
    with pytest.raises(InputError, match="from any source"):
        capture(sc, tmp_path / "smpi", via="smpi")
    assert not (tmp_path / "smpi").exists() and not list(tmp_path.glob(".smpi.partial*"))


@pytest.mark.simgrid
@needs_smpi
def test_fortran_program_is_measured(tmp_path: Path) -> None:
    if shutil.which("smpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("smpif90/gfortran not installed (apt-get install gfortran)")

    res = simulate(program_scenario(tmp_path, "ring.f90", ranks=2))
    ev = res.events
    assert [str(o) for o in ev[ev["rank"] == 1]["op"]] == ["region", "compute", "recv", "allreduce"]
    work = ev[ev["region"] == "work"]
    assert len(work[work["kind"] == "region"]) == 2
    assert (work[work["kind"] == "region"]["exit"] - work[work["kind"] == "region"]["enter"]).tolist() == \
        pytest.approx([1e-3, 2e-3])


# ---------------------------------------------------------------------------------------------------------------
# Failures
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_smpi
def test_compile_error_is_shown_verbatim_with_the_file(tmp_path: Path) -> None:

    bad = tmp_path / "broken.c"
    bad.write_text("#include <mpi.h>\nint main(int argc, char** argv) {\n  MPI_Init(&argc, &argv)\n"
                   "  return undefined_thing;\n}\n")
    with pytest.raises(InputError) as err:
        simulate(program_scenario(tmp_path, str(bad)))
    text = str(err.value)
    assert text.startswith(str(bad)) and "smpicc could not compile broken.c" in text
    assert "broken.c:3:25: error: expected" in text and "undefined_thing" in text


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize(("mode", "words"), [
    ("abort", ["rank 1 called MPI_Abort(MPI_COMM_WORLD, 3) at simulated 0 s"]),
    ("deadlock", ["deadlock at simulated 0 s: rank 0 in MPI_Recv from rank 1 (fail.c:23), rank 1 in MPI_Recv from "
                  "rank 0 (fail.c:23)", "(SimGrid: Deadlock detected)"]),
    ("segv", ["the program crashed with a segmentation fault (SIGSEGV)", "did not reach MPI_Finalize"]),
    ("exit", ["rank 0 ended with exit status 2 at simulated 0 s", "did not reach MPI_Finalize"]),
])
def test_program_failures_are_one_line_naming_the_program(tmp_path: Path, mode: str, words: list[str]) -> None:

    sc = program_scenario(tmp_path, "fail.c", ranks=2, args=[mode])
    with pytest.raises(ProgramError) as err:
        run_scenario(sc, tmp_path / "out")
    text = str(err.value)
    assert text.startswith(f"{PROGRAMS / 'fail.c'}: (run): ") and "\n" not in text, text
    for w in words:
        assert w in text, text
    assert err.value.exit_code == 2 and isinstance(err.value, SimulationError)
    if mode in ("abort", "deadlock"):  # the program's own last line (stdout is flushed before both)
        assert "the program's last output line: 'rank " in text, text
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial*"))


@pytest.mark.simgrid
@needs_smpi
def test_program_time_limit(tmp_path: Path) -> None:

    sc = program_scenario(tmp_path, "fail.c", ranks=2, args=["loop"], simulation={"timeout": 3})
    with pytest.raises(SimulationError, match=r"fail.c: \(run\): the program did not finish within the time "
                       "limit of 3 s and was stopped"):
        simulate(sc)


@pytest.mark.simgrid
@needs_smpi
def test_binary_without_the_layer_is_refused(tmp_path: Path) -> None:

    exe = tmp_path / "plain"
    subprocess.run(["smpicc", str(PROGRAMS / "late_sender.c"), "-o", str(exe)], check=True, capture_output=True)
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "program", "binary": str(exe)}}

    with pytest.raises(InputError, match="was not linked with waitlab's measurement layer"):
        simulate(from_mapping(data, str(tmp_path / "s.toml")))

@pytest.mark.simgrid
def test_instrumentation_charged_in_the_program_matches_the_replay(bsp_run: Any, tmp_path: Path) -> None:

    sc0, _ = bsp_run
    extra = {"instrumentation": {"events": "all", "fixed_cost": 1e-5}}
    sc = from_mapping({"scenario": {"name": "bsp-instr", "ranks": 4}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "program", "sources": [str(PROGRAMS / "bsp.c")], "args": ["3"]},
                       **extra}, str(tmp_path / "s.toml"))
    real = run_pipeline(sc).perturbation
    index = capture(sc0, tmp_path / "cap")
    tsc = from_mapping({"scenario": {"name": "bsp-instr-replay", "ranks": 4}, "platform": {"name": "dawning_5000a"},
                        "application": {"kind": "trace", "trace": str(index)}, **extra}, "<test>")
    rep = run_pipeline(tsc).perturbation
    for key in ("makespan", "total_wait"):
        assert real.report[key]["measured"] == pytest.approx(rep.report[key]["measured"], rel=0.01)
    assert real.report["injected_seconds"] == pytest.approx(rep.report["injected_seconds"])
    assert real.report["makespan"]["measured"] > real.report["makespan"]["unperturbed"]
    cc, rc = real.report["condition_c"], rep.report["condition_c"]
    assert (cc["holds"], cc["pairs"], cc["violating_pairs"]) == (rc["holds"], rc["pairs"], rc["violating_pairs"])
    assert (real.measured.events["kind"] == "overhead").sum() == (rep.measured.events["kind"] == "overhead").sum()
