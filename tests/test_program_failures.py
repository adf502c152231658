"""A failed program run in one line (issue 23), from SimGrid's own output: which cause wins, what is quoted.

The outputs below are SMPI 3.32's, copied from runs of ``tests/programs/fail.c`` (2 ranks) with plain
``smpirun`` (no measurement layer, so ``MPI_Abort`` has no error code); the end-to-end cases with the layer are in
``tests/bad_inputs_programs.py`` and ``tests/test_realapps_programs.py``.  Also: the output reader keeps at most its
limit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from program_scenarios import needs_smpi, program_scenario

from waitlab.api import run as run_scenario
from waitlab.simulator.output_reader import OutputReader
from waitlab.simulator.program_run import ProgramError, explain_failure

ABORT = """rank 0 starting (abort)
rank 1 starting (abort)
[h1:1:(2) 0.000000] ./src/smpi/bindings/smpi_pmpi.cpp:138: [smpi_pmpi/WARNING] MPI_Abort was called, something \
went probably wrong in this simulation ! Killing all processes sharing the same MPI_COMM_WORLD
"""
EXIT = """rank 0 starting (exit)
[h0:0:(1) 0.250000] ./src/smpi/internals/smpi_global.cpp:645: [smpi_kernel/WARNING] SMPI process did not return 0. \
Return value : 2
rank 1 starting (exit)
[0.250000] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock detected, some activities are still \
around but will never complete. This usually happens when the user code is not perfectly clean.
[0.250000] [ker_engine/INFO] Actor 2 (1@h1): waiting for communication activity 0x55ad10bfa0d0 () in state WAITING \
to finish
"""
SEGV = """rank 0 starting (segv)
Segmentation fault.
Segmentation fault
./fail --cfg=smpi/privatization:1  --cfg=surf/precision:1e-9 plat.xml
Execution failed with code 139.
"""

#: SMPI 3.32 on a correct ring of persistent requests (MPI_Startall + MPI_Waitall, 4 ranks): actors blocked in a
#: simcall are listed without the colon; the contention plugin's line is waitlab's, not the program's.
SIMCALL_DEADLOCK = """rank 2 late
waitlab contention: mem law on 1 links
[0.100607] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock detected, some activities are still \
around but will never complete. This usually happens when the user code is not perfectly clean.
[0.100607] [ker_engine/INFO] 2 actors are still running, waiting for something.
[0.100607] [ker_engine/INFO] Legend of the following listing: "Actor <pid> (<name>@<host>): <status>"
[0.100607] [ker_engine/INFO] Actor 3 (2@h2) simcall actor::ActivityWaitanySimcall
[0.100607] [ker_engine/INFO] Actor 4 (3@h3) simcall actor::ActivityWaitanySimcall
"""
#: SMPI 3.32 on MPI_Mprobe (2 ranks).
NOT_IMPLEMENTED = """waitlab contention: mem law on 1 links
[h1:1:(2) 0.000000] ./src/smpi/bindings/smpi_mpi.cpp:469: [root/CRITICAL] Not yet implemented: PMPI_Mprobe. Please \
contact the SimGrid team if support is needed
Aborted
./mprobe --cfg=smpi/privatization:1  --cfg=surf/precision:1e-9 --cfg=network/model:SMPI plat.xml
Execution failed with code 134.
"""


def test_a_deadlock_in_a_simcall_names_its_ranks_and_not_waitlabs_own_line() -> None:
    err = str(explain_failure(SIMCALL_DEADLOCK, 0, "", "prog.c"))
    assert err.startswith("prog.c: (run): deadlock at simulated 0.100607 s: ranks 2, 3 blocked ")
    assert "the program's last output line: 'rank 2 late'" in err and "contention" not in err


def test_a_call_smpi_does_not_implement_is_named() -> None:
    err = explain_failure(NOT_IMPLEMENTED, 134, " (ranks 0, 1 did not reach MPI_Finalize)", "prog.c")
    assert str(err).startswith("prog.c: (run): rank 1 called MPI_Mprobe, which SMPI (SimGrid 3.")
    assert str(err).endswith("(fix: do without MPI_Mprobe (use MPI_Probe then MPI_Recv from the probed source and "
                             "tag), or run the program with another MPI)") and err.exit_code == 2


def test_the_fix_for_an_unimplemented_call_is_about_that_call() -> None:
    """The suggestion names what replaces the call SMPI stopped at (not MPI_Mprobe's replacement for every call)."""
    intercomm = NOT_IMPLEMENTED.replace("PMPI_Mprobe", "PMPI_Intercomm_create").replace("[h1:1:(2)", "[h0:0:(1)")
    err = str(explain_failure(intercomm, 134, "", "prog.c"))
    assert err.startswith("prog.c: (run): rank 0 called MPI_Intercomm_create, which SMPI (SimGrid 3.")
    assert err.endswith("(fix: do without MPI_Intercomm_create (use an intracommunicator (MPI_Comm_split of "
                        "MPI_COMM_WORLD) in which the two groups address each other by rank), or run the program "
                        "with another MPI)")
    assert "MPI_Mprobe" not in err and "e.g." not in err
    other = str(explain_failure(NOT_IMPLEMENTED.replace("PMPI_Mprobe", "PMPI_Pcontrol"), 134, "", "prog.c"))
    assert other.endswith("(fix: do without MPI_Pcontrol, or run the program with another MPI)")


def test_abort_without_the_layer_names_rank_and_time_and_the_last_line() -> None:
    err = explain_failure(ABORT, 0, " (rank 1 did not reach MPI_Finalize)", "prog.c")
    assert str(err) == ("prog.c: (run): rank 1 called MPI_Abort at simulated 0 s; the program's last output line: "
                        "'rank 1 starting (abort)' (fix: the program stopped itself: see why in its own output)")
    assert err.exit_code == 2


def test_an_exit_status_wins_over_the_deadlock_it_leaves_behind() -> None:
    err = explain_failure(EXIT, 134, "", "prog.c")
    assert str(err).startswith("prog.c: (run): rank 0 ended with exit status 2 at simulated 0.25 s; ")
    assert "deadlock" not in str(err)
    alone = explain_failure(EXIT.replace("SMPI process did not return 0. Return value : 2", "x"), 0, "", "prog.c")
    assert str(alone).startswith("prog.c: (run): deadlock at simulated 0.25 s: rank 1 blocked ")


def test_a_crash_leaves_out_simgrid_lines_from_the_last_output_line() -> None:
    err = explain_failure(SEGV, 139, " (ranks 0, 1 did not reach MPI_Finalize)", "prog.c")
    assert str(err).startswith("prog.c: (run): the program crashed with a segmentation fault (SIGSEGV) (ranks 0, 1 "
                               "did not reach MPI_Finalize); the program's last output line: "
                               "'rank 0 starting (segv)' (fix: ")
    killed = explain_failure("", -9, "", "prog.c")
    assert "the program was killed by SIGKILL" in str(killed)


def test_the_output_reader_keeps_at_most_its_limit() -> None:
    # 8 MiB of output (plus bytes that are not UTF-8), read with a 1 MiB limit
    code = "import sys; sys.stdout.buffer.write(b'\\xff' + b'x' * (8 << 20)); sys.stdout.flush()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    reader = OutputReader(proc.stdout, 1 << 20)
    assert reader.ended.wait(60)
    proc.wait()
    reader.join()
    assert reader.over and reader.size == 1 << 20
    text = reader.text()
    assert text[0] == "\ufffd" and len(text) == 1 << 20  # the bad byte replaced, then x up to the limit
    full = subprocess.Popen([sys.executable, "-c", "print('a\\r\\nb')"], stdout=subprocess.PIPE)
    assert full.stdout is not None
    whole = OutputReader(full.stdout, None)
    full.wait()
    whole.join()
    assert not whole.over and whole.text() == "a\nb\n"  # newlines as a text-mode pipe reads them


#: SimGrid's deadlock report for ``n`` ranks, each followed by the layer's line for the call it is in
#: (``wl_report_inside``): rank r < n - 1 in MPI_Recv from r + 1, the last in MPI_Barrier.
def _chain_output(n: int) -> str:
    head = ("[0.2] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock detected, some activities "
            "are still around but will never complete.\n")
    actors = "".join(f"[0.2] [ker_engine/INFO] Actor {r + 1} ({r}@h{r}): waiting for communication activity 0x5 () "
                     "in state WAITING to finish\n" for r in range(n))
    inside = "".join(f"waitlab-layer: rank {r} ended inside MPI_Recv from {r + 1} tag {r} site 0x10\n"
                     for r in range(n - 1))
    return head + actors + inside + f"waitlab-layer: rank {n - 1} ended inside MPI_Barrier site 0x20\n"


def test_a_deadlock_names_the_call_each_rank_is_in_and_fits_the_fix_to_them() -> None:
    err = explain_failure(_chain_output(3), None, "", "prog.c")
    assert err.problem == ("deadlock at simulated 0.2 s: rank 0 in MPI_Recv from rank 1, rank 1 in MPI_Recv from "
                           "rank 2 tag 1, rank 2 in MPI_Barrier (SimGrid: Deadlock detected)")
    assert "collective" in err.fix and "both call MPI_Recv first" not in err.fix
    cycle = explain_failure(_chain_output(3).replace("MPI_Barrier site", "MPI_Recv from 0 tag 2 site"), None, "",
                            "prog.c")
    assert "rank 2 in MPI_Recv from rank 0 tag 2" in cycle.problem and "cycle of receives" in cycle.fix


def test_a_deadlock_of_many_ranks_names_the_first_few_and_counts_the_rest() -> None:
    err = explain_failure(_chain_output(20), None, "", "prog.c")
    assert "rank 5 in MPI_Recv from rank 6 tag 5, and 14 more (SimGrid" in err.problem, err.problem
    assert "rank 6 in" not in err.problem and "\n" not in str(err)


@pytest.mark.simgrid
@needs_smpi
def test_a_program_deadlock_names_each_ranks_call_peer_and_source_line(tmp_path: Path) -> None:
    # tests/programs/deadlock_chain.c: line 12 is the MPI_Recv from rank + 1 (tag rank), line 14 the MPI_Barrier.
    sc = program_scenario(tmp_path, "deadlock_chain.c", ranks=3)
    with pytest.raises(ProgramError) as err:
        run_scenario(sc, tmp_path / "out")
    assert err.value.problem.startswith(
        "deadlock at simulated 0 s: rank 0 in MPI_Recv from rank 1 (deadlock_chain.c:12), rank 1 in MPI_Recv from "
        "rank 2 tag 1 (deadlock_chain.c:12), rank 2 in MPI_Barrier (deadlock_chain.c:14) (SimGrid: Deadlock "
        "detected)"), err.value.problem
    assert "both call MPI_Recv first" not in err.value.fix
