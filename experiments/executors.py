"""The one seam through which waitlab fans out simulations: a ``concurrent.futures.Executor``.

``local`` (default) is a process pool on this machine; ``dask`` is Dask distributed, either a
``LocalCluster`` started here or an existing scheduler (``tcp://host:8786``) for when one machine is
not enough.  Both give the same ``submit``/``Future`` interface, so sweeps and counterfactual
re-runs do not care which one runs them.
"""

from __future__ import annotations

import logging
import numbers
import os
import warnings
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

from waitlab.errors import InputError
from waitlab.experiments.dask_connect import check_address, open_client
from waitlab.experiments.isolated import PointProcesses

EXECUTORS = ("local", "dask")


def default_workers() -> int:
    """Worker processes for a local pool: the machine's cores (each SMPI run is single-threaded)."""
    return max(1, os.cpu_count() or 1)


def check_executor(kind: str, workers: int | None, scheduler: str | None, source: str = "command line",
                   option: str = "scheduler") -> None:
    """Refuse executor settings that cannot work, before anything is created (a scheduler address that is empty
    or not one included: :func:`~waitlab.experiments.dask_connect.check_address`)."""
    if kind not in EXECUTORS:
        raise InputError(source, "executor", f"unknown executor {kind!r}", f"use one of: {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, numbers.Integral)
                                or workers < 1):  # workers="2": refused, not compared with 1
        raise InputError(source, "workers", f"must be an integer >= 1, got {workers!r}", "use workers = 2")
    if scheduler is not None:
        check_address(scheduler, source, option)
        if kind == "local":
            raise InputError(source, option, "only used with the dask executor", 'set executor = "dask"')


@contextmanager
def open_executor(kind: str = "local", workers: int | None = None, scheduler: str | None = None,
                  source: str = "command line", option: str = "scheduler") -> Iterator[Executor]:
    """Yield an executor of the given kind and shut it down afterwards.

    Parameters
    ----------
    kind : {"local", "dask"}
    workers : int, optional
        Processes (local) or workers of a new Dask ``LocalCluster``; default: the number of cores.
    scheduler : str, optional
        Address of an existing Dask scheduler (``kind = "dask"`` only); no cluster is started then.  It is
        checked, then asked whether it is a Dask scheduler, within
        :data:`~waitlab.experiments.dask_connect.CONNECT_TIMEOUT` seconds: an address that is not one, where
        nothing answers or where something else answers is one
        :class:`~waitlab.experiments.dask_connect.SchedulerProblem` (exit status 2).
    source, option : str
        Where the settings came from and the scheduler's option there, for error messages.
    """
    check_executor(kind, workers, scheduler, source, option)
    n = workers or default_workers()
    if kind == "local":
        # one child process per call, in its own process group; its SimGrid runs die with it
        pool = PointProcesses(n)
        try:
            yield pool
        except BaseException:
            pool.stop()  # Ctrl-C or an error: end the running calls, start no more
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    from dask.distributed import Client, LocalCluster  # only when chosen: importing it costs about a second

    if scheduler is not None:
        with open_client(scheduler, source, option) as client:
            yield client.get_executor()
        return
    # distributed's own log (a failed task's traceback, workers killed at the end) stays out of the terminal: a
    # point's failure is said once, in one line, by the sweep
    with warnings.catch_warnings():  # another cluster holds port 8787: the scheduler's HTTP port moves, not ours to say
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.CRITICAL)
    with cluster, Client(cluster) as client:
        yield client.get_executor()
