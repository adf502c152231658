"""Benchmark of report.html (issue 26): a 1,024-rank x 20-step stencil with a late rank.

Prints the size of ``report.html``, the time ``waitlab run`` spends writing it (built again here, timed),
and the time headless Chromium (Debian's ``chromium``, network off, fresh profile) takes to open it:
``performance.now()`` when the timeline is drawn (``ready``), the wall time from navigation to ready
measured outside the page, and Chromium's own figures (``Performance.getMetrics``: CPU time of the page's
main thread and process, which the machine's load does not inflate; script, compile and task durations).
Also a drill-down: the time to redraw the timeline for another rank window.
On a shared machine the wall figures grow with the load (printed with them).

    nice -n 10 .venv/bin/python benchmarks/bench_report.py --ranks 1024 --steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from waitlab import api
from waitlab.experiments.report.html import write_html_report
from waitlab.experiments.scenario import from_mapping

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from headless import load


def scenario(ranks: int, steps: int) -> dict:
    return {"scenario": {"name": f"report-bench-{ranks}x{steps}", "ranks": ranks, "seed": 1},
            "platform": {"name": "dawning_5000a"},
            "application": {"kind": "stencil", "dims": 2, "steps": steps, "compute_seconds": 0.01,
                            "imbalance": [{"region": "Stencil", "ranks": [5], "distribution": "constant",
                                           "magnitude": 0.005}]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="browser openings (best and median printed)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-report-") as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        api.run(from_mapping(scenario(a.ranks, a.steps), "bench"), out, png=False)
        run_s = time.perf_counter() - t0
        loaded = api.load_run(out)
        summary = json.loads((out / "summary.json").read_text())
        budget = pd.read_parquet(out / "ranks.parquet")
        t0 = time.perf_counter()
        page = write_html_report(out, loaded.metadata, summary, loaded.events, loaded.waits, budget, loaded.ledger())
        write_s = time.perf_counter() - t0
        leaf = int((loaded.events["kind"] != "region").sum())
        print(f"run {a.ranks} ranks x {a.steps} steps: {len(loaded.events):,} events ({leaf:,} leaf), "
              f"{len(loaded.waits):,} wait states; waitlab run {run_s:.1f} s")
        print(f"report.html: {page.stat().st_size / 2**20:.2f} MiB, written in {write_s:.2f} s")
        drill = ("(() => { const t = performance.now(); window.WAITLAB.showRanks(500, 532); "
                 "return performance.now() - t; })()")
        opens, cpu = [], []
        for _ in range(a.repeat):
            p = load(page, values={"drill_ms": drill,
                                   "status": "document.getElementById('wl-range-status').textContent"})
            m = p.metrics
            opens.append(p.ready_ms)
            cpu.append(m.get("ThreadTime", float("nan")))
            print(f"open: ready {p.ready_ms / 1e3:.2f} s (wall {p.wall_seconds:.2f} s); CPU of the page's main "
                  f"thread {m.get('ThreadTime', 0):.2f} s, of its process {m.get('ProcessTime', 0):.2f} s; script "
                  f"{m.get('ScriptDuration', 0):.2f} s, compile {m.get('V8CompileDuration', 0):.2f} s, "
                  f"tasks {m.get('TaskDuration', 0):.2f} s; drill-down to ranks 500-531 "
                  f"{p.values['drill_ms'] / 1e3:.2f} s; console messages {len(p.console)}, network requests "
                  f"{len(p.failed_requests)}; load average {os.getloadavg()[0]:.1f}")
        opens.sort()
        cpu.sort()
        print(f"open time: best {opens[0] / 1e3:.2f} s, median {opens[len(opens) // 2] / 1e3:.2f} s "
              f"over {len(opens)} openings; main-thread CPU best {cpu[0]:.2f} s, median {cpu[len(cpu) // 2]:.2f} s")


if __name__ == "__main__":
    main()
