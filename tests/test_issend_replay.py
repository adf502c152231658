"""A small MPI_Issend waits for its late receiver live and after capture + replay (issue 13).

``programs/issend.c``: every delay is ``smpi_execute_benched(s)``, so the waits are known by hand (DESIGN.md
section 5); network time adds microseconds, hence the 1e-4 s tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from program_scenarios import program_scenario, trace_scenario
from test_programs_mpi import TOL, capture_and_replay, needs_smpi

from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate


def late_receiver_waits(res) -> list[tuple[int, str, float, int]]:  # type: ignore[no-untyped-def]
    w = res.waits[res.waits["pattern"] == "late_receiver"].sort_values("event")
    return [(int(r), str(o), float(x), int(q)) for r, o, x, q in
            w[["rank", "op", "wait", "peer_rank"]].itertuples(index=False)]


@pytest.mark.simgrid
@needs_smpi
def test_issend_of_4_bytes_waits_for_a_late_receiver_live_and_replayed(tmp_path: Path) -> None:

    # 1. Issend at 0, receive posted at 0.2 s: rank 0's MPI_Wait waits 0.2 s.
    # 2. Isend + Issend at ~0.2 s, receives posted at 0.2 + 0.3 = 0.5 s: the MPI_Waitall waits 0.3 s for the issend
    #    (the 4-byte isend is eager and waits for nothing).
    expected = [(0, "wait", pytest.approx(0.2, abs=TOL), 1), (0, "waitall", pytest.approx(0.3, abs=TOL), 1)]
    sc = program_scenario(tmp_path, "issend.c", ranks=2)
    live = simulate(sc)
    assert late_receiver_waits(live) == expected
    assert sorted(live.events.loc[live.events["op"] == "issend", "bytes"].tolist()) == [4, 4]
    replayed = capture_and_replay(sc, tmp_path)
    assert late_receiver_waits(replayed) == expected
    assert (tmp_path / "cap" / "rank0.txt").read_text().count(" issend ") == 2


@pytest.mark.simgrid
@needs_smpi
def test_two_replays_of_an_issend_capture_are_identical(tmp_path: Path) -> None:
    """The replay's ssend/issend (and the waits that complete an issend) call SMPI's Request internals, not the MPI
    functions, which book the host CPU time since the rank's last MPI call: two replays agree to the last bit."""


    index = capture(program_scenario(tmp_path, "issend.c", ranks=2), tmp_path / "cap", check=False)
    runs = [simulate(trace_scenario(index, 2)) for _ in range(2)]
    for table in ("events", "waits"):
        first, second = (getattr(r, table) for r in runs)
        assert pd.util.hash_pandas_object(first).to_numpy().tobytes() == \
            pd.util.hash_pandas_object(second).to_numpy().tobytes(), table
