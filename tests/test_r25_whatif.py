"""A capacity planner's what-ifs (round 25, tester t2): a results folder whose input files changed since its run is
read but not simulated again (F3); two grid keys setting one setting (F4) and a built-in platform named twice (F5)
are refused; messages and the compare picture (F7); the figures docs/platforms.md tells a planner to change (F1, F2).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

import waitlab
import waitlab.experiments.compare as compare
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.compare import Comparison, compare_png
from waitlab.experiments.results import load_run
from waitlab.experiments.run_folder import seal
from waitlab.experiments.scenario import load_scenario, scenario_hash
from waitlab.experiments.sweep import load_sweep
from waitlab.platforms import load_platform
from waitlab.platforms.render import render_platform

ROOT = Path(__file__).resolve().parents[1]

#: The tester's crossbar (plat/mine.toml): no [mpi], so a message of n bytes takes latency + (n + 16) / bandwidth.
PLATFORM = """name = "mine"
description = "A simple crossbar."
[machine]
max_nodes = { value = 8, source = "test" }
[node]
cores = { value = 4, source = "test" }
core_speed = { value = 1.0e9, assumed = true, reason = "round" }
memory = { value = 8589934592, source = "test" }
[intra_node]
bandwidth = { value = 4.0e9, assumed = true, reason = "round" }
latency = { value = 1.0e-6, assumed = true, reason = "round" }
[inter_node]
bandwidth = { value = 1.0e9, source = "round figure" }
latency = { value = 1.0e-5, source = "round figure" }
[topology]
kind = "crossbar"
[disk]
bandwidth = { value = 1.0e8, assumed = true, reason = "round" }
latency = { value = 1.0e-3, assumed = true, reason = "round" }
[trace]
buffer_memory = { value = 1073741824, assumed = true, reason = "round" }
"""

#: A stencil whose rank 1 is late by 5 ms a step, one rank per node of the platform file ``plat.toml`` beside it.
SCENARIO = """[scenario]
name = "edited"
ranks = 4
seed = 3
[platform]
name = "plat.toml"
ranks_per_node = 1
[application]
kind = "stencil"
steps = 2
compute_seconds = 0.01
halo_bytes = 100000
[[application.imbalance]]
region = "Stencil"
ranks = [1]
distribution = "constant"
magnitude = 0.005
"""


def _run(folder: Path) -> tuple[Path, Path]:
    """``folder/in/plat.toml`` and a run of the scenario on it in ``folder/run``: (platform file, results folder)."""
    (folder / "in").mkdir(parents=True)
    plat = folder / "in" / "plat.toml"
    plat.write_text(PLATFORM)
    (folder / "in" / "s.toml").write_text(SCENARIO)
    waitlab.run(folder / "in" / "s.toml", folder / "run", png=False)
    return plat, folder / "run"


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose platform file is never edited."""
    return _run(tmp_path_factory.mktemp("intact"))[1]


# ------------------------------------------------------------------------------------------------ F3


@pytest.mark.simgrid
def test_an_intact_folder_and_a_copy_of_it_elsewhere_read_as_they_were(intact: Path, tmp_path: Path) -> None:
    run = load_run(intact)
    assert run.inputs_changed == ""
    assert run.scenario.hash() == json.loads((intact / "run.json").read_text())["scenario_hash"]
    moved = tmp_path / "elsewhere" / "deeper" / "run"
    shutil.copytree(intact, moved)  # the paths in scenario.toml are absolute
    assert load_run(moved).inputs_changed == ""


@pytest.mark.simgrid
def test_a_folder_of_an_older_waitlab_is_not_taken_for_an_edited_one(intact: Path, tmp_path: Path) -> None:
    """run.json's hash as two older waitlabs wrote it: over a resolved scenario with fewer defaults, and (before the
    hash covered the platform file) over the application's digest alone.  Neither is an edited input."""
    for name, fingerprint in (("fewer-defaults", None), ("no-file-hash", "")):
        old = tmp_path / name
        shutil.copytree(intact, old)
        meta = json.loads((old / "run.json").read_text())
        resolved = meta["resolved_scenario"]
        del resolved["simulation"]["timing_precision"]  # a key this waitlab fills in and that one did not know
        sc = load_scenario(old / "scenario.toml")
        meta["scenario_hash"] = scenario_hash(resolved, sc.fingerprint() if fingerprint is None else fingerprint)
        (old / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        seal(old)  # as that waitlab sealed its folder
        run = load_run(old)
        assert run.inputs_changed == "", name
        assert run.scenario.platform_bytes() == PLATFORM.encode()  # simulated again as it is: nothing to tell


@pytest.mark.simgrid
def test_a_platform_file_edited_since_the_run_refuses_the_ground_truth_not_the_reading(tmp_path: Path) -> None:
    plat, folder = _run(tmp_path)
    recorded = json.loads((folder / "run.json").read_text())["scenario_hash"]
    plat.write_text(PLATFORM.replace("value = 1.0e9, source", "value = 1.0e7, source"))  # 100x slower network
    run = load_run(folder)
    assert run.inputs_changed.startswith(f"{plat}: (file): changed since the run of results folder {folder}")
    assert f"the run's {recorded}" in run.inputs_changed
    # what re-simulates: refused in one line naming the file and the fix, before anything is simulated
    with pytest.raises(InputError) as err:
        waitlab.diagnose(folder, cache_dir=tmp_path / "cache", use_cache=False)
    assert err.value.file == str(plat) and "restore the file" in err.value.fix and "\n" not in str(err.value)
    assert not (tmp_path / "cache").exists()
    # the API's run of the loaded scenario is a new run of the file as it is now, under its own hash
    again = waitlab.run(run.scenario, tmp_path / "again", png=False)
    assert json.loads((tmp_path / "again" / "run.json").read_text())["scenario_hash"] not in (recorded, "")
    assert again is not None
    # what only reads the folder's tables: as before
    assert waitlab.diagnose(folder, truth=False).truth is None
    assert waitlab.compare(folder, folder).identical
    assert "chrome" in waitlab.export(folder, "chrome", tmp_path / "exports")
    waitlab.report(folder)
    # the command line: one line, exit status 2, no report
    out = subprocess.run([sys.executable, "-m", "waitlab.cli", "diagnose", str(folder), "-o", str(tmp_path / "d"),
                          "--no-cache"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and str(plat) in out.stderr, out.stderr
    assert not (tmp_path / "d").exists()
    plat.write_text(PLATFORM)  # restored as the run read it: simulated again
    assert load_run(folder).inputs_changed == ""
    assert load_run(folder).scenario.platform_bytes() == PLATFORM.encode()


@pytest.mark.simgrid
def test_a_noise_signature_edited_since_the_run_refuses_the_ground_truth(tmp_path: Path) -> None:
    sig = tmp_path / "sig.txt"
    sig.write_text("0.0 0.0005\n")
    (tmp_path / "s.toml").write_text(SCENARIO.replace('name = "plat.toml"', 'name = "dawning_5000a"')
                                     + '[noise]\nmodel = "signature"\nfile = "sig.txt"\nperiod = 0.004\n')
    waitlab.run(tmp_path / "s.toml", tmp_path / "run", png=False)
    assert load_run(tmp_path / "run").inputs_changed == ""
    sig.write_text("0.0 0.002\n")
    run = load_run(tmp_path / "run")
    assert run.inputs_changed.startswith(f"{sig}: (file): changed since the run")
    with pytest.raises(InputError) as err:
        waitlab.diagnose(tmp_path / "run", use_cache=False, cache_dir=tmp_path / "cache")
    assert err.value.file == str(sig)
    assert waitlab.diagnose(tmp_path / "run", truth=False).models


# ------------------------------------------------------------------------------------------------ F4, F5, F7: grids


def _sweep(tmp_path: Path, grid: str) -> Path:
    """A sweep file over a 2-rank pingpong with ``grid`` (its lines)."""
    (tmp_path / "base.toml").write_text(
        '[scenario]\nname = "b"\nranks = 2\n[platform]\nname = "dawning_5000a"\nranks_per_node = 1\n'
        '[application]\nkind = "pingpong"\nsteps = 2\nmessage_bytes = 8\n')
    (tmp_path / "sw.toml").write_text(f'base = "base.toml"\n[grid]\n{grid}')
    return tmp_path / "sw.toml"


@pytest.mark.parametrize(("keys", "outer", "inner"), [
    (['"simulation.config.smpi/allreduce" = ["redbcast"]', '"simulation.config" = [{"smpi/allreduce" = "rdb"}]'],
     "simulation.config", "simulation.config.smpi/allreduce"),
    (['"simulation.config" = [{}]', "'simulation.config.\"smpi/bcast\"' = [\"flattree\"]"],
     "simulation.config", 'simulation.config."smpi/bcast"'),
    (['"scenario" = [{name = "x", ranks = 2}]', '"scenario.seed" = [1, 2]'], "scenario", "scenario.seed"),
])
def test_two_grid_keys_that_set_one_setting_are_refused_naming_both(tmp_path: Path, keys: list[str], outer: str,
                                                                    inner: str) -> None:
    """The tester's grid labelled its row redbcast and simulated rdb (the later key overwrote the earlier)."""
    with pytest.raises(InputError) as err:
        load_sweep(_sweep(tmp_path, "\n".join(keys) + "\n"))
    assert err.value.field == "grid" and f"({outer!r} holds {inner!r})" in err.value.problem
    assert err.value.fix == "keep one of the two keys" and "\n" not in str(err.value)


def test_the_same_key_spelled_twice_is_refused_and_distinct_settings_pass(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_sweep(_sweep(tmp_path, '"simulation.config.smpi/bcast" = ["flattree"]\n'
                                    "'simulation.config.\"smpi/bcast\"' = [\"binomial_tree\"]\n"))
    assert "(the same key, spelled two ways)" in err.value.problem
    sweep = load_sweep(_sweep(tmp_path, '"simulation.config.smpi/bcast" = ["flattree"]\n'
                                        '"simulation.config.smpi/allreduce" = ["rdb", "lr"]\n'))
    assert len(sweep.points) == 2


def test_a_built_in_platform_and_its_own_data_file_are_one_value(tmp_path: Path) -> None:
    data = Path(str(resources.files("waitlab.platforms") / "data" / "deepcomp_7000.toml"))
    (tmp_path / "link").symlink_to(data.parent)
    for twin in (data, tmp_path / "link" / "deepcomp_7000.toml"):  # the tester's grid, and the file by another way
        with pytest.raises(InputError) as err:
            load_sweep(_sweep(tmp_path, f'"platform.name" = ["deepcomp_7000", "{twin}"]\n'))
        assert "make the same scenario" in err.value.problem and f"platform.name={twin}" in err.value.problem
    copy = tmp_path / "dc.toml"  # a copy is a file of its own (a sweep may see it edited): not the built-in
    shutil.copyfile(data, copy)
    assert len(load_sweep(_sweep(tmp_path, f'"platform.name" = ["deepcomp_7000", "{copy}"]\n')).points) == 2


def test_a_grid_value_true_is_named_true(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_sweep(_sweep(tmp_path, '"application.message_bytes" = [1, true]\n'))
    assert err.value.field == "grid (application.message_bytes=true)"


def test_the_compare_picture_of_different_rank_counts_says_why_the_rank_panel_is_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    empty = pd.DataFrame({"category": [], "a": [], "b": [], "delta": []})
    cmp = Comparison("a", "b", (1.0, 2.0), empty, empty.rename(columns={"category": "pattern"}),
                     empty.rename(columns={"category": "region"}), pd.DataFrame(),
                     pd.DataFrame({"step": [0], "a": [1.0], "b": [2.0], "delta": [1.0]}),
                     ["rank counts differ (16 vs 32): no per-rank comparison"])
    drawn = []

    def keep(*args: object, **kwargs: object) -> object:
        fig, axes = original(*args, **kwargs)
        drawn.append(axes)
        return fig, axes

    original = compare.subplots
    monkeypatch.setattr(compare, "subplots", keep)
    compare_png(cmp, tmp_path / "c.png")
    texts = [t.get_text() for t in drawn[0][1, 0].texts]
    assert texts == ["rank counts differ (16 vs 32):\nno per-rank comparison"]
    assert (tmp_path / "c.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------------ F1, F2: the figures


def _factor(text: str) -> float:
    """SMPI's large-message bandwidth factor of a DeepComp 7000 variant (one rank on each of two nodes)."""
    path = Path(text)
    config = render_platform(load_platform(path), 2, ranks_per_node=1).smpi_config
    return float(config["smpi/bw-factor"].split(";")[-1].split(":")[1])


def _variant(tmp_path: Path, name: str, *changes: tuple[str, str]) -> str:
    text = (resources.files("waitlab.platforms") / "data" / "deepcomp_7000.toml").read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    (tmp_path / f"{name}.toml").write_text(text)
    return str(tmp_path / f"{name}.toml")


def test_the_link_figure_only_sets_the_factor_and_the_latency_what_if_needs_the_bandwidth_figure(
        tmp_path: Path) -> None:
    """docs/platforms.md "Network what-ifs": with [mpi] figures the link's bandwidth only sets the factor, whose
    product with it (the rate a node's flows share) is the same at 2.5 and 5 GB/s; halving the latency alone lowers
    the factor (0.601286 -> 0.600640, the tester's run.json figures), and the bandwidth figure raised to
    S / (S / B - dL) brings it back."""
    link = ("bandwidth = { value = 2.5e9", "bandwidth = { value = 5.0e9")
    lat = ("latency = { value = 1.5e-6", "latency = { value = 7.5e-7")
    s = 1048576
    raised = s / (s / 1.5e9 - 0.75e-6)
    assert raised == pytest.approx(1.50161e9, rel=1e-6)  # the figure the page gives
    mpi = ("{ size = 1048576, bandwidth = { value = 1.5e9", f"{{ size = 1048576, bandwidth = {{ value = {raised!r}")
    base = _factor(_variant(tmp_path, "dc"))
    assert base == pytest.approx(0.601286, abs=1e-6)
    assert _factor(_variant(tmp_path, "link2x", link)) * 5.0e9 == pytest.approx(base * 2.5e9, rel=1e-12)
    assert _factor(_variant(tmp_path, "lathalf", lat)) == pytest.approx(0.600640, abs=1e-6)
    assert _factor(_variant(tmp_path, "lathalf_bw", lat, mpi)) == pytest.approx(base, rel=1e-9)
    page = " ".join((ROOT / "docs" / "platforms.md").read_text().split())
    assert "25% too high" not in page  # the old "known gap" said the shared capacity was the link's
    for figure in ("0.601286 to 0.600640", "1.50161e9 B/s", "2.00215e9", "5.601 ms"):
        assert figure in page, figure
    assert f"{2.0e9 * raised / 1.5e9:.5e}".replace("e+0", "e") == "2.00215e9"


@pytest.mark.simgrid
def test_a_pingpong_does_not_see_the_link_figure_but_sees_the_mpi_figure(tmp_path: Path) -> None:
    """1 MiB one way on DeepComp 7000 is S / B = 1048576 / 1.5e9 = 699.05 us (the figure), whatever the link's rate;
    with the figure doubled, half of it."""
    link = ("bandwidth = { value = 2.5e9", "bandwidth = { value = 5.0e9")
    mpi = ("{ size = 1048576, bandwidth = { value = 1.5e9", "{ size = 1048576, bandwidth = { value = 3.0e9")
    port = ("port_bandwidth = { value = 2.0e9", "port_bandwidth = { value = 4.0e9")
    one_way = {}
    for name, changes in (("dc", ()), ("link2x", (link,)), ("net2x", (link, mpi, port))):
        plat = _variant(tmp_path, name, *changes)
        (tmp_path / f"{name}.s.toml").write_text(
            f'[scenario]\nname = "pp"\nranks = 2\n[platform]\nname = "{plat}"\nranks_per_node = 1\n'
            '[application]\nkind = "pingpong"\nsteps = 2\nmessage_bytes = 1048576\n')
        run = waitlab.run(tmp_path / f"{name}.s.toml", tmp_path / name, png=False)
        one_way[name] = run.result.summary["makespan"] / 4  # two round trips
    assert one_way["dc"] == pytest.approx(1048576 / 1.5e9, rel=1e-6)
    assert one_way["link2x"] == one_way["dc"]  # to the bit
    assert one_way["net2x"] == pytest.approx(1048576 / 3.0e9, rel=1e-6)


@pytest.mark.simgrid
def test_a_program_edited_since_the_run_refuses_the_ground_truth(tmp_path: Path) -> None:
    """A program's counterfactual runs rebuild it from its sources: edited since the run, the truth would be of
    another program, so it is refused like an edited platform file; the reading goes on."""
    src = tmp_path / "p.c"
    src.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Barrier(MPI_COMM_WORLD);\n"
                   "  MPI_Finalize(); return 0; }\n")
    toml = tmp_path / "p.toml"
    toml.write_text('[scenario]\nname = "p"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                    '[application]\nkind = "program"\nsources = ["p.c"]\n')
    folder = tmp_path / "run"
    waitlab.run(toml, folder, png=False)
    src.write_text(src.read_text().replace("MPI_Barrier(MPI_COMM_WORLD);", "MPI_Barrier(MPI_COMM_WORLD); /* v2 */"))
    assert "the application's sources and inputs" in load_run(folder).inputs_changed
    with pytest.raises(InputError, match="changed since the run"):
        waitlab.diagnose(folder, cache_dir=tmp_path / "cache", use_cache=False)
    assert waitlab.diagnose(folder, truth=False).truth is None


@pytest.mark.simgrid
def test_the_network_what_if_alltoall_figures_are_what_a_run_gives(tmp_path: Path) -> None:
    """The alltoall times docs/platforms.md and docs/sweeps.md quote for their network what-ifs (DeepComp 7000,
    64 ranks on nodes of 8 cores, basic_linear, 64 KiB per pair): the link doubled alone changes nothing, the `[mpi]`
    figures doubled halve it (nearly), the latency halved alone makes it slower."""
    link = ("bandwidth = { value = 2.5e9", "bandwidth = { value = 5.0e9")
    lat = ("latency = { value = 1.5e-6", "latency = { value = 7.5e-7")

    (tmp_path / "base.toml").write_text('[scenario]\nname = "net"\nranks = 64\nseed = 1\n[platform]\n'
                                        'name = "deepcomp_7000"\n[application]\nkind = "fft"\nsteps = 3\n'
                                        'bytes_per_peer = 65536\n[simulation]\nalltoall = "basic_linear"\n')
    plats = ["deepcomp_7000", _variant(tmp_path, "link2x", link), _variant(tmp_path, "lathalf", lat)]
    (tmp_path / "sweep.toml").write_text('base = "base.toml"\n[grid]\n"platform.name" = ['
                                         + ", ".join(json.dumps(p) for p in plats) + "]\n")
    assert main(["sweep", str(tmp_path / "sweep.toml"), "-o", str(tmp_path / "sw"), "-q"]) == 0
    rows = pd.read_csv(tmp_path / "sw" / "sweep.csv")
    base, link2x, lathalf = (1e3 * float(rows.loc[rows["platform.name"] == p, "alltoall_time"].item()) for p in plats)
    assert link2x == pytest.approx(base, rel=1e-12)  # the same time, to rounding
    assert lathalf > base
    pages = " ".join((ROOT / "docs" / "platforms.md").read_text().split() + (ROOT / "docs" / "sweeps.md").read_text()
                     .split())
    for figure in (f"{base:.4f} ms", f"{base:.4f} to {lathalf:.4f} ms", f"{base:.4f} -> {lathalf:.4f} ms"):
        assert figure in pages, figure
