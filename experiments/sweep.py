"""Sweeps: what-if grids over scenario keys, one results folder per point, resumable.

A sweep file names a base scenario and a grid of dotted keys::

    base = "stencil_late_rank.toml"          # relative to the sweep file
    [grid]
    "scenario.ranks" = [16, 64]
    "simulation.alltoall" = ["ring", "bruck"]
    [sweep]
    name = "alltoall-whatif"                 # optional
    executor = "local"                       # or "dask"
    workers = 2
    scheduler = "tcp://10.0.0.5:8786"       # dask only: use an existing cluster

Every point is a full scenario; its results go to ``OUT/runs/<scenario hash>/`` through
:func:`~waitlab.experiments.run.run_scenario`, which only renames a folder into place once it is
complete.  A sweep that is interrupted therefore resumes by skipping the points whose folder exists,
without redoing or corrupting them; ``OUT/sweep.csv`` is rebuilt from the finished folders.
"""

from __future__ import annotations

import copy
import itertools
import json
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError, WaitlabError
from waitlab.experiments.executors import open_executor
from waitlab.experiments.scenario import Scenario, from_mapping


@dataclass(frozen=True)
class SweepPoint:
    """One scenario of a sweep and the grid values that made it."""

    values: tuple[tuple[str, Any], ...]
    scenario: Scenario
    data: dict[str, Any]

    @property
    def key(self) -> str:
        return self.scenario.hash()


@dataclass(frozen=True)
class Sweep:
    name: str
    points: tuple[SweepPoint, ...]
    executor: str = "local"
    workers: int | None = None
    scheduler: str | None = None


def _set_dotted(data: dict[str, Any], key: str, value: Any, file: str) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise InputError(file, f"grid.{key}", f"{part} is not a table in the base scenario", "check the key")
    node[parts[-1]] = value


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep file and expand its grid into validated scenarios."""
    p = Path(path)
    file = str(p)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(file, "(file)", "does not exist", "check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(file, "(syntax)", f"not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    for key in data:
        if key not in ("base", "grid", "sweep"):
            raise InputError(file, key, "unknown key", "allowed: base, [grid], [sweep]")
    if not isinstance(data.get("base"), str):
        raise InputError(file, "base", "is required: the path of the base scenario", 'base = "scenario.toml"')
    base_path = (p.parent / data["base"]).resolve()
    if not base_path.exists():
        raise InputError(file, "base", f"{base_path} does not exist", "give a path relative to the sweep file")
    with base_path.open("rb") as fh:
        base = tomllib.load(fh)
    grid = data.get("grid", {})
    if not isinstance(grid, dict) or not grid:
        raise InputError(file, "grid", "must be a table with at least one key", '"scenario.ranks" = [16, 64]')
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise InputError(file, f"grid.{key}", "must be a non-empty list of values", f'"{key}" = [1, 2]')
    opts = data.get("sweep", {})
    for key in opts:
        if key not in ("name", "executor", "workers", "scheduler"):
            raise InputError(file, f"sweep.{key}", "unknown key", "allowed: name, executor, workers, scheduler")
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        scen = copy.deepcopy(base)
        for k, v in zip(keys, combo, strict=True):
            _set_dotted(scen, k, v, file)
        values = tuple(zip(keys, combo, strict=True))
        label = ", ".join(f"{k}={v}" for k, v in values)
        try:
            sc = from_mapping(scen, f"{base_path} [{label}]")
        except InputError as exc:
            raise InputError(file, f"grid ({label})", f"makes an invalid scenario: {exc}",
                             "change that grid value") from None
        points.append(SweepPoint(values, sc, scen))
    workers = opts.get("workers")
    return Sweep(name=str(opts.get("name", p.stem)), points=tuple(points), executor=str(opts.get("executor", "local")),
                 workers=int(workers) if workers is not None else None, scheduler=opts.get("scheduler"))


def _run_point(data: dict[str, Any], source: str, out: str) -> dict[str, Any]:
    """Worker: simulate one point into ``out`` (atomically) and return its summary."""
    from waitlab.experiments.run import run_scenario

    result = run_scenario(from_mapping(data, source), Path(out), png=False)
    return result.summary


def _row(point: SweepPoint, summary: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {k: v for k, v in point.values}
    row["scenario_hash"] = point.key
    row["makespan"] = summary["makespan"]
    for k, v in summary["totals"].items():
        row[f"total_{k}"] = v
    row["max_rank_wait"] = summary["max_rank_wait"]
    row["wait_states"] = summary["wait_states"]
    return row


def run_sweep(sweep: Sweep, out: Path, *, executor: Executor | None = None,
              progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run every point not finished yet; return the table of all finished points (also ``out/sweep.csv``).

    Points that fail are reported through ``progress`` and left out; rerunning the sweep retries them.
    """
    out = Path(out)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    todo = [pt for pt in sweep.points if not (runs / pt.key / "run.json").exists()]
    say(f"sweep {sweep.name}: {len(sweep.points)} points, {len(sweep.points) - len(todo)} already done, "
        f"{len(todo)} to run")
    failures: list[str] = []
    if todo:
        def submit_all(ex: Executor) -> None:
            futures = {ex.submit(_run_point, pt.data, pt.scenario.source, str(runs / pt.key)): pt for pt in todo}
            for fut in as_completed(futures):
                pt = futures[fut]
                label = ", ".join(f"{k}={v}" for k, v in pt.values)
                try:
                    fut.result()
                    say(f"done: {label}")
                except WaitlabError as exc:
                    failures.append(f"{label}: {exc}")
                    say(f"FAILED: {label}: {exc}")

        if executor is not None:
            submit_all(executor)
        else:
            with open_executor(sweep.executor, sweep.workers, sweep.scheduler, source=f"sweep {sweep.name}") as ex:
                submit_all(ex)
    rows = []
    for pt in sweep.points:
        summary_file = runs / pt.key / "summary.json"
        if summary_file.exists():
            rows.append(_row(pt, json.loads(summary_file.read_text())))
    table = pd.DataFrame(rows)
    tmp = out / ".sweep.csv.tmp"
    table.to_csv(tmp, index=False)
    tmp.replace(out / "sweep.csv")
    if failures:
        say(f"{len(failures)} point(s) failed; run the sweep again to retry them")
    return table
