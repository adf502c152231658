"""``waitlab evaluate --executor dask`` (issue 24): the suite runs and the counterfactual re-runs go to a Dask
``LocalCluster``, and the leaderboard is the same bytes as with the local executor (each from its own cold cache,
so both simulate everything)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario_files import imbalance_toml, scenario_toml

from waitlab import api

pytest.importorskip("distributed")
pytestmark = [pytest.mark.simgrid, pytest.mark.slow]

#: Two tiny cases: one late rank at an allreduce, and one at a row-communicator allreduce (no halos).
CASE = scenario_toml("{name}", 4, 'kind = "stencil"\ndims = 2\nsteps = 2\ncompute_seconds = 0.002\n'
                     'halo_bytes = 1024\n{extra}', seed=1,
                     more=imbalance_toml("{late}", 0.001, distribution="constant"))


def _suite(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.toml").write_text(CASE.format(name="tiny-late", extra="", late=1))
    (folder / "b.toml").write_text(CASE.format(name="tiny-row", extra='collective_comm = "row"\nhalo_every = 0',
                                               late=2))
    (folder / "suite.toml").write_text('[[case]]\nfile = "a.toml"\ncause = "compute imbalance"\nwhat = "late"\n\n'
                                       '[[case]]\nfile = "b.toml"\ncause = "sub-communicators"\nwhat = "row"\n')
    return folder


def test_evaluate_on_a_dask_cluster_writes_the_local_leaderboard(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite")
    local = api.evaluate(suite, tmp_path / "local", executor="local", workers=1, cache_dir=tmp_path / "c1",
                         png=False)
    dask = api.evaluate(suite, tmp_path / "dask", executor="dask", workers=1, cache_dir=tmp_path / "c2", png=False)
    assert local.counts["runs_simulated"] == dask.counts["runs_simulated"] == 2  # both cold
    assert dask.counts["reruns_simulated"] == local.counts["reruns_simulated"] > 0
    assert not local.notes and set(local.rows["case"]) == {"tiny-late", "tiny-row"}
    for f in ("leaderboard.md", "leaderboard.csv", "leaderboard.json"):
        assert (tmp_path / "local" / f).read_bytes() == (tmp_path / "dask" / f).read_bytes(), f
