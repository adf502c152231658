"""A results folder read back: the operation table is read only when used (diagnose --no-truth never does)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scenario_files import imbalance_toml, scenario_toml

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.diagnosis.diagnose import diagnose_path
from waitlab.experiments.results import read_ledger
from waitlab.models.analysis.metrics import ledger_frame

SCENARIO = scenario_toml("lazy", 4, 'kind = "stencil"\nsteps = 2\ndims = 1\ncompute_seconds = 0.01\nhalo_bytes = 1024',
                         seed=2, more=imbalance_toml("1", 0.005))


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lazy")
    (d / "s.toml").write_text(SCENARIO)
    waitlab.run(d / "s.toml", d / "run", png=False)
    return d / "run"


@pytest.mark.simgrid
def test_the_operations_are_read_when_first_used(run_folder: Path) -> None:
    run = waitlab.load_run(run_folder)
    assert "ops" not in run.__dict__
    ledger = run.ledger()  # from ledger.parquet alone
    assert "ops" not in run.__dict__ and (ledger["seconds"] > 0).any()
    diag = diagnose_path(run, truth=False)
    assert diag.models and "ops" not in run.__dict__  # the models and the no-truth diagnosis need no operations
    assert len(run.ops) > 0 and "ops" in run.__dict__
    pd.testing.assert_frame_equal(ledger, ledger_frame(run.ops))  # the same table either way
    pd.testing.assert_frame_equal(run.ledger(), ledger)


@pytest.mark.simgrid
def test_a_damaged_operation_table_is_refused_when_the_folder_is_read(run_folder: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(run_folder, bad)
    raw = (bad / "ops.parquet").read_bytes()
    (bad / "ops.parquet").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError) as err:
        waitlab.load_run(bad, trust_edited=True)  # not only later, when the operations are first used
    assert err.value.field == "(file)" and "ops.parquet" in str(err.value)


@pytest.mark.simgrid
def test_a_ledger_with_an_unknown_kind_of_cause_is_refused_in_one_line(run_folder: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(run_folder, bad)
    table = pq.read_table(bad / "ledger.parquet")
    assert table.num_rows > 0
    table = table.set_column(table.column_names.index("kind"), "kind", pa.array(["bogus"] * table.num_rows))
    pq.write_table(table, bad / "ledger.parquet")
    run = waitlab.load_run(bad, trust_edited=True)
    with pytest.raises(InputError) as err:
        run.ledger()
    assert err.value.field == "column kind" and "'bogus'" in str(err.value) and "imbalance" in str(err.value)


def test_read_ledger_over_row_groups_with_plain_and_empty_text_columns(tmp_path: Path) -> None:
    """Three rows in two row groups, region and kind written as plain strings: regions index the names given ("zz"
    is none of them: -1), kinds index CAUSE_KINDS (imbalance 0, noise 1); an empty ledger, whose text columns
    pandas writes without a type, reads as empty arrays."""
    table = pa.table({"rank": [0, 1, 2], "region": ["b", "zz", "a"], "step": [0, 0, 1], "seconds": [0.5, 1.0, 2.0],
                      "kind": ["noise", "imbalance", "noise"]})
    pq.write_table(table, tmp_path / "ledger.parquet", row_group_size=2, use_dictionary=False)
    led = read_ledger(tmp_path / "ledger.parquet", ("a", "b"))
    assert (led.rank.tolist(), led.region.tolist(), led.step.tolist(), led.seconds.tolist(), led.kind.tolist()) == \
        ([0, 1, 2], [1, -1, 0], [0, 0, 1], [0.5, 1.0, 2.0], [1, 0, 1])
    empty = pa.table({"rank": pa.array([], pa.int64()), "region": pa.array([], pa.null()),
                      "step": pa.array([], pa.int64()), "seconds": pa.array([], pa.float64()),
                      "kind": pa.array([], pa.null())})
    pq.write_table(empty, tmp_path / "ledger.parquet")
    assert len(read_ledger(tmp_path / "ledger.parquet", ("a",))) == 0
