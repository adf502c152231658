"""Reproduction of Rao et al.'s alltoall study on Dawning 5000A and DeepComp 7000 (``waitlab reproduce rao-alltoall``).

Rao et al. timed eight alltoall algorithms (2D mesh, 3D mesh, Bruck, MPICH native, pair, recursive
doubling, ring, LAM/MPI simple) for 512 B to 512 KB per rank pair on 64 to 1024 ranks, 8 per node, on
both machines (section 4.2), and drew ranking, crossover and scaling conclusions (sections 5.1-5.4).
:func:`reproduce` simulates the same points with SMPI on the calibrated platform models
(the one machine model, :func:`waitlab.platforms.machine.machine_settings`: calibrated factors, send-order cost,
contention laws; every point is a scenario, :func:`~waitlab.experiments.reproduce.alltoall_points.point_scenario`)
and :func:`~waitlab.experiments.reproduce.rao_statements.judge` marks each conclusion holds / partly / fails.

Points SimGrid 3.32 cannot simulate (:func:`~waitlab.models.apps.alltoall.check_alltoall_point`) are
listed as ``refused``, never as a time; a point that fails or times out is ``failed``.

What is sourced and what is fitted: see :func:`provenance` (nothing is fitted to the statements: every
model figure is a platform-file figure, sourced or assumed before the runs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.reproduce.alltoall_points import POINT_SIMULATION, alltoall_point, contention_config
from waitlab.experiments.reproduce.rao_statements import ALGORITHMS, SIZES, judge
from waitlab.models.apps.alltoall import check_alltoall_point
from waitlab.platforms import calibrate, load_platform
from waitlab.platforms.machine import contention_record

__all__ = ["DEFAULT_SUBSET", "FULL_GRID", "STATEMENT_11", "STATEMENT_EXTRA", "STATEMENT_GRID", "STEPWISE",
           "RaoResult", "markdown", "provenance", "reproduce", "write"]

PLATFORMS: tuple[str, ...] = ("dawning_5000a", "deepcomp_7000")
LABELS = {"2dmesh": "2D mesh", "3dmesh": "3D mesh", "bruck": "Bruck", "basic_linear": "MPICH native",
          "pair": "pair", "rdb": "recursive doubling", "ring": "ring", "lam_simple": "LAM simple"}

#: The paper's grid (section 4.2): both machines, 8 algorithms, 8 sizes, 64/128/256 ranks.
FULL_GRID: dict[str, Any] = {"platforms": PLATFORMS, "algorithms": ALGORITHMS, "sizes": SIZES,
                             "ranks": (64, 128, 256)}
#: The step-wise algorithms: cheap to simulate at any rank count.  The all-concurrent ones (MPICH native,
#: LAM simple) post p - 1 messages per rank, each with its own per-message cost: minutes per point from
#: 128 ranks on (benchmarks/bench_alltoall.py).
STEPWISE: tuple[str, ...] = ("2dmesh", "3dmesh", "bruck", "pair", "rdb", "ring")
#: MPICH native at 128 ranks and every size: what statement 11 needs (29-61 SimGrid CPU s per point).
STATEMENT_11: tuple[tuple[str, int, tuple[str, ...], tuple[int, ...]], ...] = (
    ("dawning_5000a", 128, ("basic_linear",), SIZES),
)
#: What runs on a 2-core machine in under fifteen minutes (two points at a time): every algorithm and size at 64
#: ranks on both machines, the step-wise algorithms and MPICH native at 128 ranks, and pair and ring at 256 ranks,
#: on Dawning.  Statements 12-15 need MPICH native or LAM simple at 256 ranks and are "not run" unless
#: :data:`STATEMENT_GRID` or the full grid is asked for (docs/performance.md, "All-concurrent alltoall": those
#: points cost about a thousand CPU seconds each in SimGrid 3.32).
DEFAULT_SUBSET: dict[str, Any] = {"platforms": PLATFORMS, "algorithms": ALGORITHMS, "sizes": SIZES,
                                  "ranks": (64,), "extra": (("dawning_5000a", 128, STEPWISE),
                                                            ("dawning_5000a", 256, ("pair", "ring")),
                                                            *STATEMENT_11)}
#: The points statements 12-15 need on top of :data:`DEFAULT_SUBSET` (``(platform, ranks, algorithms, sizes)``,
#: read from :mod:`~waitlab.experiments.reproduce.rao_statements`): Bruck, native, ring, LAM simple and pair at
#: 256 ranks, 512 B (12) and 4 KB (13, 14); Bruck and native at 256 ranks, 16 KB (14); Bruck, pair, ring and
#: native at 256 ranks, 256 KB (15).
STATEMENT_EXTRA: tuple[tuple[str, int, tuple[str, ...], tuple[int, ...]], ...] = (
    ("dawning_5000a", 256, ("bruck", "basic_linear", "ring", "lam_simple", "pair"), (512, 4096)),
    ("dawning_5000a", 256, ("bruck", "basic_linear"), (16384,)),
    ("dawning_5000a", 256, ("bruck", "pair", "ring", "basic_linear"), (262144,)),
)
#: :data:`DEFAULT_SUBSET` plus :data:`STATEMENT_EXTRA`: every statement judged (none "not run"), with the fewest
#: points; its cost is dominated by MPICH native and LAM simple at 256 ranks (docs/performance.md).
STATEMENT_GRID: dict[str, Any] = {**DEFAULT_SUBSET, "extra": DEFAULT_SUBSET["extra"] + STATEMENT_EXTRA}


@dataclass
class RaoResult:
    """Times of every point and the verdict on every statement.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per point: platform, algorithm, ranks, size, status (ok | refused | failed), seconds
        (simulated time of one alltoall; NaN unless ok), wall (s of simulation), note.
    verdicts : pandas.DataFrame
        :func:`~waitlab.experiments.reproduce.rao_statements.judge` of ``table``.
    grid : dict
        What was run.
    seconds : float
        Wall time of the whole reproduction.
    """

    table: pd.DataFrame
    verdicts: pd.DataFrame
    grid: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _points(grid: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    pts = [(p, a, r, s) for p in grid["platforms"] for r in grid["ranks"] for a in grid["algorithms"]
           for s in grid["sizes"]]
    for p, r, algs, *sizes in grid.get("extra", ()):
        pts += [(p, a, r, s) for a in algs for s in (sizes[0] if sizes else grid["sizes"])]
    return list(dict.fromkeys(pts))


def _row(plat: str, alg: str, ranks: int, size: int, status: str = "ok", note: str = "") -> dict[str, Any]:
    """A table row with no time yet."""
    return {"platform": plat, "algorithm": alg, "ranks": ranks, "size": size, "status": status,
            "seconds": float("nan"), "wall": 0.0, "note": note}


def _run_point(plat: str, alg: str, ranks: int, size: int, timeout: float) -> dict[str, Any]:
    """One row of the table: the point's time, or why it has none (refused / failed)."""
    row = _row(plat, alg, ranks, size)
    try:
        pt = alltoall_point(plat, alg, ranks, size, timeout=timeout)
        row.update(seconds=pt.seconds, wall=pt.wall)
    except InputError as exc:
        row.update(status="refused", note=exc.problem)
    except SimulationError as exc:
        row.update(status="failed", note=str(exc).splitlines()[0][:200])
    return row


def _say_point(progress: Callable[[str], None] | None, row: dict[str, Any]) -> None:
    if progress is not None:
        progress(f"{row['platform']} {row['algorithm']} {row['ranks']} ranks {row['size']} B: {row['status']} "
                 f"{row['seconds'] * 1e3:.4g} ms ({row['wall']:.1f} s)")


def _cost_order(pt: tuple[str, str, int, int]) -> tuple[int, int, int]:
    """Submission order on an executor: the all-concurrent algorithms and the most ranks first (longest first)."""
    _, alg, ranks, size = pt
    return (-int(alg not in STEPWISE), -ranks, -size)


def _run_points(pts: list[tuple[str, str, int, int]], timeout: float, executor: Executor | None,
                progress: Callable[[str], None] | None) -> list[dict[str, Any]]:
    if executor is None:
        rows = []
        for pt in pts:
            rows.append(_run_point(*pt, timeout))
            _say_point(progress, rows[-1])
        return rows
    done: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    futures: dict[Future[dict[str, Any]], tuple[str, str, int, int]] = {}
    for pt in sorted(pts, key=_cost_order):
        try:
            check_alltoall_point(pt[1], pt[2], pt[3])  # refused here: no process for it
        except InputError:
            done[pt] = _run_point(*pt, timeout)
            _say_point(progress, done[pt])
            continue
        futures[executor.submit(_run_point, *pt, timeout)] = pt
    for fut in as_completed(futures):
        pt = futures[fut]
        try:
            done[pt] = fut.result()
        except SimulationError as exc:  # the worker itself died (e.g. killed): that point failed, not the grid
            done[pt] = _row(*pt, status="failed", note=str(exc).splitlines()[0][:200])
        _say_point(progress, done[pt])
    return [done[pt] for pt in pts]  # the grid's order, whatever order the points finished in


def reproduce(grid: dict[str, Any] | None = None, *, timeout: float = 600.0,
              progress: Callable[[str], None] | None = None, executor: Executor | None = None) -> RaoResult:
    """Simulate the grid (default :data:`DEFAULT_SUBSET`; :data:`FULL_GRID` for the paper's) and judge it.

    Parameters
    ----------
    grid : dict, optional
        Keys ``platforms``, ``algorithms``, ``sizes``, ``ranks`` and optionally ``extra`` (triples
        ``(platform, ranks, algorithms)`` run for every size, or ``(platform, ranks, algorithms, sizes)``).
    timeout : float
        Wall seconds allowed per point; a point past it is ``failed``.
    progress : callable, optional
        Called with one line per finished point.
    executor : concurrent.futures.Executor, optional
        Runs the points in parallel (:func:`waitlab.api.open_executor`); each point is its own SMPI run, so the
        table is the same as one point after the other (rows in the grid's order), only the wall column differs.
    """
    grid = dict(DEFAULT_SUBSET if grid is None else grid)
    t0 = time.perf_counter()
    table = pd.DataFrame(_run_points(_points(grid), timeout, executor, progress))
    return RaoResult(table, judge(table), grid, time.perf_counter() - t0)


def provenance() -> dict[str, Any]:
    """Which model parameters are sourced, which assumed, and which fitted (and on what)."""
    out: dict[str, Any] = {}
    for name in PLATFORMS:
        m = load_platform(name)
        figures = {f.key: {"value": f.value, ("assumed" if f.assumed else "source"): f.provenance}
                   for f in m.figures if f.key.startswith(("mpi.", "inter_node", "intra_node", "node.cores"))}
        out[name] = {"figures": figures, "smpi_config": calibrate(m).smpi_config,
                     "send_order": contention_config(name), "contention": contention_record(m)}
    out["derived"] = {
        "smpi factors and loopback": "derived from the [mpi] figures (pingpong calibration), not fitted to any "
                                     "alltoall time or statement",
        "send-order cost per byte": "the platform's largest-message MPI inverse bandwidth (a rank hands its "
                                  "isends to the NIC one after the other); not fitted",
        "contention laws": "Karol, Hluchyj and Morgan 1987 (HOL blocking, computed from their model) and the "
                           "nodes' memory interfaces (sourced peak figures / 4), not fitted",
        "solver": {f"[simulation] {k}": v for k, v in POINT_SIMULATION.items()},
        "fitted": "nothing: no parameter was tuned on the statements, so all of them are checks; the HOL law's "
                  "values come from Karol et al.'s model, the memory caps from sourced peak figures "
                  "(docs/calibration.md)",
    }
    return out


def _fmt_size(s: int) -> str:
    return f"{s // 1024} KB" if s >= 1024 else f"{s} B"


def markdown(result: RaoResult) -> str:
    """Time tables (ms, one per platform and rank count), the agreement table and the run's summary."""
    tab = result.table
    out = ["# Rao et al. alltoall study, simulated", ""]
    counts = result.verdicts["verdict"].value_counts()
    out.append(f"Statements: {len(result.verdicts)}; " + ", ".join(f"{k}: {v}" for k, v in counts.items())
               + f". Points: {len(tab)} ({(tab['status'] == 'ok').sum()} ok, "
               f"{(tab['status'] == 'refused').sum()} refused, {(tab['status'] == 'failed').sum()} failed); "
               f"wall {result.seconds:.0f} s.")
    out += ["", "## Agreement with the paper", "", "| statement | section | verdict | points | numbers |",
            "| --- | --- | --- | --- | --- |"]
    for r in result.verdicts.itertuples():
        out.append(f"| {r.statement} | {r.section} | **{r.verdict}** | {r.points} | {r.numbers} |")
    for (plat, ranks), g in tab.groupby(["platform", "ranks"], sort=True):
        out += ["", f"## {plat}, {ranks} ranks (ms per alltoall)", ""]
        piv = g.assign(ms=g["seconds"] * 1e3).pivot_table(index="size", columns="algorithm", values="ms",
                                                          aggfunc="first", dropna=False)
        algs = [a for a in ALGORITHMS if a in piv.columns]
        out.append("| size | " + " | ".join(LABELS[a] for a in algs) + " |")
        out.append("| --- |" + " --- |" * len(algs))
        for size, row in piv.iterrows():
            cells = ["refused" if pd.isna(row[a]) else f"{row[a]:.4g}" for a in algs]
            out.append(f"| {_fmt_size(int(str(size)))} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _save(fig: Any, ax: Any, path: Path) -> Path:
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def plot(result: RaoResult, folder: Path) -> list[Path]:
    """Figures in the paper's style: time vs size per (platform, ranks); time vs ranks per size (Dawning)."""
    tab = result.table[result.table["status"] == "ok"]
    paths: list[Path] = []
    for (plat, ranks), g in tab.groupby(["platform", "ranks"], sort=True):
        fig, ax = subplots(figsize=(6, 4))
        for alg in ALGORITHMS:
            s = g[g["algorithm"] == alg].sort_values("size")
            if len(s):
                ax.plot(s["size"], s["seconds"] * 1e3, marker="o", label=LABELS[alg])
        ax.set(xscale="log", yscale="log", xlabel="message size (B)", ylabel="time (ms)",
               title=f"{plat}, {ranks} ranks")
        paths.append(_save(fig, ax, folder / f"{plat}_{ranks}_ranks.png"))
    d = tab[tab["platform"] == "dawning_5000a"]
    if d["ranks"].nunique() > 1:
        for size in (512, 4096, 262144):
            g = d[d["size"] == size]
            fig, ax = subplots(figsize=(6, 4))
            for alg in ALGORITHMS:
                s = g[g["algorithm"] == alg].sort_values("ranks")
                if len(s) > 1:
                    ax.plot(s["ranks"], s["seconds"] * 1e3, marker="o", label=LABELS[alg])
            ax.set(yscale="log", xlabel="ranks", ylabel="time (ms)", title=f"dawning_5000a, {_fmt_size(size)}")
            paths.append(_save(fig, ax, folder / f"dawning_5000a_{size}_B_vs_ranks.png"))
    return paths


def write(result: RaoResult, folder: str | Path, png: bool = True) -> None:
    """``times.csv``, ``agreement.csv``, ``rao_alltoall.md``, ``rao_alltoall.json`` (+ PNG figures) in ``folder``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    result.table.to_csv(out / "times.csv", index=False)
    result.verdicts.to_csv(out / "agreement.csv", index=False)
    (out / "rao_alltoall.md").write_text(markdown(result) + "\n")
    grid = {k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v for k, v in result.grid.items()}
    (out / "rao_alltoall.json").write_text(json.dumps({"grid": grid, "seconds": result.seconds,
                                                       "provenance": provenance()}, indent=2, sort_keys=True,
                                                      default=str) + "\n")
    if png:
        plot(result, out)
