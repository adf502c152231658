"""THE machine model: every SimGrid/SMPI setting of a rendered platform, decided in one place.

``waitlab run``, ``sweep``, ``diagnose``, ``calibrate`` and every ``reproduce`` get their settings from
:func:`machine_settings` (through :func:`waitlab.experiments.pipeline.smpi_config`); none adds its own.
The settings, in the order they are merged (a scenario's own ``[simulation] config`` comes last and wins):

1. the calibrated SMPI factors and per-message overheads (:func:`waitlab.platforms.smpi_factors.calibrate`);
2. the send-order cost when the platform's ``[contention] send_order`` is true: ``smpi/ois`` gets a per-byte
   part equal to the platform's largest-message MPI inverse bandwidth (a rank hands its non-blocking sends to
   the NIC one after the other, docs/calibration.md);
3. the tree allreduce and binomial reduce (:data:`TREE_ALLREDUCE`);
4. the solver precisions, from the scenario (``[simulation] solver_precision`` = ``maxmin/precision``,
   ``timing_precision`` = ``surf/precision``; defaults :data:`SOLVER_PRECISION`, :data:`TIMING_PRECISION`;
   :func:`solver_settings`);
5. the contention laws (``[contention]`` of the platform file, :mod:`waitlab.platforms.contention`) as the
   ``waitlab/contention`` rules of the contention plugin, unless the scenario says ``contention = "none"``.

The eager threshold is part of 1 (``smpi/send-is-detached-thresh``).  A scenario's alltoall algorithm (its
``[simulation] alltoall`` or the application's ``alltoall_algorithm``) becomes ``smpi/alltoall`` through
:func:`alltoall_settings`.

A real program run (``kind = "program"``) adds :func:`program_settings`: its own computation is not benchmarked and
``MPI_Wtime`` costs nothing (deterministic), unless the scenario says ``computation = "measured"``.

Examples
--------
>>> from waitlab.platforms import load_platform, render_platform
>>> m = load_platform("dawning_5000a")
>>> cfg = machine_settings(m, render_platform(m, 16, ranks_per_node=8))
>>> cfg["maxmin/precision"], cfg["smpi/allreduce"], cfg["smpi/send-is-detached-thresh"]
('0.0001', 'redbcast', '12288')
>>> cfg["waitlab/contention"].startswith("hol:*_DOWN")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from waitlab.models.apps.alltoall import ALLTOALL_ALGORITHMS, P2P_ALLTOALL_ALGORITHMS, USABLE_ALLTOALL
from waitlab.platforms.contention import SETTING, law_record, plugin_rules
from waitlab.platforms.fat_tree import uses_d_mod_k
from waitlab.platforms.model import PlatformModel
from waitlab.platforms.render import RenderedPlatform
from waitlab.platforms.smpi_factors import calibrate

__all__ = ["COMPUTATION_KEY", "CONTENTION_CHOICES", "EAGER_TRANSFER_KEY", "FACTOR_KEYS", "PROGRAM_DETERMINISTIC",
           "SOLVER_PRECISION", "TIMING_PRECISION", "TREE_ALLREDUCE", "alltoall_settings", "computation_measured",
           "contention_record", "machine_settings", "mpi_bandwidth", "program_settings", "replay_settings",
           "send_order_config", "smpi_factor_settings", "solver_settings"]

#: The allreduce is a binomial reduce followed by a binomial broadcast, and MPI_Reduce is binomial: SimGrid's
#: own default (a linear reduce whose root completes P-1 receives through P-1 ``waitany`` calls) costs O(P^2)
#: simulation time per allreduce (docs/performance.md, "Scale"); the binomial trees are what MPI libraries do
#: for small reductions, and they move a 1,024-rank LARED-S-like makespan by +9.6e-6 s per step.
TREE_ALLREDUCE: dict[str, str] = {"smpi/allreduce": "redbcast", "smpi/reduce": "binomial"}
#: The SimGrid setting that transfers small messages when they are sent (SMPI's eager mailboxes); the resource
#: estimate reads it from a scenario's settings.
EAGER_TRANSFER_KEY = "smpi/async-small-thresh"
#: Default ``maxmin/precision``: SimGrid 3.32's LMM solver aborts ("Cannot saturate more a constraint that has
#: no active element") when rounding error in a heavily shared link exceeds its default absolute precision 1e-5;
#: 1e-4 completes those runs with identical times on every case compared (docs/calibration.md, "Solver precision").
SOLVER_PRECISION = 1e-4
#: Default ``surf/precision`` (SimGrid's own default, 1e-9 s).
TIMING_PRECISION = 1e-9
#: Values of a scenario's ``[simulation] contention``.
CONTENTION_CHOICES: tuple[str, ...] = ("platform", "none")
#: The SimGrid setting that benchmarks a real program's own computation (``yes``) or skips it (``no``); a
#: scenario may not set it itself (it would also skip the compute actions of a replay).
COMPUTATION_KEY = "smpi/simulate-computation"
#: SMPI's piecewise latency and bandwidth correction factors (part of the calibration, :func:`smpi_factor_settings`).
FACTOR_KEYS: tuple[str, ...] = ("smpi/bw-factor", "smpi/lat-factor")


def mpi_bandwidth(model: PlatformModel) -> float | None:
    """MPI-level B/s of the platform's largest-message inter-node figure (None without ``[mpi]``)."""
    if model.mpi is None:
        return None
    last = model.mpi.inter_node[-1]
    return last.size / last.seconds


def send_order_config(model: PlatformModel) -> dict[str, str]:
    """``smpi/ois`` with the send-order cost (docs/calibration.md, "send order"); ``{}`` when not declared.

    The per-byte part is the platform's MPI-level inverse bandwidth of its largest-message figure: a rank hands
    its non-blocking sends to the NIC one after the other, at the rate one message gets alone.
    """
    if model.mpi is None or not model.contention.send_order:
        return {}
    last = model.mpi.inter_node[-1]
    per_byte = last.seconds / last.size  # seconds per byte of the largest-message figure
    return {"smpi/ois": f"0:{model.mpi.send_overhead!r}:{per_byte!r}"}


def smpi_factor_settings(model: PlatformModel) -> dict[str, str]:
    """SMPI's latency and bandwidth correction factors the machine model sets for ``model`` (:data:`FACTOR_KEYS`
    of its calibration, :func:`waitlab.platforms.smpi_factors.calibrate`).

    >>> from waitlab.platforms import load_platform
    >>> smpi_factor_settings(load_platform("okita_myrinet"))  # [mpi] smpi_factors = false: factors 1
    {'smpi/bw-factor': '0:1.0', 'smpi/lat-factor': '0:1.0'}
    """
    cfg = calibrate(model).smpi_config
    return {k: cfg[k] for k in FACTOR_KEYS}


def solver_settings(solver_precision: float = SOLVER_PRECISION,
                    timing_precision: float = TIMING_PRECISION) -> dict[str, str]:
    """SimGrid's solver settings of a scenario's ``[simulation] solver_precision`` and ``timing_precision``.

    >>> solver_settings(1e-3, 1e-7)
    {'maxmin/precision': '0.001', 'surf/precision': '1e-07'}
    """
    return {"maxmin/precision": repr(float(solver_precision)), "surf/precision": repr(float(timing_precision))}


def alltoall_settings(algorithm: str) -> dict[str, str]:
    """The SMPI setting that selects the alltoall ``algorithm``; ``{}`` for one waitlab expands into point-to-point
    operations itself (:data:`waitlab.models.apps.alltoall.P2P_ALLTOALL_ALGORITHMS`).

    >>> alltoall_settings("ring"), alltoall_settings("lam_simple")
    ({'smpi/alltoall': 'ring'}, {})
    """
    if algorithm not in ALLTOALL_ALGORITHMS:
        raise ValueError(f"unknown alltoall algorithm {algorithm!r}; use one of: {', '.join(USABLE_ALLTOALL)}")
    return {} if algorithm in P2P_ALLTOALL_ALGORITHMS else {"smpi/alltoall": algorithm}


def _d_mod_k_leaves(model: PlatformModel, platform: RenderedPlatform) -> tuple[int, ...]:
    """SimGrid 3.32's ids of the leaf switches of the rendered ``FAT_TREE`` cluster (the last ``L`` of ``2 N``).

    FatTreeZone numbers the ``N`` nodes first and gives the switches the ids up to ``2 N - 1``, the leaves
    last (checked on 3.32 for 2 and 3 leaves of 256 nodes: leaves 1022-1023, top switches 968-1021).
    """
    n_leaves = -(-platform.n_nodes // platform.leaf_size)
    if not uses_d_mod_k(model, platform.split_cores, n_leaves):
        return ()
    top = 2 * platform.n_nodes
    return tuple(range(top - n_leaves, top))


def machine_settings(model: PlatformModel, platform: RenderedPlatform, *, contention: str = "platform",
                     solver_precision: float = SOLVER_PRECISION,
                     timing_precision: float = TIMING_PRECISION) -> dict[str, str]:
    """Every SimGrid ``--cfg`` setting of ``model`` rendered as ``platform`` (see the module docstring).

    Parameters
    ----------
    model : PlatformModel
    platform : RenderedPlatform
        The rendering (the fat tree's switch ids and the calibration come from it).
    contention : str
        ``"platform"`` (the file's laws) or ``"none"`` (no NONLINEAR law; the send-order cost stays, it is
        part of the calibration of the platform's MPI).
    solver_precision, timing_precision : float
        ``maxmin/precision`` and ``surf/precision``.
    """
    if contention not in CONTENTION_CHOICES:
        raise ValueError(f"contention must be one of {CONTENTION_CHOICES}, got {contention!r}")
    cfg = dict(platform.smpi_config)
    cfg.update(send_order_config(model))
    cfg.update(TREE_ALLREDUCE)
    cfg.update(solver_settings(solver_precision, timing_precision))
    if contention == "platform":
        rules = plugin_rules(model.contention, model.memory_bandwidth, calibrate(model).bw_factor[-1],
                             _d_mod_k_leaves(model, platform), mpi_bandwidth=mpi_bandwidth(model))
        if rules:
            cfg[SETTING] = rules
    return cfg


def contention_record(model: PlatformModel, contention: str = "platform") -> dict[str, Any]:
    """The contention model a run used, for run.json (law, source, values; ``{"law": "none"}`` when off)."""
    if contention == "none":
        return {"law": "none", "memory_path": False, "send_order": model.contention.send_order,
                "switched_off_by": "[simulation] contention = \"none\""}
    return law_record(model.contention, model.memory_bandwidth, mpi_bandwidth(model))


#: SimGrid settings of a deterministic real program run: computation between MPI calls is not benchmarked (only
#: explicit ``smpi_execute*`` and injected delays take simulated time) and ``MPI_Wtime`` costs nothing.
PROGRAM_DETERMINISTIC: dict[str, str] = {COMPUTATION_KEY: "no", "smpi/wtime": "0"}


def program_settings(computation: str = "none", core_speed: float | None = None) -> dict[str, str]:
    """SimGrid settings of a real program run: :data:`PROGRAM_DETERMINISTIC`, or with ``computation =
    "measured"`` the program's own computation benchmarked and charged at the platform's ``core_speed`` (flop/s).

    >>> program_settings()
    {'smpi/simulate-computation': 'no', 'smpi/wtime': '0'}
    >>> program_settings("measured", 1e9)["smpi/host-speed"]
    '1000000000.0'
    """
    cfg = dict(PROGRAM_DETERMINISTIC)
    if computation == "measured":
        if core_speed is None:
            raise ValueError("measured computation needs the platform's core speed")
        cfg[COMPUTATION_KEY] = "yes"
        cfg["smpi/host-speed"] = repr(float(core_speed))
    return cfg


def computation_measured(settings: Mapping[str, str]) -> bool:
    """Whether SimGrid benchmarks the program's own computation under ``settings`` (the measurement layer then
    books it before each MPI call)."""
    return settings.get(COMPUTATION_KEY) == "yes"


#: A replay's computation is its ``compute`` actions only.  SMPI books the host CPU time between a public MPI call
#: and the previous one as computation when it exceeds ``smpi/cpu-threshold`` (1 us by default; smpi_bench.cpp),
#: and the replay extension's calls through the public API (nonblocking collectives) would let a preempted
#: host's microseconds in; -1 (infinity) discards every such burst, so the same trace gives the same bytes.
REPLAY_NO_HOST_TIME: dict[str, str] = {"smpi/cpu-threshold": "-1"}


def replay_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """SimGrid settings of a trace replay: :data:`REPLAY_NO_HOST_TIME`, then ``settings`` (which win).

    >>> replay_settings({"maxmin/precision": "1e-4"})
    {'smpi/cpu-threshold': '-1', 'maxmin/precision': '1e-4'}
    """
    return {**REPLAY_NO_HOST_TIME, **settings}
