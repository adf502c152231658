"""Programs nobody on this project wrote (issue 5): NAS EP/IS/DT and SMPI's collective test program from
SimGrid's source package (``slow``: skipped with the reason when it cannot be downloaded), and a C++ program with
the capture command.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from program_scenarios import (
    HAVE_SMPI,
    PROGRAMS,
    needs_smpi,
    trace_scenario,
)

from waitlab.api import run as run_scenario
from waitlab.cli import main
from waitlab.errors import EnvironmentProblem
from waitlab.experiments.capture import capture
from waitlab.experiments.nas import fetch_simgrid_sources, nas_scenario, smpi_test_scenario
from waitlab.experiments.pipeline import simulate
from waitlab.models.ops import ACTIONS
from waitlab.simulator.ti_trace import parse_ti_trace

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
