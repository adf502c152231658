"""Cost of waitlab's measurement layer on real MPI programs under SMPI (issue 5).

The same program is built twice with ``smpicc``: plain, and linked with waitlab's
PMPI layer (``simulator/native/waitlab_pmpi.c``).  Both run under ``smpirun``
with the same platform and settings (privatization on, deterministic:
``smpi/simulate-computation:no``); the wall time of each run is the median of
``--repeat`` runs.  Reported: the ratio with/without the layer, the layer's
cost per recorded event, events recorded per second of run, and the speed of
turning the records into the event table (read, call-site naming,
``build_events``), and the time to draw the timeline picture of ``--picture-events`` events (100,000 by default:
16 ranks of alternating compute and MPI events, one in ten waiting).

The program is ``tests/programs/bsp.c`` (10 records per rank and step: region
markers, irecv/isend/waitall halo, allreduce); ``--nas`` adds NAS IS class S
from SimGrid's source package when it can be fetched.

    .venv/bin/python benchmarks/bench_realapps.py                  # 8 ranks x 2000 steps
    .venv/bin/python benchmarks/bench_realapps.py --ranks 16 --steps 4000 --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.errors import EnvironmentProblem
from waitlab.experiments.nas import NAS, fetch_simgrid_sources
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.report.plots import timeline_png
from waitlab.experiments.scenario import from_mapping
from waitlab.platforms.machine import program_settings
from waitlab.simulator.build import cache_dir
from waitlab.simulator.programs import (
    build_program,
    read_records,
    records_to_ops,
    run_program,
    sources_digest,
)
from waitlab.simulator.smpi import run_smpirun
from waitlab.simulator.timeline import build_events

ROOT = Path(__file__).resolve().parents[1]
BSP = ROOT / "tests" / "programs" / "bsp.c"


def plain_build(sources: list[Path], name: str) -> Path:
    """The program built by smpicc without waitlab's layer (cached next to the layered build)."""

    target = cache_dir() / "programs" / f"{name}-plain-{sources_digest(sources)}"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        inc = [f"-I{ROOT / 'simulator' / 'native'}", f"-I{sources[0].parent}"]
        subprocess.run(["smpicc", "-O2", "-g", *inc, *map(str, sources), "-o", str(target), "-lm"], check=True)
    return target


def timed_runs(binary: Path, ranks: int, args: list[str], repeat: int, layer: bool) -> tuple[float, int, float]:
    """Median wall seconds of ``repeat`` runs; records and the parse seconds of the last layered run."""

    sc = from_mapping({"scenario": {"name": "bench", "ranks": ranks}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "pingpong", "steps": 1}}, "<bench>")
    platform = prepare(sc).platform
    walls: list[float] = []
    records = 0
    parse = 0.0
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-") as tmp:
        work = Path(tmp)
        xml, hostfile = platform.write(work)
        out = work / "records"
        for _ in range(repeat):
            if layer:
                res = run_program(binary, ranks, xml, hostfile, out, args=args, config=program_settings(), cwd=work)
                walls.append(res.wall_seconds)
            else:
                res = run_smpirun(binary, ranks, xml, hostfile, args=args, config=program_settings(), cwd=work,
                                  privatize=True)
                walls.append(res.wall_seconds)
        if layer:
            t = time.perf_counter()
            rec = read_records(out, ranks)
            run = records_to_ops(rec, binary)
            build_events(run.ops, run.t_enter, run.t_exit)
            parse = time.perf_counter() - t
            records = len(rec)
    return statistics.median(walls), records, parse


def measure(name: str, sources: list[Path], ranks: int, args: list[str], repeat: int) -> dict[str, Any]:
    layered = build_program(sources, name=f"bench-{name}")
    plain = plain_build(sources, f"bench-{name}")
    w0, _, _ = timed_runs(plain, ranks, args, repeat, layer=False)
    w1, records, parse = timed_runs(layered, ranks, args, repeat, layer=True)
    return {
        "program": name, "ranks": ranks, "args": args, "repeat": repeat,
        "wall_without_layer_s": w0, "wall_with_layer_s": w1, "ratio": w1 / w0 if w0 > 0 else float("nan"),
        "records": records, "layer_cost_per_record_us": 1e6 * (w1 - w0) / records if records else float("nan"),
        "records_per_s_of_run": records / w1 if w1 > 0 else float("nan"),
        "parse_s": parse, "parse_records_per_s": records / parse if parse > 0 else float("nan"),
    }  # fmt: skip


def picture_seconds(n_events: int, ranks: int = 16) -> float:
    """Wall seconds of :func:`timeline_png` for ``n_events`` events on ``ranks`` ranks (best of 2)."""
    per = n_events // ranks
    rank = np.repeat(np.arange(ranks), per)
    k = np.tile(np.arange(per), ranks)
    enter = k * 1e-3 + rank * 1e-5
    events = pd.DataFrame({"rank": rank, "kind": pd.Categorical(np.where(k % 2, "mpi", "compute")),
                           "enter": enter, "exit": enter + 0.9e-3, "step": k // 10})
    w = np.flatnonzero(k % 10 == 1)
    waits = pd.DataFrame({"event": w, "rank": rank[w], "wait": np.full(w.size, 0.5e-3), "step": k[w] // 10})
    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-") as tmp:
        for _ in range(2):
            t = time.perf_counter()
            timeline_png(events, waits, Path(tmp) / "timeline.png", title="bench")
            best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--nas", action="store_true", help="also NAS IS class S (fetches SimGrid's source package)")
    p.add_argument("--json", type=Path, default=None, help="write the results there")
    p.add_argument("--picture-events", type=int, default=100_000, help="events of the timeline picture timed")
    a = p.parse_args(argv)
    pic = picture_seconds(a.picture_events)
    print(f"timeline picture of {a.picture_events} events (16 ranks): {pic:.2f} s")
    results: list[dict[str, Any]] = [measure("bsp", [BSP], a.ranks, [str(a.steps)], a.repeat)]
    if a.nas:
        try:
            nas = fetch_simgrid_sources() / "examples" / "smpi" / "NAS"
            results.append(measure("nas-is-S", [nas / s for s in NAS["is"]["sources"]], a.ranks,
                                   [str(a.ranks), "S"], a.repeat))
        except EnvironmentProblem as exc:
            print(f"NAS skipped: {exc}", file=sys.stderr)
    for r in results:
        print(f"{r['program']}: {r['ranks']} ranks, {r['records']} records: smpirun {r['wall_without_layer_s']:.3f} s "
              f"without the layer, {r['wall_with_layer_s']:.3f} s with it (x{r['ratio']:.3f}, "
              f"layer overhead {r['layer_cost_per_record_us']:.2f} us per MPI call (record)); "
              f"{r['records_per_s_of_run']:.0f} records per s "
              f"of run; records -> event table {r['parse_s']:.3f} s ({r['parse_records_per_s']:.0f} records/s)")
    if a.json:
        a.json.write_text(json.dumps({"picture_seconds": pic, "picture_events": a.picture_events,
                                      "programs": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
