"""The machine model names every SimGrid setting: alltoall choice, solver precisions, SMPI factors (no SMPI run)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from waitlab.experiments.pipeline import prepare
from waitlab.experiments.reproduce import okita_spilling as okita
from waitlab.experiments.reproduce.alltoall_points import POINT_SIMULATION, SOLVER_CONFIG, point_scenario
from waitlab.platforms import load_platform, render_platform
from waitlab.platforms.machine import alltoall_settings, machine_settings, smpi_factor_settings, solver_settings

DATA = Path(__file__).resolve().parents[1] / "platforms" / "data"


def _sections(value: str) -> list[tuple[int, float]]:
    """SMPI's piecewise factor text ``"t0:f0;t1:f1"`` as (threshold, factor) pairs."""
    return [(int(t), float(f)) for t, f in (part.split(":") for part in value.split(";"))]


def test_alltoall_settings_select_smpi_algorithms_only() -> None:
    assert alltoall_settings("bruck") == {"smpi/alltoall": "bruck"}
    assert alltoall_settings("lam_simple") == {}  # written out as point-to-point operations by waitlab
    with pytest.raises(ValueError, match="unknown alltoall algorithm 'lam'"):
        alltoall_settings("lam")


def test_a_point_gets_its_alltoall_and_precisions_from_the_machine_model() -> None:
    cfg = prepare(point_scenario("dawning_5000a", "ring", 8, 4096)).smpi_config()
    assert cfg["smpi/alltoall"] == "ring"
    # the point's [simulation] options (1e-3, 1e-7 s), as SimGrid settings
    assert (float(cfg["maxmin/precision"]), float(cfg["surf/precision"])) == (1e-3, 1e-7)
    assert "smpi/alltoall" not in prepare(point_scenario("dawning_5000a", "lam_simple", 8, 4096)).smpi_config()


def test_probe_solver_settings_are_the_point_options() -> None:
    """The probes that bypass the pipeline use the same precisions, spelled by the machine model."""
    assert POINT_SIMULATION == {"solver_precision": 1e-3, "timing_precision": 1e-7}
    assert {k: float(v) for k, v in SOLVER_CONFIG.items()} == {"maxmin/precision": 1e-3, "surf/precision": 1e-7}
    m = load_platform("dawning_5000a")
    full = machine_settings(m, render_platform(m, 16, ranks_per_node=8), solver_precision=1e-3,
                            timing_precision=1e-7)
    assert {k: full[k] for k in SOLVER_CONFIG} == SOLVER_CONFIG == solver_settings(1e-3, 1e-7)


def test_okita_record_lists_the_factors_its_runs_use() -> None:
    """Okita et al.'s platform file says ``[mpi] smpi_factors = false``: one section from 0 B, factor 1."""
    assert tomllib.loads((DATA / "okita_myrinet.toml").read_text())["mpi"]["smpi_factors"] is False
    recorded = okita.calibration()["smpi_factors"]["value"]
    assert {k: _sections(v) for k, v in recorded.items()} == {"smpi/bw-factor": [(0, 1.0)],
                                                             "smpi/lat-factor": [(0, 1.0)]}
    used = prepare(okita.scenario(1)).smpi_config()
    assert recorded == {k: used[k] for k in recorded}
    assert recorded == smpi_factor_settings(load_platform("okita_myrinet"))
