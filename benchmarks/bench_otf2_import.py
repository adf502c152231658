"""Benchmark of the OTF2 import (issue 25): events/s and peak memory of reading an archive into an operation table.

Writes (once, cached under ``--work``) an OTF2 archive with OTF2's own Python writer: ``--ranks`` ranks x
``--steps`` steps of a Score-P-like BSP step (a user region around compute, a ring halo exchange with
MPI_Isend / MPI_Irecv / MPI_Waitall, an MPI_Allreduce): 22 events per rank and step.  Then, in a fresh
process, reads it with :func:`waitlab.simulator.otf2_import.read_otf2` (C event reader) and converts it with
:func:`waitlab.models.otf2_ops.records_to_ops`, and prints the wall time and events/s of each stage and of
both, and the process's peak resident memory above its baseline (``ru_maxrss``) per event.

    nice -n 10 .venv/bin/python benchmarks/bench_otf2_import.py --ranks 64 --steps 800
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import otf2
from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole

from waitlab.models.otf2_ops import records_to_ops
from waitlab.simulator.otf2_import import read_otf2, reader_library

EVENTS_PER_STEP = 24


def write_archive(folder: Path, ranks: int, steps: int) -> Path:
    """A synthetic Score-P-like archive (module docstring)."""
    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        node = d.system_tree_node("machine")
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                           group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(ranks)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=list(range(ranks))))
        reg = {n: d.region(n, region_role=role, paradigm=p) for n, role, p in (
            ("solve", RegionRole.FUNCTION, Paradigm.COMPILER), ("MPI_Isend", RegionRole.POINT2POINT, Paradigm.MPI),
            ("MPI_Irecv", RegionRole.POINT2POINT, Paradigm.MPI), ("MPI_Waitall", RegionRole.POINT2POINT, Paradigm.MPI),
            ("MPI_Allreduce", RegionRole.COLL_ALL2ALL, Paradigm.MPI))}
        for r in range(ranks):
            w = trace.event_writer_from_location(locs[r])
            t, req = 0, 0
            for _ in range(steps):
                w.enter(t, reg["solve"])
                t += 100_000
                w.leave(t, reg["solve"])
                for peer in ((r + 1) % ranks, (r - 1) % ranks):
                    w.enter(t, reg["MPI_Isend"])
                    w.mpi_isend(t, peer, world, 1, 4096, req)
                    w.leave(t + 100, reg["MPI_Isend"])
                    req += 1
                    t += 200
                for _ in range(2):  # from r - 1, then from r + 1 (the partners come with the completions)
                    w.enter(t, reg["MPI_Irecv"])
                    w.mpi_irecv_request(t, req)
                    w.leave(t + 100, reg["MPI_Irecv"])
                    req += 1
                    t += 200
                w.enter(t, reg["MPI_Waitall"])
                t += 1000
                for k in (4, 3, 2, 1):
                    if k in (4, 3):
                        w.mpi_isend_complete(t, req - k)
                    else:
                        peer = (r - 1) % ranks if k == 2 else (r + 1) % ranks
                        w.mpi_irecv(t, peer, world, 1, 4096, req - k)
                w.leave(t, reg["MPI_Waitall"])
                w.enter(t, reg["MPI_Allreduce"])
                w.mpi_collective_begin(t)
                t += 5000
                w.mpi_collective_end(t, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 8 * ranks, 8 * ranks)
                w.leave(t, reg["MPI_Allreduce"])
    return folder / "traces.otf2"


def measure(anchor: Path) -> dict[str, float]:
    """Read and convert ``anchor`` in this process; times and peak memory."""
    reader_library()  # built once, not timed
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    rec = read_otf2(anchor)
    t1, c1 = time.perf_counter(), time.process_time()
    ops = records_to_ops(rec)
    t2, c2 = time.perf_counter(), time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    n = int(rec.kind.size)
    return {"events": n, "operations": len(ops), "read_s": t1 - t0, "convert_s": t2 - t1, "read_cpu": c1 - c0,
            "convert_cpu": c2 - c1, "peak_kib": peak}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--work", type=Path, default=Path("/tmp/waitlab-bench-otf2"))
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # internal: the fresh process
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    folder = args.work / f"r{args.ranks}-s{args.steps}"
    anchor = folder / "traces.otf2"
    if not anchor.is_file():
        t = time.perf_counter()
        write_archive(folder, args.ranks, args.steps)
        print(f"wrote {args.ranks * args.steps * EVENTS_PER_STEP:,} events with OTF2's Python writer in "
              f"{time.perf_counter() - t:.1f} s: {anchor}")
    out = subprocess.run([sys.executable, __file__, "--measure", str(anchor)], capture_output=True, text=True,
                         check=True)
    m = json.loads(out.stdout.splitlines()[-1])
    n = m["events"]
    total = m["read_s"] + m["convert_s"]
    print(f"{args.ranks} ranks x {args.steps} steps: {n:,} events -> {m['operations']:,} operations")
    cpu = m["read_cpu"] + m["convert_cpu"]
    print("  stage                          wall                     CPU (this process)")
    for label, w, c in (("read (C reader + definitions)", m["read_s"], m["read_cpu"]),
                        ("convert (numpy)", m["convert_s"], m["convert_cpu"]), ("import total", total, cpu)):
        print(f"  {label:<30} {w:6.3f} s {n / w / 1e6:5.2f} M events/s   {c:6.3f} s {n / c / 1e6:5.2f} M events/s")
    print(f"  peak memory above baseline:    {m['peak_kib'] / 1024:.0f} MiB  ({m['peak_kib'] * 1024 / n:.0f} B/event)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
