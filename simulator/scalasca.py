"""Scalasca, the field's reference trace analyzer, run on an OTF2 archive and its report read back.

Scalasca's ``scout.mpi`` replays an OTF2 archive (a Score-P ``traces.otf2`` or waitlab's own export,
:mod:`waitlab.simulator.otf2_export`) on as many MPI ranks as the trace has and writes ``scout.cubex`` next to
the anchor file: the wait-state patterns (Late Sender, Late Receiver, Wait at Barrier, Wait at NxN, Late
Broadcast, Early Reduce, the RMA patterns), the delay costs of its root-cause analysis (Böhme et al., SC10)
and the critical path (Böhme et al., IPDPS 2012).  ``scout.cubex`` is read with ``pycubexr`` (PyPI; optional
dependency ``waitlab[scalasca]``).

Where Scalasca comes from (:func:`find_scalasca`), first found wins:

1. ``WAITLAB_SCALASCA=/prefix`` (``/prefix/bin/scout.mpi``), e.g. a module or Spack installation;
2. ``scout.mpi`` on ``PATH``;
3. the copy ``scripts/build_scalasca.sh`` builds into waitlab's cache (``$WAITLAB_CACHE/scalasca-2.6``).

:data:`SCALASCA_METRIC` is the one name map between waitlab's wait-state patterns and Scalasca's metrics.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.errors import EnvironmentProblem, SimulationError
from waitlab.simulator.build import cache_dir

#: Scalasca version the build script builds (and the cache folder's name).
CACHED_VERSION = "scalasca-2.6"
#: Stamp file ``scripts/build_scalasca.sh`` writes into the prefix once the build is complete.
BUILD_STAMP = ".waitlab-built"

#: waitlab's wait-state pattern -> Scalasca's metric (its ``scout.cubex`` name), one to one.  A Scalasca
#: metric's value is its whole severity, its sub-patterns' included (:func:`metric_totals`), except where
#: waitlab splits a pattern into disjoint parts as Scalasca's sub-patterns do (:data:`SCALASCA_EXCLUSIVE`).
SCALASCA_METRIC: dict[str, str] = {
    "late_sender": "mpi_latesender",
    "late_receiver": "mpi_latereceiver",
    "wait_at_barrier": "mpi_barrier_wait",
    "wait_at_nxn": "mpi_wait_nxn",
    "late_broadcast": "mpi_latebroadcast",
    "early_reduce": "mpi_earlyreduce",
    "early_scan": "mpi_earlyscan",
    "rma_late_post": "mpi_rma_sync_late_post",
    "rma_early_wait": "mpi_rma_early_wait",
    "rma_late_complete": "mpi_rma_late_complete",
    "rma_wait_at_fence": "mpi_rma_wait_at_fence",
    "rma_early_fence": "mpi_rma_early_fence",
    "rma_lock_contention": "mpi_rma_sync_lock_competition",
    "rma_wait_at_create": "mpi_rma_wait_at_create",
    "rma_wait_at_free": "mpi_rma_wait_at_free",
}
#: Scalasca metrics whose sub-patterns are separate waitlab patterns: compared without their sub-metrics.
SCALASCA_EXCLUSIVE = frozenset({"mpi_rma_early_wait", "mpi_rma_wait_at_fence"})
#: Scalasca's root-cause metrics: delay costs (short-term, long-term) per wait pattern, and the critical path.
DELAY_METRICS: dict[str, tuple[str, str]] = {
    "late_sender": ("delay_latesender", "delay_latesender_longterm"),
    "late_receiver": ("delay_latereceiver", "delay_latereceiver_longterm"),
    "wait_at_barrier": ("delay_barrier", "delay_barrier_longterm"),
    "wait_at_nxn": ("delay_n2n", "delay_n2n_longterm"),
    "late_broadcast": ("delay_12n", "delay_12n_longterm"),
    "early_reduce": ("delay_n21", "delay_n21_longterm"),
}
CRITICAL_PATH_METRICS = ("critical_path", "critical_imbalance_impact")

_HINT = ("set WAITLAB_SCALASCA=/prefix (the folder holding bin/scout.mpi), put scout.mpi on PATH, or build the copy "
         "in ../shared/tools with: bash scripts/build_scalasca.sh")


def cached_prefix() -> Path:
    """Where ``scripts/build_scalasca.sh`` installs Scalasca: ``$WAITLAB_CACHE/scalasca-2.6``."""
    return cache_dir() / CACHED_VERSION


def find_scalasca() -> tuple[Path | None, str]:
    """Scalasca's installation prefix (``prefix/bin/scout.mpi``), or None; and a one-line reason.

    The reason says where it was found, or why not and how to get it (module docstring: the order).
    """
    env = os.environ.get("WAITLAB_SCALASCA")
    if env:
        prefix = Path(env).expanduser()
        if (prefix / "bin" / "scout.mpi").is_file():
            return prefix, f"Scalasca from WAITLAB_SCALASCA={env}"
        return None, f"WAITLAB_SCALASCA={env} has no bin/scout.mpi (fix: point it at Scalasca's installation prefix)"
    on_path = shutil.which("scout.mpi")
    if on_path:
        return Path(on_path).resolve().parent.parent, f"Scalasca from PATH ({on_path})"
    prefix = cached_prefix()
    if (prefix / BUILD_STAMP).is_file() and (prefix / "bin" / "scout.mpi").is_file():
        return prefix, f"Scalasca built by scripts/build_scalasca.sh ({prefix})"
    return None, f"Scalasca not found (fix: {_HINT})"


def require_scalasca() -> Path:
    """Scalasca's prefix, or an :class:`EnvironmentProblem` with the reason."""
    prefix, reason = find_scalasca()
    if prefix is None:
        raise EnvironmentProblem(reason)
    return prefix


def _mpirun(prefix: Path) -> str:
    for cand in (prefix / "bin" / "mpirun", shutil.which("mpirun")):
        if cand is not None and Path(cand).is_file():
            return str(cand)
    raise EnvironmentProblem("scout.mpi needs mpirun, which is not on PATH "
                             "(fix: apt-get install openmpi-bin, the MPI Scalasca was built with)")


def _last_words(text: str) -> str:
    """The line of scout's output that says what went wrong (its ``ABORT``/``Error``/assertion line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for key in ("ABORT", "Assertion", "Error", "error", "FATAL", "Fatal"):
        hits = [ln for ln in lines if key in ln]
        if hits:
            return hits[0][:400]
    return lines[-1][:400] if lines else "no output"


def run_scout(archive_anchor: str | Path, ranks: int, *, rootcause: bool = True, critical_path: bool = True,
              time_correct: bool = False, timeout: float = 600.0, prefix: Path | None = None) -> Path:
    """Run ``scout.mpi`` on the OTF2 archive ``archive_anchor`` (its ``traces.otf2``) with ``ranks`` MPI ranks.

    Returns the path of the ``scout.cubex`` it writes next to the anchor (an older one is replaced).  Errors
    are one line quoting scout: :class:`EnvironmentProblem` when Scalasca or mpirun is missing,
    :class:`SimulationError` when scout fails or runs longer than ``timeout`` seconds (its process group is
    killed).  ``time_correct`` turns on Scalasca's clock correction (off: waitlab's timestamps are exact).
    """
    anchor = Path(archive_anchor)
    if not anchor.is_file():
        raise EnvironmentProblem(f"{anchor}: no such OTF2 anchor file (fix: pass the archive's traces.otf2)")
    anchor = anchor.resolve()  # scout runs in the archive's folder: a relative path would point elsewhere there
    prefix = prefix if prefix is not None else require_scalasca()
    cubex = anchor.parent / "scout.cubex"
    cubex.unlink(missing_ok=True)
    cmd = [_mpirun(prefix), "--allow-run-as-root", "--oversubscribe", "-np", str(int(ranks)),
           str(prefix / "bin" / "scout.mpi"), "--rootcause" if rootcause else "--no-rootcause",
           "--critical-path" if critical_path else "--no-critical-path",
           "--time-correct" if time_correct else "--no-time-correct", str(anchor)]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True, cwd=anchor.parent)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SimulationError(f"{anchor}: scout.mpi ran longer than {timeout:g} s and was stopped "
                              "(fix: a smaller trace, or a larger timeout)") from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0 or not cubex.is_file():
        raise SimulationError(f"{anchor}: scout.mpi failed (exit {proc.returncode}): {_last_words(out)}")
    return cubex


def _cubexr() -> Any:
    try:
        import pycubexr  # optional: pip install 'waitlab[scalasca]'
    except ImportError as exc:
        raise EnvironmentProblem("reading scout.cubex needs pycubexr (fix: pip install 'waitlab[scalasca]', "
                                 "or pip install pycubexr)") from exc
    return pycubexr


def read_cubex(path: str | Path) -> pd.DataFrame:
    """Every metric of a ``scout.cubex`` as a table: ``metric, metric_path, rank, callpath, seconds``.

    One row per (metric, rank, call path) with a non-zero value; ``seconds`` is the metric's own value
    (exclusive along the metric tree and the call tree); ``metric_path`` is the metric's place in Scalasca's
    metric tree (``time>mpi>...>mpi_latesender``), so :func:`metric_totals` can add sub-patterns.  ``callpath`` is the
    call path's region names joined by ``>``.  Metrics that are zero everywhere are absent from the file,
    hence from the table.  Counts (``visits``, ``syncs_*``, ...) are in their own unit, not seconds.
    """
    pycubexr = _cubexr()
    from pycubexr.utils.exceptions import MissingMetricError

    rows: list[pd.DataFrame] = []
    with pycubexr.CubexParser(str(path)) as cube:
        names: dict[int, str] = {}

        def walk(cnode: Any, prefix: str) -> None:
            name = cube.get_region(cnode).name
            names[cnode.id] = f"{prefix}>{name}" if prefix else name
            for child in cnode.get_children():
                walk(child, names[cnode.id])

        for root in cube.get_root_cnodes():
            walk(root, "")
        cnodes = [cube.get_cnode(i) for i in sorted(names)]
        # the values of a call path are one per location, in location-id order; a location's rank is its
        # location group's (a process), the location's own rank being its thread number (pycubexr 2.1 lists
        # the groups only through its parse result)
        groups = cube._anchor_result.system_tree_nodes[0].all_location_groups()
        rank_of = {int(loc.id): int(g.rank) for g in groups for loc in g.all_locations()}
        ranks = np.array([rank_of[i] for i in range(len(rank_of))], np.int64)
        parent: dict[str, str] = {c.name: m.name for m in cube.all_metrics() for c in m.childs}

        def tree_path(name: str) -> str:
            return f"{tree_path(parent[name])}>{name}" if name in parent else name

        path_of = {m.name: tree_path(m.name) for m in cube.all_metrics()}
        for metric in cube.all_metrics():
            try:
                values = cube.get_metric_values(metric)
            except (MissingMetricError, AssertionError):  # pycubexr 2.1.1 asserts on an empty index: zero too
                continue
            for cnode in cnodes:
                v = np.asarray(values.cnode_values(cnode, convert_to_exclusive=True), np.float64)
                nz = np.flatnonzero(v)
                if nz.size:
                    rows.append(pd.DataFrame({"metric": metric.name, "metric_path": path_of[metric.name],
                                              "rank": ranks[nz], "callpath": names[cnode.id], "seconds": v[nz]}))
    cols = {"metric": str, "metric_path": str, "rank": np.int64, "callpath": str, "seconds": np.float64}
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    return pd.concat(rows, ignore_index=True)


def metric_totals(table: pd.DataFrame, metric: str, *, without_submetrics: bool = False) -> pd.Series:
    """Seconds of ``metric`` per rank (index: rank), from :func:`read_cubex`'s table.

    ``scout.cubex`` stores a pattern's whole severity, its sub-patterns' included (Late Sender holds its
    "wrong order" part; ``scalasca -examine`` makes Cube's usual exclusive tree of it later): so a metric's
    rows are its value.  ``without_submetrics`` subtracts its direct sub-patterns.
    """
    own = table.loc[(table["metric"] == metric).to_numpy(), ["rank", "seconds"]]
    if without_submetrics:
        parent = table["metric_path"].map(lambda path: path.split(">")[-2] if ">" in path else "")
        sub = (parent == metric).to_numpy(bool)
        own = pd.concat([own, table.loc[sub, ["rank", "seconds"]].assign(seconds=lambda d: -d["seconds"])])
    return own.groupby("rank")["seconds"].sum()


def scalasca_waits(table: pd.DataFrame) -> pd.DataFrame:
    """Scalasca's wait states in waitlab's names: ``pattern, rank, seconds`` (from :func:`read_cubex`)."""
    out = []
    for pattern, metric in SCALASCA_METRIC.items():
        s = metric_totals(table, metric, without_submetrics=metric in SCALASCA_EXCLUSIVE)
        if len(s):
            out.append(pd.DataFrame({"pattern": pattern, "rank": s.index.to_numpy(np.int64),
                                     "seconds": s.to_numpy(np.float64)}))
    if not out:
        return pd.DataFrame({"pattern": pd.Series(dtype=str), "rank": pd.Series(dtype=np.int64),
                             "seconds": pd.Series(dtype=np.float64)})
    return pd.concat(out, ignore_index=True)
