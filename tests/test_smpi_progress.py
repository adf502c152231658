"""A long SMPI stage shows its progress on a terminal (issue 23), and only there: same results with and without.

``waitlab run`` runs under a pseudo-terminal with the update interval forced down to 20 ms
(``WAITLAB_PROGRESS_INTERVAL``), so the short SMPI stage of a small scenario reports several times; the same
command with stderr a pipe must print no progress, and both results folders must hold the same bytes (but
``timing.json``, the wall-clock seconds of each stage, which differ between any two runs).
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from waitlab.simulator.progress import Progress, Throttled, read_progress, reporter, reporting

BSP = Path(__file__).resolve().parent / "programs" / "bsp.c"
#: A real program long enough for several 20 ms progress updates (its layer's count, not the replay's file).
PROGRAM = """[scenario]
name = "progress-program"
ranks = 4

[platform]
name = "dawning_5000a"

[application]
kind = "program"
sources = ["{bsp}"]
args = ["6000"]
"""

#: A replay whose SMPI stage (about 2 s) outlasts the imports a run makes while it (0.3-0.8 s, before which no
#: progress is read): a terminal shows progress lines.
SCENARIO = """[scenario]
name = "progress"
ranks = 64
seed = 3

[platform]
name = "dawning_5000a"

[application]
kind = "stencil"
steps = 300
compute_seconds = 0.01
"""


def _run_on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr a pseudo-terminal; its exit status and everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once
        os.execve(argv[0], argv, env)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a results folder but ``timing.json`` (wall-clock seconds, the one file reruns differ in)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "timing.json"}


@pytest.mark.simgrid
def test_progress_on_a_terminal_only_and_the_same_bytes(tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text(SCENARIO, encoding="utf-8")
    env = {**os.environ, "WAITLAB_PROGRESS_INTERVAL": "0.02", "TERM": "dumb"}
    cli = [sys.executable, "-m", "waitlab.cli", "run", str(s), "--no-png"]

    code, shown = _run_on_a_terminal([*cli, "-o", str(tmp_path / "tty")], env)
    assert code == 0, shown
    lines = re.findall(r"SMPI: simulated ([0-9.e+-]+) s, ([0-9,]+) of ([0-9,]+) actions \((\d+)%\), (\d+) s elapsed",
                       shown)
    assert lines, f"no progress line on the terminal:\n{shown[-2000:]}"
    sims = [float(t) for t, *_ in lines]
    assert sims == sorted(sims) and sims[-1] > 0  # the simulated time only moves forward
    total = {int(n.replace(",", "")) for _, _, n, _, _ in lines}
    assert len(total) == 1 and all(int(d.replace(",", "")) <= next(iter(total)) for _, d, *_ in lines)
    assert "\r\x1b[K" in shown  # the line is rewritten in place and cleared at the end

    piped = subprocess.run([*cli, "-o", str(tmp_path / "pipe")], env=env, capture_output=True, text=True,
                           timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "SMPI:" not in piped.stderr + piped.stdout and "\r" not in piped.stderr

    code, quiet = _run_on_a_terminal([*cli, "-o", str(tmp_path / "quiet"), "--quiet"], env)
    assert code == 0 and "SMPI:" not in quiet, quiet

    tty, pipe = _files(tmp_path / "tty"), _files(tmp_path / "pipe")
    assert tty.keys() == pipe.keys() and len(tty) > 3
    differ = [name for name in tty if tty[name] != pipe[name]]
    assert not differ, f"results differ with a terminal: {differ}"


@pytest.mark.simgrid
def test_a_program_shows_its_recorded_calls_on_a_terminal_and_writes_the_same_bytes(tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text(PROGRAM.format(bsp=BSP), encoding="utf-8")
    env = {**os.environ, "WAITLAB_PROGRESS_INTERVAL": "0.02", "TERM": "dumb"}
    cli = [sys.executable, "-m", "waitlab.cli", "run", str(s), "--no-png"]
    code, shown = _run_on_a_terminal([*cli, "-o", str(tmp_path / "tty")], env)
    assert code == 0, shown
    lines = re.findall(r"SMPI: simulated ([0-9.e+-]+) s, ([0-9,]+) calls recorded, (\d+) s elapsed", shown)
    assert lines, f"no progress line on the terminal:\n{shown[-2000:]}"
    calls = [int(n.replace(",", "")) for _, n, _ in lines]
    sims = [float(t) for t, _, _ in lines]
    assert calls == sorted(calls) and sims == sorted(sims) and calls[-1] > 0
    piped = subprocess.run([*cli, "-o", str(tmp_path / "pipe")], env=env, capture_output=True, text=True,
                           timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "SMPI:" not in piped.stderr + piped.stdout
    tty, pipe = _files(tmp_path / "tty"), _files(tmp_path / "pipe")
    assert tty.keys() == pipe.keys() and len(tty) > 3
    assert not [name for name in tty if tty[name] != pipe[name]], "results differ with a terminal"


def test_throttled_reports_at_most_once_per_interval_and_passes_the_end_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAITLAB_PROGRESS_INTERVAL", "3600")
    got: list[Progress | None] = []
    first, second = Progress(0.5, 10, 20, 1.0), Progress(0.6, 12, 20, 1.1)
    waits = Throttled(got.append)  # the first report one interval (an hour) after it is made
    waits(first)
    assert got == [] and not waits.shown
    at_once = Throttled(got.append, at_once=True)
    at_once(first)
    at_once(second)  # within the hour: dropped
    at_once(None)  # the end always goes through
    assert got == [first, None] and at_once.shown


def test_progress_is_reported_only_inside_the_block() -> None:
    got: list[Progress | None] = []
    assert reporter() is None
    with reporting(got.append):
        fn = reporter()
        assert fn is not None
        fn(Progress(0.5, 10, 20, 1.0))
    assert reporter() is None and got == [Progress(0.5, 10, 20, 1.0)]


def test_a_torn_or_foreign_progress_file_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "progress"
    for text in ["", "0.5", "x 3", "nan 3", "-1 3", "0.5 -2"]:
        p.write_text(text, encoding="utf-8")
        assert read_progress(p) is None, text
    p.write_text("2.500000000 77".ljust(63) + "\n", encoding="utf-8")
    assert read_progress(p) == (2.5, 77)
