"""Disk full and permission errors: one line naming the folder and the real cause, rc 2, nothing partial left.

The non-writable cases run the command line as an unprivileged user: as root through ``setpriv`` (user
``nobody``), else as the current user against a folder made read-only with ``chmod``.  The full-disk case mounts
a 20 MB tmpfs, which needs root; it is skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write

from waitlab.cli import main

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
SETPRIV = shutil.which("setpriv")


def as_user(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``waitlab ARGS`` as an unprivileged user (``nobody`` when we are root)."""
    cmd = [sys.executable, "-m", "waitlab.cli", *args]
    env = dict(os.environ, HOME=str(cwd), TMPDIR=str(cwd))
    if ROOT:
        cmd = [str(SETPRIV), "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A world-readable folder with a run folder and a sweep folder that the unprivileged user cannot write."""
    base = Path(tempfile.mkdtemp(prefix="waitlab-writefail-"))
    try:
        base.chmod(0o755)
        write(base / "g.toml", GOOD)
        assert main(["run", str(base / "g.toml"), "-o", str(base / "locked" / "run"), "--no-png", "-q"]) == 0
        sweep = base / "locked" / "sweep"
        write(sweep / "sweep.csv", "application.steps,scenario_hash,makespan,total_wait,max_rank_wait\n"
              "3,aaaa,1.0,0.5,0.1\n4,bbbb,2.0,0.7,0.2\n")
        (base / "scratch").mkdir()
        (base / "scratch").chmod(0o777)
        for p in [base / "locked", *(base / "locked").rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        if not ROOT:
            for p in [base / "locked", *(q for q in (base / "locked").rglob("*") if q.is_dir())]:
                p.chmod(0o555)
        yield base
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


CASES = {
    "diagnose": ["diagnose", "{locked}/run", "--no-truth"],
    "diagnose-o": ["diagnose", "{locked}/run", "--no-truth", "-o", "{locked}/report"],
    "export-otf2": ["export", "{locked}/run", "--otf2"],
    "export-chrome": ["export", "{locked}/run", "--chrome", "-o", "{locked}/exports"],
    "export-graphml": ["export", "{locked}/run", "--graphml"],
    "compare-png": ["compare", "{locked}/run", "{locked}/run", "--png", "{locked}/cmp.png"],
    "plot": ["plot", "{locked}/sweep"],
    "run": ["run", "{base}/g.toml", "-o", "{locked}/new", "--no-png"],
    "run-force": ["run", "{base}/g.toml", "-o", "{locked}/run", "--no-png", "--force"],
}


@pytest.mark.skipif(ROOT and SETPRIV is None, reason="root without setpriv cannot run as another user")
@pytest.mark.parametrize("name", sorted(CASES))
def test_non_writable_folder_is_one_line_rc_2(shared: Path, name: str) -> None:
    locked = shared / "locked"
    before = sorted(str(p) for p in locked.rglob("*"))
    args = [a.format(locked=locked, base=shared) for a in CASES[name]]
    proc = as_user(args, shared / "scratch")
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "Permission denied: you may not write there" in err, err
    assert str(locked) in err, err
    assert sorted(str(p) for p in locked.rglob("*")) == before, "something was left in the folder"


@pytest.mark.simgrid
def test_a_sweep_onto_a_full_disk_names_the_disk_and_leaves_nothing_partial(tmp_path: Path, small_disk: Path) -> None:
    disk = small_disk
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as fh:  # leave room for about one point (~150 kB each)
        fh.write(b"\0" * (free - 200_000))
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3, 4, 5, 6, 7, 8]\n'
          '[sweep]\nname = "full"\nworkers = 2\n')
    proc = subprocess.run([sys.executable, "-m", "waitlab.cli", "sweep", str(tmp_path / "sw.toml"), "-o",
                           str(disk / "out")], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert proc.returncode in (2, 3), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    failed = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert failed, proc.stderr
    for line in failed:  # every failure names the full disk
        assert "No space left on device: the disk is full" in line, line
    runs = disk / "out" / "runs"
    assert not list(runs.glob(".*")), f"partial folders left: {list(runs.glob('.*'))}"
    for folder in runs.iterdir():  # what is there is complete
        assert (folder / "run.json").is_file() and (folder / ".waitlab").is_file()
    assert len(list(runs.iterdir())) < 6
