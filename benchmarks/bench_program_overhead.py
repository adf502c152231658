"""waitlab's own work around a real program run (issue 25): seconds beside the SMPI stage, and where they go.

Runs ``tests/programs/bsp.c`` (10 layer records per rank and step) with ``--ranks`` ranks x ``--steps`` steps through
``waitlab.api.run`` into a results folder, then the same run with stock SimGrid alone (the folder's
``program/rerun/smpirun.sh``), and prints: the wall time of ``api.run``, its stages (build, SMPI, reading the
layer's records into the event table, wait states, writing the results folder), waitlab's own seconds (everything
but the SMPI stage) as a share of the SMPI stage, and the stock run's time.

    nice -n 10 .venv/bin/python benchmarks/bench_program_overhead.py --ranks 16 --steps 15000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from waitlab import api

BSP = Path(__file__).resolve().parent.parent / "tests" / "programs" / "bsp.c"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=15000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-overhead-") as tmp:
        folder = Path(tmp)
        (folder / "s.toml").write_text(
            f'[scenario]\nname = "bsp"\nranks = {args.ranks}\n[platform]\nname = "dawning_5000a"\n'
            f'[application]\nkind = "program"\nsources = ["{BSP}"]\nargs = ["{args.steps}"]\n')
        api.run(folder / "s.toml")  # build the program once (not part of the figures)
        t = time.perf_counter()
        run = api.run(folder / "s.toml", folder / "out")
        total = time.perf_counter() - t
        stages = dict(run.result.stage_seconds)
        timing = json.loads((folder / "out" / "timing.json").read_text())
        t = time.perf_counter()
        stock = subprocess.run(["sh", str(folder / "out" / "program" / "rerun" / "smpirun.sh")], capture_output=True,
                               text=True)
        stock_s = time.perf_counter() - t
    smpi = stages.get("smpi", 0.0)
    own = total - smpi
    events = len(run.result.events)
    print(f"bsp.c, {args.ranks} ranks x {args.steps} steps: {events:,} events, stock rerun exit {stock.returncode}")
    print(f"  waitlab run (results folder):  {total:8.2f} s")
    for k, v in sorted(stages.items()):
        print(f"    stage {k:<22} {v:8.2f} s")
    print(f"    writing the folder etc.      {total - sum(stages.values()):8.2f} s")
    print(f"  stock smpirun (rerun/):        {stock_s:8.2f} s")
    print(f"  waitlab's own work:            {own:8.2f} s = {100 * own / max(smpi, 1e-9):.1f}% of the SMPI stage")
    print(f"  (timing.json: {json.dumps(timing['stage_seconds'], sort_keys=True)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
