"""Every command block of the README and the tutorial runs as written, in a fresh copy of the examples.

``sh`` blocks run line by line with bash (each must exit 0, or 0 or 1 when its comment says ``exit 1 when``, as
``check-c``'s does), ``python`` blocks with the venv's Python, in a temporary folder holding ``examples/`` and a link
to the ``.venv``.  A command whose comment starts with ``slow:`` (``cmd   # slow: why``) is skipped: the README's
set-up, paper-reproduction and evaluation commands (15 s to minutes on two cores).  The perturbed run, ``check-c``,
the sweep and its plot take a few seconds each (the tutorial's sweep of 4 runs of 64 ranks 2-9 s, its plot 1.5-5 s
on two cores with other work on the machine) and are run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
SLOW = re.compile(r"#\s*slow:")
EXIT_1 = re.compile(r"#.*\bexit 1 when\b")  # a command documented to exit 1 in some case (check-c: a violation)


def command_blocks(markdown: str) -> list[tuple[str, str]]:
    """``(language, text)`` of every fenced ``sh``/``bash``/``python`` block, in order."""
    return [(lang, body) for lang, body in FENCE.findall(markdown) if lang in ("sh", "bash", "python")]


def commands(markdown: str) -> list[tuple[str, str]]:
    """``(language, command)`` to run: one per shell line (minus ``slow:`` ones), one per Python block."""
    out: list[tuple[str, str]] = []
    for lang, body in command_blocks(markdown):
        if lang == "python":
            out.append((lang, body))
            continue
        for line in body.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and not SLOW.search(line):
                out.append(("sh", line))
    return out


def allowed_codes(cmd: str) -> tuple[int, ...]:
    """The exit codes a command may end with: 0, and 1 when its comment says when it exits 1."""
    return (0, 1) if EXIT_1.search(cmd) else (0,)


def test_the_parser_skips_only_marked_lines():
    md = "x\n```sh\na   # slow: long\nb  # fast\n\n# comment\n```\n```toml\nc\n```\n```python\nprint(1)\n```\n"
    assert commands(md) == [("sh", "b  # fast"), ("python", "print(1)\n")]
    assert allowed_codes("w check-c r   # condition C; exit 1 when violated") == (0, 1)
    assert allowed_codes("w run s -o r   # noise") == allowed_codes("exit 1 when") == (0,)


def test_the_sweeps_are_run_not_skipped():
    """The t3 report's F2: the tutorial's and the README's sweep and plot were marked ``slow:`` (about 30 s) where
    they take a few seconds, so no test ran them."""
    for doc in ("README.md", "docs/tutorial.md"):
        run = [cmd for _, cmd in commands((ROOT / doc).read_text(encoding="utf-8"))]
        assert any("waitlab sweep examples/alltoall_sweep.toml" in c for c in run), doc
        assert any("waitlab plot results/alltoall-sweep" in c for c in run), doc


@pytest.mark.simgrid
@pytest.mark.parametrize("doc", ["README.md", "docs/tutorial.md"])
def test_every_command_block_runs(doc: str, tmp_path: Path):
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    venv = Path(sys.executable).parent.parent
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "tests" / "data", tmp_path / "tests" / "data")  # the Score-P traces `analyze` reads
    (tmp_path / ".venv").symlink_to(venv)
    todo = commands((ROOT / doc).read_text(encoding="utf-8"))
    assert len(todo) >= 5, f"{doc}: too few command blocks found"
    for lang, cmd in todo:
        argv = ["bash", "-c", cmd] if lang == "sh" else [str(venv / "bin" / "python"), "-c", cmd]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode in allowed_codes(cmd), \
            f"{doc}: `{cmd.strip()}` exited {proc.returncode}:\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, f"{doc}: `{cmd.strip()}`:\n{proc.stderr[-2000:]}"


@pytest.mark.simgrid
def test_the_api_page_block_runs_as_written(tmp_path: Path):
    """docs/api.md's session, alone in a fresh folder: it makes every folder it reads (13-28 s on two cores)."""
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    blocks = [body for lang, body in command_blocks((ROOT / "docs" / "api.md").read_text(encoding="utf-8"))
              if lang == "python"]
    assert len(blocks) == 1, "docs/api.md: expected its one Python session"
    proc = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"docs/api.md's block exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    # its balanced run, made in Python, is the tutorial's balanced.toml (made with sed): the same comparison
    tutorial = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    makespan = next(line for line in tutorial.splitlines() if line.startswith("makespan: A "))
    assert makespan in proc.stdout.splitlines()
