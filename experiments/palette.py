"""One colour per meaning, shared by every figure waitlab draws.

Activities keep their colour in timelines, graphs and comparisons (compute blue, MPI yellow, wait red,
...); wait patterns have their own shades of red; categorical series (regions blamed, sweep lines)
use :data:`SERIES`, which avoids the reserved colours.
"""

from __future__ import annotations

#: Activity kinds of the event table.
KIND_COLOURS: dict[str, str] = {
    "compute": "#4c9be8", "mpi": "#f2c14e", "overhead": "#9b59b6", "noise": "#7f8c8d", "flush": "#16a085",
    "swap": "#d35400", "delay": "#bdc3c7", "sleep": "#bdc3c7", "other": "#c8c8c8",
}  # fmt: skip
#: Wait states (any pattern), everywhere.
WAIT = "#e74c3c"
#: Regions not singled out.
OTHER = "#c8c8c8"
#: Wait patterns (shades of the wait colour).
PATTERN_COLOURS: dict[str, str] = {
    "late_sender": "#e74c3c", "late_receiver": "#c0392b", "wait_at_barrier": "#ff7f7f",
    "wait_at_nxn": "#a93226", "late_broadcast": "#f1948a", "early_reduce": "#922b21", "early_scan": "#fadbd8",
}  # fmt: skip
#: A root cause (excess work that made others wait) in graphs.
CAUSE = "#2e86c1"
#: Categorical series (culprit regions, sweep lines): no blue, yellow, red or grey, which mean the above.
SERIES: tuple[str, ...] = ("#9467bd", "#2ca02c", "#ff7f0e", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#1f3a93")
#: Run A and run B in comparisons.
RUN_A, RUN_B = "#5d6d7e", "#ff7f0e"
