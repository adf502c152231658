"""``waitlab.sweep()`` and ``waitlab.diagnose()`` from a script without a ``__main__`` guard and from stdin.

Spawned process pools re-import ``__main__``, which such scripts cannot give: waitlab's local executor runs each
call in a worker process of its own (``python -m waitlab.experiments.isolated``), so they work like the CLI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write

import waitlab

pytestmark = pytest.mark.simgrid

SCRIPT = """import waitlab
table = waitlab.sweep("sw.toml", "out")
print("ROWS", len(table), sorted(table["application.steps"]))
diag = waitlab.diagnose("out/runs/{key}", n_candidates=1, use_cache=False)
print("TRUTH", diag.truth is not None and diag.truth.distinct > 0)
"""


def test_sweep_and_diagnose_from_stdin_without_a_main_guard(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD.replace("steps = 3", 'steps = 3\n[[application.imbalance]]\n'
                                            'region = "Stencil"\nranks = [1]\nmagnitude = 0.001'))
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3, 4, 5]\n[sweep]\nname = "s"\n'
          'workers = 2\n')
    key = waitlab.load_sweep(tmp_path / "sw.toml").points[0].key
    script = SCRIPT.format(key=key)
    proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "ROWS 3 [3, 4, 5]" in proc.stdout, proc.stdout + proc.stderr
    assert "TRUTH True" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_sweep_from_a_script_file_without_a_guard(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3, 4]\n[sweep]\nname = "s"\n')
    write(tmp_path / "script.py", 'import waitlab\nprint("ROWS", len(waitlab.sweep("sw.toml", "out")))\n')
    proc = subprocess.run([sys.executable, "script.py"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0 and "ROWS 2" in proc.stdout, proc.stdout + proc.stderr
