"""The leaderboard of ``waitlab evaluate``: ``leaderboard.md``, ``.csv``, ``.json``, ``leaderboard.png`` and
``cost.csv``.

``leaderboard.csv`` has one row per (model, case) with every score; ``.json`` adds the means per model
and per (model, cause class); ``.md`` shows them as tables.  These three and the figure are the same
bytes for the same suite, models and waitlab version.  The model's wall-clock cost varies from run to
run, so it is kept apart in ``cost.csv`` (seconds per model and case) and summarised in the terminal.

Scores (:func:`~waitlab.experiments.diagnosis.evaluate.case_scores`): ``top1``/``topk`` hit of a truly
costliest (rank, region); ``blame_error`` = L1 distance of the blame per region to the true cost per region
over the true total; ``total_error`` = (attributed - true total) / true total; ``false_blame`` = share of the
blame on (rank, region) pairs with no injected cause; ``rank_error`` = the L1 distance per (rank, region)
over the pairs whose truth is known (costed candidates, tied sets shared equally, pairs without a cause);
``spearman`` over the costed (rank, region) pairs;
``predicted``/``realized`` improvement of balancing the model's culprit regions.  n/a: undefined (true
total near zero, noise that per-region truth cannot remove, fewer than two costed pairs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.diagnosis.evaluate import SCORES
from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.writer import replaced_files

#: Column titles of the scores.
TITLES = {"top1": "top-1 hit", "topk": "top-k hit", "blame_error": "blame error (L1)",
          "rank_error": "(rank, region) error", "total_error":
          "total error", "false_blame": "false blame", "spearman": "Spearman", "predicted": "predicted impr.",
          "realized": "realized impr."}
#: Scores where lower is better (the others: higher is better, or a comparison).
LOWER_IS_BETTER = ("blame_error", "rank_error", "false_blame")


def _r(x: Any) -> Any:
    """A score rounded to 6 significant digits (JSON: None for n/a)."""
    if isinstance(x, float | np.floating):
        return None if not math.isfinite(float(x)) else float(f"{float(x):.6g}")
    return x


def _cell(x: Any, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.0f}%" if pct else f"{x:.2f}"


#: Scores summarised by their median over the cases (relative errors: a few cases where the injected causes
#: explain little of the wait would dominate a mean); the others by their mean (hit rates, shares).
MEDIAN = ("blame_error", "rank_error", "total_error")


def aggregate(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per ``by``: the mean (the :data:`MEDIAN` scores: the median) of every score over the cases (n/a
    skipped), and the number of cases scored."""
    ok = rows[rows["error"].astype("string").fillna("") == ""]
    g = ok.groupby(by, sort=False)
    parts = [g[[c]].median() if c in MEDIAN else g[[c]].mean() for c in SCORES if c in rows]
    out = pd.concat(parts, axis=1)
    out["cases"] = g.size()
    return out.reset_index()


def _abs_total(rows: pd.DataFrame) -> pd.DataFrame:
    r = rows.copy()
    r["total_error"] = r["total_error"].abs()
    return r


def leaderboard_dict(rows: pd.DataFrame, notes: list[str]) -> dict[str, Any]:
    """Plain data of ``leaderboard.json``."""
    models = list(dict.fromkeys(rows["model"]))
    overall = aggregate(_abs_total(rows), ["model"])
    by_cause = aggregate(_abs_total(rows), ["model", "cause"])
    return {
        "models": [{"key": m, "name": str(rows.loc[rows["model"] == m, "name"].iloc[0])} for m in models],
        "cases": [{k: _r(v) for k, v in r.items()} for r in
                  rows.drop_duplicates("case")[["case", "cause", "what", "ranks", "platform"]].to_dict("records")],
        "overall": {r["model"]: {k: _r(v) for k, v in r.items() if k != "model"} for r in overall.to_dict("records")},
        "by_cause": {f"{r['model']}|{r['cause']}": {k: _r(v) for k, v in r.items() if k not in ("model", "cause")}
                     for r in by_cause.to_dict("records")},
        "rows": [{k: _r(v) for k, v in r.items() if k != "seconds"} for r in rows.to_dict("records")],
        "notes": notes,
    }


def to_markdown(rows: pd.DataFrame, notes: list[str]) -> str:
    """``leaderboard.md``."""
    models = list(dict.fromkeys(rows["model"]))
    names = dict(zip(rows["model"], rows["name"], strict=False))
    causes = list(dict.fromkeys(rows["cause"]))
    n_cases = rows["case"].nunique()
    lines = ["# Diagnosis leaderboard", "",
             f"{n_cases} cases in {len(causes)} cause classes, {len(models)} models. Hit rates, false blame, "
             "Spearman and improvements are means over the cases; the three errors (blame, (rank, region), total "
             "= |attributed - true| / true) are medians. n/a: undefined (a true total near zero, noise the "
             "per-region truth cannot remove). The model costs in seconds are in `cost.csv` (wall clock, not "
             "reproducible).", ""]
    failed = (rows[rows["error"].astype("string").fillna("") != ""].groupby("model").size() if "error" in rows
              else pd.Series())
    if len(failed):
        lines += ["Models that failed on some cases are listed after every model that answered all of them, the "
                  "fewest failures first: their scores are over the cases they answered, so a case a model did not "
                  "answer must not help it (as a scikit-learn search ranks a candidate with a failed fold last).", ""]
    lines += ["## Overall", "",
              "| model | " + " | ".join(TITLES[c] for c in SCORES) + " | cases |",
              "| --- |" + " ---: |" * (len(SCORES) + 1)]
    overall = aggregate(_abs_total(rows), ["model"]).set_index("model")
    overall["failed"] = [int(failed.get(m, 0)) for m in overall.index]
    order = [*overall.sort_values(["failed", "top1", "blame_error"], ascending=[True, False, True],
                                  kind="stable").index,
             *[m for m in models if m not in overall.index]]  # a model that failed on every case: last
    for m in order:
        pct = {"top1", "topk", "false_blame", "predicted", "realized", "total_error", "blame_error", "rank_error"}
        k = int(failed.get(m, 0))
        cases = (f"{int(overall.loc[m, 'cases'])}" if m in overall.index else "0") + (f" ({k} failed)" if k else "")
        cells = [_cell(float(overall.loc[m, c]), c in pct) for c in SCORES] if m in overall.index \
            else ["failed"] * len(SCORES)
        lines.append(f"| {names[m]} | " + " | ".join(cells) + f" | {cases} |")
    by = aggregate(_abs_total(rows), ["model", "cause"]).set_index(["model", "cause"])
    for score in ("top1", "blame_error", "rank_error", "false_blame"):
        lines += ["", f"## {TITLES[score]} by cause class", "",
                  "| model | " + " | ".join(causes) + " |", "| --- |" + " ---: |" * len(causes)]
        for m in order:
            cells = [_cell(float(by.loc[(m, c), score]), True) if (m, c) in by.index else "failed" for c in causes]
            lines.append(f"| {names[m]} | " + " | ".join(cells) + " |")
    lines += ["", "## Cases", "", "Waits split: wait states whose blame the models split between culprits that "
              "arrived at exactly the same time / within the tie tolerance of 1 us (near ties).", "",
              "| case | cause | what | ranks | platform | waits split (exact / near) |",
              "| --- | --- | --- | ---: | --- | ---: |"]
    ties = rows.dropna(subset=["near_ties"]).drop_duplicates("case").set_index("case") if "near_ties" in rows \
        else pd.DataFrame()
    for r in rows.drop_duplicates("case").itertuples():
        split = f"{int(ties.loc[r.case, 'exact_ties'])} / {int(ties.loc[r.case, 'near_ties'])}" \
            if r.case in ties.index else "n/a"
        lines.append(f"| `{r.case}` | {r.cause} | {r.what} | {r.ranks} | {r.platform} | {split} |")
    if notes:
        lines += ["", "## Model failures", "", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def figure(rows: pd.DataFrame, path: Path) -> None:
    """Heat maps of top-1 hit and blame error per model and cause class."""
    by = aggregate(_abs_total(rows), ["model", "cause"])
    models = list(dict.fromkeys(rows["model"]))
    names = dict(zip(rows["model"], rows["name"], strict=False))
    causes = list(dict.fromkeys(rows["cause"]))
    fig, axes = subplots(1, 2, figsize=(4 + 1.1 * len(causes), 1.2 + 0.45 * len(models)), squeeze=False)
    for ax, score, cmap in ((axes[0, 0], "top1", "Greens"), (axes[0, 1], "blame_error", "Reds")):
        grid = by.pivot(index="model", columns="cause", values=score).reindex(index=models, columns=causes)
        vals = grid.to_numpy(float)
        ax.imshow(np.nan_to_num(vals, nan=0.0), cmap=cmap, vmin=0, vmax=1 if score == "top1" else 2, aspect="auto")
        for (i, j), v in np.ndenumerate(vals):
            ax.text(j, i, "n/a" if not math.isfinite(v) else f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(causes)))
        ax.set_xticklabels(causes, rotation=35, ha="right", fontsize=7)
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels([names[m] for m in models], fontsize=7)
        ax.set_title(TITLES[score], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


#: The files ``waitlab evaluate`` writes into its folder.
LEADERBOARD_FILES = ("leaderboard.md", "leaderboard.csv", "leaderboard.json", "leaderboard.png", "cost.csv")


def write_leaderboard(rows: pd.DataFrame, out: Path, notes: list[str], png: bool = True) -> list[Path]:
    """Write the leaderboard files into ``out``; return them.

    Over an earlier leaderboard, each file is replaced whole or not at all
    (:func:`~waitlab.experiments.writer.replaced_files`): a write that fails or is interrupted leaves the earlier
    files as they were, never a truncated one.  Without ``png``, an earlier ``leaderboard.png`` is removed once the
    new files are in place: it showed another leaderboard."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = ["leaderboard.md", "leaderboard.csv", "leaderboard.json", "cost.csv", *(["leaderboard.png"] if png else [])]
    cols = ["model", "name", "case", "cause", "what", "ranks", "platform", *SCORES, "exact_ties", "near_ties",
            "error"]
    with replaced_files(out, "leaderboard file") as files:
        files.path("leaderboard.md").write_text(to_markdown(rows, notes))
        rows = rows.reindex(columns=list(dict.fromkeys([*rows.columns, *cols])))
        rows[cols].to_csv(files.path("leaderboard.csv"), index=False, float_format="%.6g", lineterminator="\n")
        files.path("leaderboard.json").write_text(json.dumps(leaderboard_dict(rows, notes), indent=2,
                                                             sort_keys=True) + "\n")
        rows[["model", "case", "seconds"]].to_csv(files.path("cost.csv"), index=False, float_format="%.6g",
                                                  lineterminator="\n")
        if png:
            figure(rows, files.path("leaderboard.png"))
    stale = out / "leaderboard.png"
    if not png and (stale.is_file() or stale.is_symlink()):
        stale.unlink()
    return [out / n for n in names]


__all__ = ["LEADERBOARD_FILES", "aggregate", "figure", "leaderboard_dict", "to_markdown", "write_leaderboard"]
