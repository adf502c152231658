"""Scenario validation, error messages, the CLI, atomic results and determinism."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from scenario_files import TINY

from waitlab.api import run as run_scenario
from waitlab.errors import InputError, SimulationError
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping, load_scenario
from waitlab.simulator.export import read_table

GOOD = TINY


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "waitlab.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(("edit", "field", "words"), [
    (("ranks = 4", "ranks = 0"), "scenario.ranks", "must be >= 1"),
    (("ranks = 4", 'ranks = "four"'), "scenario.ranks", "must be an integer"),
    (("seed = 7", "seed = -1"), "scenario.seed", "must be >= 0"),
    (('[application]', '[aplication]'), "aplication", "unknown section"),
    (('name = "dawning_5000a"', 'nodes = 2'), "platform.name", "is required"),
    (('kind = "stencil"', 'kind = "stencl"'), "application.kind", "unknown application kind 'stencl'"),
    (("steps = 3", "steps = 3\nsimulation_speed = 2"), "application.simulation_speed", "unknown key"),
])
def test_bad_scenarios_name_file_field_and_fix(tmp_path, edit, field, words):
    p = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(InputError) as info:
        load_scenario(p)
    err = info.value
    assert err.file == str(p) and err.field == field and words in err.problem
    assert str(err).startswith(f"{p}: {field}: ")


def test_simulation_section_errors(tmp_path):
    base = GOOD + "\n[simulation]\n"
    cases = {
        'alltoall = "fast"': ("simulation.alltoall", "unknown SMPI alltoall algorithm"),
        'alltoall = "pair"': ("simulation.alltoall", "power-of-two"),
        "timeout = -5": ("simulation.timeout", "must be > 0"),
        'config = { "smpi/simulate-computation" = "no" }': ("simulation.config.smpi/simulate-computation",
                                                           "skips compute"),
    }
    for line, (field, words) in cases.items():
        text = base + line + "\n"
        if "pair" in line:
            text = text.replace("ranks = 4", "ranks = 6")
        with pytest.raises(InputError) as info:
            load_scenario(write(tmp_path, text))
        assert info.value.field == field and words in info.value.problem, line


def test_an_application_alltoall_algorithm_the_ranks_cannot_run_names_its_key(tmp_path):
    text = ('[scenario]\nname = "f"\nranks = 6\n[platform]\nname = "dawning_5000a"\n'
            '[application]\nkind = "fft"\nalltoall_algorithm = "pair"\n')
    with pytest.raises(InputError) as info:
        load_scenario(write(tmp_path, text))
    assert info.value.field == "application.alltoall_algorithm" and "power-of-two" in info.value.problem


def test_a_platform_path_that_is_a_folder_says_so(tmp_path):
    data = tomllib.loads(GOOD)
    data["platform"]["name"] = str(tmp_path)
    with pytest.raises(InputError, match=rf"platform\.name: platform file {tmp_path} is a folder"):
        from_mapping(data, str(tmp_path / "s.toml"))


def test_a_scenario_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    plain = load_scenario(write(tmp_path, GOOD))
    p = tmp_path / "bom.toml"
    p.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_scenario(p).hash() == plain.hash()


def test_syntax_and_missing_file_errors(tmp_path):
    with pytest.raises(InputError, match=r"\(syntax\): not valid TOML"):
        load_scenario(write(tmp_path, "[scenario\nranks = 4\n"))
    with pytest.raises(InputError, match="does not exist"):
        load_scenario(tmp_path / "nope.toml")
    with pytest.raises(InputError, match="platform: section is missing"):
        from_mapping({"scenario": {"ranks": 2}, "application": {"kind": "stencil"}}, "x.toml")


def test_hash_covers_resolved_defaults(tmp_path):
    a = load_scenario(write(tmp_path, GOOD, "a.toml"))
    b = load_scenario(write(tmp_path, GOOD.replace("[simulation]", "") + '\n[simulation]\nalltoall = "default"\n',
                            "b.toml"))
    c = load_scenario(write(tmp_path, GOOD.replace("seed = 7", "seed = 8"), "c.toml"))
    assert a.hash() == b.hash() != c.hash()


def test_cli_reports_errors_without_traceback(tmp_path):
    p = write(tmp_path, GOOD.replace("ranks = 4", "ranks = 0"))
    out = cli("run", str(p), "-o", str(tmp_path / "out"))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    line = f"{p}: scenario.ranks: must be >= 1, got 0 (fix: give ranks a value that is >= 1 (number of MPI processes))"
    assert out.stderr == f"waitlab: error: {line}\n"
    assert not (tmp_path / "out").exists()
    # the docs quote this very line
    for doc in ("quickstart.md", "scenarios.md", "tutorial.md"):
        text = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text()
        assert line.split(": ", 1)[1] in text, doc


#: The scenario each error example of docs/scenarios.md ("## Errors") is made from, by the key its line names.
PAGE_ERRORS = {
    "scenario.ranks": GOOD.replace("ranks = 4", "ranks = 0"),
    "simulation.alltoall": GOOD + '\n[simulation]\nalltoall = "fast"\n',
    "(syntax)": GOOD.replace("ranks = 4", "ranks 4"),  # line 3, column 7
}


def test_the_error_examples_of_the_scenarios_page_are_what_waitlab_prints(tmp_path):
    page = (Path(__file__).resolve().parents[1] / "docs" / "scenarios.md").read_text()
    block = page.split("## Errors", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert [line.split(": ")[3] for line in lines] == list(PAGE_ERRORS)
    for line in lines:
        (tmp_path / "bad.toml").write_text(PAGE_ERRORS[line.split(": ")[3]])
        out = subprocess.run([sys.executable, "-m", "waitlab.cli", "run", "bad.toml", "-o", "out"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 2 and not (tmp_path / "out").exists(), out.stderr
        # the page's "..." leaves out part of the line; the rest is the line as printed
        pattern = ".*?".join(re.escape(part) for part in line.split("..."))
        assert re.fullmatch(pattern, out.stderr.removesuffix("\n")), f"page: {line}\nprinted: {out.stderr}"


@pytest.mark.simgrid
def test_trace_json_is_written_only_with_chrome(tmp_path):
    """``trace.json`` (0.1 s of CPU and 32 MB at 1,024 ranks) is opt-in, as ``timeline.png`` is: ``--chrome``."""
    p = write(tmp_path, GOOD)
    plain = cli("run", str(p), "-o", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    run = json.loads((tmp_path / "plain" / "run.json").read_text())
    assert not (tmp_path / "plain" / "trace.json").exists() and "chrome_trace" not in run
    assert "trace.json" not in run["files"] and "trace.json" not in plain.stdout
    chrome = cli("run", str(p), "-o", str(tmp_path / "chrome"), "--chrome")
    assert chrome.returncode == 0, chrome.stderr
    run = json.loads((tmp_path / "chrome" / "run.json").read_text())
    trace = json.loads((tmp_path / "chrome" / "trace.json").read_text())
    assert "trace.json" in run["files"] and "trace.json" in chrome.stdout
    assert run["chrome_trace"] is True
    ranks = {e["tid"] for e in trace["traceEvents"] if e.get("ph") == "X"}  # a track per rank, every rank's slices
    assert ranks == set(range(4)), ranks


@pytest.mark.simgrid
def test_run_twice_gives_identical_bytes_and_metadata(tmp_path):
    p = write(tmp_path, GOOD)
    for name in ("a", "b"):
        out = cli("run", str(p), "-o", str(tmp_path / name), "--no-png", "--chrome")
        assert out.returncode == 0, out.stderr
    for f in ("events.parquet", "events.csv", "waits.parquet", "ledger.parquet", "summary.json", "trace.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f

    _, meta = read_table(tmp_path / "a" / "events.parquet")
    assert meta["seed"] == 7 and meta["platform"] == "dawning_5000a" and meta["simgrid_version"].startswith("3.")
    assert meta["scenario_hash"] == load_scenario(p).hash()
    # an existing folder is not overwritten without --force
    again = cli("run", str(p), "-o", str(tmp_path / "a"))
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.simgrid
def test_failed_simulation_leaves_no_results(tmp_path):
    # cheap to generate, expensive to simulate (minutes): all-to-all of 256 KiB blocks among 256 ranks
    slow = GOOD.replace("ranks = 4", "ranks = 256").replace('kind = "stencil"', 'kind = "fft"')
    p = write(tmp_path, slow + 'bytes_per_peer = 262144\n[simulation]\ntimeout = 0.5\nalltoall = "basic_linear"\n')
    with pytest.raises(SimulationError, match=r"exceeded the time limit of 0\.5 s"):
        run_scenario(load_scenario(p), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not any(x.name.startswith(".out.partial") for x in tmp_path.iterdir())


@pytest.mark.simgrid
def test_demo_example_validates_and_platform_listing_works():
    root = Path(__file__).resolve().parents[1]
    sc = load_scenario(root / "examples" / "lared_s_dawning.toml")
    assert sc.application_kind == "lared_s" and sc.ranks == 256
    out = cli("platforms")
    assert out.returncode == 0 and "dawning_5000a" in out.stdout and "sunway_taihulight" in out.stdout


@pytest.mark.simgrid
def test_paje_trace_is_written_on_request(tmp_path):
    p = write(tmp_path, GOOD + "\n[simulation]\npaje = true\n")
    run_scenario(load_scenario(p), tmp_path / "out", png=False)
    paje = (tmp_path / "out" / "smpi.paje").read_text()
    assert paje.startswith("#This file was generated using SimGrid-3.32")
    assert "PajeDefineContainerType" in paje


@pytest.mark.simgrid
def test_doctor_reports_every_part():
    out = cli("doctor")
    assert out.returncode == 0, out.stdout
    for part in ("smpirun", "smpicxx", "replay extension", "measurement layer", "python3-simgrid bindings"):
        assert f"[ok] {part}" in out.stdout


@pytest.mark.simgrid
def test_reference_core_speed_scales_compute_with_the_platform(tmp_path):

    text = GOOD.replace("ranks = 4", "ranks = 2") + "compute_seconds = 0.5\nallreduce_every = 0\nhalo_bytes = 0\n"
    exact = simulate(load_scenario(write(tmp_path, text, "a.toml")))
    # DeepComp 7000 cores run 12 Gflop/s (platform data); seconds given at 6 Gflop/s take half as long there
    scaled = simulate(load_scenario(write(tmp_path, text.replace("dawning_5000a", "deepcomp_7000")
                                          + "[simulation]\nreference_core_speed = 6e9\n", "b.toml")))
    def compute(r):
        ev = r.events
        return ev.loc[ev["kind"] == "compute", "exit"].sub(ev.loc[ev["kind"] == "compute", "enter"])
    assert compute(exact).to_numpy() == pytest.approx(0.5, abs=1e-9)
    assert compute(scaled).to_numpy() == pytest.approx(0.25, abs=1e-9)


def test_hash_covers_the_platform_file_and_the_noise_signature_file(tmp_path):
    # an edited input file is another scenario: a sweep's resume and the caches must not reuse its results
    plat = tmp_path / "plat.toml"
    plat.write_text((Path(__file__).parents[1] / "platforms" / "data" / "dawning_5000a.toml").read_text())
    (tmp_path / "sig.txt").write_text("0.001 0.002\n")
    text = (GOOD.replace('name = "dawning_5000a"', f'name = "{plat}"') +
            '\n[noise]\nmodel = "signature"\nfile = "sig.txt"\n')
    assert str(plat) in text
    before = load_scenario(write(tmp_path, text)).hash()
    plat.write_text(plat.read_text().replace("[node]", "[node]\n# an edit", 1))
    edited_platform = load_scenario(tmp_path / "s.toml").hash()
    (tmp_path / "sig.txt").write_text("0.001 0.005\n")
    edited_signature = load_scenario(tmp_path / "s.toml").hash()
    assert len({before, edited_platform, edited_signature}) == 3
    # a scenario without input files keeps the hash it had (no file digest joins it)
    sc = load_scenario(write(tmp_path, GOOD, "g.toml"))
    assert sc.fingerprint() == ""
