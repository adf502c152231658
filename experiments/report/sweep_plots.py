"""What-if pictures of a sweep table: each result against one swept key, panels by another, lines for the rest.

The figure is a grid: one row per result (``y``), one column per value of the *facet* key; in every panel the
x axis is the *x* key and each line (or row of markers) is one combination of the remaining keys, with the same
colour in every panel.  The legend sits outside the panels, to their right; a row whose values span more than a
decade is drawn on a log scale.  Defaults: ``x`` is the swept key with the most values, ``facet`` (with three or
more keys) the remaining key with the fewest values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from waitlab.errors import InputError
from waitlab.experiments.report.palette import SERIES, distinct
from waitlab.experiments.run_folder import INCOMPLETE

#: Results drawn by default (those present), then every ``<op>_time`` column and the diagnosis scores.
DEFAULT_RESULTS = ("makespan", "total_wait", "max_rank_wait")
#: A row of panels is drawn on a log scale when its largest positive value is at least this many times its smallest.
LOG_SPAN = 10.0


def plot_sweep(table: pd.DataFrame, swept_keys: Sequence[str], out_png: Path,
               results: Sequence[str] | None = None, *, x: str | None = None, facet: str | None = None) -> Path:
    """Draw :func:`sweep_figure` into ``out_png``; returns the path."""
    fig = sweep_figure(table, swept_keys, results, x=x, facet=facet)
    fig.savefig(out_png, dpi=100)
    return Path(out_png)


def _pick(table: pd.DataFrame, keys: list[str], x: str | None, facet: str | None) -> tuple[str, str | None]:
    for name, flag in ((x, "--x"), (facet, "--facet")):
        if name is not None and name not in keys:
            raise InputError("sweep table", flag, f"{name!r} is not a swept key", f"use one of: {', '.join(keys)}")
    counts = {k: table[k].nunique(dropna=False) for k in keys}
    if x is None:
        x = max((k for k in keys if k != facet), key=lambda k: counts[k], default=keys[0])
    if facet == x:
        raise InputError("sweep table", "--facet", f"{facet!r} is also the x axis", "facet by another swept key")
    if facet is None and len(keys) >= 3:
        facet = min((k for k in keys if k != x), key=lambda k: counts[k])
    return x, facet


def _ylabel(r: str) -> str:
    seconds = r == "makespan" or r.startswith("total_") or r.endswith(("_wait", "_time"))
    return f"{r} (s)" if seconds else r


def sweep_figure(table: pd.DataFrame, swept_keys: Sequence[str], results: Sequence[str] | None = None, *,
                 x: str | None = None, facet: str | None = None) -> Figure:
    """Draw the grid described in the module docstring (mean over repeated rows, e.g. seeds).

    Non-numeric x keys are placed at evenly spaced ticks and drawn as markers only (slightly offset per series,
    so equal values stay visible), since a line between two categories would suggest values in between.
    """
    missing = [k for k in swept_keys if k not in table.columns]
    if missing:
        raise InputError("sweep table", ", ".join(missing), "swept key is not a column of the table",
                         f"use one of: {', '.join(map(str, table.columns))}")
    keys = list(swept_keys)
    numeric_cols = [c for c in table.columns if c not in keys and pd.api.types.is_numeric_dtype(table[c])]
    bad = [r for r in (results or ()) if r not in numeric_cols]
    if bad:
        raise InputError("sweep table", ", ".join(bad), "is not a numeric result column of the table",
                         f"use one of: {', '.join(map(str, numeric_cols))}")
    res = list(results) if results else numeric_cols
    xkey, fkey = _pick(table, keys, x, facet)
    series_keys = [k for k in keys if k not in (xkey, fkey)]
    fvals = list(pd.unique(table[fkey])) if fkey else [None]
    numeric = pd.api.types.is_numeric_dtype(table[xkey])
    xs = list(pd.unique(table[xkey]))
    xpos = {v: (v if numeric else i) for i, v in enumerate(sorted(xs) if numeric else xs)}
    # one series per combination of the remaining keys (grid order), one colour each in the whole figure
    series = (table[series_keys].astype(str).agg(", ".join, axis=1) if series_keys
              else pd.Series("", index=table.index))
    labels = list(dict.fromkeys(series))
    palette = distinct(len(labels)) if len(labels) > len(SERIES) else list(SERIES)
    fig = Figure(figsize=(0.6 + 4.4 * len(fvals) + 2.2 * bool(series_keys), 0.6 + 3.0 * len(res)),
                 layout="constrained")
    axes = fig.subplots(len(res), len(fvals), squeeze=False, sharex=True, sharey="row")
    handles: dict[int, Line2D] = {}
    for i, r in enumerate(res):
        for j, fv in enumerate(fvals):
            ax = axes[i, j]
            sub_table = table if fkey is None else table[table[fkey] == fv]
            for n, label in enumerate(labels):
                sub = sub_table[series[sub_table.index] == label]
                if sub.empty:
                    continue
                m = sub.groupby(xkey, sort=False)[r].mean()
                xv = np.array([xpos[v] for v in m.index], float)
                o = np.argsort(xv)
                colour = palette[n % len(palette)]
                if numeric:
                    ax.plot(xv[o], m.to_numpy(float)[o], marker="o", color=colour)
                else:
                    dodge = (n - (len(labels) - 1) / 2) * min(0.5 / max(len(labels), 1), 0.15)
                    ax.plot(xv[o] + dodge, m.to_numpy(float)[o], marker="o", ls="none", color=colour)
                handles.setdefault(n, Line2D([], [], color=colour, marker="o", ls="-" if numeric else "none",
                                             label=label))
            ax.grid(alpha=0.3)
            if i == len(res) - 1:
                ax.set_xlabel(xkey)
            if j == 0:
                ax.set_ylabel(_ylabel(r))
            if i == 0 and fkey is not None:
                ax.set_title(f"{fkey} = {fv}", fontsize=10)
        vals = table[r].to_numpy(float)
        pos = vals[np.isfinite(vals) & (vals > 0)]
        if pos.size and pos.size == np.isfinite(vals).sum() and pos.max() >= LOG_SPAN * pos.min():
            axes[i, 0].set_yscale("log")  # shared along the row
    if not numeric:
        names = [str(v) for v in xpos]
        upright = 90 if sum(map(len, names)) > 24 else 0  # names that do not fit side by side stand upright
        for ax in axes[-1]:
            ax.set_xticks(list(xpos.values()), names, rotation=upright, ha="center")
            ax.set_xlim(-0.5, len(xpos) - 0.5)  # each category in the middle of its own slot
    elif len(xpos) <= 12:  # the swept values themselves, not 1.2, 1.4, ... between two switch counts
        for ax in axes[-1]:
            ax.set_xticks(sorted(float(v) for v in xpos), [str(v) for v in sorted(xpos)])
    if series_keys:
        fig.legend(handles=[handles[k] for k in sorted(handles)], title=", ".join(series_keys),
                   loc="outside right upper", fontsize=8, title_fontsize=8, frameon=False)
    return fig


def _read_table(folder: Path) -> pd.DataFrame:
    csv = Path(folder) / "sweep.csv"
    if not csv.is_file():
        raise InputError(str(folder), "sweep.csv", "is missing: not a sweep folder",
                         "pass the folder written by `waitlab sweep` (it holds sweep.csv)")
    try:
        table = pd.read_csv(csv)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InputError(str(csv), "(file)", f"is not a sweep table: {str(exc).splitlines()[0] if str(exc) else exc}",
                         "re-run `waitlab sweep` to rewrite the table") from None
    if "scenario_hash" in table.columns and not len(table) and (Path(folder) / INCOMPLETE).is_file():
        raise InputError(str(csv), "(rows)", "no point finished: the sweep was interrupted before the first",
                         "run the same `waitlab sweep` command again: it runs the missing points")
    if "scenario_hash" not in table.columns or not len(table):
        raise InputError(str(csv), "scenario_hash", "is missing or the table is empty",
                         "re-run `waitlab sweep` to rewrite the table")
    return table


def plot_sweep_folder(folder: Path, out_png: Path | None = None, results: Sequence[str] | None = None, *,
                      x: str | None = None, facet: str | None = None) -> Path:
    """Draw ``folder/sweep.csv`` (written by ``waitlab sweep``) into ``out_png`` (default ``folder/sweep.png``).

    The swept keys are the columns before ``scenario_hash`` (the sweep table lists the grid keys first).  By default
    the results are :data:`DEFAULT_RESULTS`, the time of one collective per operation (``<op>_time``) and the
    diagnosis scores.
    """
    table = _read_table(folder)
    keys, res = _keys_and_results(table, results)
    return plot_sweep(table, keys, Path(out_png) if out_png else Path(folder) / "sweep.png", res, x=x, facet=facet)


def _keys_and_results(table: pd.DataFrame, results: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The swept keys of a sweep table and the results :func:`plot_sweep_folder` draws (its defaults when none)."""
    keys = list(table.columns[: list(table.columns).index("scenario_hash")])
    extra = [c for c in table.columns if c.endswith("_time") or c.endswith((".blame_error", ".top1"))]
    return keys, list(results) if results else [c for c in DEFAULT_RESULTS if c in table.columns] + extra


def sweep_plot_axes(folder: Path, results: Sequence[str] | None = None, *, x: str | None = None,
                    facet: str | None = None) -> dict[str, Any]:
    """What :func:`plot_sweep_folder` draws with these arguments: ``results`` (a row of panels each), the ``x`` key
    and the ``facet`` key (``None``: one column of panels)."""
    table = _read_table(folder)
    keys, res = _keys_and_results(table, results)
    if not res:  # as sweep_figure: every numeric column
        res = [c for c in table.columns if c not in keys and pd.api.types.is_numeric_dtype(table[c])]
    xkey, fkey = _pick(table, keys, x, facet)
    return {"results": res, "x": xkey, "facet": fkey}
