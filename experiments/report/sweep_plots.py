"""What-if pictures of a sweep table: each result against each swept key, one line per value of the others."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from waitlab.errors import InputError
from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.palette import distinct


def plot_sweep(table: pd.DataFrame, swept_keys: Sequence[str], out_png: Path,
               results: Sequence[str] | None = None) -> Path:
    """Draw :func:`sweep_figure` into ``out_png``; returns the path."""
    fig = sweep_figure(table, swept_keys, results)
    fig.savefig(out_png, dpi=100)
    return Path(out_png)


def sweep_figure(table: pd.DataFrame, swept_keys: Sequence[str], results: Sequence[str] | None = None) -> Figure:
    """Draw a grid: rows = results (numeric columns that are not swept keys), columns = swept keys.

    In panel (result, key) the x axis is ``key`` and each line is one combination of the *other* swept
    keys (mean over repeated rows, e.g. seeds).  Every combination (``key=value, ...``) has its own colour
    in the whole figure, so a colour never means two things.  Non-numeric keys are placed at evenly
    spaced ticks and drawn as markers only (slightly offset per series), since a line between two
    categories would suggest values in between.
    """
    missing = [k for k in swept_keys if k not in table.columns]
    if missing:
        raise InputError("sweep table", ", ".join(missing), "swept key is not a column of the table",
                         f"use one of: {', '.join(map(str, table.columns))}")
    keys = list(swept_keys)
    bad = [r for r in (results or ()) if r not in table.columns or not pd.api.types.is_numeric_dtype(table[r])]
    if bad:
        numeric = [c for c in table.columns if c not in keys and pd.api.types.is_numeric_dtype(table[c])]
        raise InputError("sweep table", ", ".join(bad), "is not a numeric column of the table",
                         f"use one of: {', '.join(map(str, numeric))}")
    res = list(results) if results is not None else [
        c for c in table.columns if c not in keys and pd.api.types.is_numeric_dtype(table[c])]
    fig, axes = subplots(len(res), len(keys), figsize=(4.2 * len(keys), 3.0 * len(res)), squeeze=False)
    colours: dict[str, str] = {}
    n_series = sum(len(table.groupby([k for k in keys if k != key], dropna=False)) if len(keys) > 1 else 1
                   for key in keys)
    palette = distinct(n_series)
    for j, key in enumerate(keys):
        others = [k for k in keys if k != key]
        xs = list(pd.unique(table[key]))
        numeric = pd.api.types.is_numeric_dtype(table[key])
        xpos = {x: (x if numeric else i) for i, x in enumerate(sorted(xs) if numeric else xs)}
        groups = table.groupby(others, sort=True, dropna=False) if others else [((), table)]
        groups = list(groups)
        for i, r in enumerate(res):
            ax = axes[i, j]
            for n, (label, sub) in enumerate(groups):
                m = sub.groupby(key, sort=False)[r].mean()
                x = np.array([xpos[v] for v in m.index], float)
                o = np.argsort(x)
                lab = ", ".join(f"{k}={v}" for k, v in zip(others, label if isinstance(label, tuple) else (label,),
                                                           strict=True)) or r
                colour = colours.setdefault(lab, palette[len(colours) % len(palette)])
                if numeric:
                    ax.plot(x[o], m.to_numpy(float)[o], marker="o", color=colour, label=lab)
                else:  # categories: markers only, dodged so equal values stay visible
                    dodge = (n - (len(groups) - 1) / 2) * min(0.3 / max(len(groups), 1), 0.08)
                    ax.plot(x[o] + dodge, m.to_numpy(float)[o], marker="o", ls="none", color=colour, label=lab)
            if not numeric:
                ax.set_xticks(list(xpos.values()), [str(v) for v in xpos], rotation=20)
            ax.set_xlabel(key)
            ax.set_ylabel(f"{r} (s)" if r == "makespan" or r.startswith("total_") or r.endswith("_wait") else r)
            ax.grid(alpha=0.3)
            if i == 0 and others:
                ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def plot_sweep_folder(folder: Path, out_png: Path | None = None, results: Sequence[str] | None = None) -> Path:
    """Draw ``folder/sweep.csv`` (written by ``waitlab sweep``) into ``out_png`` (default ``folder/sweep.png``).

    The swept keys are the columns before ``scenario_hash`` (the sweep table lists the grid keys first).
    """
    csv = Path(folder) / "sweep.csv"
    if not csv.is_file():
        raise InputError(str(folder), "sweep.csv", "is missing: not a sweep folder",
                         "pass the folder written by `waitlab sweep` (it holds sweep.csv)")
    try:
        table = pd.read_csv(csv)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InputError(str(csv), "(file)", f"is not a sweep table: {str(exc).splitlines()[0] if str(exc) else exc}",
                         "re-run `waitlab sweep` to rewrite the table") from None
    if "scenario_hash" not in table.columns or not len(table):
        raise InputError(str(csv), "scenario_hash", "is missing or the table is empty",
                         "re-run `waitlab sweep` to rewrite the table")
    keys = list(table.columns[: list(table.columns).index("scenario_hash")])
    default = ["makespan", "total_wait", "max_rank_wait"]
    scores = [c for c in table.columns if c.endswith((".blame_error", ".top1"))]  # [sweep] diagnose (issue 24)
    res = list(results) if results else [c for c in default if c in table.columns] + scores
    return plot_sweep(table, keys, Path(out_png) if out_png else Path(folder) / "sweep.png", res)
