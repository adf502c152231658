"""The bad-input corpus through the CLI, in-process: exit 2, one line naming file and field, nothing left behind.

The cases are in ``tests/bad_inputs_corpus.py`` (TOML kinds) and ``tests/bad_inputs_files.py`` (noise
signatures, traces, program sources, results folders).  A few go through a real subprocess too, to check that
what the user sees on the terminal is one line and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from bad_inputs_corpus import CASES, GOOD, Case, write
from bad_inputs_files import GOOD_RUN
from bad_inputs_issue40 import INTEGRITY  # noqa: F401 - registers the issue-40 cases (items 2, 4-7)
from bad_inputs_models import CASE as _MODEL_CASE  # noqa: F401 - registers the issue-40 cases
from bad_inputs_more import FFT  # noqa: F401 - registers the issue-23 cases
from bad_inputs_programs import PROGRAMS  # registers the programs that fail while they run

from waitlab.cli import main

KINDS = Counter(c.kind for c in CASES)
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def test_the_corpus_is_large_and_covers_every_file_kind():
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 300
    # the figure docs/scenarios.md gives
    docs = (Path(__file__).parents[1] / "docs" / "scenarios.md").read_text()
    assert f"runs a corpus of {len(CASES)} such inputs" in docs
    assert {f"program-runs-{k}" for k in PROGRAMS} <= {c.id for c in CASES}  # programs that fail while they run
    assert set(KINDS) == {"scenario", "platform", "sweep", "noise", "trace", "program", "run folder", "output folder",
                          "sweep folder", "model"}


@pytest.fixture(scope="session")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small simulated results folder that the run-folder cases copy and damage."""
    if not GOOD_RUN:
        d = tmp_path_factory.mktemp("good-run")
        write(d / "s.toml", GOOD)
        assert main(["run", str(d / "s.toml"), "-o", str(d / "run"), "--no-png"]) == 0
        GOOD_RUN.append(d / "run")
    return GOOD_RUN[0]


def _snapshot(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _restore_modes(folder: Path) -> None:
    for p in folder.rglob("*"):
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clean_line(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if case.needs_nonroot and ROOT:
        pytest.skip("running as root: every file is readable")
    if case.kind == "run folder" and case.id != "folder-missing":
        request.getfixturevalue("good_run")
    d = tmp_path / "case"
    d.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(d)
    argv, file, field = case.build(d)
    before = _snapshot(d)
    try:
        code = main(argv)
    finally:
        _restore_modes(d)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in out + err
    assert code == 2, err
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("waitlab: error: ") and len(line) < 2000, line
    assert file in line, f"the message does not name the file {file!r}: {line}"
    assert field in line, f"the message does not name the field {field!r}: {line}"
    assert not (d / "out").exists()
    assert _snapshot(d) == before, "something was left behind"
    assert not list(scratch.iterdir()), "scratch left in TMPDIR"


@pytest.mark.parametrize("edit", [("ranks = 4", "ranks = inf"), ("[platform]", "[platform\n")])
def test_subprocess_prints_one_line_without_traceback(tmp_path: Path, edit: tuple[str, str]) -> None:
    s = write(tmp_path / "s.toml", GOOD.replace(*edit))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "waitlab.cli", "run", str(s), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(s) in proc.stderr and not out.exists()
