"""Benchmark: simulation wall time per alltoall point, before and after the calibrated machine models (issue 11).

"before" renders the same platform with SMPI's default factors and no per-message costs (what waitlab did
before issue 11); "after" adds the calibrated factors, per-message overheads and the send-order cost
(:func:`waitlab.experiments.reproduce.alltoall_points.contention_config`).  Both use the solver precision
of :data:`~waitlab.experiments.reproduce.alltoall_points.SOLVER_CONFIG`.  ``--precision`` instead compares
solver precisions on the same points (simulated times and wall times), to show the precision that lets the
all-concurrent algorithms finish at 256 ranks does not change results where the default also finishes.

Prints one line per point: algorithm, ranks, size, model, simulated ms, wall s (or the failure).

    .venv/bin/python benchmarks/bench_alltoall.py --ranks 256 --sizes 4096 --algorithms ring bruck pair
    .venv/bin/python benchmarks/bench_alltoall.py --ranks 64 128 --sizes 4096 --precision 1e-5 1e-4 1e-3
    .venv/bin/python benchmarks/bench_alltoall.py --ranks 64 --algorithms basic_linear --setting network/optim=Full

``--models ns-3`` simulates the same points with SimGrid's packet-level ns-3 binding on the star platform of
:mod:`waitlab.platforms.ns3` (a probe: TCP over IP switches; 50-1000 times the fluid model's wall time):

    .venv/bin/python benchmarks/bench_alltoall.py --ranks 64 --algorithms basic_linear ring pair --models ns-3

``--contention`` runs every point of the machine model without and with the platform's contention laws
(``[simulation] contention = "none"`` / ``"platform"``: HOL blocking, memory path) and prints both:

    .venv/bin/python benchmarks/bench_alltoall.py --ranks 64 128 --sizes 512 4096 65536 --contention

``--setting KEY=VALUE`` (repeatable) compares the calibrated model with and without that SimGrid setting, to look
for settings that keep the all-concurrent algorithms tractable without changing their times.
"""

from __future__ import annotations

import argparse
import time

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.reproduce.alltoall_points import alltoall_point
from waitlab.experiments.reproduce.rao_statements import ALGORITHMS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="dawning_5000a")
    ap.add_argument("--ranks", type=int, nargs="+", default=[256])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096])
    ap.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    ap.add_argument("--models", nargs="+", default=["smpi-default", "calibrated"])
    ap.add_argument("--precision", nargs="*", default=None,
                    help="compare these maxmin/precision values (calibrated model) instead of before/after")
    ap.add_argument("--setting", action="append", default=[],
                    help="KEY=VALUE SimGrid setting to compare against the calibrated model (repeatable)")
    ap.add_argument("--contention", action="store_true",
                    help="compare the machine model without and with the platform's contention laws")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()
    print(f"# {args.platform}, 8 ranks per node; simulated ms, wall s")
    t_all = time.perf_counter()
    for ranks in args.ranks:
        for size in args.sizes:
            for alg in args.algorithms:
                variants: list[tuple[str, str, dict[str, str]]]
                if args.contention:
                    variants = [("calibrated", "no contention", {}), ("calibrated", "contention", {})]
                elif args.precision:
                    variants = [("calibrated", f"precision {p}", {"maxmin/precision": p}) for p in args.precision]
                elif args.setting:
                    pairs = [kv.split("=", 1) for kv in args.setting]
                    variants = [("calibrated", "calibrated", {})]
                    variants += [("calibrated", f"{k}={v}", {k: v}) for k, v in pairs]
                else:
                    variants = [(m, m, {}) for m in args.models]
                for model, label, extra in variants:
                    try:
                        pt = alltoall_point(args.platform, alg, ranks, size, model=model, extra_config=extra,
                                            timeout=args.timeout, contention=label != "no contention")
                        res = f"{pt.seconds * 1e3:12.5f} ms {pt.wall:8.1f} s"
                    except InputError as exc:
                        res = f"refused: {exc.problem[:90]}"
                    except SimulationError as exc:
                        res = f"FAILED: {str(exc).splitlines()[0][:90]}"
                    print(f"{alg:13s} {ranks:5d} {size:8d} {label:16s} {res}", flush=True)
    print(f"# total wall {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
