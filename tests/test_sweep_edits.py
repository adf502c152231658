"""Files a scenario reads, edited while it runs: a result's scenario hash names the bytes it simulated.

A scenario reads its platform file (and digests its noise signature) once, when it is loaded; its run parses the
platform from those bytes and records their hash.  A sweep hands that snapshot to its workers, says at the end that
a file changed, and its next run redoes exactly the points whose hash changed.  A program's sources (and the headers
of its ``-I`` folders) and a noise signature, which the run reads itself, must not change while it reads them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from scenario_files import scenario_toml

from waitlab.errors import InputError
from waitlab.experiments import stage
from waitlab.experiments import sweep as sweep_module
from waitlab.experiments.scenario import InputFiles, from_mapping, load_scenario
from waitlab.experiments.stage import check_application_files, prepare
from waitlab.experiments.sweep import changed_files, load_sweep, run_sweep
from waitlab.experiments.sweep_points import check_draft
from waitlab.platforms.model import _data_dir

FAST = "bandwidth = { value = 1.5e9,"
SLOW = "bandwidth = { value = 1.5e8,"  # 10x lower MPI inter-node bandwidth: another smpi/bw-factor


def platform_file(folder: Path, name: str = "myplat.toml") -> Path:
    """A copy of Dawning 5000A's platform file (its MPI inter-node bandwidth is :data:`FAST`)."""
    path = folder / name
    shutil.copy(_data_dir() / "dawning_5000a.toml", path)
    assert path.read_text().count(FAST) == 1
    return path


def slow_down(path: Path) -> None:
    path.write_text(path.read_text().replace(FAST, SLOW))


def scenario_file(folder: Path, platform: str = "myplat.toml", more: str = "") -> Path:
    """4 ranks of a 2-step stencil, one per node (so the MPI inter-node figures matter)."""
    path = folder / "base.toml"
    text = scenario_toml("edits", 4, 'kind = "stencil"\nsteps = 2', seed=1, platform=platform, more=more)
    path.write_text(text.replace(f'name = "{platform}"\n', f'name = "{platform}"\nranks_per_node = 1\n'))
    return path


def bw_factor(prep: Any) -> str:
    return str(prep.smpi_config()["smpi/bw-factor"])


def test_a_scenario_keeps_the_platform_bytes_it_was_loaded_with(tmp_path: Path) -> None:
    plat = platform_file(tmp_path)
    sc = load_scenario(scenario_file(tmp_path))
    before = sc.hash()
    fast = bw_factor(prepare(sc))
    slow_down(plat)
    assert sc.hash() == before  # the hash is of the bytes read at load, not of the file as it is now
    prep = prepare(sc)
    assert bw_factor(prep) == fast and prep.scenario.hash() == before  # and so is the platform simulated
    again = load_scenario(tmp_path / "base.toml")
    assert again.hash() != before and bw_factor(prepare(again)) != fast
    assert sc.with_values({"scenario.seed": 2}).platform_bytes() == sc.platform_bytes()  # a variant keeps them


def test_a_run_records_the_hash_of_the_platform_bytes_it_read_even_if_the_file_changes_right_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plat = platform_file(tmp_path)
    sc = load_scenario(scenario_file(tmp_path))
    old_hash, old_bw = sc.hash(), bw_factor(prepare(sc))
    unread = dataclasses.replace(sc, inputs=InputFiles())  # as if the file could not be read at load
    real = stage.read_platform_file

    def read_then_edit(path: str) -> bytes:
        raw = real(path)
        slow_down(plat)  # the file changes right after the run read it
        return raw

    monkeypatch.setattr(stage, "read_platform_file", read_then_edit)
    prep = prepare(unread)
    assert SLOW in plat.read_text()
    assert bw_factor(prep) == old_bw  # simulated: the bytes read
    assert prep.scenario.hash() == old_hash  # recorded (pipeline.finish hashes prep.scenario): the same bytes
    assert load_scenario(tmp_path / "base.toml").hash() != old_hash


def test_a_noise_signature_edited_after_load_is_refused_by_the_run(tmp_path: Path) -> None:
    platform_file(tmp_path)
    (tmp_path / "sig.txt").write_text("0.001 0.0005\n0.003 0.0005\n")
    sc = load_scenario(scenario_file(tmp_path, more='[noise]\nmodel = "signature"\nfile = "sig.txt"\n'))
    before = sc.hash()
    prepare(sc)
    (tmp_path / "sig.txt").write_text("0.001 0.0009\n")
    assert sc.hash() == before
    with pytest.raises(InputError, match=r"sig\.txt: \(file\): changed after the scenario was loaded"):
        prepare(sc)


def test_a_program_whose_sources_or_include_headers_change_while_it_runs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "cfg.h").write_text("#define N 4\n")
    (tmp_path / "main.c").write_text('#include "cfg.h"\nint main(void) { return 0; }\n')
    path = tmp_path / "prog.toml"
    path.write_text(scenario_toml("prog", 2, 'kind = "program"\nsources = ["main.c"]\ncompile_flags = ["-Iinc"]'))
    sc = load_scenario(path)
    check_application_files(sc)  # unchanged: nothing to say
    (tmp_path / "inc" / "cfg.h").write_text("#define N 8\n")
    with pytest.raises(InputError, match=r"application: its files .* changed while the run read them"):
        check_application_files(sc)
    sc = load_scenario(path)
    check_application_files(sc)
    (tmp_path / "main.c").write_text('#include "cfg.h"\nint main(void) { return 1; }\n')
    with pytest.raises(InputError, match=r"changed while the run read them"):
        check_application_files(sc)


def make_sweep(tmp_path: Path, grid: str) -> Path:
    platform_file(tmp_path, "pa.toml")
    platform_file(tmp_path, "pb.toml")
    scenario_file(tmp_path, "pa.toml")
    path = tmp_path / "sweep.toml"
    path.write_text(f'base = "base.toml"\n[grid]\n{grid}\n[sweep]\nname = "edits"\nworkers = 1\n')
    return path


def test_a_sweep_reads_each_platform_file_once_and_hands_its_points_those_bytes(tmp_path: Path) -> None:
    sw = load_sweep(make_sweep(tmp_path, '"scenario.seed" = [1, 2, 3]'))
    keys = [pt.key for pt in sw.points]
    assert len({id(pt.scenario.platform_bytes()) for pt in sw.points}) == 1  # one reading for every point
    (tmp_path / "pa.toml").write_text("garbage = [")  # even an invalid file changes no planned point
    assert [pt.key for pt in sw.points] == keys
    assert changed_files(sw) == [str(tmp_path / "pa.toml")]
    for inputs, same in ((sw.points[0].scenario.inputs, True), (None, False)):  # what a worker simulates
        rebuilt = from_mapping(sw.points[0].data, sw.points[0].scenario.source, inputs=inputs)
        assert (rebuilt.hash() == keys[0]) == same
    # a point whose run records another hash than planned (a file its run read itself changed) is not published
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "run.json").write_text(json.dumps({"scenario_hash": "0123456789abcdef"}))
    with pytest.raises(InputError, match=r"changed since the sweep read them: its run records scenario hash "
                       r"0123456789abcdef, not"):
        check_draft(str(draft), keys[0], sw.points[0].scenario.source)
    assert not draft.exists()


def test_a_finished_folder_recording_another_hash_is_run_again_and_a_gone_one_is_a_failure(tmp_path: Path) -> None:
    sw = load_sweep(make_sweep(tmp_path, '"scenario.seed" = [1, 2]'))
    runs = tmp_path / "out" / "runs"
    wrong = runs / sw.points[0].key
    wrong.mkdir(parents=True)
    (wrong / "run.json").write_text(json.dumps({"scenario_hash": "another0scenario"}))
    said: list[str] = []
    todo = sweep_module._to_run(sw, runs, said.append)
    assert [pt.key for pt in todo] == [pt.key for pt in sw.points] and not wrong.exists()
    assert "records scenario hash another0scenario" in said[0]
    # the table leaves such a folder out, and a point counted as done whose folder is gone is a failure row
    wrong.mkdir()
    (wrong / "run.json").write_text(json.dumps({"scenario_hash": "another0scenario"}))
    (wrong / "summary.json").write_text("{}")
    failures: list[dict[str, Any]] = []
    done = {pt.key for pt in sw.points}
    table, failed = sweep_module._write_tables(sw, tmp_path / "out", runs, failures, done=done)
    assert len(table) == 0 and len(failures) == 2 and "no longer holds its run" in failures[0]["error"]
    assert failed.is_file()


@pytest.mark.simgrid
def test_a_platform_file_edited_during_a_sweep_changes_no_point_and_the_resume_redoes_exactly_its_points(
        tmp_path: Path) -> None:
    path = make_sweep(tmp_path, '"platform.name" = ["pa.toml", "pb.toml"]\n"scenario.seed" = [1, 2]')
    sw = load_sweep(path)
    pa = tmp_path / "pa.toml"
    old = {pt.key: pt for pt in sw.points}
    fast = bw_factor(prepare(sw.points[0].scenario))
    out = tmp_path / "out"
    said: list[str] = []

    def progress(msg: str) -> None:
        said.append(msg)
        if msg.startswith("done:") and SLOW not in pa.read_text():
            slow_down(pa)  # after the first point: the others are running or about to

    table = run_sweep(sw, out, progress=progress)
    assert table.attrs["counts"] == {"done": 4, "ran": 4, "failed": 0, "skipped": 0}
    assert sorted(table["scenario_hash"]) == sorted(old)  # every row under the hash it was planned (and ran) under
    assert table.attrs["changed_files"] == [str(pa)] and "pa.toml changed while the sweep ran" in said[-1]
    for key in old:
        meta = json.loads((out / "runs" / key / "run.json").read_text())
        assert meta["scenario_hash"] == key and meta["smpi_config"]["smpi/bw-factor"] == fast  # what it simulated
    stamps = {key: (out / "runs" / key / "run.json").stat().st_mtime_ns for key in old}

    resumed = load_sweep(path)  # reads the edited file: pa's points are other scenarios now
    again: list[str] = []
    table = run_sweep(resumed, out, progress=again.append)
    assert again[0].endswith("4 points, 2 already done, 2 to run")
    assert table.attrs["counts"] == {"done": 4, "ran": 2, "failed": 0, "skipped": 2}
    assert not table.attrs["changed_files"]
    for pt in resumed.points:
        meta = json.loads((out / "runs" / pt.key / "run.json").read_text())
        assert meta["scenario_hash"] == pt.key
        if pt.scenario.platform.name == str(pa):  # redone, on the edited file
            assert pt.key not in old and meta["smpi_config"]["smpi/bw-factor"] == bw_factor(prepare(pt.scenario))
            assert meta["smpi_config"]["smpi/bw-factor"] != fast
        else:  # not redone
            assert pt.key in old and (out / "runs" / pt.key / "run.json").stat().st_mtime_ns == stamps[pt.key]
    assert sorted(table["scenario_hash"]) == sorted(pt.key for pt in resumed.points)
