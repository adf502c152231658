"""A program run's results folder re-runs with stock SimGrid alone (issue 25): ``program/rerun/`` holds the
platform XML, the hostfile, the program and the exact smpirun command line."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from waitlab import api

PROGRAMS = Path(__file__).resolve().parent / "programs"
HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_rerun_with_stock_smpirun_gives_the_same_makespan(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(f'[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                     f'ranks_per_node = 2\n[application]\nkind = "program"\n'
                                     f'sources = ["{PROGRAMS / "bsp.c"}"]\nargs = ["3"]\n')
    run = api.run(tmp_path / "s.toml", tmp_path / "out")
    makespan = float(run.result.events["exit"].max())
    rerun = tmp_path / "out" / "program" / "rerun"
    assert {p.name for p in rerun.iterdir()} >= {"platform.xml", "hostfile", "program", "smpirun.sh"}
    script = (rerun / "smpirun.sh").read_text()
    assert "--cfg=smpi/wtime:0" in script and "-platform platform.xml -hostfile hostfile" in script
    assert "python" not in script.lower() and "export WAITLAB_OUT" not in script
    moved = shutil.copytree(rerun, tmp_path / "elsewhere")  # the folder is self-contained
    out = subprocess.run(["sh", str(moved / "smpirun.sh"), "--cfg=smpi/display-timing:yes", "--log=root.thres:info"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.search(r"Simulated time: ([0-9.e+-]+) seconds", out.stdout + out.stderr)
    assert found is not None
    assert float(found.group(1)) == pytest.approx(makespan, rel=1e-5)  # SimGrid prints 6 significant digits
    assert not list(moved.glob("r*.log"))  # the layer recorded nothing outside waitlab
