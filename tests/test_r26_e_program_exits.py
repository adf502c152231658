"""A rank that leaves early is named, and a negative status is given as one ``exit_codes`` accepts (tester t1 of
session 26, findings 2 and 3).

2. A rank that calls ``exit(0)`` or returns 0 before ``MPI_Finalize`` leaves the others blocked; SimGrid then reports
   a deadlock of those.  docs/real_programs.md ("Failures") promises that the exiting rank is named rather than the
   deadlock: it is the rank that neither reached ``MPI_Finalize`` nor is among the blocked ones.
3. ``main`` returning -1 ends the process with status 255 (the low 8 bits); ``[application] exit_codes`` takes
   0..255, so the message says the program returned -1 and names 255 to list.

The SMPI output below is SimGrid 3.32's with waitlab's layer, copied from a run of ``programs/early_exit.c``
(``exit0``, 4 ranks).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from program_scenarios import needs_smpi, program_scenario

from waitlab.experiments.pipeline import simulate
from waitlab.simulator.program_run import ProgramError, explain_failure

EXIT0 = """waitlab contention: mem law on 1 links
[0.100004] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock detected, some activities are \
still around but will never complete. This usually happens when the user code is not perfectly clean.
[0.100004] [ker_engine/INFO] 3 actors are still running, waiting for something.
[0.100004] [ker_engine/INFO] Legend of the following listing: "Actor <pid> (<name>@<host>): <status>"
[0.100004] [ker_engine/INFO] Actor 1 (0@node-0) simcall actor::ActivityWaitanySimcall
[0.100004] [ker_engine/INFO] Actor 3 (2@node-0): waiting for communication activity 0x5629b4a09b70 () in state \
WAITING to finish
[0.100004] [ker_engine/INFO] Actor 4 (3@node-0): waiting for communication activity 0x5629b4a09f30 () in state \
WAITING to finish
waitlab-layer: rank 0 ended inside MPI_Barrier site 0x5b8d
waitlab-layer: rank 2 ended inside MPI_Barrier site 0x5b8d
waitlab-layer: rank 3 ended inside MPI_Barrier site 0x5b8d
"""
NEG = ("[node-0:0:(1) 0.100002] ./src/smpi/internals/smpi_global.cpp:645: [smpi_kernel/WARNING] SMPI process did "
       "not return 0. Return value : -1\n")
FINALIZE = "call MPI_Finalize on every rank before main returns or the program exits"


def test_the_rank_that_left_is_named_before_the_deadlock_it_caused() -> None:
    err = str(explain_failure(EXIT0, None, " (ranks 0, 1, 2, 3 did not reach MPI_Finalize)", "m.c",
                              unfinished=[0, 1, 2, 3]))
    assert err.startswith("m.c: (run): rank 1 ended without calling MPI_Finalize, leaving the others in a deadlock "
                          "at simulated 0.100004 s: rank 0 in MPI_Barrier, rank 2 in MPI_Barrier, rank 3 in "
                          "MPI_Barrier (SimGrid: Deadlock detected)")
    assert err.endswith(f"(fix: {FINALIZE})")
    # every unfinished rank blocked (a real deadlock): no rank is blamed for leaving
    plain = str(explain_failure(EXIT0, None, " (ranks 0, 2, 3 did not reach MPI_Finalize)", "m.c",
                                unfinished=[0, 2, 3]))
    assert plain.startswith("m.c: (run): deadlock at simulated 0.100004 s: rank 0 in MPI_Barrier")
    assert "ended without" not in plain


def test_a_negative_status_is_given_as_the_status_to_list() -> None:
    err = str(explain_failure(NEG, 255, "", "m.c"))
    assert err.startswith("m.c: (run): rank 0 returned -1 (exit status 255) at simulated 0.100002 s")
    assert "list the status, 255, in [application] exit_codes" in err
    assert "-1 in" not in err and "status -1" not in err


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize("mode", ["exit0", "return0"])
def test_a_program_whose_rank_leaves_early_names_it(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ProgramError) as info:
        simulate(program_scenario(tmp_path, "early_exit.c", ranks=4, args=[mode]))
    msg = str(info.value)
    assert "rank 1 ended without calling MPI_Finalize, leaving the others in a deadlock" in msg
    assert "rank 0 in MPI_Barrier (early_exit.c:" in msg and "rank 1 in" not in msg
    assert msg.endswith(f"(fix: {FINALIZE})")


@pytest.mark.simgrid
@needs_smpi
def test_the_status_the_message_names_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match=r"rank \d returned -1 \(exit status 255\)"):
        simulate(program_scenario(tmp_path, "early_exit.c", ranks=2, args=["neg"]))
    res = simulate(program_scenario(tmp_path, "early_exit.c", ranks=2, args=["neg"], exit_codes=[0, 255]))
    assert res.metadata["exit_statuses"] == {"0": -1, "1": -1}
