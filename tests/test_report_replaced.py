"""``waitlab diagnose RUN`` rewrites files of an existing results folder (``report.html``, ``diagnosis/*``): each is
written beside its final name and renamed over it once complete, so a full disk or ``ulimit -f`` leaves the earlier
files whole, and the error names the file that could not be written."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scenario_files import TINY

from waitlab import api, cli
from waitlab.errors import WriteError
from waitlab.experiments.report import diagnosis_report, html
from waitlab.experiments.run_folder import MARKER, seal


def half_then_full(real: Any) -> Any:
    """A ``Path.write_text`` that writes half of a hidden temporary file's text, then fails as a full disk."""

    def write_text(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        if not self.name.startswith("."):
            return int(real(self, data, *args, **kwargs))
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    return write_text


def test_a_report_page_that_cannot_be_written_leaves_the_old_page_whole(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "report.html"
    page.write_text("<html>the old, complete page</html>\n")
    os.chmod(page, 0o640)
    monkeypatch.setattr(html, "build_html", lambda *a, **k: "<html>" + "x" * 100_000 + "</html>\n")
    monkeypatch.setattr(Path, "write_text", half_then_full(Path.write_text))
    with pytest.raises(WriteError, match=r"report\.html: \(file\): writing failed: No space left on device"):
        html.write_html_report(tmp_path, {}, {}, None, None, None, None)
    monkeypatch.undo()
    assert page.read_text() == "<html>the old, complete page</html>\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary file left
    monkeypatch.setattr(html, "build_html", lambda *a, **k: "<html>new</html>\n")
    written = html.write_html_report(tmp_path, {}, {}, None, None, None, None)
    assert written == page and page.read_text() == "<html>new</html>\n"
    assert page.stat().st_mode & 0o777 == 0o640  # the replaced page keeps its permissions


def test_a_diagnosis_that_cannot_be_written_leaves_the_old_one_whole(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "diagnosis"
    out.mkdir()
    (out / "diagnosis.json").write_text('{"old": true}\n')
    (out / "diagnosis.md").write_text("# old\n")
    (out / "blame_by_region.png").write_bytes(b"old png")
    seal(out, "diagnosis", ("diagnosis.json",))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(diagnosis_report, "report_dict", lambda diag: {"new": True})
    monkeypatch.setattr(diagnosis_report, "to_markdown", lambda diag: "# new\n")

    def blame_figure(diag: Any, path: Path) -> None:  # the disk fills while the figure is saved
        path.write_bytes(b"half a png")
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(diagnosis_report, "blame_figure", blame_figure)
    diag = SimpleNamespace(events=None, waits=None)
    with pytest.raises(WriteError, match=r"diagnosis/blame_by_region\.png: \(file\): writing failed: File too large"):
        diagnosis_report.write_report(diag, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # every old file, and nothing else
    monkeypatch.setattr(diagnosis_report, "blame_figure", lambda diag, path: path.write_bytes(b"new png"))
    diagnosis_report.write_report(diag, out)
    assert json.loads((out / "diagnosis.json").read_text()) == {"new": True}
    assert (out / "blame_by_region.png").read_bytes() == b"new png"
    record = json.loads((out / MARKER).read_text())  # the record holds the new files, not the temporary ones
    assert record["files"] == ["blame_by_region.png", "diagnosis.json", "diagnosis.md", "timing.json"]
    seal(out, "diagnosis", ("diagnosis.json",))  # the same record as a seal of the folder written in place
    assert json.loads((out / MARKER).read_text()) == record


def waitlab(args: list[str], cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "WAITLAB_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "waitlab", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, preexec_fn=limit, timeout=300)


@pytest.mark.simgrid
def test_diagnose_past_the_file_size_limit_keeps_the_runs_page_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    assert waitlab(["run", "tiny.toml", "-o", "run", "--no-png", "-q"], tmp_path).returncode == 0
    page = tmp_path / "run" / "report.html"
    old = page.read_bytes()
    assert b"</html>" in old
    proc = waitlab(["diagnose", "run", "--no-truth", "--no-png", "-q"], tmp_path, fsize=len(old) // 2)
    assert proc.returncode == 2, proc.stderr
    assert "run/report.html: (file): writing failed: File too large" in proc.stderr
    assert page.read_bytes() == old  # the run's page is whole, as before
    assert not [p.name for p in (tmp_path / "run").rglob(".*partial*")]
    assert waitlab(["diagnose", "run", "--no-truth", "--no-png", "-q"], tmp_path).returncode == 0
    assert page.read_bytes() != old and page.read_text().rstrip().endswith("</html>")


@pytest.mark.simgrid
def test_waitlab_report_rebuilds_the_page_run_wrote_byte_for_byte(tmp_path: Path) -> None:
    # two wait patterns: the pattern table followed the summary's key order, by wait in the run, alphabetical when
    # read back from summary.json (written with sorted keys)

    example = Path(__file__).resolve().parent.parent / "examples" / "noise_only.toml"
    run = tmp_path / "run"
    api.run(example, run)
    assert len(json.loads((run / "summary.json").read_text())["wait_by_pattern"]) >= 2
    written = (run / "report.html").read_bytes()
    assert cli.main(["report", str(run), "-q"]) == 0
    assert (run / "report.html").read_bytes() == written
