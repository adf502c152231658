"""Real MPI programs (issue 5): measurement layer, regions, call sites, capture/replay, failures, NAS.

Tests marked ``simgrid`` build and run programs with SMPI; ``slow`` ones fetch
SimGrid's source package (NAS EP/IS/DT, SMPI test programs) and skip with the
reason when it cannot be downloaded.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from waitlab.api import run as run_scenario
from waitlab.cli import main
from waitlab.errors import EnvironmentProblem, InputError, SimulationError
from waitlab.experiments.capture import capture
from waitlab.experiments.nas import fetch_simgrid_sources, nas_scenario, smpi_test_scenario
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.programs import injection_schedule
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.ops import ACTIONS, CAUSE_KINDS, CODE, Ledger, OpBuilder, OpTable
from waitlab.simulator.program_run import ProgramError
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import format_ti_lines, write_trace

PROGRAMS = Path(__file__).resolve().parent / "programs"
NATIVE = Path(__file__).resolve().parents[1] / "simulator" / "native"
HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
needs_smpi = pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")


def program_scenario(tmp: Path, source: str | list[str], ranks: int = 2, platform: str = "dawning_5000a",
                     **app: Any) -> Scenario:
    """A program scenario, written to ``tmp`` so relative paths and error messages name a real file."""
    sources = [source] if isinstance(source, str) else source
    data: dict[str, Any] = {
        "scenario": {"name": Path(sources[0]).stem, "ranks": ranks},
        "platform": {"name": platform},
        "application": {"kind": "program", "sources": [str(PROGRAMS / s) if not Path(s).is_absolute() else s
                                                        for s in sources], **app},
    }
    sim = app.pop("simulation", None)
    if sim:
        data["simulation"] = sim
        data["application"].pop("simulation", None)
    return from_mapping(data, str(tmp / "scenario.toml"))


def trace_scenario(index: Path, ranks: int, platform: str = "dawning_5000a") -> Scenario:
    return from_mapping({"scenario": {"name": "replay", "ranks": ranks}, "platform": {"name": platform},
                         "application": {"kind": "trace", "trace": str(index)}}, "<test>")


def source_line(path: Path, needle: str, nth: int = 0) -> int:
    lines = [i + 1 for i, ln in enumerate(path.read_text().splitlines()) if needle in ln]
    return lines[nth]


# ---------------------------------------------------------------------------------------------------------------
# Pure parts: action codes, TI parser and writer, scenario keys
# ---------------------------------------------------------------------------------------------------------------

def test_layer_action_codes_match_the_op_table() -> None:
    assert '#include "waitlab_actions.h"' in (NATIVE / "waitlab_pmpi.c").read_text()
    text = (NATIVE / "waitlab_actions.h").read_text()
    codes = dict(re.findall(r"WL_([A-Z_]+) = (\d+)", text))
    assert len(codes) == len(ACTIONS)
    by_upper = {a.upper(): a for a in ACTIONS}
    for name, value in codes.items():
        assert CODE[by_upper[name]] == int(value), name


def _sample_ops() -> tuple[OpTable, VectorStore]:
    b = OpBuilder(n_ranks=3)
    b.add("enter", [0, 1, 2], region="solve")
    b.add("compute", [0, 1, 2], value=[0.5, 0.25, 0.125])
    b.add("leave", [0, 1, 2], region="solve")
    b.add("isend", 0, peer=1, tag=3, value=800)
    b.add("irecv", 1, peer=0, tag=3, value=800)
    b.add("wait", 0, peer=1, tag=3)
    b.add("wait", 1, peer=0, tag=3, value2=1)
    b.add("alltoallv", [0, 1, 2], value=[6, 9, 12], value2=[3, 12, 12])
    b.add("bcast", [0, 1, 2], value=16, peer=2)
    b.add("overhead", 2, value=1e-6)
    ops = b.build()
    vec = VectorStore()
    for r, (s, rv) in enumerate((([1, 2, 3], [1, 1, 1]), ([4, 2, 3], [2, 2, 8]), ([1, 5, 6], [3, 9, 0]))):
        vec.put(r, CODE["alltoallv"], 0, s, rv)
    return ops, vec


def test_ti_round_trip_keeps_operations_and_per_peer_counts(tmp_path: Path) -> None:
    ops, vec = _sample_ops()
    index = write_trace(ops, 2e9, tmp_path / "t", vectors=vec, header="test trace", relative=True)
    assert index.read_text().split() == ["rank0.txt", "rank1.txt", "rank2.txt"]
    text = (tmp_path / "t" / "rank1.txt").read_text()
    assert text.startswith("# test trace\n1 init\n1 enter solve\n1 compute 500000000.0\n")
    assert "1 alltoallv 9 4 2 3 12 2 2 8 6 6\n" in text and text.endswith("1 finalize\n")
    parsed = parse_ti_trace(index, flops_per_second=2e9, n_ranks=3)
    back = parsed.ops
    assert back.names == ops.names
    for col in ("rank", "seq", "code", "name", "peer", "tag"):
        assert np.array_equal(getattr(back, col), getattr(ops, col)), col
    assert np.allclose(back.value, ops.value) and np.allclose(back.value2, ops.value2)
    assert parsed.vectors.data.keys() == vec.data.keys()
    for k, (s, r) in vec.data.items():
        assert np.array_equal(parsed.vectors.data[k][0], s) and np.array_equal(parsed.vectors.data[k][1], r)


def test_ti_lines_spread_v_counts_evenly_without_vectors() -> None:
    ops, _ = _sample_ops()
    lines = format_ti_lines(ops, 1e9)
    a2av = [ln for ln in lines if ln.startswith("alltoallv")]
    assert a2av[2] == "alltoallv 12 4 4 4 12 4 4 4 6 6"
    assert "bcast 16 2 6" in lines  # bytes, datatype MPI_BYTE


def test_ti_parser_reads_smpi_datatypes_and_shared_files(tmp_path: Path) -> None:
    f = tmp_path / "shared.txt"
    f.write_text("# comment\n0 init 1\n1 init\n0 send 1 5 10\n1 recv 0 5 10 6\n0 compute 3e9\n"
                 "1 allreduce 4 100 1\n0 allreduce 4 100 1\n0 sendRecv 2 1 3 1\n1 sendRecv 3 0 2 0\n"
                 "0 finalize\n1 finalize\n")
    index = tmp_path / "index"
    index.write_text("shared.txt\n")
    ops = parse_ti_trace(index, flops_per_second=1e9).ops
    assert ops.n_ranks == 2
    r0 = [ACTIONS[c] for c in ops.code[ops.rank == 0]]
    assert r0 == ["send", "compute", "allreduce", "isend", "irecv", "waitall"]
    # rank 0's init has an argument: default datatype MPI_DOUBLE (8 bytes); rank 1's: MPI_BYTE
    assert ops.value[(ops.rank == 0) & (ops.code == CODE["send"])][0] == 80
    assert ops.value[(ops.rank == 1) & (ops.code == CODE["recv"])][0] == 10
    assert ops.value[ops.code == CODE["compute"]][0] == pytest.approx(3.0)
    assert ops.value[(ops.rank == 1) & (ops.code == CODE["allreduce"])][0] == 16  # datatype 1: int


@pytest.mark.parametrize(("line", "message"), [
    ("0 bogus 1 2", "action 'bogus' cannot be replayed"),
    ("0 send 1 x 10", "argument 2 (tag) is not a number"),
    ("0 send 1 2", "missing argument 3 (count)"),
    ("0 send 7 2 10", "partner rank 7 is outside 0..1"),
    ("0 recv -333 2 10", "from any source"),
    ("0 send 1 2 10 99", "unknown datatype id '99'"),
    ("0 compute -5", "must be a finite number >= 0"),
    ("5 barrier", "rank 5 is outside 0..1"),
    ("zero barrier", "expected '<rank> <action> <arguments>'"),
    ("0 alltoallv 10 5 5 10", "needs 2 receive counts"),
    ("0 enter two words", "enter takes one region name"),
])
def test_ti_parser_names_file_and_line_of_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "r0.txt").write_text(f"0 init\n0 barrier\n{line}\n")
    (tmp_path / "r1.txt").write_text("1 init\n1 barrier\n")
    index = tmp_path / "index.txt"
    index.write_text("r0.txt\nr1.txt\n")
    with pytest.raises(InputError) as err:
        parse_ti_trace(index, flops_per_second=1e9, n_ranks=2)
    text = str(err.value)
    assert message in text
    assert "r0.txt: line 3:" in text


def test_ti_parser_rejects_missing_files_and_rank_mixups(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="trace index does not exist"):
        parse_ti_trace(tmp_path / "nope", flops_per_second=1e9)
    (tmp_path / "index.txt").write_text("a.txt\nb.txt\n")
    with pytest.raises(InputError, match=r"index.txt: line 1: trace file a.txt does not exist"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9)
    (tmp_path / "a.txt").write_text("0 init\n")
    (tmp_path / "b.txt").write_text("0 barrier\n")
    with pytest.raises(InputError, match="line of rank 0 in the file of rank 1"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9)
    (tmp_path / "b.txt").write_text("1 barrier\n")
    with pytest.raises(InputError, match=r"has 2 ranks \(one file each in the index\) but the scenario asks for 4"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9, n_ranks=4)


def test_injection_schedule_places_operations_around_the_programs_computation() -> None:

    b = OpBuilder(n_ranks=1)
    b.add("overhead", 0, value=1e-6)            # before the interval's computation -> after the previous call
    b.add("enter", 0, region="@a.c:1-2")
    b.add("compute", 0, value=0.5)
    b.add("leave", 0, region="@a.c:1-2")
    b.add("noise", 0, value=2e-6)               # after it -> just before the next call
    b.add("barrier", 0)
    b.add("enter", 0, region="solve")           # a user region marker is an anchor
    b.add("flush", 0, value=100, value2=1e4)
    s = injection_schedule(b.build())
    assert [ACTIONS[c] for c in s.code] == ["overhead", "noise", "flush"]
    assert s.anchor.tolist() == [0, 0, 2] and s.phase.tolist() == [1, 0, 0]
    assert s.value.tolist() == [1e-6, 2e-6, 100] and s.value2[2] == 1e4


@pytest.mark.parametrize(("app", "message"), [
    ({"kind": "program"}, "give exactly one of sources or binary"),
    ({"kind": "program", "sources": ["missing.c"]}, "missing.c does not exist"),
    ({"kind": "program", "sources": "late_sender.c"}, "must be a list"),
    ({"kind": "program", "sources": ["late_sender.c"], "computation": "fast"},
     "allowed: 'none', 'measured' or 'counted'"),
    ({"kind": "program", "sources": ["late_sender.c"], "exit_codes": [-1]}, "statuses 0..255"),
    ({"kind": "program", "sources": ["late_sender.c"], "colour": 1}, "unknown key"),
    ({"kind": "program", "sources": ["late_sender.c"], "language": "cobol"}, "allowed: 'c', 'c++' or 'fortran'"),
    ({"kind": "trace"}, "application.trace: is required"),
    ({"kind": "trace", "trace": "none/index.txt"}, "does not exist"),
])
def test_real_application_keys_are_validated(app: dict[str, Any], message: str) -> None:
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"}, "application": app}
    with pytest.raises(InputError, match=re.escape(message)):
        from_mapping(data, str(PROGRAMS / "scenario.toml"))


def test_program_scenario_hash_follows_the_source(tmp_path: Path) -> None:
    src = tmp_path / "p.c"
    src.write_text("int main(void) { return 0; }\n")
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "program", "sources": ["p.c"], "args": ["{ranks}"]}}
    h1 = from_mapping(data, str(tmp_path / "s.toml")).hash()
    src.write_text("int main(void) { return 1; }\n")
    assert from_mapping(data, str(tmp_path / "s.toml")).hash() != h1


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
    ("deadlock", ["deadlock at simulated 0 s: ranks 0, 1 blocked", "(SimGrid: Deadlock detected)"]),
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
        assert "its last output line: 'rank " in text, text
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


# ---------------------------------------------------------------------------------------------------------------
# Programs nobody on this project wrote (SimGrid's source package)
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simgrid_sources() -> Path:
    if not HAVE_SMPI:
        pytest.skip("SimGrid SMPI is not installed")

    try:
        return fetch_simgrid_sources()
    except EnvironmentProblem as exc:
        pytest.skip(f"SimGrid's source package is not available: {exc}")


def _mpi_counts(ev: pd.DataFrame) -> pd.DataFrame:
    mpi = ev[ev["kind"] == "mpi"]
    return mpi.groupby(["rank", mpi["op"].astype(str)]).size().unstack(fill_value=0).sort_index(axis=1)


@pytest.mark.simgrid
@pytest.mark.slow
@pytest.mark.parametrize(("bench", "ranks"), [("ep", 4), ("is", 4), ("dt", 5)])
def test_nas_runs_on_two_platforms(simgrid_sources: Path, tmp_path: Path, bench: str, ranks: int) -> None:

    counts = {}
    for platform in ("dawning_5000a", "deepcomp_7000"):
        sc = nas_scenario(bench, ranks=ranks, platform=platform)
        res = run_scenario(sc, tmp_path / platform, png=False).result
        assert (tmp_path / platform / "waits.parquet").is_file()
        w = res.waits
        assert (w["wait"] >= 0).all() and len(w) > 0
        counts[platform] = _mpi_counts(res.events)
        if bench == "is":
            assert w[w["op"].astype(str).isin(["alltoall", "alltoallv"])]["wait"].sum() > 0
            c = counts[platform]
            assert (c["alltoall"] == 11).all() and (c["alltoallv"] == 11).all() and (c["allreduce"] == 11).all()
        if bench == "dt":  # BH graph of class S: 4 sources feed rank 4 (two messages per arc)
            c = counts[platform]
            assert c.loc[4, "recv"] == 8 and (c.loc[0:3, "send"] == 2).all()
    pd.testing.assert_frame_equal(counts["dawning_5000a"], counts["deepcomp_7000"])
    # per-rank MPI calls agree with SMPI's own record of the calls the program made (-trace-ti)
    sc = nas_scenario(bench, ranks=ranks)
    index = capture(sc, tmp_path / "smpi", via="smpi")
    theirs = parse_ti_trace(index, flops_per_second=1e9, n_ranks=ranks).ops
    mpi = theirs.mask([a for a in ACTIONS[5:28]])
    ref = pd.crosstab(theirs.rank[mpi], np.array([ACTIONS[c] for c in theirs.code[mpi]])).sort_index(axis=1)
    ref.index.name, ref.columns.name = "rank", "op"
    mine = counts["dawning_5000a"]
    mine.columns.name = "op"
    pd.testing.assert_frame_equal(mine, ref, check_dtype=False, check_names=False)


@pytest.mark.simgrid
@pytest.mark.slow
def test_smpi_collective_test_program_and_smpi_capture_replay(simgrid_sources: Path, tmp_path: Path) -> None:

    res = simulate(smpi_test_scenario("coll-allreduce", ranks=4))
    c = _mpi_counts(res.events)
    assert list(c.columns) == ["allreduce"] and (c["allreduce"] == 1).all()  # erroneous calls are not recorded
    assert (res.waits["wait"] >= 0).all()
    # IS captured by SMPI's own tracer replays to the same waits as the real run
    sc = nas_scenario("is", ranks=4)
    real = simulate(sc)
    rep = simulate(trace_scenario(capture(sc, tmp_path / "is", via="smpi"), 4))
    total = real.waits["wait"].sum()
    assert abs(rep.waits["wait"].sum() - total) <= 0.01 * total


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


@pytest.mark.simgrid
@needs_smpi
def test_cxx_program_and_the_capture_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:

    scenario = tmp_path / "ring.toml"
    scenario.write_text(f'[scenario]\nname = "ring"\nranks = 3\n[platform]\nname = "deepcomp_7000"\n'
                        f'[application]\nkind = "program"\nsources = ["{PROGRAMS / "ring.cpp"}"]\n')
    assert main(["run", str(scenario), "-o", str(tmp_path / "res"), "--no-png"]) == 0
    waits = pd.read_parquet(tmp_path / "res" / "waits.parquet")
    # rank 1 receives the token from rank 0, which finished its 1 ms of work first: no wait; rank 0 waits for
    # the token to come back from rank 2 (3 ms of work)
    ls = waits[waits["pattern"] == "late_sender"].set_index("rank")["wait"]
    assert ls[0] == pytest.approx(2e-3, abs=1e-4)
    assert main(["capture", str(scenario), "-o", str(tmp_path / "cap")]) == 0
    out = capsys.readouterr().out
    assert 'kind = "trace"' in out and str(tmp_path / "cap" / "index.txt") in out
    replay = tmp_path / "replay.toml"
    replay.write_text(out[out.index("[scenario]"):])
    assert main(["run", str(replay), "-o", str(tmp_path / "rep"), "--no-png"]) == 0
    rwaits = pd.read_parquet(tmp_path / "rep" / "waits.parquet")
    assert rwaits["wait"].sum() == pytest.approx(waits["wait"].sum(), rel=0.01)
    assert main(["capture", str(scenario), "-o", str(tmp_path / "cap")]) == 2  # exists: an InputError
