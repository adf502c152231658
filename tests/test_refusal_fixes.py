"""Every fix a refusal suggests is valid input (issue 25): the suggestions are taken from the message itself
and fed back into the scenario, which then runs."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from waitlab.errors import WaitlabError
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
NATIVE = Path(__file__).resolve().parent.parent / "simulator" / "native"

#: A program that waits for 1 ms of MPI_Wtime to pass (OSU's osu_ialltoall does this to emulate compute).
SPIN = r"""
#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  double t0 = MPI_Wtime();
  while (MPI_Wtime() - t0 < 1e-3) {}
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"""
#: A suggestion: "set / give / add / use" then ``section.key = value`` or ``[section] key = value`` (value: a TOML
#: string or inline table); a setting only described ("under application.computation = ...") is not one.
FIX = re.compile(r'\b(?:[Ss]et|give|add|use) (?:\[(?P<s1>\w+)\] (?P<k1>\w+)|(?P<s2>[a-z]+)\.(?P<k2>\w+)) = '
                 r'(?P<v>"[^"]*"|\{[^}]*\})')


def suggested_fixes(message: str) -> list[tuple[str, str, Any]]:
    """(section, key, value) of every setting a message suggests."""
    return [(m["s1"] or m["s2"], m["k1"] or m["k2"], tomllib.loads(f"v = {m['v']}")["v"])
            for m in FIX.finditer(message)]


def test_suggestions_of_the_measurement_layer_are_valid_input(tmp_path: Path) -> None:
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', "".join(p.read_text() for p in NATIVE.glob("*.c"))))
    text = text.replace('\\"', '"')
    fixes = suggested_fixes(text)
    assert ("simulation", "config", {"smpi/wtime": "1e-7"}) in fixes
    (tmp_path / "p.c").write_text(SPIN)
    for section, key, value in fixes:
        if section == "application" and key == "kind":
            continue
        data: dict[str, Any] = {"scenario": {"name": "fix", "ranks": 2}, "platform": {"name": "dawning_5000a"},
                                "application": {"kind": "program", "sources": ["p.c"]}}
        data.setdefault(section, {})[key] = value
        from_mapping(data, str(tmp_path / "s.toml"))  # raises on an invalid suggestion


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_wtime_spin_refusal_and_each_suggested_fix_runs(tmp_path: Path) -> None:

    (tmp_path / "p.c").write_text(SPIN)
    base: dict[str, Any] = {"scenario": {"name": "spin", "ranks": 2}, "platform": {"name": "dawning_5000a"},
                            "application": {"kind": "program", "sources": ["p.c"]},
                            "simulation": {"timeout": 120}}
    with pytest.raises(WaitlabError) as exc:
        simulate(from_mapping(base, str(tmp_path / "s.toml")))
    message = str(exc.value)
    assert "MPI_Wtime" in message
    fixes = suggested_fixes(message)
    assert {(s, k) for s, k, _ in fixes} == {("application", "computation"), ("simulation", "config")}
    for section, key, value in fixes:
        data = {k: dict(v) for k, v in base.items()}
        data[section][key] = value
        res = simulate(from_mapping(data, str(tmp_path / "s.toml")))
        assert float(res.events["exit"].max()) >= 1e-3  # the 1 ms of MPI_Wtime passed in simulated time
