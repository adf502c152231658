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

``--scaling`` prints the cost of the Rao grid's points as the ranks grow (calibrated model, ranks entering
together, see :mod:`waitlab.experiments.reproduce.alltoall_points`): MPICH native, LAM simple, ring, pair and
Bruck at 512 B, 4 KB, 64 KB and 512 KB on 64 / 128 / 256 ranks (the point of the one machine model: every
rank enters at time 0, no barrier first; docs/performance.md gives the measured change against a barrier start).
Every line also gives the CPU seconds of the SimGrid process, which a shared machine inflates less than wall time:

    .venv/bin/python benchmarks/bench_alltoall.py --scaling
    .venv/bin/python benchmarks/bench_alltoall.py --scaling --contention --ranks 256 --sizes 512 4096 16384 262144 \
        --algorithms ring pair bruck

With ``--scaling``, ``--contention`` prints every point without and with the contention laws, and ``--setting
KEY=VALUE`` adds a SimGrid setting to every point (``[simulation] config``).
    .venv/bin/python benchmarks/bench_alltoall.py --ranks 1024 --sizes 4096 --algorithms basic_linear lam_simple \
        --models calibrated
"""

from __future__ import annotations

import argparse
import resource
import time

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.reproduce.alltoall_points import POINT_SIMULATION, AlltoallPoint, alltoall_point
from waitlab.experiments.reproduce.rao_statements import ALGORITHMS
from waitlab.platforms.machine import solver_settings

#: ``--scaling``: the algorithms and sizes of issue 22's cost table.
SCALING_ALGORITHMS: tuple[str, ...] = ("basic_linear", "lam_simple", "ring", "pair", "bruck")
SCALING_SIZES: tuple[int, ...] = (512, 4096, 65536, 524288)
SCALING_RANKS: tuple[int, ...] = (64, 128, 256)


def _children_cpu() -> float:
    """User + system CPU seconds of every finished child process (SimGrid's, once a point returns)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed_point(*args: object, **kwargs: object) -> tuple[AlltoallPoint | None, str, float]:
    """One point: (result or None, text of the result or failure, CPU seconds of SimGrid)."""
    cpu = _children_cpu()
    try:
        pt = alltoall_point(*args, **kwargs)  # type: ignore[arg-type]
        return pt, f"{pt.seconds * 1e3:12.5f} ms {pt.wall:8.1f} s wall {_children_cpu() - cpu:8.1f} s cpu", pt.wall
    except InputError as exc:
        return None, f"refused: {exc.problem[:90]}", 0.0
    except SimulationError as exc:
        return None, f"FAILED: {str(exc).splitlines()[0][:90]}", float("inf")


def scaling(platform: str, ranks: list[int], sizes: list[int], algorithms: list[str], timeout: float,
            contention: tuple[bool, ...] = (True,), extra: dict[str, str] | None = None) -> None:
    """Print the cost of every point (the machine model's point: every rank enters the alltoall at time 0).

    ``contention`` lists the variants run per point: with the platform's contention laws (True) and/or without
    (False, ``[simulation] contention = "none"``); ``extra`` adds ``[simulation] config`` settings to every point.
    """
    print(f"# {platform}, 8 ranks per node, calibrated model; algorithm ranks size contention: simulated ms, "
          "wall s, SimGrid CPU s")
    too_slow: set[tuple[str, int, bool]] = set()  # (algorithm, size, contention) past the time limit: skip more ranks
    for n in ranks:
        for size in sizes:
            for alg in algorithms:
                for cont in contention:
                    label = "platform" if cont else "none"
                    if (alg, size, cont) in too_slow:
                        print(f"{alg:13s} {n:5d} {size:8d} {label:8s} skipped (timed out at fewer ranks)")
                        continue
                    _, text, wall = _timed_point(platform, alg, n, size, model="calibrated", timeout=timeout,
                                                 contention=cont, extra_config=extra or None)
                    if wall == float("inf"):
                        too_slow.add((alg, size, cont))
                    print(f"{alg:13s} {n:5d} {size:8d} {label:8s} {text}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="dawning_5000a")
    ap.add_argument("--ranks", type=int, nargs="+", default=None, help="default 256 (--scaling: 64 128 256)")
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="default 4096 (--scaling: 512 B..512 KB)")
    ap.add_argument("--algorithms", nargs="+", default=None, help="default all eight (--scaling: five)")
    ap.add_argument("--models", nargs="+", default=["smpi-default", "calibrated"])
    ap.add_argument("--precision", nargs="*", default=None,
                    help="compare these maxmin/precision values (calibrated model) instead of before/after")
    ap.add_argument("--setting", action="append", default=[],
                    help="KEY=VALUE SimGrid setting to compare against the calibrated model (repeatable)")
    ap.add_argument("--contention", action="store_true",
                    help="compare the machine model without and with the platform's contention laws")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--scaling", action="store_true",
                    help="cost of MPICH native, LAM simple, ring, pair, Bruck at 512 B..512 KB on 64/128/256 ranks")
    args = ap.parse_args()
    if args.scaling:
        t_all = time.perf_counter()
        scaling(args.platform, args.ranks or list(SCALING_RANKS), args.sizes or list(SCALING_SIZES),
                args.algorithms or list(SCALING_ALGORITHMS), args.timeout,
                (False, True) if args.contention else (True,),
                dict(kv.split("=", 1) for kv in args.setting))
        print(f"# total wall {time.perf_counter() - t_all:.0f} s")
        return
    args.ranks, args.sizes = args.ranks or [256], args.sizes or [4096]
    args.algorithms = args.algorithms or list(ALGORITHMS)
    print(f"# {args.platform}, 8 ranks per node; simulated ms, wall s")
    t_all = time.perf_counter()
    for ranks in args.ranks:
        for size in args.sizes:
            for alg in args.algorithms:
                variants: list[tuple[str, str, dict[str, str]]]
                if args.contention:
                    variants = [("calibrated", "no contention", {}), ("calibrated", "contention", {})]
                elif args.precision:
                    variants = [("calibrated", f"precision {p}",
                                 solver_settings(float(p), POINT_SIMULATION["timing_precision"]))
                                for p in args.precision]
                elif args.setting:
                    pairs = [kv.split("=", 1) for kv in args.setting]
                    variants = [("calibrated", "calibrated", {})]
                    variants += [("calibrated", f"{k}={v}", {k: v}) for k, v in pairs]
                else:
                    variants = [(m, m, {}) for m in args.models]
                for model, label, extra in variants:
                    _, res, _ = _timed_point(args.platform, alg, ranks, size, model=model, extra_config=extra,
                                             timeout=args.timeout, contention=label != "no contention")
                    print(f"{alg:13s} {ranks:5d} {size:8d} {label:16s} {res}", flush=True)
    print(f"# total wall {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
