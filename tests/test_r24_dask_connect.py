"""The connection side of sweeps on an existing Dask scheduler (report s24/t3).

- A scheduler address that is not one (``notanaddress``, a bad port, the dashboard's web address, an empty
  ``--scheduler``) is one line naming ``--scheduler`` and the fix, exit status 2, before anything connects.
- Nothing listening, or a service that is no Dask scheduler (silent like a web server waiting for its request, or
  answering ``HTTP/1.1 400`` like a proxy), is one line within the connect timeout, exit 2: no traceback, no hang,
  no "out of memory".
- A scheduler without workers is said once on stderr, and the sweep goes on waiting.
- Ctrl-C with a frozen worker does not wait for it (stop_points asks each worker on its own, with a timeout).
- A scheduler lost mid-sweep: one line naming the address, the finished points kept, the unfinished ones missing
  (not in failed.csv), ``incomplete.txt`` and the resume command.
- An interruption says that a results folder was removed only when one was; a duplicate grid value is named.

Every test but the last needs no Dask cluster: local socket servers stand for the wrong services and a stand-in
executor for a client that lost its scheduler.  The last starts a real ``dask scheduler`` and one ``dask worker``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from process_watch import wait_for
from scenario_files import scenario_toml

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError, Interrupted, SimulationError, WaitlabError
from waitlab.experiments import dask_connect
from waitlab.experiments.dask_connect import address_problem, check_address
from waitlab.experiments.executors import open_executor
from waitlab.experiments.run_folder import results_folder
from waitlab.experiments.sweep import SchedulerLost, load_sweep, run_sweep
from waitlab.experiments.sweep_points import dask_client, stop_points

# imported where used, so that the command-line tests fail on their own account before the fix (not at import)

BASE = scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 2', seed=3, platform="deepcomp_7000")
PORTS = "the scheduler listens on 8786 by default, the dashboard on 8787"


def sweep_file(tmp_path: Path, grid: str = '"scenario.seed" = [1, 2, 3]', sweep: str = "") -> Path:
    (tmp_path / "base.toml").write_text(BASE)
    p = tmp_path / "sw.toml"
    p.write_text(f'base = "base.toml"\n[grid]\n{grid}\n{sweep}')
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("waitlab: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def fast_connect(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(dask_connect, "CONNECT_TIMEOUT", 1.5)
    return 1.5


# -- the address, checked before connecting -------------------------------------------------------------------------

@pytest.mark.parametrize(("address", "problem", "fix"), [
    ("notanaddress", "'notanaddress' has no port", "tcp://notanaddress:8786"),
    ("tcp://127.0.0.1:18787x", "the port '18787x' is not a number", "tcp://127.0.0.1:8786"),
    ("http://127.0.0.1:8787/status", "is a web address (http://)", "tcp://127.0.0.1:8786"),
    ("https://host:8787", "is a web address (https://)", "tcp://host:8786"),
    ("", "'' is empty", "leave the option out"),
    ("   ", "is empty", "tcp://HOST:8786"),
    ("tcp://127.0.0.1:0", "the port 0 is not in 1..65535", PORTS),
    ("tcp://127.0.0.1:65536", "the port 65536 is not in 1..65535", PORTS),
    ("tcp://:8786", "has no host", "tcp://HOST:8786"),
    ("ucx://host:8786", "unknown scheme 'ucx://'", "tcp://HOST:PORT or tls://HOST:PORT"),
    ("tcp://host:8786/status", "has a path after the port", "tcp://HOST:PORT"),
    ("tcp://::1:8786", "an IPv6 host must be in brackets", "tcp://[::1]:8786"),
    ("tcp://bad host:8786", "'bad host' is not a host name", PORTS),
])
def test_a_scheduler_address_that_is_not_one_is_refused_with_its_fix(address: str, problem: str, fix: str) -> None:

    found = address_problem(address)
    assert found is not None, address
    assert problem in found[0] and fix in found[1], found


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://sched.example.org:8786", "127.0.0.1:8786",
                                     "host-1.cluster:9000", "tcp://[::1]:8786", "[fe80::1]:1", "TCP://h:65535"])
def test_a_scheduler_address_is_accepted(address: str) -> None:

    assert address_problem(address) is None
    assert check_address(address, "x", "scheduler").port in (8786, 9000, 1, 65535)


@pytest.mark.parametrize("address", ["notanaddress", "tcp://127.0.0.1:18787x", "http://127.0.0.1:8787/status", ""])
def test_the_command_line_refuses_a_bad_scheduler_address_in_one_line(tmp_path: Path, address: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    sw = sweep_file(tmp_path)
    out = tmp_path / "out"
    t0 = time.monotonic()
    rc = main(["sweep", str(sw), "-o", str(out), "--scheduler", address])
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2
    assert time.monotonic() - t0 < 10  # nothing connected (the empty address used to run the sweep here)
    assert line.startswith("waitlab: error: (command line): --scheduler: ") and "(fix: " in line, line
    assert not out.exists()


def test_a_bad_scheduler_in_the_sweep_file_is_refused_when_it_is_loaded(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"sw\.toml: sweep\.scheduler: 'http://h:8787/status' is a web address.*"
                                         r"fix: give the scheduler's address, e\.g\. tcp://h:8786"):
        load_sweep(sweep_file(tmp_path, sweep='[sweep]\nscheduler = "http://h:8787/status"\n'))


def test_the_python_api_refuses_an_empty_scheduler(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"scheduler: '' is empty"):
        api.sweep(sweep_file(tmp_path), tmp_path / "out", scheduler="")
    assert not (tmp_path / "out").exists()


# -- what answers at the address ------------------------------------------------------------------------------------

@pytest.fixture
def server() -> Iterator[Callable[[bytes | None], str]]:
    """Start a local TCP service: it reads what it is sent, then answers ``reply`` (None: it stays silent, as a web
    server waiting for its request line); return its address."""
    socks: list[socket.socket] = []
    stop = threading.Event()

    def start(reply: bytes | None) -> str:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.settimeout(0.2)
        socks.append(srv)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                socks.append(conn)
                try:
                    conn.settimeout(5)
                    conn.recv(65536)
                    if reply is not None:
                        conn.sendall(reply)
                        conn.close()
                except OSError:
                    pass

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{srv.getsockname()[1]}"

    yield start
    stop.set()
    for s in socks:
        s.close()


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"],
                         ids=["silent-web-server", "http-400"])
def test_a_service_that_is_no_dask_scheduler_is_one_line_within_the_timeout(
        tmp_path: Path, server: Callable[[bytes | None], str], fast_connect: float, reply: bytes | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    address = server(reply)
    out = tmp_path / "out"
    t0 = time.monotonic()
    rc = main(["sweep", str(sweep_file(tmp_path)), "-o", str(out), "--scheduler", address])
    took = time.monotonic() - t0
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2, line  # not 4 ("out of memory": Dask read the HTTP reply as a frame length)
    assert f"--scheduler: the service at {address} is not a Dask scheduler (" in line, line
    assert "memory" not in line.lower() and PORTS in line
    assert took < fast_connect + 5, took
    assert not out.exists()


def test_nothing_listening_is_one_line_naming_the_timeout_and_the_fix(
        tmp_path: Path, fast_connect: float, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    rc = main(["sweep", str(sweep_file(tmp_path)), "-o", str(tmp_path / "out"), "--scheduler", address])
    took = time.monotonic() - t0
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2
    assert (f"--scheduler: no Dask scheduler answered at {address} within {fast_connect:g} s: the connection was "
            "refused") in line, line
    assert f"(fix: start `dask scheduler` there, or check the host and port: {PORTS})" in line
    assert took < fast_connect + 5, took


def test_the_connect_timeout_is_short_and_documented() -> None:

    assert dask_connect.CONNECT_TIMEOUT <= 10
    docs = (Path(__file__).parents[1] / "docs" / "sweeps.md").read_text()
    assert f"within {dask_connect.CONNECT_TIMEOUT:g} s" in docs
    assert f"{dask_connect.NO_WORKERS_AFTER:g} s" in docs


# -- a scheduler without workers --------------------------------------------------------------------------------------

class Counting:
    """Stands for a client: ``scheduler_info`` says how many workers the scheduler has."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def scheduler_info(self, n_workers: int = -1) -> dict[str, Any]:
        return {"type": "Scheduler", "n_workers": self.workers, "workers": {}}


@pytest.mark.parametrize("workers", [0, 1])
def test_a_scheduler_without_workers_is_said_once_and_the_sweep_waits_on(monkeypatch: pytest.MonkeyPatch,
                                                                         workers: int) -> None:

    monkeypatch.setattr(dask_connect, "NO_WORKERS_AFTER", 0.2)
    said: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=dask_connect._watch_workers,
                               args=(Counting(workers), "tcp://h:8786", stop, said.append), daemon=True)
    watcher.start()
    time.sleep(1.0)
    assert watcher.is_alive()  # it goes on waiting: workers may join later
    stop.set()
    watcher.join(2)
    if workers:
        assert said == []
    else:
        assert len(said) == 1, said
        assert said[0].startswith("waitlab: warning: the Dask scheduler tcp://h:8786 has no workers yet")
        assert "(fix: start one with `dask worker tcp://h:8786`" in said[0] and "\n" not in said[0]


# -- the scheduler lost mid-sweep -------------------------------------------------------------------------------------

class LostClient:
    """Stands for a Dask client: ``status`` turns to "connecting" when it loses its scheduler."""

    def __init__(self, address: str) -> None:
        self.status = "running"
        self.cluster = None
        self.scheduler = SimpleNamespace(address=address)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("the scheduler is gone")

    def sync(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("the scheduler is gone")


class LosingExecutor(Executor):
    """Stands for ``Client.get_executor()``: its futures end as Dask's do when the client loses its scheduler."""

    def __init__(self, address: str) -> None:
        self._client = LostClient(address)
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self.futures.append(fut)
        return fut

    def lose(self, n: int) -> None:
        """The first point fails on its own; then the scheduler goes: Dask cancels every other future."""
        deadline = time.monotonic() + 10
        while len(self.futures) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        self.futures[0].set_exception(SimulationError("the point's own error"))
        time.sleep(0.1)
        self._client.status = "connecting"
        for fut in self.futures[1:]:
            fut.cancel()
            fut.set_running_or_notify_cancel()


def test_a_lost_scheduler_keeps_the_finished_points_and_records_no_lost_point_as_failed(tmp_path: Path) -> None:
    sw = load_sweep(sweep_file(tmp_path))
    out = tmp_path / "out"
    address = "tcp://127.0.0.1:28786"
    ex = LosingExecutor(address)
    threading.Thread(target=ex.lose, args=(len(sw.points),), daemon=True).start()
    with pytest.raises(WaitlabError) as caught:  # before the fix: a table, the lost points in failed.csv
        run_sweep(sw, out, executor=ex)
    text = str(caught.value)
    assert type(caught.value).__name__ == "SchedulerLost"
    assert caught.value.exit_code == 3 and "\n" not in text
    assert f"the connection to the Dask scheduler {address} was lost" in text, text
    assert "0 of 3 points finished and are kept" in text and "2 unfinished points were not recorded as failed" in text
    assert f"rerun `waitlab sweep {sw.path} -o {out} --scheduler {address}`" in text
    failed = (out / "failed.csv").read_text()
    assert "the point's own error" in failed and "Cancelled" not in failed
    assert len(failed.strip().splitlines()) == 2  # the header and the point that failed on its own
    assert f"lost the connection to the Dask scheduler {address}" in (out / "incomplete.txt").read_text()
    assert [p.name for p in (out / "runs").iterdir()] == []  # no attempt folder left


def test_the_command_line_says_a_lost_scheduler_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise SchedulerLost("sweep s: the connection to the Dask scheduler tcp://h:8786 was lost")

    monkeypatch.setattr(api, "sweep", lost)
    rc = main(["sweep", str(sweep_file(tmp_path)), "-o", str(tmp_path / "out")])
    assert rc == 3
    assert "was lost" in one_error_line(capsys.readouterr().err)


# -- interruptions, duplicate values -----------------------------------------------------------------------------------

def test_an_interruption_names_a_removed_folder_only_when_there_was_one(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def connecting(*args: Any, **kwargs: Any) -> Any:  # interrupted while connecting: no folder was started
        raise Interrupted("", signal.SIGTERM)

    monkeypatch.setattr(api, "sweep", connecting)
    assert main(["sweep", str(sweep_file(tmp_path)), "-o", str(tmp_path / "out")]) == 143
    assert capsys.readouterr().err.strip() == "waitlab: interrupted; nothing partial was kept"

    run = tmp_path / "run"
    with pytest.raises(Interrupted) as caught, results_folder(run) as partial:
        (partial / "events.csv").write_text("x")
        raise Interrupted("", signal.SIGINT)
    assert not run.exists()
    assert getattr(caught.value, "removed_folder", None) == str(run)

    def writing(*args: Any, **kwargs: Any) -> Any:
        with results_folder(run):
            raise Interrupted("", signal.SIGINT)

    monkeypatch.setattr(api, "sweep", writing)
    assert main(["sweep", str(sweep_file(tmp_path)), "-o", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err.strip() == (f"waitlab: interrupted; nothing partial was kept ({run}, being "
                                               "written, was removed)")


def test_a_duplicate_grid_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"grid\.application\.steps: lists the value 2 twice.*list each value once"):
        load_sweep(sweep_file(tmp_path, '"application.steps" = [1, 2, 2]'))
    with pytest.raises(InputError, match=r"grid\.platform\.name: lists the value 'deepcomp_7000' twice"):
        load_sweep(sweep_file(tmp_path, '"platform.name" = ["deepcomp_7000", "deepcomp_7000"]'))


# -- a real scheduler and worker ---------------------------------------------------------------------------------------

@pytest.mark.simgrid
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc")
def test_on_a_real_scheduler_no_workers_is_said_and_a_frozen_worker_is_not_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")

    monkeypatch.setattr(dask_connect, "NO_WORKERS_AFTER", 1.0)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.log", "wb") as log:  # the child keeps its own copy
            p = subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                 start_new_session=True)
        procs.append(p)
        return p

    try:
        spawn("scheduler", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
              "--no-dashboard")
        assert dask_connect.probe(address, 20).kind == "scheduler", (tmp_path / "scheduler.log").read_text()
        attempt = tmp_path / "attempt"
        attempt.mkdir()
        with open_executor("dask", scheduler=address) as ex:
            time.sleep(2.5)  # no worker: said once after NO_WORKERS_AFTER, and the executor stays open
            err = capsys.readouterr().err
            assert err.count("has no workers yet, 1 s after connecting") == 1, err
            assert f"`dask worker {address}`" in err
            worker = spawn("worker", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                           "--no-dashboard")
            client = dask_client(ex)
            assert wait_for(lambda: dask_connect.worker_count(client) == 1, 30), \
                (tmp_path / "worker.log").read_text()[-2000:]
            os.kill(worker.pid, signal.SIGSTOP)  # a hung node: it answers nothing, the scheduler still lists it
            done: list[tuple[int | None, int]] = []
            asking = threading.Thread(target=lambda: done.append(stop_points(ex, attempt, wait=2.0)), daemon=True)
            t1 = time.monotonic()
            asking.start()
            asking.join(10)
            assert done == [(None, 1)], "stop_points waited for the frozen worker"
            assert time.monotonic() - t1 < 6
            closing = time.monotonic()
        assert time.monotonic() - closing < dask_connect.CLOSE_TIMEOUT + 3  # closing does not wait for it either
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
