"""``waitlab doctor``: is everything waitlab needs installed and working?"""

from __future__ import annotations

import shutil
import subprocess
import sys

from waitlab.errors import WaitlabError
from waitlab.simulator.build import INSTALL_HINT, contention_plugin, replay_binary, simgrid_version
from waitlab.simulator.limits import MAPS_BASE, MAPS_PER_RANK_GUARDED, max_map_count, open_files_limit
from waitlab.simulator.programs import layer_object


def doctor(quiet: bool = False) -> int:
    """Print one line per check (``quiet``: only the failed ones); return 0 when all pass, 1 otherwise."""
    ok = True

    def report(name: str, good: bool, detail: str) -> None:
        nonlocal ok
        ok &= good
        if not good or not quiet:
            print(f"[{'ok' if good else 'FAIL'}] {name}: {detail}")

    for tool in ("smpirun", "smpicc", "smpicxx"):
        path = shutil.which(tool)
        report(tool, path is not None, path or f"not found; install with: {INSTALL_HINT}")
    fortran = shutil.which("smpif90") and shutil.which("gfortran")
    if not quiet:
        print(f"[{'ok' if fortran else 'note'}] smpif90 + gfortran: "
              f"{fortran or 'missing (only needed for Fortran programs): sudo apt-get install -y gfortran'}")
    if shutil.which("smpirun"):
        report("SimGrid version", True, simgrid_version())
    try:
        report("replay extension", True, str(replay_binary()))
    except WaitlabError as exc:
        report("replay extension", False, str(exc))
    try:
        report("contention plugin", True, str(contention_plugin()))
    except WaitlabError as exc:
        report("contention plugin", False, str(exc))
    try:
        report("measurement layer (real programs)", True, str(layer_object()))
    except WaitlabError as exc:
        report("measurement layer (real programs)", False, str(exc))
    # in a child process: importing simgrid prints SimGrid's own INFO line on stderr
    here = subprocess.run([sys.executable, "-c", "import simgrid"], capture_output=True, text=True)
    if here.returncode == 0:
        report("python3-simgrid bindings", True, "importable from this Python")
    else:  # optional: nothing in waitlab imports the s4u bindings (runs go through smpirun), so a note, not a FAIL
        proc = subprocess.run(["/usr/bin/python3", "-c", "import simgrid; print(simgrid.__file__)"],
                              capture_output=True, text=True)
        detail = f"in {proc.stdout.strip()} but not importable here" if proc.returncode == 0 else "not installed"
        if not quiet:
            print(f"[note] python3-simgrid bindings (optional; waitlab does not import them): {detail}; for your "
                  f"own s4u scripts install {INSTALL_HINT} and use a venv made by '/usr/bin/python3 -m venv "
                  "--system-site-packages'")
    if not quiet:
        _limits()
    if not ok or not quiet:
        print("all checks passed" if ok else "some checks failed")
    return 0 if ok else 1


def _limits() -> None:
    """Machine limits that bound the number of ranks (notes, not failures: waitlab adapts to them)."""
    files = open_files_limit()
    print(f"[note] open files (ulimit -n): {files}; waitlab replays one shared trace file, so this bounds only "
          f"replays of per-rank trace files (about {max(files - 32, 0)} ranks)")
    maps = max_map_count()
    if maps is None:
        print("[note] vm.max_map_count: unreadable")
        return
    guarded = max((maps - MAPS_BASE) // MAPS_PER_RANK_GUARDED, 0)
    print(f"[note] vm.max_map_count: {maps}; stack guard pages fit up to about {guarded} ranks, beyond that "
          "waitlab sets contexts/guard-size:0 (same simulated times, no stack-overflow guard)")
