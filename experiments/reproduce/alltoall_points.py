"""One alltoall point simulated with SMPI: (platform, algorithm, ranks, bytes) -> simulated and wall time.

Shared by the Rao et al. reproduction (:mod:`waitlab.experiments.reproduce.rao_alltoall`) and
``benchmarks/bench_alltoall.py``.  A point is one ``MPI_Alltoall`` of ``size`` bytes per rank pair on
``ranks`` ranks, ``ranks_per_node`` per node (Rao et al. ran 8 per node, section 4.2), every rank starting at
time 0, as the paper timed it (``MPI_Wtime`` around one call); the time is the latest exit.

``model="calibrated"`` (the default) runs the point as a scenario (:func:`point_scenario`: application
``fft`` with one step, no compute, ``bytes_per_peer = size``) through THE pipeline
(:func:`waitlab.experiments.pipeline.prepare`, :func:`~waitlab.experiments.pipeline.simulate_ops`): the
machine model is :func:`waitlab.platforms.machine.machine_settings`, the same as ``waitlab run``'s; the only
choices a point makes are scenario options a user can set too (``[simulation] timing_precision`` and
``solver_precision``, :data:`POINT_SIMULATION`; ``contention``).  ``waitlab run`` of
``point_scenario(...).to_toml()`` gives the same bytes (tests/test_machine_model.py).

Two probes that are *not* the machine model remain for comparisons: ``"smpi-default"`` (the same links with
SMPI's default factors and no per-message costs: what waitlab did before issue 11) and ``"ns-3"`` (SimGrid's
packet-level ns-3 binding on a star of point-to-point links at the MPI-level figures,
:mod:`waitlab.platforms.ns3`).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from waitlab.errors import SimulationError
from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.apps.alltoall import check_alltoall_point, emit_alltoall
from waitlab.models.columns import frame
from waitlab.models.ops import OpBuilder
from waitlab.platforms import load_platform, render_platform
from waitlab.platforms.machine import alltoall_settings, replay_settings, send_order_config, solver_settings
from waitlab.platforms.ns3 import NS3_CONFIG, ns3_star
from waitlab.simulator.replay import replay_ops

__all__ = ["MODELS", "POINT_SIMULATION", "SOLVER_CONFIG", "AlltoallPoint", "alltoall_point", "contention_config",
           "point_scenario"]

#: Machine models a point can be simulated with.
MODELS: tuple[str, ...] = ("calibrated", "smpi-default", "ns-3")

#: The ``[simulation]`` options of every point (scenario options a user can set the same way): the timing
#: precision that keeps the all-concurrent algorithms tractable, and the solver precision that lets them finish
#: at 256 ranks (docs/calibration.md, "Solver precision", measures what they change).
POINT_SIMULATION: dict[str, float] = {"solver_precision": 1e-3, "timing_precision": 1e-7}

#: The same as SimGrid settings (:func:`waitlab.platforms.machine.solver_settings`), for the probes that bypass the
#: pipeline (``smpi-default``, ``ns-3``).  SimGrid 3.32 aborts the all-concurrent algorithms (basic_linear,
#: LAM simple) at 256 ranks with the default absolute precision ("Cannot saturate more a constraint that has
#: no active element", or a segfault); a solver precision of 1e-3 completes them.  A timing precision
#: (1e-9 s by default) of 1e-7 s lets SimGrid handle the per-message events of one
#: tenth of a microsecond together: the all-concurrent algorithms run 2-4 times faster, their times move by
#: at most 0.3%, the step-wise ones by at most 0.02% (docs/calibration.md, "Solver precision").
SOLVER_CONFIG: dict[str, str] = solver_settings(**POINT_SIMULATION)


def contention_config(platform: str) -> dict[str, str]:
    """The platform's send-order cost (:func:`waitlab.platforms.machine.send_order_config`; kept for callers)."""
    return send_order_config(load_platform(platform))


def point_scenario(platform: str, algorithm: str, ranks: int, size: int, *, ranks_per_node: int = 8,
                   contention: str = "platform", timeout: float = 600.0) -> Scenario:
    """The scenario of one point: ``fft``, one step, no compute, one alltoall of ``size`` bytes per rank pair.

    Its ``[simulation]`` holds :data:`POINT_SIMULATION` and ``contention``; ``waitlab run`` of its TOML
    (``point_scenario(...).to_toml()``) is the same run.
    """
    return from_mapping({
        "scenario": {"name": f"alltoall-{algorithm}-{ranks}-{size}", "ranks": ranks},
        "platform": {"name": platform, "ranks_per_node": ranks_per_node},
        "application": {"kind": "fft", "steps": 1, "compute_seconds": 0.0, "bytes_per_peer": size,
                        "alltoall_algorithm": algorithm},
        "simulation": {"timeout": timeout, "contention": contention, **POINT_SIMULATION},
    })


@dataclass(frozen=True)
class AlltoallPoint:
    """Result of one point: ``seconds`` simulated (one alltoall), ``wall`` seconds of simulation."""

    platform: str
    algorithm: str
    ranks: int
    size: int
    model: str
    seconds: float
    wall: float


def alltoall_point(platform: str, algorithm: str, ranks: int, size: int, *, ranks_per_node: int = 8,
                   model: str = "calibrated", contention: bool = True, extra_config: dict[str, str] | None = None,
                   timeout: float = 600.0) -> AlltoallPoint:
    """Simulate one alltoall point (see the module docstring).

    Raises
    ------
    waitlab.errors.InputError
        A point SimGrid 3.32 cannot simulate (:func:`~waitlab.models.apps.alltoall.check_alltoall_point`).
    waitlab.errors.SimulationError
        SimGrid failed or ran past ``timeout``.
    """
    check_alltoall_point(algorithm, ranks, size)
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; use one of {MODELS}")
    if model == "calibrated":
        sc = point_scenario(platform, algorithm, ranks, size, ranks_per_node=ranks_per_node,
                            contention="platform" if contention else "none", timeout=timeout)
        if extra_config:
            sc = sc.with_values({"simulation.config": {**sc.simulation.config, **extra_config}})
        t0 = time.perf_counter()
        res = simulate_ops(prepare(sc))
        return _point(platform, algorithm, ranks, size, model, float(res.events["exit"].max()),
                      time.perf_counter() - t0)
    plat = load_platform(platform)
    rp = render_platform(plat, ranks, ranks_per_node=ranks_per_node) if model != "ns-3" else None
    star = ns3_star(plat, ranks, ranks_per_node) if model == "ns-3" else None
    b = OpBuilder(n_ranks=ranks)
    all_ranks = np.arange(ranks, dtype=np.int32)
    b.add("barrier", all_ranks, step=0)
    emit_alltoall(b, algorithm, ranks, send_bytes=size, recv_bytes=size, step=1)
    ops = b.build()
    config: dict[str, str] = {}
    if star is not None:
        config.update(NS3_CONFIG)
    config.update(SOLVER_CONFIG)
    config.update(alltoall_settings(algorithm))
    config.update(extra_config or {})
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="waitlab-a2a-") as tmp:
        if star is not None:
            xml, hostfile = star.write(Path(tmp))
            speed = star.core_speed
        else:
            assert rp is not None
            xml, hostfile = rp.write(Path(tmp))
            speed = rp.core_speed
        rep = replay_ops(ops, xml, hostfile, speed, config=replay_settings(config), timeout=timeout,
                         what=f"{algorithm} alltoall of {size} B on {ranks} ranks of {platform}")
    wall = time.perf_counter() - t0
    ev = frame(rep.events)
    start = float(ev.loc[ev["op"] == "barrier", "exit"].max()) if "op" in ev else 0.0
    return _point(platform, algorithm, ranks, size, model, float(ev["exit"].max()) - start, wall)


def _point(platform: str, algorithm: str, ranks: int, size: int, model: str, seconds: float,
           wall: float) -> AlltoallPoint:
    if not np.isfinite(seconds) or seconds <= 0 or seconds > 1e4:
        raise SimulationError(f"{algorithm} alltoall of {size} B on {ranks} ranks of {platform} returned an "
                              f"impossible time ({seconds!r} s): SimGrid arithmetic overflow; point refused")
    return AlltoallPoint(platform, algorithm, ranks, size, model, seconds, wall)
