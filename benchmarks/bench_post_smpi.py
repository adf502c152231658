"""waitlab's own work after a program's SMPI stage, timed alone: the SMPI stage recorded once, then replayed.

On a shared machine the SMPI stage of ``bench_program_overhead.py`` moves by a third from run to run, and with it
the load under which waitlab's own work is timed. This script runs ``tests/programs/bsp.c`` (16 ranks x ``--steps``)
once with ``--record`` and keeps the measurement layer's records and SimGrid's answer in ``--store``; every later
run (``--replay``) hands those to ``waitlab.api.run`` in place of ``smpirun`` (records linked, not copied), so it
times only what waitlab does around the SMPI stage (reading the records, the event table, wait states, the results
folder), wall and CPU seconds of the whole process, all threads. Before/after comparisons: run ``--replay`` with each
version's Python in turn (the store is plain files; the records are the layer's binary format).

    nice -n 10 .venv/bin/python benchmarks/bench_post_smpi.py --record --steps 33000    # ~4.2 M events, ~1 min
    nice -n 10 .venv/bin/python benchmarks/bench_post_smpi.py --replay --steps 33000    # ~10 s
"""

from __future__ import annotations

import argparse
import pickle
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.simulator import programs as prog

BSP = Path(__file__).resolve().parent.parent / "tests" / "programs" / "bsp.c"
SCENARIO = ('[scenario]\nname = "bsp"\nranks = 16\n[platform]\nname = "dawning_5000a"\n'
            '[application]\nkind = "program"\nsources = ["{bsp}"]\nargs = ["{steps}"]\n')


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime + ch.ru_utime + ch.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="run SMPI and keep its records in --store")
    mode.add_argument("--replay", action="store_true", help="time waitlab's work on the stored records")
    ap.add_argument("--steps", type=int, default=33000)
    ap.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "waitlab-bench-post-smpi")
    ap.add_argument("--keep", type=Path, help="copy the results folder's events.parquet here (to compare versions)")
    args = ap.parse_args()
    real = prog.run_program
    timed = [False]  # the warm-up run (build, imports) runs SMPI for real

    def recording(*a: Any, **k: Any) -> Any:
        res = real(*a, **k)
        if timed[0]:
            shutil.rmtree(args.store, ignore_errors=True)
            shutil.copytree(a[4], args.store / "records")
            (args.store / "smpi.pickle").write_bytes(pickle.dumps(res))
        return res

    def replaying(*a: Any, **k: Any) -> Any:
        if not timed[0]:
            return real(*a, **k)
        out_dir = Path(a[4])
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.symlink_to(args.store / "records")
        return pickle.loads((args.store / "smpi.pickle").read_bytes())

    prog.run_program = recording if args.record else replaying  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(prefix="waitlab-bench-post-smpi-") as tmp:
        folder = Path(tmp)
        (folder / "warm.toml").write_text(SCENARIO.format(bsp=BSP, steps=1))
        api.run(folder / "warm.toml", folder / "warm")
        (folder / "s.toml").write_text(SCENARIO.format(bsp=BSP, steps=args.steps))
        timed[0] = True
        w, c = time.perf_counter(), _cpu()
        run = api.run(folder / "s.toml", folder / "out")
        wall, cpu = time.perf_counter() - w, _cpu() - c
        if args.keep is not None:
            shutil.copy(folder / "out" / "events.parquet", args.keep)
    load = Path("/proc/loadavg").read_text().split()[0]
    what = "SMPI stage + waitlab's work (recorded)" if args.record else "waitlab's own work (SMPI stage replayed)"
    print(f"bsp.c, 16 ranks x {args.steps} steps, {len(run.result.events):,} events: {what}: "
          f"{wall:.2f} s wall, {cpu:.2f} s CPU (load average {load})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
