"""The Scalasca cross-check of every suite case (issue 38): the table of docs/diagnosis.md, "Scalasca".

For each case of the built-in suite (or ``--only`` some): simulate it, export OTF2, run Scalasca's
``scout.mpi`` (default options: root cause and critical path on), and print one Markdown row per case and
pattern: waitlab's total, Scalasca's total, their relative difference, and the largest per-rank difference.
Cases with more ranks than ``--max-ranks`` are listed as not run (``scout.mpi`` needs one MPI process per
rank: a 256-rank case takes about a minute on two cores, the whole suite about 30 minutes).

    .venv/bin/python benchmarks/scalasca_table.py --out /tmp/scalasca-table --max-ranks 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from waitlab import api
from waitlab.experiments.diagnosis.suite import load_suite
from waitlab.experiments.results import load_run
from waitlab.experiments.scalasca_check import compare_waits, pattern_totals, scout_run_folder
from waitlab.simulator.scalasca import find_scalasca


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the runs and their exports")
    ap.add_argument("--only", nargs="*", default=(), help="cases whose name contains one of these")
    ap.add_argument("--max-ranks", type=int, default=64)
    args = ap.parse_args(argv)
    prefix, reason = find_scalasca()
    if prefix is None:
        print(reason, file=sys.stderr)
        return 1
    print("| case | pattern | waitlab (s) | Scalasca (s) | rel. diff. | max per-rank diff. (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in load_suite(None, args.only):
        if case.scenario.ranks > args.max_ranks:
            print(f"| {case.name} | (not run: {case.scenario.ranks} ranks) | | | | |", flush=True)
            continue
        folder = args.out / case.name
        t0 = time.perf_counter()
        if not (folder / "events.parquet").is_file():
            api.run(case.file, folder, force=True, png=False)
        try:
            cubex = scout_run_folder(folder, timeout=1800)
        except Exception as exc:  # a failing case is a row of the table, not the end of it
            print(f"| {case.name} | scout failed: {str(exc)[:160]} | | | | |", flush=True)
            continue
        cmp = compare_waits(load_run(folder).waits, cubex)
        per_rank = (cmp["scalasca"] - cmp["waitlab"]).abs().groupby(cmp["pattern"]).max()
        totals = pattern_totals(cmp)
        if totals.empty:
            print(f"| {case.name} | (no wait state in either) | 0 | 0 | 0 | 0 |", flush=True)
        for _, row in totals.iterrows():
            print(f"| {case.name} | {row['pattern']} | {row['waitlab']:.6g} | {row['scalasca']:.6g} | "
                  f"{row['rel']:.2e} | {per_rank[row['pattern']]:.2e} |", flush=True)
        print(f"{case.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
