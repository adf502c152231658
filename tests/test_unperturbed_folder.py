"""``RUN/unperturbed`` (the unperturbed twin of a perturbed run) is read like any run folder: with RUN's scenario,
checked with RUN's integrity record and its own (`waitlab compare RUN/unperturbed RUN` said scenario.toml was
missing there, and no re-run could write it)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from waitlab import api

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "noise_only.toml"

pytestmark = pytest.mark.simgrid


def test_the_unperturbed_twin_loads_and_compares(tmp_path: Path) -> None:
    run = tmp_path / "run"
    api.run(EXAMPLE, run)
    twin = api.load_run(run / "unperturbed")
    assert twin.scenario.hash() == api.load_run(run).scenario.hash()  # RUN's scenario
    a = json.loads((run / "unperturbed" / "summary.json").read_text())["makespan"]
    b = json.loads((run / "summary.json").read_text())["makespan"]
    cmp = api.compare(run / "unperturbed", run)
    assert cmp.to_dict()["makespan"]["delta"] == pytest.approx(b - a, abs=1e-12) and b > a  # the noise delayed it
    # the noise detours are perturbation in both folders' budgets (ranks.csv), not compute
    totals = cmp.totals.set_index("category")["delta"]
    noise = pd.read_csv(run / "ranks.csv")["perturbation"].sum()
    assert noise > 0 and totals["perturbation"] == pytest.approx(noise, rel=1e-9)
    assert totals["compute"] == pytest.approx(0.0, abs=1e-9)
    (run / "unperturbed" / "events.parquet").write_bytes(b"edited")
    with pytest.raises(api.InputError):
        api.load_run(run / "unperturbed")  # its own integrity record still guards it


def test_a_foreign_run_json_and_another_schema_are_refused_by_every_reader(tmp_path: Path) -> None:
    run = tmp_path / "run"
    api.run(EXAMPLE, run)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({"a": 1}))  # another tool's file of that name
    for read in (api.load_run, api.load_events):
        with pytest.raises(api.InputError, match=r"schema_version: is missing: this is not the run\.json of a waitlab"):
            read(run)
    (run / "run.json").write_text(json.dumps({**meta, "schema_version": 51}))
    with pytest.raises(api.InputError, match="schema_version: is 51"):
        api.load_events(run)  # check-c's reader: it checked only the integrity record
