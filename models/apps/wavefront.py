"""Wavefront: a Sweep3D-like pipelined sweep over a 2-D process grid.

A sweep starts at one corner of the ``px x py`` grid.  For each of ``blocks``
k-blocks (the pipeline), every rank receives from its upstream neighbours,
computes, and sends downstream; for the north-west corner::

    recv(W); recv(N); enter Sweep; compute; leave Sweep; send(E); send(S)

(boundary ranks skip the missing neighbours).  ``corners`` lists the start
corners of successive sweeps, cycled (``("nw", "se", "ne", "sw")`` alternates
like Sweep3D's octants in 2-D).  One step is one sweep; an optional allreduce
closes it.  Blocking sends and receives as in Sweep3D: a rank that is late
delays every rank downstream of it, so waits reach ranks that did no extra
work (indirect waits), one grid hop per pipeline stage.

The step's injected excess of ``Sweep`` is spread evenly over its blocks.

Examples
--------
>>> ops = generate(WavefrontParams(steps=1, blocks=1, grid=(2, 2)), n_ranks=4)
>>> ops.per_rank_counts().tolist()   # corner ranks: 2 sends / 2 receives; others one of each
[5, 5, 5, 5]
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from waitlab.models.apps.common import (
    AppParams,
    WorkTerm,
    check_imbalance_regions,
    check_ranks,
    emit_region,
    process_grid,
    region_excess,
    uniform_work,
)
from waitlab.models.apps.halo import neighbours
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.validation import ParamError, StrictBool, StrictInt, num, params

Corner = Literal["nw", "ne", "sw", "se"]
#: Corner -> (upstream x direction, upstream y direction).
UPSTREAM: dict[str, tuple[str, str]] = {"nw": ("W", "N"), "ne": ("E", "N"), "sw": ("W", "S"), "se": ("E", "S")}
_DOWN = {"W": "E", "E": "W", "N": "S", "S": "N"}
#: Tags of messages travelling along x and along y.
TAG_X, TAG_Y = 200, 201


@params
class WavefrontParams(AppParams):
    """Parameters of :func:`generate` (kind ``"wavefront"``).

    Attributes
    ----------
    steps : int
        Sweeps.
    grid : tuple of int
        ``(px, py)``; empty = most square factorisation of the rank count.
    blocks : int
        Pipeline blocks (k-planes) per sweep.
    message_bytes : int
        Bytes of each boundary message.
    compute_seconds : float
        Balanced ``Sweep`` time per rank and block.
    corners : tuple of {"nw", "ne", "sw", "se"}
        Start corners of successive sweeps (cycled).
    allreduce : bool
        End every sweep with an allreduce (a convergence test).
    """

    KIND: ClassVar[str] = "wavefront"
    REGIONS: ClassVar[tuple[str, ...]] = ("Sweep",)

    steps: int = num(4, ge=1)
    grid: tuple[StrictInt, ...] = ()
    blocks: int = num(4, ge=1)
    message_bytes: int = num(8192, ge=0)
    compute_seconds: float = num(0.001, ge=0.0)
    corners: tuple[Corner, ...] = ("nw",)
    allreduce: StrictBool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "grid", tuple(self.grid))
        object.__setattr__(self, "corners", tuple(self.corners))
        if not self.corners:
            raise ParamError("corners", "needs at least one corner", 'write corners = ["nw"]')
        for i, c in enumerate(self.corners):
            if c not in UPSTREAM:
                raise ParamError(f"corners[{i}]", f"unknown corner {c!r}", f"use one of: {', '.join(UPSTREAM)}")

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        return [uniform_work(n_ranks, "compute_seconds", f"blocks x compute_seconds = {self.blocks} x "
                             f"{self.compute_seconds:g} s", self.blocks * self.compute_seconds)]


def generate(params: WavefrontParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks (pure; see the module doc for one block)."""
    check_ranks(n_ranks, params.KIND)
    check_imbalance_regions(params)
    px, py = process_grid(n_ranks, params.grid)
    excess = region_excess(params, "Sweep", n_ranks, seed) / params.blocks
    b = OpBuilder(n_ranks=n_ranks)
    everyone = np.arange(n_ranks, dtype=np.int32)
    nbytes = params.message_bytes
    for s in range(params.steps):
        ux, uy = UPSTREAM[params.corners[s % len(params.corners)]]
        recv_x, recv_y = neighbours(px, py, ux), neighbours(px, py, uy)
        send_x, send_y = neighbours(px, py, _DOWN[ux]), neighbours(px, py, _DOWN[uy])
        for _ in range(params.blocks):
            b.add("recv", recv_x[0], step=s, value=nbytes, peer=recv_x[1], tag=TAG_X)
            b.add("recv", recv_y[0], step=s, value=nbytes, peer=recv_y[1], tag=TAG_Y)
            emit_region(b, "Sweep", step=s, seconds=params.compute_seconds + excess[s], excess=excess[s])
            b.add("send", send_x[0], step=s, value=nbytes, peer=send_x[1], tag=TAG_X)
            b.add("send", send_y[0], step=s, value=nbytes, peer=send_y[1], tag=TAG_Y)
        if params.allreduce:
            b.add("allreduce", everyone, step=s, value=8, value2=1.0)
    return b.build()
