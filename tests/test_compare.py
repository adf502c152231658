"""`waitlab compare`: two runs whose difference is known by construction (one injected delay)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from scenario_files import imbalance_toml, scenario_toml

from waitlab import api, cli
from waitlab.experiments.compare import compare_runs
from waitlab.experiments.results import load_run
from waitlab.models.analysis.waitstates import make_events

BASE = scenario_toml("{name}", 4, 'kind = "stencil"\ndims = 2\nsteps = 6\ncompute_seconds = 0.01', seed=1)
#: Rank 2 computes 0.05 s more in step 3 only.
DELAY, LATE_RANK, LATE_STEP = 0.05, 2, 3
EXTRA = imbalance_toml(str(LATE_RANK), DELAY, distribution="constant", steps=str(LATE_STEP))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    d = tmp_path_factory.mktemp("compare")
    (d / "a.toml").write_text(BASE.format(name="cmp-a"))
    (d / "b.toml").write_text(BASE.format(name="cmp-b") + EXTRA)
    for x in ("a", "b"):
        api.run(d / f"{x}.toml", d / x.upper(), png=False)
    return d / "A", d / "B"


@pytest.mark.simgrid
def test_compare_finds_the_injected_delay(two_runs, tmp_path, capsys):
    a, b = two_runs
    cmp = api.compare(a, b)
    # the allreduce of every step makes the delay the makespan's and step 3's growth (hand calculation)
    assert cmp.makespan_delta == pytest.approx(DELAY, abs=1e-6)
    step = cmp.steps.set_index("step")["delta"]
    assert step[LATE_STEP] == pytest.approx(DELAY, abs=1e-6)
    assert step.drop(LATE_STEP).abs().max() < 1e-6
    # the 3 other ranks each wait DELAY more at the allreduce: 3 * DELAY of wait_at_nxn
    pat = cmp.by_pattern.set_index("pattern")["delta"]
    assert pat["wait_at_nxn"] == pytest.approx(3 * DELAY, abs=1e-5)
    assert cmp.ranks_by("own_work_delta", 1)["rank"].tolist() == [LATE_RANK]
    assert cmp.ranks_by("own_work_delta", 1)["own_work_delta"].iloc[0] == pytest.approx(DELAY, abs=1e-9)
    waited = cmp.ranks.set_index("rank")["wait_delta"]
    assert waited.drop(LATE_RANK).to_numpy() == pytest.approx([DELAY] * 3, abs=1e-5)
    # A against itself: nothing moved
    same = api.compare(a, a)
    assert same.makespan_delta == 0 and not same.steps["delta"].any()
    assert cli.main(["compare", str(a), str(b), "--png", str(tmp_path / "c.png")]) == 0
    text = capsys.readouterr().out
    assert f"rank {LATE_RANK} +0.05 s" in text and f"step {LATE_STEP} " in text
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["makespan"]["delta"] == pytest.approx(DELAY, abs=1e-6)
    assert data["steps_moved"][0]["step"] == LATE_STEP
    assert data["ranks_own_work_moved"][0]["rank"] == LATE_RANK


@pytest.mark.simgrid
def test_compare_with_a_run_without_steps_compares_no_step(two_runs):
    # a trace replay has no steps (step -1): its steps must not read as moved to 0 s
    a = load_run(two_runs[0])
    replayed = replace(a, events=a.events.assign(step=-1), waits=a.waits.assign(step=-1))
    cmp = compare_runs(a, replayed)
    assert cmp.steps.empty and cmp.makespan_delta == 0
    assert any("B has no steps" in n for n in cmp.notes)
    assert "step 0" not in cmp.text()
    assert compare_runs(a, a).steps["step"].tolist() == list(range(6))  # 6 steps when both have them
    # B stops after step 3: steps 4 and 5 are not compared (they did not move to 0 s)
    shorter = replace(a, events=a.events[a.events["step"] <= 3], waits=a.waits[a.waits["step"] <= 3])
    cut = compare_runs(a, shorter)
    assert cut.steps["step"].tolist() == [0, 1, 2, 3] and "steps 4, 5 are only in A: not compared" in cut.notes


@pytest.mark.simgrid
def test_export_writes_and_registers(two_runs, tmp_path, capsys):
    a, _ = two_runs
    out = tmp_path / "x"
    assert cli.main(["export", str(a), "--chrome", "--graphml", "-o", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert set(written) >= {"chrome", "graphml"} and Path(written["graphml"]).is_file()
    # exports into the run folder are listed as waitlab's own: --force may still replace the folder
    assert cli.main(["export", str(a), "--graphml", "-q"]) == 0
    assert "propagation.graphml" in json.loads((a / ".waitlab").read_text())["files"]


def test_compare_names_a_missing_folder(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path / "nope"), str(tmp_path / "nope")]) != 0
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err


def test_check_c_exit_status_follows_condition_c(tmp_path, capsys):
    # hand-built: rank 0 has 0.25 s of overhead before its send, rank 1 none before the recv -> C breaks
    ops = ["compute", "overhead", "send", "recv"]
    ev = make_events(rank=[0, 0, 0, 1], op=ops, enter=[0, 1, 1.25, 0], exit=[1, 1.25, 1.25, 1.25],
                     match=[-1, -1, 0, 0], kind=["compute", "overhead", "mpi", "mpi"])
    ev["seq"] = ev.groupby("rank").cumcount()
    ev.to_csv(tmp_path / "bad.csv", index=False)
    assert cli.main(["check-c", str(tmp_path / "bad.csv"), "-q"]) == 1
    assert cli.main(["check-c", str(tmp_path / "bad.csv"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["holds"] is False
    ev.loc[ev["op"] == "overhead", "kind"] = "compute"  # no overhead at all: C holds
    ev.to_csv(tmp_path / "ok.csv", index=False)
    assert cli.main(["check-c", str(tmp_path / "ok.csv"), "-q"]) == 0


@pytest.mark.simgrid
def test_diagnose_reports_the_critical_path(two_runs, tmp_path, capsys):
    _, b = two_runs
    assert cli.main(["diagnose", str(b), "--no-truth", "--no-png", "-o", str(tmp_path / "d"), "--json"]) == 0
    cp = json.loads(capsys.readouterr().out)["critical_path"]
    # by hand: 6 steps of 0.01 s compute + the 0.05 s delay of rank 2 in step 3 = 0.11 s of Stencil on the path,
    # mean per rank (4 * 0.06 + 0.05) / 4; rank 2 carries the delay
    stencil = next(r for r in cp["by_region"] if r["region"] == "Stencil")
    assert stencil["seconds"] == pytest.approx(0.11, abs=1e-6)
    assert stencil["mean_per_rank"] == pytest.approx((4 * 0.06 + 0.05) / 4, abs=1e-9)
    assert cp["by_rank"][str(LATE_RANK)] >= DELAY
    assert "## Critical path" in (tmp_path / "d" / "diagnosis.md").read_text()


@pytest.mark.simgrid
def test_run_json_and_quiet(two_runs, tmp_path, capsys):
    a, _ = two_runs
    scenario = a.parent / "a.toml"
    assert cli.main(["run", str(scenario), "-o", str(tmp_path / "j"), "--json", "--no-png"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["makespan"] == pytest.approx(json.loads((a / "summary.json").read_text())["makespan"])
    assert cli.main(["run", str(scenario), "-o", str(tmp_path / "q"), "--quiet", "--no-png"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


@pytest.mark.simgrid
def test_doctor_prints_only_its_own_lines():
    proc = subprocess.run([str(Path(sys.executable).parent / "waitlab"), "doctor"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""  # importing SimGrid's bindings prints an INFO line: done in a child process
    assert all(line.startswith("[") or line == "all checks passed" for line in proc.stdout.splitlines())


def test_quiet_doctor_and_platforms_print_nothing_on_success(capsys):
    # -q: "no progress and no text summary (errors only)"; a failed check would still be printed
    for argv in (["doctor", "-q"], ["platforms", "-q"], ["platforms", "okita_myrinet", "-q"]):
        assert cli.main(argv) == 0, argv
        out = capsys.readouterr()
        assert out.out == out.err == "", argv


@pytest.mark.simgrid
def test_compare_json_of_an_edited_folder_says_so(two_runs, tmp_path, capsys):
    a, _ = two_runs
    edited = tmp_path / "edited"
    shutil.copytree(a, edited)
    (edited / "summary.json").write_text((edited / "summary.json").read_text() + "\n")
    assert cli.main(["compare", str(a), str(edited), "--json", "--trust-edited"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["trust_edited"]) == [str(edited)]


@pytest.mark.simgrid
def test_a_seed_note_speaks_of_noise_only_where_a_run_has_noise(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    ra, rb = load_run(a), load_run(b)
    other = replace(rb, scenario=rb.scenario.with_values({"scenario.seed": 7}))  # neither run has [noise]
    assert "seeds differ (1 vs 7)" in compare_runs(ra, other).notes
    noisy = replace(rb, scenario=other.scenario.with_values({"noise.model": "periodic", "noise.frequency": 10.0,
                                                             "noise.duration": 1e-4}))
    assert "seeds differ (1 vs 7): random noise differs too" in compare_runs(ra, noisy).notes
