"""The results folder of ``waitlab run`` (documented in docs/outputs.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waitlab.experiments.plots import timeline_png
from waitlab.models.analysis.summary import rank_budget
from waitlab.simulator.export import write_chrome_trace, write_table

if TYPE_CHECKING:
    from waitlab.experiments.run import RunResult


def summary_text(summary: dict[str, Any], metadata: dict[str, Any]) -> str:
    """Human-readable summary printed by ``waitlab run``."""
    t = summary["totals"]
    lines = [
        f"scenario {metadata['scenario']} ({metadata['scenario_hash']}): {metadata['ranks']} ranks on "
        f"{metadata['platform']} ({metadata['nodes']} nodes x {metadata['ranks_per_node']}), seed {metadata['seed']}, "
        f"SimGrid {metadata['simgrid_version']}",
        f"makespan {summary['makespan']:.6f} s, {summary['events']} events, {summary['wait_states']} wait states",
        "rank-seconds: " + ", ".join(f"{k} {v:.4f}" for k, v in t.items()),
    ]
    for title, key in (("wait by pattern", "wait_by_pattern"), ("wait by MPI operation", "wait_by_op"),
                       ("wait by call path", "wait_by_path")):
        items = list(summary[key].items())[:8]
        if items:
            total = sum(summary[key].values())
            lines.append(f"{title}: " + ", ".join(f"{k} {v:.4f} s ({100 * v / total:.1f}%)" for k, v in items))
    return "\n".join(lines)


def write_outputs(result: RunResult, folder: Path, png: bool = True) -> None:
    """Write every output file of one run into ``folder``."""
    meta = result.metadata
    write_table(result.events, folder / "events.parquet", meta)
    write_table(result.waits, folder / "waits.parquet", meta)
    write_table(result.ledger(), folder / "ledger.parquet", meta)
    write_table(rank_budget(result.events, result.waits, result.scenario.ranks), folder / "ranks.parquet", meta)
    chrome = write_chrome_trace(result.events, result.waits, meta, folder / "trace.json")
    if png:
        timeline_png(result.events, result.waits, folder / "timeline.png", title=result.scenario.name)
    (folder / "summary.json").write_text(json.dumps(result.summary, indent=2, sort_keys=True) + "\n")
    (folder / "summary.txt").write_text(summary_text(result.summary, meta) + "\n")
    run = dict(meta)
    run["resolved_scenario"] = result.scenario.resolved()
    run["files"] = sorted([*(p.name for p in folder.iterdir()), "run.json"])
    run["chrome_trace"] = chrome
    (folder / "run.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
