"""He et al.'s topology-aware alltoall (section 5.4.2, alltoall-test-1, figure 20(a)) against ring, per placement.

The paper ran one alltoall program (4,096 processes, 512 KB per process per round) on 12 "topology
positions" and reports a mean gain of 8.1% over ring (MVAPICH's large-message algorithm).  The 12
positions are only drawn in figure 20(a), which the text does not list: :data:`PLACEMENTS` are waitlab's
own 12, fixed before any simulation (spread over 1..16 supernodes, uneven splits, a random scatter).

Every point goes through the one run path (:func:`waitlab.experiments.pipeline.prepare` renders the
platform with the placement, :func:`~waitlab.experiments.pipeline.simulate_ops` runs SMPI); the
algorithms are point-to-point schedules (:mod:`waitlab.models.apps.alltoall_sunway`); the choice is
:func:`~waitlab.models.apps.alltoall_sunway.choose_algorithm` (a step model of the placement, nothing
fitted).  The time of a point is the latest exit minus the latest exit of the barrier before it.

The Sunway platform routes messages between supernodes statically (``topology.routing = "d_mod_k"``: 54
up-ports per supernode, chosen by destination node mod 54), and the step model prices the same routes, so
the choice sees the route conflicts a placement causes (docs/sunway.md).  Each row records the wall time of
its ring point and of its chosen point (0 when the choice is ring: the same schedule is not run twice).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.reproduce.alltoall_points import POINT_SIMULATION
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.alltoall_sunway import NetworkShape, choose_algorithm, emit_schedule, schedule
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.platforms import PlatformModel, load_platform

__all__ = ["PAPER_MEAN_GAIN", "PLACEMENTS", "network_shape", "placement_rows", "run_point"]

PLATFORM = "sunway_taihulight"
#: He et al. section 6.1: mean gain over ring across the 12 positions.
PAPER_MEAN_GAIN = 0.081
#: Bytes per rank pair (He et al.: "512 KB per process per round").
PAPER_BYTES = 512 * 1024

#: The 12 placements: label -> ``[platform]`` keys (nodes per supernode given as fractions of the job).
PLACEMENTS: dict[str, dict[str, Any]] = {
    "1 supernode": {"placement": "supernodes", "supernodes": 1},
    "2 supernodes": {"placement": "supernodes", "supernodes": 2},
    "3 supernodes": {"placement": "supernodes", "supernodes": 3},
    "4 supernodes": {"placement": "supernodes", "supernodes": 4},
    "6 supernodes": {"placement": "supernodes", "supernodes": 6},
    "8 supernodes": {"placement": "supernodes", "supernodes": 8},
    "16 supernodes": {"placement": "supernodes", "supernodes": 16},
    "3/4 + 1/4": {"split": (3, 1)},
    "7/8 + 1/8": {"split": (7, 1)},
    "5/8 + 3/8": {"split": (5, 3)},
    "1/2 + 1/4 + 1/4": {"split": (2, 1, 1)},
    "random over 4 supernodes": {"placement": "random", "placement_seed": 1, "spread": 4},
}


def network_shape(model: PlatformModel) -> NetworkShape:
    """The step model's figures from the platform file: MPI-level node bandwidth, uplink, latency + overheads.

    Under ``topology.routing = "d_mod_k"`` the step model routes every message as the rendered fat tree does:
    ``topology.uplinks`` up-ports per supernode, one node link's bandwidth each, chosen by destination mod
    ``uplinks``.  The two extra links a message between supernodes crosses add no latency to messages above
    64 KB: the calibrated SMPI latency factor is 0 there (the end-to-end time is in the bandwidth factor).
    """
    assert model.mpi is not None
    big = model.mpi.inter_node[-1]
    node_bw = big.size / big.seconds
    topo = model.topology
    uplink = topo.leaf_size * node_bw / topo.taper
    latency = model.mpi.inter_node[0].seconds + model.mpi.send_overhead + model.mpi.recv_overhead
    if topo.routing == "d_mod_k":
        return NetworkShape(node_bw, topo.uplinks * node_bw, latency, topo.uplinks)
    return NetworkShape(node_bw, uplink, latency)


def platform_keys(label: str, ranks: int, rpn: int, leaf_size: int, platform: str = PLATFORM) -> dict[str, Any]:
    """The ``[platform]`` table of one placement for ``ranks`` ranks at ``rpn`` per node."""
    spec = dict(PLACEMENTS[label])
    base: dict[str, Any] = {"name": platform, "ranks_per_node": rpn}
    needed = -(-ranks // rpn)
    if "split" in spec:
        parts = np.asarray(spec["split"], dtype=np.int64)
        counts = needed * parts // parts.sum()
        counts[0] += needed - counts.sum()
        nodes = np.concatenate([s * leaf_size + np.arange(c) for s, c in enumerate(counts)])
        return {**base, "placement": "nodes", "placement_nodes": [int(n) for n in nodes]}
    if "spread" in spec:
        return {**base, "placement": "random", "placement_seed": spec["placement_seed"],
                "nodes": int(spec["spread"]) * leaf_size}
    return {**base, **spec}


def alltoall_ops(ranks: int, algorithm: str, supernode_of_rank: np.ndarray, nbytes: float) -> OpTable:
    """A barrier, then one alltoall of ``algorithm`` as point-to-point operations."""
    b = OpBuilder(n_ranks=ranks)
    b.add("barrier", np.arange(ranks, dtype=np.int32), step=0)
    emit_schedule(b, schedule(algorithm, supernode_of_rank, nbytes), step=1)
    return b.build()


def _scenario(label: str, ranks: int, rpn: int, leaf_size: int, timeout: float, platform: str = PLATFORM,
              contention: str = "platform") -> Any:
    # the machine model is the platform's (the Sunway file declares no send-order cost: its schedules are blocking
    # steps); the precisions are the scenario options every alltoall point uses
    return from_mapping({"scenario": {"name": "he-alltoall", "ranks": ranks},
                         "platform": platform_keys(label, ranks, rpn, leaf_size, platform),
                         "application": {"kind": "fft", "steps": 1},
                         "simulation": {"timeout": timeout, "contention": contention, **POINT_SIMULATION}})


@dataclass(frozen=True)
class Point:
    """One simulated alltoall: seconds simulated, seconds of wall clock."""

    seconds: float
    wall: float


def run_point(label: str, algorithm: str, ranks: int, rpn: int, nbytes: float = PAPER_BYTES,
              timeout: float = 900.0, platform: str = PLATFORM, contention: str = "platform") -> Point:
    """Simulate one alltoall of ``algorithm`` on placement ``label`` (``platform``: a name or a TOML path;
    ``contention``: the scenario option, ``"none"`` for fluid sharing)."""
    model = load_platform(platform)
    prep = prepare(_scenario(label, ranks, rpn, model.topology.leaf_size, timeout, platform, contention))
    sn = np.asarray(prep.platform.node_of_rank) // prep.platform.leaf_size
    t0 = time.perf_counter()
    res = simulate_ops(prep, alltoall_ops(ranks, algorithm, sn, nbytes))
    ev = res.events
    start = float(ev.loc[ev["op"] == "barrier", "exit"].max())
    return Point(float(ev["exit"].max()) - start, time.perf_counter() - t0)


def placement_rows(ranks: int, rpn: int, nbytes: float = PAPER_BYTES, timeout: float = 900.0,
                   labels: tuple[str, ...] | None = None, progress: Any = None) -> pd.DataFrame:
    """Per placement: supernodes used, the chosen algorithm, ring and chosen times, the gain."""
    model = load_platform(PLATFORM)
    shape = network_shape(model)
    leaf = model.topology.leaf_size
    rows = []
    for label in labels or tuple(PLACEMENTS):
        prep = prepare(_scenario(label, ranks, rpn, leaf, timeout))
        node = np.asarray(prep.platform.node_of_rank)
        chosen, pred = choose_algorithm(node, leaf, shape, nbytes)
        ring = run_point(label, "ring", ranks, rpn, nbytes, timeout)
        best = ring if chosen == "ring" else run_point(label, chosen, ranks, rpn, nbytes, timeout)
        per_sn = np.bincount(np.unique(node) // leaf)
        rows.append({"placement": label, "supernodes": int((per_sn > 0).sum()),
                     "nodes_per_supernode": "/".join(str(int(c)) for c in per_sn[per_sn > 0]),
                     "chosen": chosen, "predicted_gain": (pred["ring"] - pred[chosen]) / pred["ring"],
                     "ring_s": ring.seconds, "chosen_s": best.seconds,
                     "gain": (ring.seconds - best.seconds) / ring.seconds, "ring_wall_s": ring.wall,
                     "chosen_wall_s": best.wall if chosen != "ring" else 0.0,
                     "wall_s": ring.wall + (best.wall if chosen != "ring" else 0.0)})
        if progress is not None:
            progress(f"alltoall {label}: ring {ring.seconds:.4f} s, {chosen} {best.seconds:.4f} s "
                     f"({rows[-1]['gain']:+.1%}; wall {rows[-1]['wall_s']:.0f} s)")
    return pd.DataFrame(rows)
