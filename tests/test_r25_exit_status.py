"""An exit status that ``[application] exit_codes`` accepts is said in the results (tester t1 of session 25): the
run succeeds, and ``summary.txt`` and ``run.json`` say which rank returned what (before, only SMPI's warning in
``program/output.txt`` did)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waitlab.cli import main

PROGRAM = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return rank == 1 ? 3 : 0;
}
"""


def _scenario(tmp_path: Path, codes: str) -> Path:
    (tmp_path / "status.c").write_text(PROGRAM)
    toml = tmp_path / f"s{len(codes)}.toml"
    toml.write_text(f'[scenario]\nname = "status"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                    f'[application]\nkind = "program"\nsources = ["status.c"]\nexit_codes = {codes}\n')
    return toml


@pytest.mark.simgrid
def test_an_accepted_exit_status_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", str(_scenario(tmp_path, "[0, 3]")), "-o", str(out), "-q"]) == 0
    assert json.loads((out / "run.json").read_text())["exit_statuses"] == {"1": 3}
    assert "exit statuses accepted by [application] exit_codes: rank 1 returned 3" in (out / "summary.txt").read_text()


@pytest.mark.simgrid
def test_a_run_where_every_rank_returns_0_records_none(tmp_path: Path) -> None:
    (tmp_path / "zero.c").write_text(PROGRAM.replace("rank == 1 ? 3 : 0", "0"))
    toml = tmp_path / "z.toml"
    toml.write_text('[scenario]\nname = "zero"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                    '[application]\nkind = "program"\nsources = ["zero.c"]\n')
    out = tmp_path / "run"
    assert main(["run", str(toml), "-o", str(out), "-q"]) == 0
    assert "exit_statuses" not in json.loads((out / "run.json").read_text())
    assert "exit statuses" not in (out / "summary.txt").read_text()
