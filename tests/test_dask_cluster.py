"""A sweep on a real Dask deployment: ``dask scheduler`` and two ``dask worker`` processes on localhost.

One worker is killed with SIGKILL while it simulates a point; the scheduler gives that point to the other
worker, and the sweep still gets every point exactly once (a folder each, one row each, no failure).
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_inputs_corpus import write
from process_watch import wait_for
from scenario_files import scenario_toml

from waitlab.cli import main

pytest.importorskip("distributed")
pytestmark = [pytest.mark.simgrid, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

POINTS = 8
#: 256 ranks, so that each point's SMPI stage lasts 0.3-0.5 s: the killer polls /proc every 50 ms, and
#: with the 4-rank scenario of the bad-input tests (an 80 ms stage) it once never caught the worker simulating.
POINT = scenario_toml("dask", 256, 'kind = "stencil"\nsteps = 3', seed=7)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(10):
        pid = parent_of(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def simulating_under(ancestor: int) -> bool:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"smpimain" in cmd and descends_from(int(d.name), ancestor):
                return True
    return False


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, WAITLAB_TEST_MARK=uuid.uuid4().hex)
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(logs / f"{name}.log", "wb")
        p = subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                             cwd=tmp_path, start_new_session=True)
        procs.append(p)
        return p

    spawn("scheduler", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
          "--no-dashboard")
    workers = [spawn(f"worker{i}", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                     "--no-dashboard", "--name", f"w{i}") for i in range(2)]
    try:
        ok = wait_for(lambda: sum(b"Starting established connection" in (logs / f"worker{i}.log").read_bytes()
                                  for i in range(2)) == 2, 120)
        assert ok, "the Dask workers did not connect: " + (logs / "worker0.log").read_text()[-2000:]
        yield address, workers
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def test_sweep_on_a_dask_cluster_survives_a_killed_worker(tmp_path: Path,
                                                          cluster: tuple[str, list[subprocess.Popen[bytes]]],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    address, workers = cluster
    write(tmp_path / "g.toml", POINT)
    steps = ", ".join(str(s) for s in range(3, 3 + POINTS))
    sw = write(tmp_path / "sw.toml", f'base = "g.toml"\n[grid]\n"application.steps" = [{steps}]\n'
               f'[sweep]\nname = "dask"\nexecutor = "dask"\nscheduler = "{address}"\n')
    out = tmp_path / "out"
    victim = workers[0]
    killed: list[bool] = []

    def killer() -> None:
        if wait_for(lambda: simulating_under(victim.pid), 120):
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(True)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    rc = main(["sweep", str(sw), "-o", str(out)])
    t.join(timeout=5)
    text = capsys.readouterr()
    assert killed, "the worker was never caught simulating"
    assert victim.wait(timeout=5) == -signal.SIGKILL
    assert rc == 0, text.out + text.err
    assert f"{POINTS} of {POINTS} points done ({POINTS} this run" in text.out, text.out
    with open(out / "sweep.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(int(r["application.steps"]) for r in rows) == list(range(3, 3 + POINTS))
    assert len({r["scenario_hash"] for r in rows}) == POINTS
    folders = sorted(p.name for p in (out / "runs").iterdir())
    assert folders == sorted(r["scenario_hash"] for r in rows), folders  # one each, no partial left
    assert not (out / "failed.csv").exists()
