"""``waitlab doctor``: is everything waitlab needs installed and working?"""

from __future__ import annotations

import shutil
import subprocess
import sys

from waitlab.errors import WaitlabError
from waitlab.simulator.build import INSTALL_HINT, replay_binary, simgrid_version
from waitlab.simulator.programs import layer_object


def doctor() -> int:
    """Print one line per check; return 0 when all pass, 1 otherwise."""
    ok = True

    def report(name: str, good: bool, detail: str) -> None:
        nonlocal ok
        ok &= good
        print(f"[{'ok' if good else 'FAIL'}] {name}: {detail}")

    for tool in ("smpirun", "smpicc", "smpicxx"):
        path = shutil.which(tool)
        report(tool, path is not None, path or f"not found; install with: {INSTALL_HINT}")
    fortran = shutil.which("smpif90") and shutil.which("gfortran")
    print(f"[{'ok' if fortran else 'note'}] smpif90 + gfortran: "
          f"{fortran or 'missing (only needed for Fortran programs): sudo apt-get install -y gfortran'}")
    if shutil.which("smpirun"):
        report("SimGrid version", True, simgrid_version())
    try:
        report("replay extension", True, str(replay_binary()))
    except WaitlabError as exc:
        report("replay extension", False, str(exc))
    try:
        report("measurement layer (real programs)", True, str(layer_object()))
    except WaitlabError as exc:
        report("measurement layer (real programs)", False, str(exc))
    # in a child process: importing simgrid prints SimGrid's own INFO line on stderr
    here = subprocess.run([sys.executable, "-c", "import simgrid"], capture_output=True, text=True)
    if here.returncode == 0:
        report("python3-simgrid bindings", True, "importable from this Python")
    else:
        proc = subprocess.run(["/usr/bin/python3", "-c", "import simgrid; print(simgrid.__file__)"],
                              capture_output=True, text=True)
        detail = proc.stdout.strip() if proc.returncode == 0 else "not installed"
        report("python3-simgrid bindings", False, f"{detail}; install with: {INSTALL_HINT} and use a venv made by "
               "'/usr/bin/python3 -m venv --system-site-packages'")
    print("all checks passed" if ok else "some checks failed")
    return 0 if ok else 1
