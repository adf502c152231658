"""Stencil: a BSP halo-exchange code on a 1-D or 2-D process grid.

One step of every rank::

    irecv from W, E, N, S neighbours; isend to W, E, N, S; waitall   (halo exchange)
    enter Stencil; compute; leave Stencil
    allreduce                                   (every ``allreduce_every`` steps)

Imbalance in ``Stencil`` makes the neighbours wait at the next halo exchange
(Late Sender) and everybody at the allreduce (Wait at NxN); with
``allreduce_every = 0`` waits spread only through the halos, one grid hop per
step.

The closing collective is ``collective`` (default ``"allreduce"``): ``"barrier"``
(Wait at Barrier), ``"reduce"`` or ``"gather"`` to ``root`` (Early Reduce: the
root waits for the latest rank), ``"bcast"`` from ``root`` (Late Broadcast: a
late root makes everybody wait), or ``"allgather"`` (Wait at NxN).  It carries
``allreduce_bytes`` per rank (``reduce`` also ``allreduce_flops``).

``collective_comm`` runs it on sub-communicators of a 2-D grid: ``"row"`` (one
communicator per grid row, ``px`` ranks: ``MPI_Comm_split(color = y, key =
x)``) or ``"column"`` (one per column, ``py`` ranks), as line solvers and
transposes do; only the collectives without a root (allreduce, barrier,
allgather).  A late rank then makes only its own group wait at the collective.
``halo_every`` exchanges halos every n-th step (0: never): without halos the
groups never meet, so the waits stay inside the late rank's group.

Examples
--------
>>> ops = generate(StencilParams(steps=2, dims=1), n_ranks=3, seed=0)
>>> ops.per_rank_counts().tolist()  # per step: irecv+isend per neighbour, waitall, 3, allreduce
[14, 18, 14]
>>> ops = generate(StencilParams(steps=1, dims=1, collective="reduce", root=2), n_ranks=3, seed=0)
>>> ops.peer[ops.mask(["reduce"])].tolist()  # every rank names the root
[2, 2, 2]
>>> ops = generate(StencilParams(steps=1, grid=(2, 2), collective_comm="row", halo_every=0), n_ranks=4)
>>> ops.comms, ops.comm[ops.mask(["allreduce"])].tolist()  # rows {0, 1} and {2, 3}
(((0, 1), (2, 3)), [1, 1, 2, 2])
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt

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
from waitlab.models.apps.halo import emit_halo_exchange, halo_pairs
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.validation import ParamError, StrictBool, StrictInt, num, params

#: Closing collectives the stencil can end a step with.
Closing = Literal["allreduce", "barrier", "reduce", "gather", "bcast", "allgather"]
#: Those that have a root.
ROOTED: frozenset[str] = frozenset({"reduce", "gather", "bcast"})
#: Communicators the closing collective can run on.
CollectiveComm = Literal["world", "row", "column"]


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
        Bytes per rank of the closing collective: the vector of ``allreduce`` and
        ``reduce``, the buffer of ``bcast``, each rank's block of ``gather`` and
        ``allgather`` (``barrier`` carries none).
    allreduce_flops : float
        Flops of the reduction of ``allreduce`` and ``reduce`` (SMPI's second argument).
    allreduce_every : int
        Closing collective after every n-th step (0: never).
    collective : {"allreduce", "barrier", "reduce", "gather", "bcast", "allgather"}
        The closing collective (module doc).
    root : int
        Root rank of ``reduce``, ``gather`` and ``bcast`` (must be below the rank count).
    collective_comm : {"world", "row", "column"}
        Communicator of the closing collective: all ranks, or one per row / column of the
        2-D grid (module doc).
    halo_every : int
        Halo exchange before every n-th step's ``Stencil`` (0: never).
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
    collective: Closing = "allreduce"
    root: int = num(0, ge=0)
    collective_comm: CollectiveComm = "world"
    halo_every: int = num(1, ge=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "grid", tuple(self.grid))
        if self.grid and self.dims != 2:  # the grid's numbers are checked against the rank count by the loader
            raise ParamError("grid", f"a process grid is only used with dims = 2, and dims = {self.dims} puts the "
                             "ranks on a line", "remove grid (dims = 1), or set dims = 2 (the grid's product must "
                             "then be the rank count)")
        if self.root and self.collective not in ROOTED:
            raise ParamError("root", f"collective {self.collective!r} has no root",
                             f"use collective = one of {sorted(ROOTED)}, or leave root out")
        if self.collective_comm != "world" and (self.dims != 2 or self.collective in ROOTED):
            raise ParamError("collective_comm", f"{self.collective_comm!r} needs dims = 2 and a collective without "
                             f"a root (got dims = {self.dims}, collective = {self.collective!r})",
                             'use dims = 2 with collective = "allreduce", "barrier" or "allgather", '
                             'or collective_comm = "world"')

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        return [uniform_work(n_ranks, "compute_seconds", f"compute_seconds = {self.compute_seconds:g} s",
                             self.compute_seconds)]


def generate(params: StencilParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks (pure; see the module doc for one step)."""
    check_ranks(n_ranks, params.KIND)
    check_imbalance_regions(params)
    if params.root >= n_ranks:
        raise ValueError(f"stencil root {params.root} does not exist with {n_ranks} ranks (use a root below {n_ranks})")
    if params.dims == 1:
        px, py = n_ranks, 1
    else:
        px, py = process_grid(n_ranks, params.grid)
    excess = region_excess(params, "Stencil", n_ranks, seed)
    b = OpBuilder(n_ranks=n_ranks)
    groups = _groups(params.collective_comm, px, py)
    pairs = halo_pairs(px, py, periodic=params.periodic) if params.halo_every else None
    for s in range(params.steps):
        if params.halo_every and s % params.halo_every == 0:
            emit_halo_exchange(b, px, py, step=s, nbytes=params.halo_bytes, periodic=params.periodic,
                               pairs=pairs)
        emit_region(b, "Stencil", step=s, seconds=params.compute_seconds + excess[s], excess=excess[s])
        if params.allreduce_every and (s + 1) % params.allreduce_every == 0:
            for members in groups:
                _closing(b, params, members, s, b.comm_id(members.tolist()))
    return b.build()


def _groups(comm: str, px: int, py: int) -> list[npt.NDArray[np.int32]]:
    """Members (world ranks, in communicator-rank order) of each communicator of the closing collective."""
    grid = np.arange(px * py, dtype=np.int32).reshape(py, px)  # grid[y, x] = rank at (x, y)
    if comm == "row":
        return list(grid)
    if comm == "column":
        return list(grid.T.copy())
    return [grid.ravel()]


def _closing(b: OpBuilder, params: StencilParams, members: npt.NDArray[np.int32], step: int, comm: int) -> None:
    """The step's closing collective on ``members`` (TI arguments: :mod:`waitlab.models.vocabulary`)."""
    c, nbytes = params.collective, params.allreduce_bytes
    if c == "barrier":
        b.add("barrier", members, step=step, comm=comm)
    elif c in ("allreduce", "reduce"):
        root = params.root if c == "reduce" else -1
        b.add(c, members, step=step, value=nbytes, value2=params.allreduce_flops, peer=root, comm=comm)
    elif c == "bcast":
        b.add("bcast", members, step=step, value=nbytes, peer=params.root, comm=comm)
    else:  # gather, allgather: send bytes, receive bytes per rank
        b.add(c, members, step=step, value=nbytes, value2=nbytes, peer=params.root if c == "gather" else -1,
              comm=comm)
