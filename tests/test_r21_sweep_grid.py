"""Sweep grids: one ``simulation.config`` key swept on its own, tables of settings written readably, a grid's
platform files validated before anything runs, and the hint for a platform figure written with its unit."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from bad_inputs_corpus import GOOD, write

import waitlab.api as api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.sweep import load_sweep
from waitlab.platforms import load_platform

PLATFORM = """name = "mine"
description = "a test cluster"
[machine]
max_nodes = { value = 32, source = "inventory" }
[node]
cores = { value = 4, source = "vendor sheet" }
core_speed = { value = 1.0e10, assumed = true, reason = "2.5 GHz x 4 flop/cycle" }
memory = { value = 17179869184, source = "vendor sheet" }
[intra_node]
bandwidth = { value = 8.0e9, assumed = true, reason = "shared-memory MPI" }
latency = { value = 4.0e-7, assumed = true, reason = "shared-memory MPI" }
[inter_node]
bandwidth = BANDWIDTH
latency = { value = 2.0e-6, source = "osu_latency" }
[topology]
kind = "crossbar"
[disk]
bandwidth = { value = 5.0e8, assumed = true, reason = "NVMe" }
latency = { value = 1.0e-4, assumed = true, reason = "NVMe" }
[trace]
buffer_memory = { value = 4294967296, assumed = true, reason = "a quarter of node memory" }
"""


def platform(path: Path, bandwidth: str = '{ value = 1.0e9, source = "10 GbE" }') -> Path:
    return write(path, PLATFORM.replace("BANDWIDTH", bandwidth))


@pytest.mark.parametrize("key", ['"simulation.config.smpi/allreduce"', """'simulation.config."smpi/allreduce"'"""])
def test_one_simgrid_setting_can_be_swept_alone(tmp_path: Path, key: str) -> None:
    write(tmp_path / "g.toml", GOOD)
    sw = load_sweep(write(tmp_path / "sw.toml", f'base = "g.toml"\n[grid]\n{key} = ["rdb", "redbcast"]\n'
                          '[sweep]\nname = "one"\n'))
    assert [pt.scenario.simulation.config.get("smpi/allreduce") for pt in sw.points] == ["rdb", "redbcast"]
    assert len({pt.key for pt in sw.points}) == 2


def test_an_unreadable_grid_key_still_says_how_to_quote(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD)
    with pytest.raises(InputError, match="quote that part"):
        load_sweep(write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"simulation.config.a b" = [1, 2]\n'))


@pytest.mark.simgrid
def test_a_swept_table_of_settings_is_readable_in_the_tables(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"simulation.config" = [{ "smpi/allreduce" = "rdb" }, '
          '{ "smpi/allreduce" = "redbcast" }]\n[sweep]\nname = "whole"\nworkers = 2\n')
    assert main(["sweep", str(tmp_path / "sw.toml"), "-o", str(tmp_path / "out"), "-q"]) == 0
    with open(tmp_path / "out" / "sweep.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["simulation.config"] for r in rows] == ["smpi/allreduce=rdb", "smpi/allreduce=redbcast"]


def test_an_invalid_platform_file_of_the_grid_is_refused_before_anything_runs(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    platform(tmp_path / "good.toml")
    platform(tmp_path / "bad" / "neg.toml", '{ value = -1.0e9, source = "10 GbE" }')
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"platform.name" = ["good.toml", "bad/neg.toml"]\n'
          '[sweep]\nname = "bad"\nworkers = 1\n')
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "sw.toml"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "grid (platform.name=bad/neg.toml): makes an invalid scenario" in err, err
    assert "inter_node.bandwidth.value: must be > 0" in err, err
    assert not out.exists()


def test_a_bandwidth_with_a_unit_gets_an_si_number_as_its_fix(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_platform(platform(tmp_path / "units.toml", '"10 Gb/s"'))
    fix = info.value.fix
    assert "value = 1.25e9" in fix and "bytes/s" in fix and "source" in fix, fix
    assert "'10 Gb/s'," not in fix and "value = '" not in fix, fix
    written = platform(tmp_path / "fixed.toml", fix.split("write bandwidth = ", 1)[1].split(":", 1)[0]
                       .replace('"..."', '"10 GbE"'))
    assert load_platform(written).figures  # the fix, as written, loads


def test_the_exit_status_is_3_whenever_a_point_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume that finds every folder but records a failure (failed.csv) is not a success."""
    write(tmp_path / "g.toml", GOOD)
    sw = write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3]\n[sweep]\nname = "x"\n')

    def fake_sweep(*args: Any, **kwargs: Any) -> pd.DataFrame:
        table = pd.DataFrame({"application.steps": [3], "scenario_hash": ["h"], "makespan": [1.0]})
        table.attrs["counts"] = {"done": 1, "ran": 0, "failed": 1, "skipped": 1}
        return table

    monkeypatch.setattr(api, "sweep", fake_sweep)
    assert main(["sweep", str(sw), "-o", str(tmp_path / "out"), "-q"]) == 3
