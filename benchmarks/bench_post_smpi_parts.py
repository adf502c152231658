"""The parts of waitlab's work on a program run's critical path after the SMPI stage, timed one by one on the records
``bench_post_smpi.py --record`` stored (16 ranks of ``bsp.c``; 4.2 M events at 33,000 steps): reading the records,
records -> operations, the event table, wait states and the summary (issue 25).

    nice -n 10 .venv/bin/python benchmarks/bench_post_smpi.py --record --steps 33000    # once
    nice -n 10 .venv/bin/python benchmarks/bench_post_smpi_parts.py --steps 33000 --repeat 3

Each part is timed in CPU and wall seconds of this process; the first pass runs in a fresh process, as in a
``waitlab run`` (its new memory is first touched there, which costs much on a virtual machine), later passes reuse
memory the process already touched; both are printed.  The last line is a digest of the operation and event
tables, the wait states and the summary: equal digests from two versions mean equal tables, column by column.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.programs import program_binary
from waitlab.experiments.scenario import load_scenario
from waitlab.models.analysis.summary import summarize
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.columns import frame
from waitlab.simulator import program_records as prog
from waitlab.simulator.timeline import build_events

BSP = Path(__file__).resolve().parent.parent / "tests" / "programs" / "bsp.c"
SCENARIO = ('[scenario]\nname = "bsp"\nranks = 16\n[platform]\nname = "dawning_5000a"\n'
            '[application]\nkind = "program"\nsources = ["{bsp}"]\nargs = ["{steps}"]\n')


def digest(table: pd.DataFrame) -> str:
    """A hash of a table's columns (names, types, values; categories by their codes and labels)."""
    h = hashlib.sha256()
    for c in table.columns:
        s = table[c]
        h.update(f"{c}:{s.dtype}".encode())
        if isinstance(s.dtype, pd.CategoricalDtype):
            h.update(s.cat.codes.to_numpy().tobytes())
            h.update("\x00".join(map(str, s.cat.categories)).encode())
        else:
            h.update(np.ascontiguousarray(s.to_numpy()).tobytes())
    return h.hexdigest()[:16]


def timed(into: dict[str, tuple[float, float]], part: str, f: Callable[..., Any], *a: Any, **k: Any) -> Any:
    """``f(*a, **k)``, its CPU and wall seconds put in ``into[part]``."""
    c, w = time.process_time(), time.perf_counter()
    out = f(*a, **k)
    into[part] = (time.process_time() - c, time.perf_counter() - w)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=33000)
    ap.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "waitlab-bench-post-smpi")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-parts-") as tmp:
        (Path(tmp) / "s.toml").write_text(SCENARIO.format(bsp=BSP, steps=args.steps))
        binary = program_binary(load_scenario(Path(tmp) / "s.toml"))  # the stored run's program (cached build)
    passes: list[dict[str, tuple[float, float]]] = []
    digests: dict[str, str] = {}
    for _ in range(args.repeat):
        t: dict[str, tuple[float, float]] = {}
        rec = timed(t, "read records", prog.read_records, args.store / "records", 16)
        run = timed(t, "records -> operations", prog.records_to_ops, rec, binary, callsite_regions="auto")
        del rec
        events = timed(t, "event table", build_events, run.ops, run.t_enter, run.t_exit)
        waits = timed(t, "wait states", wait_states, events)
        summary = timed(t, "summary", summarize, events, waits)
        passes.append(t)
        ops = pd.DataFrame({c: getattr(run.ops, c) for c in run.ops.COLUMNS})
        digests = {"operations": digest(ops), "events": digest(frame(events)), "waits": digest(frame(waits)),
                   "summary": hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()[:16]}
        del run, events, waits, ops
    print(f"bsp.c, 16 ranks x {args.steps} steps: CPU s (wall s) of each part; first pass, then the best of "
          f"{len(passes)}")
    for part in passes[0]:
        best = min(p[part][0] for p in passes)
        print(f"  {part:22s} {passes[0][part][0]:6.2f} ({passes[0][part][1]:.2f})   best {best:6.2f}")
    critical = [k for k in passes[0] if k != "summary"]
    print(f"  {'read .. wait states':22s} {sum(passes[0][k][0] for k in critical):6.2f}"
          f"{'':10s}best {min(sum(p[k][0] for k in critical) for p in passes):6.2f}")
    print(f"load average {Path('/proc/loadavg').read_text().split()[0]}; digests {json.dumps(digests)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
