"""A new user's path through the README, the tutorial and the help texts (round 22): what they promise holds."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_docs_commands import command_blocks

import waitlab
from waitlab import api, cli
from waitlab.errors import InputError
from waitlab.experiments.compare import Comparison

ROOT = Path(__file__).resolve().parent.parent


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _help(command: str, flag: str | None = None) -> str:
    p = _subparsers()[command]
    if flag is None:
        return p.format_help()
    return str(next(a for a in p._actions if flag in a.option_strings or a.dest == flag).help)


def test_compare_top_limits_only_the_ranks_and_steps() -> None:
    def side(key: str, rows: list[tuple[str, float, float]]) -> pd.DataFrame:
        return pd.DataFrame({key: [r[0] for r in rows], "a": [r[1] for r in rows], "b": [r[2] for r in rows],
                             "delta": [r[2] - r[1] for r in rows]})

    ranks = pd.DataFrame({"rank": [0, 1], "wait_delta": [0.5, 0.0], "own_work_delta": [0.0, 0.5]})
    steps = pd.DataFrame({"step": [0], "a": [1.0], "b": [1.5], "delta": [0.5]})
    cmp = Comparison("A", "B", (1.0, 1.5), side("category", [("wait", 0.0, 0.5), ("compute", 2.0, 2.5)]),
                     side("pattern", [("wait_at_nxn", 0.0, 0.5)]), side("region", [("(top level)", 0.0, 0.5)]),
                     ranks, steps)
    none = cmp.text(0)
    assert "rank-seconds (s): wait 0 -> 0.5 (+0.5), compute 2 -> 2.5 (+0.5)" in none
    assert "wait by pattern (s): wait_at_nxn" in none and "wait by region (s): (top level)" in none
    assert "ranks whose" not in none and "steps whose" not in none
    assert not any(line.endswith(": ") for line in none.splitlines())  # no empty list
    assert "rank 0 +0.5 s" in cmp.text(1) and "step 0 " in cmp.text(1)
    assert "0 lists none" in _help("compare", "--top")


@pytest.mark.simgrid
def test_the_python_block_of_the_perturbation_page_runs() -> None:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    page = (ROOT / "docs" / "perturbation.md").read_text(encoding="utf-8")
    code = next(body for lang, body in command_blocks(page[page.index("## Python API"):]) if lang == "python")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = proc.stdout.strip().splitlines()[-1].split(" -> ")
    assert float(after) < float(before)  # free flushes: a shorter run


def test_the_perturbation_page_names_the_policies_module() -> None:
    page = (ROOT / "docs" / "perturbation.md").read_text(encoding="utf-8")
    for name in re.findall(r"`(waitlab\.models\.perturb\.\w+)`", page):
        __import__(name)
    assert "Each policy is a small object in `waitlab.models.perturb.spill_policies`" in page


def test_the_package_exposes_the_tools_the_api_page_lists() -> None:
    for name in ("load_run", "capture", "check_c", "calibrate", "import_otf2", "recorded_scenario", "report",
                 "doctor", "compare"):
        assert name in waitlab.__all__ and name in dir(waitlab), name
        assert getattr(waitlab, name) is getattr(api, name), name


def test_the_commands_without_json_are_the_ones_the_readme_names() -> None:
    without = {name for name, p in _subparsers().items() if not any("--json" in a.option_strings for a in p._actions)}
    assert without == {"doctor", "capture", "import-otf2"}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "every one but `doctor`, `capture` and `import-otf2` takes `--json`" in readme


def test_the_tutorial_replaces_the_folders_the_readme_leaves() -> None:
    def lines(doc: str) -> list[str]:
        text = (ROOT / doc).read_text(encoding="utf-8")
        return [x for lang, body in command_blocks(text) if lang == "sh" for x in body.splitlines()]

    def folder(line: str) -> str | None:
        m = re.search(r"waitlab (?:run|analyze|capture|import-otf2) .*-o (\S+)", line)
        return m.group(1) if m else None

    left = {folder(x) for x in lines("README.md")} - {None}
    assert "results/late" in left
    for line in lines("docs/tutorial.md"):
        if folder(line) in left:
            assert "--force" in line, line


def test_the_help_of_reproduce_and_export_says_what_they_do() -> None:
    target = _help("reproduce", "target")
    assert "lared-s (= wu-lared-s)" in target and "policies (= spill-policies)" in target
    assert "results/wu-lared-s-<ranks>" in _help("reproduce", "--output")
    assert "default when no format flag is given" in _help("export", "--otf2")


@pytest.mark.parametrize(("argv", "said"), [
    (["rao-alltoall", "--seed", "3"], "--seed: is only read by wu-lared-s, not by rao-alltoall"),
    (["okita-spilling", "--ranks", "64"], "--ranks: is only read by spill-policies and wu-lared-s and he-sunway, "
                                          "not by okita-spilling"),
    (["he-sunway", "--full"], "--full: is only read by rao-alltoall, not by he-sunway"),
    (["wu-lared-s", "--ranks", "64", "128"], "--ranks: wu-lared-s runs one rank count, got 2"),
])
def test_reproduce_refuses_an_option_its_target_ignores(argv: list[str], said: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # each was silently ignored: a second --seed of rao-alltoall, or wu-lared-s at 128 ranks, never ran
    assert cli.main(["reproduce", *argv, "-o", str(tmp_path / "r")]) == 2
    assert said in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_an_existing_folder_is_refused_naming_the_python_argument(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match=r"already exists .*force=True"):
        api.run(ROOT / "examples" / "stencil_late_rank.toml", tmp_path / "out")
    assert cli.main(["run", str(ROOT / "examples" / "stencil_late_rank.toml"), "-o", str(tmp_path / "out")]) == 2
    assert "--force" in capsys.readouterr().err


def test_check_c_refuses_a_negative_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check-c", str(tmp_path / "events.csv"), "--show", "-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "waitlab: error: (command line): --show: must be >= 0, got -3 (fix: e.g. --show 10)"


def test_plot_json_reports_what_it_drew(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sw = tmp_path / "sw"
    sw.mkdir()
    pd.DataFrame({"ranks": [4, 8, 16, 4, 8, 16], "platform.name": ["a"] * 3 + ["b"] * 3,
                  "scenario_hash": list("abcdef"), "makespan": [1.0, 2, 3, 4, 5, 6],
                  "total_wait": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}).to_csv(sw / "sweep.csv", index=False)
    assert cli.main(["plot", str(sw), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"picture": str(sw / "sweep.png"), "results": ["makespan", "total_wait"], "x": "ranks",
                   "facet": None}
    assert cli.main(["plot", str(sw), "--json", "--y", "total_wait", "--x", "platform.name"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["results"], out["x"], out["facet"]) == (["total_wait"], "platform.name", None)
