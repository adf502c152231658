"""The critical path of a diagnosed run, reported as Scalasca's critical-path analysis does.

Time per region and per rank on the longest chain of busy time through the run
(:func:`waitlab.models.analysis.critical_path.critical_path`), and the critical-path imbalance of each
region: its seconds on the path minus its mean busy time per rank (what balancing it could save at most).
"""

from __future__ import annotations

from typing import Any

from waitlab.models.analysis.critical_path import CriticalPath


def critical_path_dict(cp: CriticalPath, top: int = 10) -> dict[str, Any]:
    """Plain data for ``diagnosis.json`` and ``--json``."""
    return {"length": cp.length, "makespan": cp.makespan,
            "by_region": [{k: (float(v) if k != "region" else str(v)) for k, v in r.items()}
                          for r in cp.by_region.head(top).to_dict("records")],
            "by_rank": {str(int(k)): float(v) for k, v in cp.by_rank.sort_values(ascending=False).head(top).items()}}


def critical_path_markdown(cp: CriticalPath, top: int = 8) -> list[str]:
    """Markdown lines of the critical-path section of the diagnosis report."""
    ranks = cp.by_rank.sort_values(ascending=False)
    lines = ["## Critical path", "",
             f"The longest chain of busy time through the run is {cp.length:.4g} s of the {cp.makespan:.4g} s "
             f"from its first activity to its last and passes through {int((ranks > 0).sum())} rank(s). Time on "
             "it per region (as Scalasca's critical-path analysis reports it); the imbalance is the region's time "
             "on the path minus its mean time per rank, the most that balancing it could save:", "",
             "| region | on the path (s) | share | mean per rank (s) | imbalance (s) |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for r in cp.by_region.head(top).to_dict("records"):
        lines.append(f"| `{r['region']}` | {r['seconds']:.4g} | {100 * r['share']:.1f}% | {r['mean_per_rank']:.4g} | "
                     f"{r['imbalance']:.4g} |")
    lines += ["", "Ranks on the path: " + ", ".join(f"{int(k)} {v:.4g} s" for k, v in ranks.head(top).items()
                                                   if v > 0), ""]
    return lines
