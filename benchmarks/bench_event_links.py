"""The event table's message matching, request completions and collective instances: numpy versions against the one
C pass (``waitlab.simulator.native_matching``, issue 25), on the operations of the run ``bench_post_smpi.py``
recorded (16 ranks of ``bsp.c``, ~5.8 M operation rows at 33,000 steps).

    nice -n 10 .venv/bin/python benchmarks/bench_post_smpi.py --record --steps 33000    # once
    nice -n 10 .venv/bin/python benchmarks/bench_event_links.py --steps 33000

The script replays the stored records through ``api.run`` once (as ``bench_post_smpi.py --replay``) to get the
operation table, then times, ``--repeat`` times and in CPU seconds of this process: the three numpy passes, the C
pass, and :func:`~waitlab.simulator.timeline.build_events` with each (alternately first).  It also checks that both
give the same arrays and the same event table.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import OpTable
from waitlab.simulator import native_matching, timeline
from waitlab.simulator.matching import completions, match_messages

HERE = Path(__file__).resolve().parent


def _numpy_links(ops: OpTable, instances: Any) -> tuple[npt.NDArray[np.int64], ...]:
    m = match_messages(ops)
    return m, completions(ops, m), instances(ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=33000)
    ap.add_argument("--store", type=Path, help="bench_post_smpi.py's --store (its default if not given)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    captured: list[OpTable] = []
    c_links = timeline._links

    def capture(ops: OpTable, instances: Any) -> Any:
        captured.append(ops)
        return c_links(ops, instances)

    timeline._links = capture  # type: ignore[assignment]
    argv = sys.argv
    sys.argv = ["bench_post_smpi.py", "--replay", "--steps", str(args.steps),
                *(["--store", str(args.store)] if args.store else [])]
    try:
        runpy.run_path(str(HERE / "bench_post_smpi.py"), run_name="__main__")
    except SystemExit as e:
        if e.code:
            raise
    sys.argv = argv
    timeline._links = c_links  # type: ignore[assignment]
    ops = max(captured, key=len)
    captured.clear()
    te = np.cumsum(np.full(len(ops), 1e-6))
    tx = te + 5e-7
    want = _numpy_links(ops, timeline.collective_instances)
    got = native_matching.links(ops, timeline.collective_instances)
    same = all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    del got, want
    for rep in range(args.repeat):
        t0 = time.process_time()
        m = match_messages(ops)
        t1 = time.process_time()
        d = completions(ops, m)
        t2 = time.process_time()
        i = timeline.collective_instances(ops)
        t3 = time.process_time()
        del m, d, i
        g = native_matching.links(ops, timeline.collective_instances)
        t4 = time.process_time()
        del g
        times = {}
        for which in (("numpy", "C") if rep % 2 == 0 else ("C", "numpy")):  # alternate which goes first
            timeline._links = _numpy_links if which == "numpy" else c_links  # type: ignore[assignment]
            t5 = time.process_time()
            ev = timeline.build_events(ops, te, tx)
            times[which] = time.process_time() - t5
            if which == "numpy":
                ev_numpy = ev
            else:
                ev_c = ev
            del ev
        timeline._links = c_links  # type: ignore[assignment]
        same = same and ev_c.equals(ev_numpy)  # Arrow tables: equal values and types
        del ev_numpy, ev_c
        print(f"{len(ops):,} operation rows: numpy match_messages {t1 - t0:.3f} + completions {t2 - t1:.3f} + "
              f"collective_instances {t3 - t2:.3f} = {t3 - t0:.3f} CPU s; C {t4 - t3:.3f} CPU s; build_events "
              f"with numpy {times['numpy']:.3f}, with C {times['C']:.3f} CPU s")
    print("same arrays and event tables" if same else "RESULTS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
