"""The benchmarks docs/performance.md quotes for what users run still run (issue 41: speed is measured by
``benchmarks/``, not by timed tests; a benchmark that fails measures nothing).  Each runs at its smallest size and
its figures' lines are checked for presence and sense, not for speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def bench(*args: str) -> str:
    out = subprocess.run([sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.simgrid
def test_bench_shell_times_a_program_against_its_stock_rerun():
    text = bench("bench_shell.py", "--pingpong", "--messages", "10", "--pairs", "1")
    m = re.search(r"ping-pong, 2 ranks x 10: waitlab run median ([\d.]+) s .* stock rerun median ([\d.]+) s", text)
    assert m, text
    assert float(m[1]) > float(m[2]) > 0  # waitlab runs the same simulation and more


@pytest.mark.simgrid
def test_bench_shell_times_a_replay_and_waitlab_s_own_work():
    text = bench("bench_shell.py", "--replay", "4", "--steps", "2", "--pairs", "1")
    m = re.search(r"4 ranks x 2 steps: waitlab run median ([\d.]+) s .* stock median ([\d.]+) s", text)
    own = re.search(r"waitlab's own work \(wall less its SMPI stage\): median ([\d.]+) s", text)
    assert m and own, text
    assert float(m[1]) > float(own[1]) > 0 and float(m[2]) > 0  # the own work is part of the command's wall time


@pytest.mark.simgrid
def test_bench_cli_overhead_splits_a_command_in_four_parts():
    text = bench("bench_cli_overhead.py", "--program", "pingpong", "--steps", "10", "--repeat", "1")
    m = re.search(r"run 1: imports ([\d.]+) s, before the SMPI stage ([\d.]+) s, SMPI stage ([\d.]+) s, after it "
                  r"([\d.]+) s: .*\(exit 0\)", text)
    assert m, text
    assert all(float(x) >= 0 for x in m.groups()) and float(m[1]) > 0
