"""The two pictures of a results folder, timed alone: ``timeline.png`` and ``report.html`` (issue 25).

``waitlab run`` draws both on its main thread after the SMPI stage. This script reads a results folder back (or,
with ``--store``, first writes one from the SMPI records that ``bench_post_smpi.py --record`` kept, without running
SMPI), then calls :func:`~waitlab.experiments.report.plots.timeline_png` and
:func:`~waitlab.experiments.report.html.write_html_report` on its tables ``--repeat`` times each in this process and
prints the CPU seconds of each call (``time.process_time``: all threads, the load does not inflate it as much as
the wall clock) and the wall seconds. The first call of each is cold (fonts, templates, Bokeh's classes), as in a
run; the later ones are warm.

    nice -n 10 .venv/bin/python benchmarks/bench_pictures.py --store /tmp/waitlab-bench-post-smpi --steps 33000
    nice -n 10 .venv/bin/python benchmarks/bench_pictures.py RESULTS_FOLDER
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab import api
from waitlab.experiments.report.html import write_html_report
from waitlab.experiments.report.plots import timeline_png
from waitlab.experiments.results import load_run
from waitlab.simulator import programs as prog

BSP = Path(__file__).resolve().parent.parent / "tests" / "programs" / "bsp.c"
SCENARIO = ('[scenario]\nname = "bsp"\nranks = 16\n[platform]\nname = "dawning_5000a"\n'
            '[application]\nkind = "program"\nsources = ["{bsp}"]\nargs = ["{steps}"]\n')


def replayed_folder(store: Path, steps: int, out: Path) -> Path:
    """A results folder of ``bsp.c`` x ``steps`` written from the records in ``store`` (no SMPI run)."""
    def replaying(*a: Any, **k: Any) -> Any:
        out_dir = Path(a[4])
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.symlink_to(store / "records")
        return pickle.loads((store / "smpi.pickle").read_bytes())

    prog.run_program = replaying  # type: ignore[assignment]
    (out / "s.toml").write_text(SCENARIO.format(bsp=BSP, steps=steps))
    api.run(out / "s.toml", out / "run")
    return out / "run"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, list[float]]:
    """CPU and wall seconds of the first call, and the CPU seconds of the later ones."""
    runs = []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.process_time() - c, time.perf_counter() - w))
    return runs[0][0], runs[0][1], [c for c, _ in runs[1:]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path, help="a results folder of `waitlab run`")
    ap.add_argument("--store", type=Path, help="records kept by bench_post_smpi.py --record (instead of a folder)")
    ap.add_argument("--steps", type=int, default=33000, help="the steps of the recorded run (with --store)")
    ap.add_argument("--repeat", type=int, default=5, help="calls of each (the first is cold; default 5)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-pictures-") as tmp:
        folder = replayed_folder(args.store, args.steps, Path(tmp)) if args.store else args.folder
        if folder is None:
            ap.error("give a results folder or --store")
        run = load_run(folder)
        summary = json.loads((run.folder / "summary.json").read_text())
        budget = pd.read_parquet(run.folder / "ranks.parquet")
        ledger = run.ledger()
        out = Path(tmp) / "pictures"
        out.mkdir()
        parts = {
            "timeline.png": lambda: timeline_png(run.events, run.waits, out / "timeline.png", title="bench"),
            "report.html": lambda: write_html_report(out, run.metadata, summary, run.events, run.waits, budget,
                                                     ledger),
        }
        print(f"{folder.name}: {len(run.events):,} events, {len(run.waits):,} wait states")
        for name, fn in parts.items():
            cpu, wall, warm = timed(fn, args.repeat)
            later = (f"; later calls {statistics.median(warm):.3f} CPU s (median of {len(warm)}, {min(warm):.3f} to "
                     f"{max(warm):.3f})") if warm else ""
            print(f"{name}: first call {cpu:.3f} CPU s ({wall:.3f} s wall){later}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
