"""Make the tutorial's figures (docs/img/tutorial_*.png): ``.venv/bin/python docs/figures.py``.

The pattern pictures are drawn from hand-built event tables whose waits waitlab's own pattern
rules compute (no SimGrid needed); the run figures come from the tutorial's two small examples
simulated with SMPI and diagnosed, and the alltoall sweep (about a minute in all).  Colours are
waitlab's palette: compute blue, MPI yellow, wait red, root cause blue dots, as in every figure.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

import waitlab
from waitlab.experiments.report.palette import KIND_COLOURS, PATTERN_COLOURS
from waitlab.models.analysis.waitstates import make_events, wait_states

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"

#: (title, events): each a tiny run that shows one pattern.  Ranks compute different times, then meet.
PATTERNS: dict[str, tuple[str, pd.DataFrame]] = {
    "late_sender": ("late sender: recv posted before the send",
                    make_events(rank=[0, 0, 1, 1], op=["compute", "send", "compute", "recv"],
                                enter=[0, 3, 0, 1], exit=[3, 3.2, 1, 3.2], match=[-1, 0, -1, 0],
                                done=[-1, 1, -1, 3], peer=[-1, 1, -1, 0])),
    "late_receiver": ("late receiver: large send waits for the recv",
                      make_events(rank=[0, 0, 1, 1], op=["compute", "send", "compute", "recv"],
                                  enter=[0, 1, 0, 3], exit=[1, 3.2, 3, 3.2], match=[-1, 0, -1, 0],
                                  done=[-1, 1, -1, 3], peer=[-1, 1, -1, 0], nbytes=[0, 10**7, 0, 0])),
    "wait_at_nxn": ("wait at NxN: allreduce waits for the last rank",
                    make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "allreduce"] * 3,
                                enter=[0, 1, 0, 2, 0, 3], exit=[1, 3.2, 2, 3.2, 3, 3.2], match=[-1, 0] * 3)),
    "wait_at_barrier": ("wait at barrier", make_events(
        rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3, enter=[0, 3, 0, 2, 0, 1],
        exit=[3, 3.1, 2, 3.1, 1, 3.1], match=[-1, 0] * 3)),
    "late_broadcast": ("late broadcast: non-roots wait for root 0", make_events(
        rank=[0, 0, 1, 1, 2, 2], op=["compute", "bcast"] * 3, enter=[0, 3, 0, 1, 0, 2],
        exit=[3, 3.2, 1, 3.2, 2, 3.2], match=[-1, 0] * 3, peer=[-1, 0] * 3)),
    "early_reduce": ("early reduce: root 0 waits for the senders", make_events(
        rank=[0, 0, 1, 1, 2, 2], op=["compute", "reduce"] * 3, enter=[0, 1, 0, 3, 0, 2],
        exit=[1, 3.2, 3, 3.2, 2, 3.2], match=[-1, 0] * 3, peer=[-1, 0] * 3)),
}


def _panel(ax: Axes, title: str, ev: pd.DataFrame) -> None:
    waits = wait_states(ev)
    for kind in ("compute", "mpi"):
        sel = ev[ev["kind"] == kind]
        ax.barh(sel["rank"], sel["exit"] - sel["enter"], left=sel["enter"], height=0.55, color=KIND_COLOURS[kind])
    for w in waits.itertuples():  # a handful of rows: the tiny hand-built tables of the pictures
        start = float(ev["enter"].to_numpy()[w.event])
        ax.barh(w.rank, w.wait, left=start, height=0.55, color=PATTERN_COLOURS[str(w.pattern)], hatch="//",
                edgecolor="white")
        ax.text(start + w.wait / 2, w.rank, f"{w.wait:g} s", ha="center", va="center", fontsize=8, color="white")
    ranks = sorted(ev["rank"].unique())
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.set_ylim(max(ranks) + 0.6, -0.6)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("time (s)", fontsize=8)


def pattern_figure(path: Path) -> None:
    fig, axes = plt.subplots(3, 2, figsize=(10, 7.5))
    for ax, (title, ev) in zip(axes.flat, PATTERNS.values(), strict=True):
        _panel(ax, title, ev)
    handles = [Patch(color=KIND_COLOURS["compute"], label="compute"), Patch(color=KIND_COLOURS["mpi"], label="MPI"),
               Patch(facecolor=PATTERN_COLOURS["late_sender"], hatch="//", edgecolor="white", label="wait")]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)


def run_figures(work: Path) -> None:
    waitlab.run(ROOT / "examples" / "stencil_late_rank.toml", work / "late", png=True)
    shutil.copy(work / "late" / "timeline.png", IMG / "tutorial_late_timeline.png")
    diag = waitlab.diagnose(work / "late")
    waitlab.write_report(diag, work / "late" / "diagnosis")
    shutil.copy(work / "late" / "diagnosis" / "culprit_timeline.png", IMG / "tutorial_late_culprit.png")
    waitlab.run(ROOT / "examples" / "wavefront_propagation.toml", work / "wave", png=True)
    shutil.copy(work / "wave" / "timeline.png", IMG / "tutorial_wave_timeline.png")
    written = waitlab.api.export(work / "wave", ("graphml",))
    shutil.copy(written["graph picture"], IMG / "tutorial_wave_graph.png")
    text = (ROOT / "examples" / "stencil_late_rank.toml").read_text()
    balanced = text[: text.index("[[application.imbalance]]")].replace("stencil-late-rank", "stencil-balanced")
    (work / "balanced.toml").write_text(balanced)
    waitlab.run(work / "balanced.toml", work / "balanced", png=False)
    cmp = waitlab.api.compare(work / "balanced", work / "late")
    waitlab.api.compare_png(cmp, IMG / "tutorial_compare.png")
    waitlab.sweep(ROOT / "examples" / "alltoall_sweep.toml", work / "sweep", workers=1)
    waitlab.api.plot(work / "sweep", IMG / "sweep_alltoall.png")


def main() -> int:
    IMG.mkdir(parents=True, exist_ok=True)
    pattern_figure(IMG / "tutorial_patterns.png")
    if "--patterns-only" not in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            run_figures(Path(tmp))
    print(f"figures written to {IMG}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
