"""Stencil: a BSP halo-exchange code on a 1-D or 2-D process grid.

One step of every rank::

    irecv from W, E, N, S neighbours; isend to W, E, N, S; waitall   (halo exchange)
    enter Stencil; compute; leave Stencil
    allreduce                                   (every ``allreduce_every`` steps)

Imbalance in ``Stencil`` makes the neighbours wait at the next halo exchange
(Late Sender) and everybody at the allreduce (Wait at NxN); with
``allreduce_every = 0`` waits spread only through the halos, one grid hop per
step.

Examples
--------
>>> ops = generate(StencilParams(steps=2, dims=1), n_ranks=3, seed=0)
>>> ops.per_rank_counts().tolist()  # per step: irecv+isend per neighbour, waitall, 3, allreduce
[14, 18, 14]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from waitlab.models.apps.common import (
    AppParams,
    check_imbalance_regions,
    check_ranks,
    emit_region,
    process_grid,
    region_excess,
)
from waitlab.models.apps.halo import emit_halo_exchange
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.validation import ParamError, StrictBool, StrictInt, num, params


@params
class StencilParams(AppParams):
    """Parameters of :func:`generate` (kind ``"stencil"``).

    Attributes
    ----------
    steps : int
        BSP steps.
    dims : {1, 2}
        Process-grid dimensions.
    grid : tuple of int
        ``(px, py)`` for ``dims = 2``; empty = most square factorisation of the rank count.
    periodic : bool
        Wrap the grid around (torus) instead of open boundaries.
    halo_bytes : int
        Bytes sent to each neighbour per step.
    compute_seconds : float
        Balanced compute time of ``Stencil`` per rank and step.
    allreduce_bytes : int
    allreduce_flops : float
        Flops of the reduction (SMPI ``allreduce`` second argument).
    allreduce_every : int
        Allreduce after every n-th step (0: never).
    """

    KIND: ClassVar[str] = "stencil"
    REGIONS: ClassVar[tuple[str, ...]] = ("Stencil",)

    dims: int = num(2, ge=1, le=2)
    grid: tuple[StrictInt, ...] = ()
    periodic: StrictBool = False
    halo_bytes: int = num(65536, ge=0)
    compute_seconds: float = num(0.01, ge=0.0)
    allreduce_bytes: int = num(8, ge=0)
    allreduce_flops: float = num(1.0, ge=0.0)
    allreduce_every: int = num(1, ge=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "grid", tuple(self.grid))
        if self.grid and (self.dims != 2 or len(self.grid) != 2 or min(self.grid) < 1):
            raise ParamError("grid", f"expected two positive numbers (px, py) with dims = 2, got {list(self.grid)}",
                             "write grid = [4, 2] and dims = 2, or leave grid out")


def generate(params: StencilParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks (pure; see the module doc for one step)."""
    check_ranks(n_ranks, params.KIND)
    check_imbalance_regions(params)
    if params.dims == 1:
        px, py = n_ranks, 1
    else:
        px, py = process_grid(n_ranks, params.grid)
    excess = region_excess(params, "Stencil", n_ranks, seed)
    b = OpBuilder(n_ranks=n_ranks)
    everyone = np.arange(n_ranks, dtype=np.int32)
    for s in range(params.steps):
        emit_halo_exchange(b, px, py, step=s, nbytes=params.halo_bytes, periodic=params.periodic)
        emit_region(b, "Stencil", step=s, seconds=params.compute_seconds + excess[s], excess=excess[s])
        if params.allreduce_every and (s + 1) % params.allreduce_every == 0:
            b.add("allreduce", everyone, step=s, value=params.allreduce_bytes, value2=params.allreduce_flops)
    return b.build()
