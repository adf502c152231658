"""One alltoall point simulated with SMPI: (platform, algorithm, ranks, bytes) -> simulated and wall time.

Shared by the Rao et al. reproduction (:mod:`waitlab.experiments.reproduce.rao_alltoall`) and
``benchmarks/bench_alltoall.py``.  A point is one ``MPI_Alltoall`` of ``size`` bytes per rank pair on
``ranks`` ranks, ``ranks_per_node`` per node (Rao et al. ran 8 per node, section 4.2), timed as the paper did
(``MPI_Wtime`` around one call after a barrier).  ``start`` says how the ranks enter the call:

- ``"together"`` (default): every rank enters the alltoall at simulated time 0 on an idle network, as after
  an ideal barrier that releases all ranks at once; the time is the latest exit.
- ``"barrier"``: the ranks first run SMPI's barrier and enter the alltoall as they leave it (64 ranks on
  Dawning 5000A: 63 different exit dates spread over 15 us); the time is the latest exit minus the latest
  barrier exit.

The all-concurrent algorithms (MPICH native, LAM simple) cost SimGrid one solver round over every active flow
per distinct event date.  Entering together, the ranks post their messages at shared dates; after SMPI's
barrier every rank posts at dates of its own.  "together" is 7-13 times cheaper at 64 ranks and is what
makes 256 ranks tractable; it changes the simulated times by the barrier's exit skew (docs/performance.md,
"All-concurrent alltoall").

``model`` chooses the machine model: ``"calibrated"`` (the platform's calibrated SMPI settings, see
:mod:`waitlab.platforms.smpi_factors`, plus the contention settings of :func:`contention_config`),
``"smpi-default"`` (the same links with SMPI's default factors and no per-message costs: what waitlab did
before) or ``"ns-3"`` (SimGrid's packet-level ns-3 binding on a star of point-to-point links at the MPI-level
figures, :mod:`waitlab.platforms.ns3`: a probe of what queues and incast change, not a calibrated model).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from waitlab.errors import SimulationError
from waitlab.models.apps.alltoall import check_alltoall_point, emit_alltoall, smpi_config
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.platforms import load_platform, render_platform
from waitlab.platforms.ns3 import NS3_CONFIG, ns3_star
from waitlab.simulator.replay import replay_ops

__all__ = ["MODELS", "SOLVER_CONFIG", "STARTS", "AlltoallPoint", "alltoall_point", "contention_config", "point_ops"]

#: Machine models a point can be simulated with.
MODELS: tuple[str, ...] = ("calibrated", "smpi-default", "ns-3")
#: How the ranks enter an alltoall point (module docstring).
STARTS: tuple[str, ...] = ("together", "barrier")

#: Solver settings for every point.  SimGrid 3.32 aborts the all-concurrent algorithms (basic_linear,
#: LAM simple) at 256 ranks with the default absolute precision ("Cannot saturate more a constraint that has
#: no active element", or a segfault); ``maxmin/precision`` 1e-3 completes them.  ``surf/precision`` (the
#: timing precision, 1e-9 s by default) at 1e-7 s lets SimGrid handle the per-message events of one
#: tenth of a microsecond together: the all-concurrent algorithms run 2-4 times faster, their times move by
#: at most 0.3%, the step-wise ones by at most 0.02% (docs/calibration.md, "Solver precision").
SOLVER_CONFIG: dict[str, str] = {"maxmin/precision": "1e-3", "surf/precision": "1e-7"}


def contention_config(platform: str) -> dict[str, str]:
    """Per-message costs that serialize a rank's sends (see docs/calibration.md, "send order").

    ``smpi/ois`` (the CPU time of one ``MPI_Isend``) gets a per-byte part equal to the platform's
    MPI-level inverse bandwidth: a rank hands its non-blocking sends to the NIC one after the other, at
    the rate one message gets alone, instead of SMPI starting all of them at once.  This is what makes
    LAM/MPI's send order (every rank starts with rank 0) contend on one node at a time.
    """
    model = load_platform(platform)
    if model.mpi is None:
        return {}
    last = model.mpi.inter_node[-1]
    per_byte = last.seconds / last.size  # seconds per byte of the largest-message figure
    return {"smpi/ois": f"0:{model.mpi.send_overhead!r}:{per_byte!r}"}


@dataclass(frozen=True)
class AlltoallPoint:
    """Result of one point: ``seconds`` simulated (one alltoall), ``wall`` seconds of simulation, ``start``."""

    platform: str
    algorithm: str
    ranks: int
    size: int
    model: str
    seconds: float
    wall: float
    start: str = "together"


def point_ops(algorithm: str, ranks: int, size: int, start: str = "together") -> OpTable:
    """The operations of one point: the alltoall (step 1), after SMPI's barrier (step 0) if ``start="barrier"``."""
    if start not in STARTS:
        raise ValueError(f"unknown start {start!r}; use one of {STARTS}")
    b = OpBuilder(n_ranks=ranks)
    if start == "barrier":
        b.add("barrier", np.arange(ranks, dtype=np.int32), step=0)
    emit_alltoall(b, algorithm, ranks, send_bytes=size, recv_bytes=size, step=1)
    return b.build()


def alltoall_point(platform: str, algorithm: str, ranks: int, size: int, *, ranks_per_node: int = 8,
                   model: str = "calibrated", contention: bool = True, extra_config: dict[str, str] | None = None,
                   timeout: float = 600.0, start: str = "together") -> AlltoallPoint:
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
    if start not in STARTS:
        raise ValueError(f"unknown start {start!r}; use one of {STARTS}")
    plat = load_platform(platform)
    rp = render_platform(plat, ranks, ranks_per_node=ranks_per_node) if model != "ns-3" else None
    star = ns3_star(plat, ranks, ranks_per_node) if model == "ns-3" else None
    ops = point_ops(algorithm, ranks, size, start)
    config: dict[str, str] = {}
    if rp is not None and model == "calibrated":
        config.update(rp.smpi_config)
        if contention:
            config.update(contention_config(platform))
    if star is not None:
        config.update(NS3_CONFIG)
    config.update(SOLVER_CONFIG)
    setting = smpi_config(algorithm)
    if setting is not None:
        key, value = setting.split(":", 1)
        config[key] = value
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
        rep = replay_ops(ops, xml, hostfile, speed, config=config, timeout=timeout,
                         what=f"{algorithm} alltoall of {size} B on {ranks} ranks of {platform}")
    wall = time.perf_counter() - t0
    ev = rep.events
    barrier = ev["op"] == "barrier" if "op" in ev else None
    begin = float(ev.loc[barrier, "exit"].max()) if barrier is not None and barrier.any() else 0.0
    seconds = float(ev["exit"].max()) - begin
    if not np.isfinite(seconds) or seconds <= 0 or seconds > 1e4:
        raise SimulationError(f"{algorithm} alltoall of {size} B on {ranks} ranks of {platform} returned an "
                              f"impossible time ({seconds!r} s): SimGrid arithmetic overflow; point refused")
    return AlltoallPoint(platform, algorithm, ranks, size, model, seconds, wall, start)
