"""One colour per meaning, shared by every figure waitlab draws and by ``report.html``.

Activities keep their colour in timelines, graphs, comparisons and the HTML report (compute blue, MPI
yellow, wait red, ...); each wait pattern has its own hue (warm colours, told apart by hue, not by shade);
each diagnosis model has one colour in every figure and the ground truth is always :data:`TRUTH` (green);
categorical series (culprit regions, sweep lines) use :data:`SERIES`, which avoids the reserved colours.
"""

from __future__ import annotations

import colorsys

#: Activity kinds of the event table.  Noise (brown) and delay (dark slate) differ in hue and lightness.
KIND_COLOURS: dict[str, str] = {
    "compute": "#4c9be8", "mpi": "#f2c14e", "overhead": "#9b59b6", "noise": "#a0522d", "flush": "#16a085",
    "swap": "#e67e22", "delay": "#34495e", "sleep": "#34495e", "other": "#c8c8c8",
}  # fmt: skip
#: Wait states (any pattern), everywhere.
WAIT = "#e74c3c"
#: Regions not singled out.
OTHER = "#c8c8c8"
#: Wait patterns: one hue each (red, magenta, maroon, salmon, crimson-pink, rose, dark red).
PATTERN_COLOURS: dict[str, str] = {
    "late_sender": "#e74c3c", "late_receiver": "#ff9f80", "wait_at_barrier": "#7b241c",
    "wait_at_nxn": "#c2185b", "late_broadcast": "#f06292", "early_reduce": "#880e4f", "early_scan": "#ffcdd2",
}  # fmt: skip
#: A root cause (excess work that made others wait) in graphs.
CAUSE = "#2e86c1"
#: The ground truth (counterfactual re-simulation), in every figure and table.
TRUTH = "#2ca02c"
#: Diagnosis models, by key (:data:`waitlab.experiments.diagnosis.diagnose.MODELS`) and by display name.
MODEL_COLOURS: dict[str, str] = {
    "cwpdm": "#6a3d9a", "hcwpdm": "#ff7f0e", "hcwpdm_each": "#17becf", "ground_truth": TRUTH,
    "CWP-DM": "#6a3d9a", "H-CWP-DM (earliest)": "#ff7f0e", "H-CWP-DM (each)": "#17becf", "ground truth": TRUTH,
}  # fmt: skip
#: Categorical series (culprit regions, sweep lines, plug-in models): no blue, yellow, red, green or grey,
#: which mean the above, nor a model's colour.  Twelve distinct hues; beyond that they repeat.
SERIES: tuple[str, ...] = (
    "#bcbd22", "#1f3a93", "#e377c2", "#7f6000", "#00897b", "#5e35b1", "#f4a582", "#4d4d00", "#80cbc4",
    "#b39ddb", "#3e2723", "#9e9d24",
)  # fmt: skip
#: Ink for axes lines, graph edges and outlines; a light rule for reference lines.
INK, RULE = "#333333", "#7f8c8d"
#: The background (zero of a heatmap).
PAPER = "#ffffff"
#: Heatmap of wait: from the background to the wait colour and darker.
HEAT: tuple[str, ...] = (PAPER, "#fde0dc", "#f9bdbb", "#f69988", "#f36c60", WAIT, "#c0392b")
#: Run A and run B in comparisons.
RUN_A, RUN_B = "#5d6d7e", "#ff7f0e"


def model_colour(name: str, index: int = 0) -> str:
    """Colour of a diagnosis model (by key or display name); unknown (plug-in) models take ``SERIES[index]``."""
    return MODEL_COLOURS.get(name, SERIES[index % len(SERIES)])


def distinct(n: int) -> list[str]:
    """``n`` distinct colours: :data:`SERIES`, then evenly spaced hues at two lightnesses.

    >>> len(set(distinct(30)))
    30
    """
    extra = max(0, n - len(SERIES))
    more = [colorsys.hls_to_rgb((0.07 + i * 0.618034) % 1.0, 0.32 if i % 2 else 0.55, 0.75) for i in range(extra)]
    return [*SERIES, *("#" + "".join(f"{round(255 * v):02x}" for v in rgb) for rgb in more)][:n]
