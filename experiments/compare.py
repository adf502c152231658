"""What changed between two runs: makespan, time budget, waits by pattern and region, the ranks and steps that moved.

Run A is the reference, run B the changed one; every delta is ``B - A``.  Per-rank and per-step tables
need the same rank count; the step time is the end of a step (the last exit of its events on any rank)
minus the end of the step before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd

from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.notebook import comparison_html
from waitlab.experiments.report.palette import INK, KIND_COLOURS, RUN_A, RUN_B, WAIT
from waitlab.experiments.results import LoadedRun
from waitlab.experiments.writer import jsonable
from waitlab.models.analysis.summary import rank_budget

#: Budget categories of a rank (rank-seconds), as in ``summary.json``.
CATEGORIES = ("compute", "perturbation", "communication", "wait", "idle")
#: Own work of a rank: what makes others wait when it grows.
OWN_WORK = ("compute", "perturbation")
TOP_LEVEL = "(top level)"
#: Changes smaller than this (s) are "unchanged" in the text: the event table's times are exact to the ns.
EPS = 1e-9


def _side_by_side(a: pd.Series, b: pd.Series, key: str) -> pd.DataFrame:
    df = pd.concat({"a": a, "b": b}, axis=1).fillna(0.0)
    df.index.name = key
    df["delta"] = df["b"] - df["a"]
    return df.reset_index().sort_values("delta", key=np.abs, ascending=False, kind="stable").reset_index(drop=True)


def _waits_by(waits: pd.DataFrame, col: str) -> pd.Series:
    keys = waits[col].astype(str).replace("", TOP_LEVEL)
    return waits["wait"].groupby(keys).sum()


def step_times(events: pd.DataFrame) -> pd.Series:
    """Seconds of each step: end of step s (last exit of its events) minus the end of step s-1 (0 before step 0)."""
    ev = events[events["step"] >= 0]
    end = ev.groupby("step")["exit"].max().sort_index()
    return pd.Series(np.diff(end.to_numpy(), prepend=0.0), index=end.index, name="seconds")


@dataclass(frozen=True)
class Comparison:
    """Run B against run A (every ``delta`` is B - A)."""

    a: str
    b: str
    makespan: tuple[float, float]
    totals: pd.DataFrame  # category, a, b, delta (rank-seconds)
    by_pattern: pd.DataFrame  # pattern, a, b, delta (seconds of wait)
    by_region: pd.DataFrame  # region, a, b, delta
    ranks: pd.DataFrame  # rank, <category>_a, <category>_b, <category>_delta, own_work_delta
    steps: pd.DataFrame  # step, a, b, delta (seconds of the step), wait_a, wait_b, wait_delta
    notes: list[str] = field(default_factory=list)

    def _repr_html_(self) -> str:
        return comparison_html(self)

    @property
    def makespan_delta(self) -> float:
        return self.makespan[1] - self.makespan[0]

    def ranks_by(self, column: str, top: int = 5) -> pd.DataFrame:
        """The ``top`` ranks whose ``column`` (e.g. ``wait_delta``, ``own_work_delta``) moved most."""
        if not len(self.ranks):
            return self.ranks
        order = self.ranks[column].abs().sort_values(ascending=False, kind="stable").index
        return self.ranks.loc[order[:top]].reset_index(drop=True)

    def steps_moved(self, top: int = 5) -> pd.DataFrame:
        """The ``top`` steps whose duration moved most."""
        return self.steps.sort_values("delta", key=np.abs, ascending=False, kind="stable").head(top)

    @property
    def identical(self) -> bool:
        """Nothing moved by more than ``EPS`` seconds: makespan, totals, waits, ranks and steps."""
        frames = [self.totals["delta"], self.by_pattern["delta"], self.by_region["delta"],
                  self.steps["delta"] if len(self.steps) else pd.Series(dtype=float)]
        frames += [self.ranks[c] for c in self.ranks.columns if c.endswith("_delta")]
        return abs(self.makespan_delta) <= EPS and all(bool((f.abs() <= EPS).all()) for f in frames)

    def to_dict(self, top: int = 5) -> dict[str, Any]:
        """Everything as plain JSON types (``waitlab compare --json``): ``identical``, and only what changed
        (rows whose delta is above ``EPS`` seconds; the makespans are always given)."""
        def rec(df: pd.DataFrame, column: str = "delta") -> list[dict[str, Any]]:
            return [jsonable(r) for r in df[df[column].abs() > EPS].to_dict("records")] if len(df) else []

        return {"a": self.a, "b": self.b, "identical": self.identical,
                "makespan": {"a": self.makespan[0], "b": self.makespan[1], "delta": self.makespan_delta},
                "totals": rec(self.totals), "wait_by_pattern": rec(self.by_pattern),
                "wait_by_region": rec(self.by_region),
                "ranks_wait_moved": rec(self.ranks_by("wait_delta", top), "wait_delta") if len(self.ranks) else [],
                "ranks_own_work_moved": rec(self.ranks_by("own_work_delta", top), "own_work_delta")
                if len(self.ranks) else [],
                "steps_moved": rec(self.steps_moved(top)), "notes": list(self.notes)}

    def text(self, top: int = 5) -> str:
        """The report ``waitlab compare`` prints."""
        ma, mb = self.makespan
        pct = f" ({100 * self.makespan_delta / ma:+.1f}%)" if ma > 0 else ""
        lines = [f"A = {self.a}", f"B = {self.b}",
                 f"makespan: A {ma:.6f} s, B {mb:.6f} s, B - A {self.makespan_delta:+.6f} s{pct}"]
        if self.identical:
            lines.append(f"identical: no total, wait, rank or step moved by more than {EPS:g} s")

        def table(title: str, df: pd.DataFrame, key: str) -> None:
            moved = df[df["delta"].abs() > EPS]
            if not len(moved):
                return
            lines.append(f"{title} (s): " + ", ".join(
                f"{r[key]} {r['a']:.4g} -> {r['b']:.4g} ({r['delta']:+.4g})"
                for r in moved.to_dict("records")))  # every one that moved: ``top`` limits the ranks and steps

        table("rank-seconds", self.totals, "category")
        table("wait by pattern", self.by_pattern, "pattern")
        table("wait by region", self.by_region, "region")
        if len(self.ranks):
            for col, what in (("own_work_delta", "own work (compute + perturbation)"), ("wait_delta", "wait")):
                rows = self.ranks_by(col, top)
                rows = rows[rows[col].abs() > EPS]
                if len(rows):
                    lines.append(f"ranks whose {what} moved most: " + ", ".join(
                        f"rank {int(r['rank'])} {r[col]:+.4g} s" for r in rows.to_dict("records")))
        steps = self.steps_moved(top)
        steps = steps[steps["delta"].abs() > EPS]
        if len(steps):
            lines.append("steps whose duration moved most: " + ", ".join(
                f"step {int(r['step'])} {r['a']:.4g} -> {r['b']:.4g} s ({r['delta']:+.4g})"
                for r in steps.to_dict("records")))
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _budget(run: LoadedRun, ranks: int) -> pd.DataFrame:
    """A run's per-rank budget: its ``ranks.parquet`` (which books noise detours as perturbation: the run knew them),
    else rebuilt from its events and waits."""
    path = run.folder / "ranks.parquet"
    return pd.read_parquet(path) if path.is_file() else rank_budget(run.events, run.waits, ranks)


def compare_runs(a: LoadedRun, b: LoadedRun) -> Comparison:
    """Compare two loaded results folders (B against A)."""
    notes = [f"{side} was read with --trust-edited: {run.edited}" for side, run in (("A", a), ("B", b)) if run.edited]
    na, nb = int(a.scenario.ranks), int(b.scenario.ranks)
    ba, bb = _budget(a, na), _budget(b, nb)
    totals = _side_by_side(ba[list(CATEGORIES)].sum(), bb[list(CATEGORIES)].sum(), "category")
    by_pattern = _side_by_side(_waits_by(a.waits, "pattern"), _waits_by(b.waits, "pattern"), "pattern")
    by_region = _side_by_side(_waits_by(a.waits, "region"), _waits_by(b.waits, "region"), "region")
    if na == nb:
        ranks = pd.DataFrame({"rank": ba["rank"]})
        for c in CATEGORIES:
            ranks[f"{c}_a"], ranks[f"{c}_b"] = ba[c], bb[c]
            ranks[f"{c}_delta"] = bb[c] - ba[c]
        ranks["own_work_delta"] = sum(ranks[f"{c}_delta"] for c in OWN_WORK)
    else:
        ranks = pd.DataFrame()
        notes.append(f"rank counts differ ({na} vs {nb}): no per-rank comparison")
    steps = _side_by_side(step_times(a.events), step_times(b.events), "step").sort_values("step")
    wait_steps = _side_by_side(a.waits.groupby("step")["wait"].sum(), b.waits.groupby("step")["wait"].sum(), "step")
    steps = steps.merge(wait_steps.rename(columns={"a": "wait_a", "b": "wait_b", "delta": "wait_delta"}),
                        on="step", how="left").fillna(0.0)
    steps = steps[steps["step"] >= 0].reset_index(drop=True)
    stepless = [side for side, run in (("A", a), ("B", b)) if not (run.events["step"].to_numpy() >= 0).any()]
    if stepless:  # a replayed trace has no steps (step -1): its steps would all read as moved to 0 s
        steps = steps.iloc[:0]
        notes.append(f"{' and '.join(stepless)} {'has' if len(stepless) == 1 else 'have'} no steps (a trace replay "
                     "or import): no per-step comparison")
    else:  # a step only one run has did not move to 0 s: it is not compared
        only = {side: sorted(set(own) - set(other)) for side, own, other in (
            ("A", a.events["step"].to_numpy(), b.events["step"].to_numpy()),
            ("B", b.events["step"].to_numpy(), a.events["step"].to_numpy()))}
        for side, missing in only.items():
            if missing:
                notes.append(f"steps {', '.join(map(str, missing[:8]))}{' ...' if len(missing) > 8 else ''} are "
                             f"only in {side}: not compared")
        steps = steps[~steps["step"].isin([*only["A"], *only["B"]])].reset_index(drop=True)
    if a.scenario.platform.name != b.scenario.platform.name:
        notes.append(f"platforms differ ({a.scenario.platform.name} vs {b.scenario.platform.name})")
    if a.scenario.seed != b.scenario.seed:  # (noise only where a run has [noise]: a recorded run has none)
        noise = ": random noise differs too" if a.scenario.noise is not None or b.scenario.noise is not None else ""
        notes.append(f"seeds differ ({a.scenario.seed} vs {b.scenario.seed}){noise}")
    return Comparison(_shown(a.folder), _shown(b.folder),
                      (float(a.events["exit"].max()), float(b.events["exit"].max())),
                      totals, by_pattern, by_region, ranks, steps, notes)


def _shown(folder: Path) -> str:
    """A run's folder as the comparison names it: relative to the current folder when inside it (as typed, e.g.
    ``results/balanced``), else absolute (a loaded run holds its folder absolute).

    >>> _shown(Path.cwd() / "results" / "a"), _shown(Path("/elsewhere/b"))
    ('results/a', '/elsewhere/b')
    """
    return str(folder.relative_to(Path.cwd())) if folder.is_relative_to(Path.cwd()) else str(folder)


def _pair_bars(ax: Any, df: pd.DataFrame, key: str, title: str) -> None:
    x = np.arange(len(df))
    ax.bar(x - 0.2, df["a"], 0.4, color=RUN_A, label="A")
    ax.bar(x + 0.2, df["b"], 0.4, color=RUN_B, label="B")
    ax.set_xticks(x, [str(k) for k in df[key]], rotation=20, fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False)


def rank_panel(ax: Any, cmp: Comparison) -> None:
    """The per-rank panel: each rank's change of own work and of wait; when the runs have different rank counts, no
    bars but the reason (an empty frame would read as "nothing moved")."""
    ax.set_title("per rank: change", fontsize=10)
    if not len(cmp.ranks):
        why = next((n for n in cmp.notes if n.startswith("rank counts differ")), "no per-rank comparison")
        ax.text(0.5, 0.5, why.replace(": ", ":\n", 1), ha="center", va="center", fontsize=9, color=INK,
                transform=ax.transAxes, wrap=True)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    r = cmp.ranks["rank"].to_numpy()
    ax.bar(r - 0.2, cmp.ranks["own_work_delta"], 0.4, color=KIND_COLOURS["compute"],
           label="own work (compute + perturbation)")
    ax.bar(r + 0.2, cmp.ranks["wait_delta"], 0.4, color=WAIT, label="wait")
    ax.axhline(0, color=INK, lw=0.6)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.3 * (hi - lo))  # room for the legend above the bars
    ax.legend(fontsize=8, frameon=False, loc="upper right", ncol=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("rank")
    ax.set_ylabel("B - A (s)")


def compare_png(cmp: Comparison, path: Path) -> Path:
    """Four panels: budget A vs B, wait by pattern A vs B, per-rank change, per-step change."""
    fig, axes = subplots(2, 2, figsize=(12, 7))
    _pair_bars(axes[0, 0], cmp.totals.sort_values("category"), "category", "rank-seconds by activity")
    _pair_bars(axes[0, 1], cmp.by_pattern.sort_values("pattern"), "pattern", "wait by pattern")
    rank_panel(axes[1, 0], cmp)
    ax = axes[1, 1]
    ax.bar(cmp.steps["step"], cmp.steps["delta"], color=RUN_B)
    ax.axhline(0, color=INK, lw=0.6)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("B - A (s)")
    ax.set_title("per step: change of the step's duration", fontsize=10)
    fig.suptitle(f"B - A: makespan {cmp.makespan_delta:+.4g} s   (A = {Path(cmp.a).name}, B = {Path(cmp.b).name})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    return Path(path)
