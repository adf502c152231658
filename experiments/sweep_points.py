"""Where a sweep's points are written, and why a stopped sweep can never find a point landing later.

Each run of a sweep writes its points into an *attempt folder* of its own, ``OUT/runs/.attempt-<hex>.partial-<pid>``
(hidden, and named like every partial folder, so a later sweep removes it once this process is gone).  A point's
worker fills ``<attempt>/<hash>-<hex>/`` and returns its path; only the sweep itself (the client) renames it to
``OUT/runs/<hash>/`` (:func:`publish`).  When the sweep stops (Ctrl-C, SIGTERM, an unwritable disk), it cancels
what has not started, ends the running points (:func:`stop_points`) and renames the attempt folder away before
removing it (:func:`discard`): a point still running anywhere (a Dask worker the stop did not reach) finds no
folder to create or to fill, and could not publish one anyway.  A resumed sweep therefore never meets a folder
written by a point of the stopped one.

On Dask, each point runs in a child process of the worker (:func:`write_point_isolated`, the local executor's
:class:`~waitlab.experiments.isolated.PointProcesses`), so ending a running point ends its SimGrid run: the sweep
asks every worker to end the points of its attempt (:func:`stop_attempt` through ``Client.run``), and a worker
that missed that ends them itself when it sees the attempt folder gone.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import uuid
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from waitlab.errors import InputError, SimulationError, write_error
from waitlab.experiments.isolated import GRACE, PointProcesses
from waitlab.experiments.leftovers import pid_alive
from waitlab.experiments.pipeline import run
from waitlab.experiments.results import write_run
from waitlab.experiments.run_folder import seal
from waitlab.experiments.scenario import InputFiles, from_mapping
from waitlab.readers import read_json

__all__ = ["check_draft", "discard", "discard_stale_attempts", "new_attempt", "publish", "recorded_hash",
           "scheduler_of", "stop_attempt", "stop_points", "write_point", "write_point_isolated"]

ATTEMPT = ".attempt-"
#: Seconds between two looks of a Dask point at its attempt folder (gone: the sweep stopped, end the point).
POLL = 0.5
#: Why a point of a stopped sweep ends without a result (nobody reads it: the sweep has stopped).
STOPPED = "not written: the sweep was stopped"


def new_attempt(runs: Path) -> Path:
    """Create this run's attempt folder in ``runs`` (OSError when ``runs`` cannot be written)."""
    attempt = runs / f"{ATTEMPT}{uuid.uuid4().hex[:12]}.partial-{os.getpid()}"
    attempt.mkdir()
    return attempt


def discard(folder: Path) -> None:
    """Remove ``folder`` so that nothing can be created in it any more: renamed away first (a writer that still
    holds its path then fails), then removed."""
    if not folder.exists():
        return
    dead = folder.with_name(f".discarded-{uuid.uuid4().hex[:12]}.partial-{os.getpid()}")
    try:
        os.replace(folder, dead)
    except OSError:
        dead = folder
    for _ in range(5):  # a writer that had a file open may still add one while the tree is removed
        shutil.rmtree(dead, ignore_errors=True)
        if not dead.exists():
            return


def discard_stale_attempts(runs: Path) -> None:
    """Remove the attempt folders of sweeps that no longer run (killed, say), before their writers could use them."""
    if not runs.is_dir():
        return
    for p in runs.glob(f"{ATTEMPT}*.partial-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            discard(p)


def recorded_hash(folder: Path) -> str | None:
    """The scenario hash a point's ``run.json`` records (None: no ``run.json``, or not one waitlab can read)."""
    try:
        meta = read_json(Path(folder) / "run.json", "run.json", 16 << 20)
    except InputError:
        return None
    return str(meta.get("scenario_hash")) if isinstance(meta, dict) else None


def check_draft(draft: str, key: str, source: str) -> None:
    """Refuse (and remove) a point's finished ``draft`` whose run records another scenario hash than ``key``, the
    hash the sweep planned it under and names its folder by: a file the run read itself (a program's sources, a
    noise signature) changed since the sweep read it, so the folder would name a scenario it did not simulate."""
    recorded = recorded_hash(Path(draft))
    if recorded != key:
        shutil.rmtree(draft, ignore_errors=True)
        raise InputError(source, "(files)", f"the files this point reads changed since the sweep read them: its "
                         f"run records scenario hash {recorded}, not {key} as the sweep planned it", "run the sweep "
                         "again: it runs the points whose scenario changed")


def write_point(data: dict[str, Any], source: str, attempt: str, key: str,
                inputs: InputFiles | None = None) -> tuple[str, dict[str, Any]]:
    """Worker: simulate one point and write its folder into ``attempt``; return that folder and the summary.

    ``inputs`` are the files the sweep read for the point (:class:`~waitlab.experiments.scenario.InputFiles`):
    the point simulates those bytes, not the files as they are now (the sweep then checks that its run records
    the hash it planned, :func:`check_draft`).  The folder is only a draft: :func:`publish` (the sweep) renames it
    into place.  When the attempt folder is gone (the sweep stopped), nothing is written.
    """
    if not Path(attempt).is_dir():
        raise SimulationError(STOPPED)
    result = run(from_mapping(data, source, inputs=inputs))
    folder = Path(attempt) / f"{key}-{uuid.uuid4().hex[:8]}"
    final = Path(attempt).parent / key
    try:
        folder.mkdir()  # not parents=True: a stopped sweep's attempt folder is never made again
    except FileNotFoundError:
        raise SimulationError(STOPPED) from None
    except OSError as exc:
        raise write_error(exc, final) from None
    try:
        write_run(result, folder, png=False)
        seal(folder, "run")
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        if not Path(attempt).is_dir():
            raise SimulationError(STOPPED) from None
        raise write_error(exc, final) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return str(folder), dict(result.result.summary)


def publish(draft: str, attempt: Path, final: Path) -> None:
    """Rename a point's finished ``draft`` (in ``attempt``) to ``final``; a ``final`` already finished stays."""
    src = Path(draft)
    if src.parent.resolve() != attempt.resolve() or not src.is_dir():
        raise SimulationError(f"the point's folder {draft} is not in {attempt}")
    if (final / "run.json").exists():  # finished before: never overwritten
        shutil.rmtree(src, ignore_errors=True)
        return
    try:
        if final.is_dir():  # an empty or unfinished folder of no sweep: nothing to keep
            shutil.rmtree(final)
        os.replace(src, final)
    except OSError as exc:
        shutil.rmtree(src, ignore_errors=True)
        raise write_error(exc, final) from None


# -- Dask: each point in a child process of the worker, ended when the sweep stops ------------------------------

_LOCK = threading.Lock()
_IDLE: list[PointProcesses] = []  # children of finished points, reused by the next point (imports paid once)
_RUNNING: dict[str, list[PointProcesses]] = {}  # attempt folder -> the pools running its points here
_STOPPED: set[str] = set()  # attempt folders whose sweep asked this process to end its points


def write_point_isolated(data: dict[str, Any], source: str, attempt: str, key: str,
                         inputs: InputFiles | None = None) -> tuple[str, dict[str, Any]]:
    """Dask task: :func:`write_point` in a child process of this worker, ended when the sweep stops (it asks,
    :func:`stop_attempt`, or its attempt folder is gone)."""
    with _LOCK:
        pool = _IDLE.pop() if _IDLE else PointProcesses(1)
        _RUNNING.setdefault(attempt, []).append(pool)
    stopped = False
    try:
        fut = pool.submit(write_point, data, source, attempt, key, inputs)
        while True:
            try:
                return fut.result(timeout=POLL)
            except FutureTimeout:
                if attempt in _STOPPED or not Path(attempt).is_dir():
                    stopped = True
                    pool.stop()
                    raise SimulationError(STOPPED) from None
            except BaseException as exc:  # the child's Interrupted (a KeyboardInterrupt) must not reach Dask
                if attempt in _STOPPED or not Path(attempt).is_dir() or isinstance(exc, KeyboardInterrupt):
                    stopped = True
                    raise SimulationError(STOPPED) from None
                raise
    finally:
        with _LOCK:
            pools = _RUNNING.get(attempt, [])
            if pool in pools:
                pools.remove(pool)
            if not pools:
                _RUNNING.pop(attempt, None)
            if not stopped:
                _IDLE.append(pool)
        if stopped:
            pool.stop()
            pool.shutdown(wait=True)


async def stop_attempt(attempt: str) -> int:
    """On a Dask worker (``Client.run``): end this process's running points of ``attempt`` (SIGTERM, which
    removes their drafts and ends their SimGrid runs; SIGKILL after the grace); return how many ran."""
    with _LOCK:
        _STOPPED.add(attempt)
        pools = list(_RUNNING.get(attempt, ()))
    if pools:
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in pools))
    return len(pools)


def dask_client(ex: Executor) -> Any:
    """The Dask client behind a ``Client.get_executor()`` executor, or None for any other executor."""
    client = getattr(ex, "_client", None)
    return client if client is not None and hasattr(client, "run") else None


def scheduler_of(ex: Executor | None) -> str | None:
    """The address of the existing Dask scheduler ``ex`` submits to; None for a cluster started here or no Dask."""
    client = dask_client(ex) if ex is not None else None
    if client is None or getattr(client, "cluster", None) is not None:
        return None
    try:
        return str(client.scheduler.address)
    except AttributeError:
        return None


#: Seconds a Dask worker gets to answer the request to end its points (they get :data:`GRACE` after SIGTERM): one
#: that does not answer (frozen, swapping, cut off) is not waited for; its points end on seeing their folder gone.
STOP_WAIT = GRACE + 2.0


def stop_points(ex: Executor, attempt: Path, wait: float = STOP_WAIT) -> tuple[int | None, int]:
    """Ask every Dask worker, each on its own, to end its running points of ``attempt``; return how many the
    workers that answered within ``wait`` seconds ended (None: not Dask, or no worker answered) and how many
    workers did not answer (their points end on seeing the attempt folder gone)."""
    client = dask_client(ex)
    if client is None:
        return None, 0

    async def ask_all() -> list[int | None]:
        async def ask(worker: str) -> int | None:
            try:  # Client.run from within the client's loop: awaitable
                answers = await asyncio.wait_for(client.run(stop_attempt, str(attempt), workers=[worker],
                                                            on_error="return"), wait)
            except Exception:  # a worker that did not answer in time, or left
                return None
            n = answers.get(worker) if isinstance(answers, dict) else None
            return n if isinstance(n, int) else None

        workers = await asyncio.wait_for(client.nthreads(), wait)
        return list(await asyncio.gather(*(ask(w) for w in workers)))

    try:
        counts = client.sync(ask_all, callback_timeout=2 * wait + 1.0)  # the list of workers, then their answers
    except Exception:  # the scheduler did not answer: every worker ends its points on seeing the folder gone
        return None, 0
    answered = [n for n in counts if n is not None]
    return (sum(answered) if answered else None), len(counts) - len(answered)
