"""Program builds (issue 25): relative -I paths resolve against the scenario file, and the build cache
covers every header the compiler read (a header changed in an -I folder rebuilds the program)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None

PROGRAM = r"""
#include <mpi.h>
#include "delay.h"
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) smpi_execute_benched(DELAY_MS * 1e-3);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"""


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_header_in_an_include_folder_changes_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))  # a cache of this test's own
    (tmp_path / "src").mkdir()
    (tmp_path / "inc").mkdir()
    (tmp_path / "scen").mkdir()
    (tmp_path / "src" / "main.c").write_text(PROGRAM)
    header = tmp_path / "inc" / "delay.h"

    def barrier_wait(delay_ms: int) -> float:
        header.write_text(f"#define DELAY_MS {delay_ms}\n")
        sc = from_mapping({"scenario": {"name": "hdr", "ranks": 2}, "platform": {"name": "dawning_5000a"},
                           "application": {"kind": "program", "sources": ["../src/main.c"],
                                           "compile_flags": ["-I../inc"]}},
                          str(tmp_path / "scen" / "scenario.toml"))  # -I../inc: relative to the scenario file
        assert sc.application.compile_flags == (f"-I{tmp_path / 'inc'}",)
        res = simulate(sc)
        return float(res.waits.loc[res.waits["rank"] == 1, "wait"].sum())

    assert barrier_wait(30) == pytest.approx(0.030, abs=1e-4)
    assert barrier_wait(70) == pytest.approx(0.070, abs=1e-4)  # same sources, same flags: only the header changed
    assert barrier_wait(70) == pytest.approx(0.070, abs=1e-4)
    manifests = list((tmp_path / "cache" / "programs").glob("hdr-*.deps.json"))
    assert len(manifests) == 1  # one recipe: the header's content is checked, not part of the name
    listed = json.loads(manifests[0].read_text())
    assert str(header) in listed and any(p.endswith("/mpi.h") for p in listed)  # -MD: system headers too
