"""Fortran (and C++) real programs, round 24: Fortran persistent requests and MPI_Request_free, Fortran's MPI_Wtime
(the busy-loop refusal and the counted charge), Fortran sources compiled in module order, build errors whose fix
names what is wrong, a path flag written with its value in one element, and the documented Fortran inject.

Expected waits are counted by hand from the programs' own compute (``smpi_execute_benched``), see each program's
header in ``tests/programs/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from program_scenarios import needs_smpi, program_scenario

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.real_params import resolve_flag_paths
from waitlab.simulator.programs import compile_order, fortran_modules

DOCS = Path(__file__).resolve().parents[1] / "docs" / "real_programs.md"
HAVE_FORTRAN = shutil.which("smpif90") is not None and shutil.which("gfortran") is not None
needs_fortran = pytest.mark.skipif(not HAVE_FORTRAN, reason="smpif90/gfortran not installed (apt-get install gfortran)")


def _mpi_ops(events: pd.DataFrame, rank: int) -> list[str]:
    sel = events[(events["rank"] == rank) & (events["kind"] == "mpi")]
    return [str(o) for o in sel["op"]]


# ---------------------------------------------------------------------------------------------------------------
# Without SimGrid: module order, flag splitting, docs
# ---------------------------------------------------------------------------------------------------------------

def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_fortran_modules_finds_definitions_and_uses() -> None:

    defined, used = fortran_modules("MODULE Alpha ! the kinds\n  module procedure f\ncontains\nend module alpha\n"
                                    "program p\n  use alpha\n  use, intrinsic :: iso_c_binding\n"
                                    "  use, non_intrinsic :: beta\n  use :: gamma, only: g\n  user = 1\nend\n"
                                    "submodule (delta) impl\nend submodule\n")
    assert defined == {"alpha"}
    assert used == {"alpha", "beta", "gamma", "delta"}


def test_compile_order_puts_module_definitions_first(tmp_path: Path) -> None:

    main = _write(tmp_path, "main.f90", "program m\n use mpi\n use work\n use kinds\nend program\n")
    work = _write(tmp_path, "work.f90", "module work\n use iso_c_binding\n use kinds\nend module work\n")
    kinds = _write(tmp_path, "kinds.f90", "module kinds\nend module kinds\n")
    helper = _write(tmp_path, "helper.c", "int helper(void) { return 0; }\n")
    # main needs work and kinds, work needs kinds: kinds, work, main; the C file keeps its place among the free ones
    assert compile_order([main, helper, work, kinds], ["fortran", "c", "fortran", "fortran"]) == [1, 3, 2, 0]
    # already in order: unchanged
    assert compile_order([kinds, work, main], ["fortran"] * 3) == [0, 1, 2]


def test_compile_order_keeps_the_given_order_for_cycles_and_unknown_modules(tmp_path: Path) -> None:

    a = _write(tmp_path, "a.f90", "module a\n use b\nend module a\n")
    b = _write(tmp_path, "b.f90", "module b\n use a\nend module b\n")
    user = _write(tmp_path, "u.f90", "program u\n use elsewhere\n use mpi\nend program\n")
    assert compile_order([a, b, user], ["fortran"] * 3) == [0, 1, 2]
    assert compile_order([user, a], ["fortran"] * 2) == [0, 1]  # a uses b, which no source defines here


def test_path_flag_with_its_value_in_one_element_is_split() -> None:

    base = Path("/s/x")
    assert resolve_flag_paths(("-I include", "-L  lib ", "-include cfg.h", "-DMSG=a b"), base) == (
        "-I", "/s/x/include", "-L", "/s/x/lib", "-include", "/s/x/cfg.h", "-DMSG=a b")
    assert resolve_flag_paths(("-Iinclude", "-I", "inc"), base) == ("-I/s/x/include", "-I", "/s/x/inc")


def test_docs_show_fortran_inject_and_no_persistent_gap() -> None:

    text = DOCS.read_text()
    assert "waitlab_inject('solve', 0.1d0)" in text
    assert "`waitlab_inject('name', s)`" in text
    assert "among them the persistent requests" not in text


# ---------------------------------------------------------------------------------------------------------------
# With SimGrid
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_persistent_requests_give_the_late_sender_waits(tmp_path: Path) -> None:

    res = simulate(program_scenario(tmp_path, "persistent_late_sender.f90", ranks=2))
    w = res.waits
    big = w[w["wait"] > 1e-3]
    # by hand: rank 1 computes 0.1 s before each of 3 MPI_Start, then 0.2 s before MPI_Startall
    assert big["pattern"].tolist() == ["late_sender"] * 4
    assert big["rank"].tolist() == [0] * 4 and big["peer_rank"].tolist() == [1] * 4
    assert [str(o) for o in big["op"]] == ["wait", "wait", "wait", "waitall"]
    assert big["wait"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.2], abs=1e-5)
    assert float(w["wait"].sum()) == pytest.approx(0.5, abs=1e-4)
    # each Start is an irecv/isend (Ssend_init: issend); MPI_Request_free of the pending Isend is its wait
    assert _mpi_ops(res.events, 0) == ["irecv", "wait"] * 3 + ["irecv", "irecv", "waitall", "recv", "barrier"]
    assert _mpi_ops(res.events, 1) == ["isend", "wait"] * 3 + ["isend", "issend", "waitall", "isend", "wait",
                                                               "barrier"]


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_wtime_busy_loop_is_refused_without_computation(tmp_path: Path) -> None:

    sc = program_scenario(tmp_path, "wtime_busy.f90", ranks=2, simulation={"timeout": 30})
    with pytest.raises(SimulationError) as err:
        simulate(sc)
    text = str(err.value)
    assert "MPI_Wtime returned the same time 1,000,000 times in a row" in text, text
    assert "time limit" not in text, text


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_wtime_busy_loop_advances_when_counted(tmp_path: Path) -> None:

    sc = program_scenario(tmp_path, "wtime_busy.f90", ranks=2, computation="counted", flops_per_block=1e5,
                          simulation={"timeout": 30})
    w = simulate(sc).waits
    # rank 1 leaves its loop at the first MPI_Wtime >= 0.1 s after it started (within one iteration's charge)
    assert w["pattern"].tolist() == ["late_broadcast"] and w["rank"].tolist() == [0]
    assert 0.1 <= float(w["wait"].iloc[0]) < 0.1 + 1e-3


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_modules_build_in_any_source_order(tmp_path: Path) -> None:

    sources = ["modorder_main.f90", "modorder_work.f90", "modorder_kinds.f90"]  # users first
    w = simulate(program_scenario(tmp_path, sources, ranks=3)).waits
    # by hand: rank 2 computes 0.1 s before the Allreduce, ranks 0 and 1 wait 0.1 s each
    assert w["pattern"].tolist() == ["wait_at_nxn"] * 2 and sorted(w["rank"].tolist()) == [0, 1]
    assert w["wait"].tolist() == pytest.approx([0.1, 0.1], abs=1e-6)


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_module_no_source_defines_names_the_sources_key(tmp_path: Path) -> None:

    src = _write(tmp_path, "u.f90", "program u\n  use mpi\n  use r24_nowhere\n  integer :: ierr\n"
                 "  call MPI_Init(ierr)\n  call MPI_Finalize(ierr)\nend program\n")
    with pytest.raises(InputError) as err:
        simulate(program_scenario(tmp_path, str(src)))
    assert err.value.field == "application.sources" and err.value.file == str(tmp_path / "scenario.toml")
    assert "no file of application.sources defines module r24_nowhere" in err.value.problem
    assert "add the file that defines module r24_nowhere to application.sources" in err.value.fix
    assert "\n" not in str(err.value)


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_use_mpi_f08_says_to_use_mpi(tmp_path: Path) -> None:

    src = _write(tmp_path, "f08.f90", "program f\n  use mpi_f08\n  call MPI_Init()\n  call MPI_Finalize()\n"
                 "end program\n")
    with pytest.raises(InputError) as err:
        simulate(program_scenario(tmp_path, str(src)))
    assert err.value.file == str(src) and err.value.field == "(compile)"
    assert "mpi_f08" in err.value.problem
    assert err.value.fix.startswith("SimGrid's SMPI has no mpi_f08 module: write `use mpi`"), err.value.fix


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_language_key_that_contradicts_the_suffix_is_named(tmp_path: Path) -> None:

    src = _write(tmp_path, "bar.f90", "program bar\n  use mpi\n  integer :: ierr\n  call MPI_Init(ierr)\n"
                 "  call MPI_Finalize(ierr)\nend program\n")
    with pytest.raises(InputError) as err:
        simulate(program_scenario(tmp_path, str(src), language="c"))
    assert err.value.field == "application.language" and err.value.file == str(tmp_path / "scenario.toml")
    assert "bar.f90 is fortran by its suffix, compiled as c" in err.value.problem
    assert "remove application.language" in err.value.fix and 'language = "fortran"' in err.value.fix


@pytest.mark.simgrid
@needs_smpi
def test_cxx_mpi_bindings_say_to_use_the_c_api(tmp_path: Path) -> None:

    src = _write(tmp_path, "cx.cpp", "#include <mpi.h>\nint main(int argc, char** argv) {\n  MPI::Init(argc, argv);\n"
                 "  MPI::Finalize();\n  return 0;\n}\n")
    with pytest.raises(InputError) as err:
        simulate(program_scenario(tmp_path, str(src)))
    assert err.value.file == str(src) and err.value.field == "(compile)"
    assert "removed in MPI-3 and SMPI has none: call the C API" in err.value.fix, err.value.fix


@pytest.mark.simgrid
@needs_smpi
def test_include_flag_with_its_path_in_one_element_builds(tmp_path: Path) -> None:

    (tmp_path / "include").mkdir()
    _write(tmp_path / "include", "r24_delay.h", "#define R24_DELAY 0.25\n")
    src = _write(tmp_path, "main.c", '#include <mpi.h>\n#include <smpi/smpi.h>\n#include "r24_delay.h"\n'
                 "int main(int argc, char** argv) {\n  int rank; double x = 1;\n  MPI_Init(&argc, &argv);\n"
                 "  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n  if (rank == 0) smpi_execute_benched(R24_DELAY);\n"
                 "  MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);\n  MPI_Finalize();\n  return 0;\n}\n")
    w = simulate(program_scenario(tmp_path, str(src), compile_flags=["-I include"])).waits
    # by hand: the root computes R24_DELAY = 0.25 s before the Bcast, rank 1 waits for it
    assert w["pattern"].tolist() == ["late_broadcast"] and w["rank"].tolist() == [1]
    assert float(w["wait"].iloc[0]) == pytest.approx(0.25, abs=1e-6)


@pytest.mark.simgrid
@needs_smpi
@needs_fortran
def test_fortran_inject_as_documented(tmp_path: Path) -> None:

    # the docs' Fortran example, in a 3-rank program: rank 2 injects 0.1 s in "solve" before an Allreduce
    src = _write(tmp_path, "inj.f90", "program inj\n  use mpi\n  integer :: ierr, rank\n  double precision :: x, y\n"
                 "  call MPI_Init(ierr)\n  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)\n"
                 "  if (rank == 2) call waitlab_inject('solve', 0.1d0)\n  x = rank\n"
                 "  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)\n"
                 "  call MPI_Finalize(ierr)\nend program\n")
    res = simulate(program_scenario(tmp_path, str(src), ranks=3))
    w = res.waits
    assert sorted(w["rank"].tolist()) == [0, 1] and w["wait"].tolist() == pytest.approx([0.1, 0.1], abs=1e-6)
    led = res.ledger()
    assert led["rank"].tolist() == [2] and led["region"].tolist() == ["solve"]
    assert led["kind"].tolist() == ["imbalance"] and led["seconds"].tolist() == pytest.approx([0.1])
