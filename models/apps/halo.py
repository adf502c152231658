"""Halo exchange with the four grid neighbours of a 2-D process grid (a 1-D grid is ``py = 1``).

Rank ``r`` sits at ``x = r % px``, ``y = r // px``.  Directions are west
(x-1), east (x+1), north (y-1) and south (y+1).  A message travelling in
direction ``d`` carries tag ``HALO_TAG_BASE + d``, so the receiver posts its
``irecv`` from its neighbour in the opposite direction with that tag, and the
two messages of a pair of ranks that are neighbours twice (periodic grid two
wide) stay distinguishable.

Examples
--------
>>> owners, peers = neighbours(3, 1, "E", periodic=False)
>>> owners.tolist(), peers.tolist()
([0, 1], [1, 2])
>>> from waitlab.models.ops import ACTIONS, OpBuilder
>>> b = OpBuilder(n_ranks=3)
>>> emit_halo_exchange(b, 3, 1, step=0, nbytes=16)
>>> ops = b.build()
>>> [ACTIONS[c] for c in ops.code[ops.rank == 1]]
['irecv', 'irecv', 'isend', 'isend', 'waitall']
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import OpBuilder

#: Direction name -> (dx, dy).
DIRECTIONS: dict[str, tuple[int, int]] = {"W": (-1, 0), "E": (1, 0), "N": (0, -1), "S": (0, 1)}
OPPOSITE: dict[str, str] = {"W": "E", "E": "W", "N": "S", "S": "N"}
#: Tag of a halo message travelling west; east, north, south follow.
HALO_TAG_BASE = 100


def halo_tag(direction: str) -> int:
    """Tag of a halo message travelling in ``direction``."""
    return HALO_TAG_BASE + list(DIRECTIONS).index(direction)


def neighbours(px: int, py: int, direction: str, *, periodic: bool = False
               ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Ranks that have a neighbour in ``direction`` and that neighbour (self-neighbours dropped)."""
    dx, dy = DIRECTIONS[direction]
    r = np.arange(px * py, dtype=np.int32)
    x, y = r % px, r // px
    nx, ny = x + dx, y + dy
    if periodic:
        nx, ny = nx % px, ny % py
        ok = np.ones(r.size, dtype=bool)
    else:
        ok = (nx >= 0) & (nx < px) & (ny >= 0) & (ny < py)
    nb = (ny * px + nx).astype(np.int32)
    ok &= nb != r
    return r[ok], nb[ok]


def halo_pairs(px: int, py: int, *, periodic: bool = False
               ) -> dict[str, tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]]:
    """:func:`neighbours` of every direction (W, E, N, S): what :func:`emit_halo_exchange` exchanges along, to compute
    once for all the steps of a run."""
    return {d: neighbours(px, py, d, periodic=periodic) for d in DIRECTIONS}


def emit_halo_exchange(builder: OpBuilder, px: int, py: int, *, step: int, nbytes: float, periodic: bool = False,
                       pairs: dict[str, tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]] | None = None) -> None:
    """Append irecv from every neighbour (W, E, N, S), isend to every neighbour, then waitall.

    Ranks without any neighbour emit nothing.  ``pairs`` is :func:`halo_pairs` of the same grid, if already known.
    """
    if pairs is None:
        pairs = halo_pairs(px, py, periodic=periodic)
    for d, (owners, peers) in pairs.items():
        builder.add("irecv", owners, step=step, value=nbytes, peer=peers, tag=halo_tag(OPPOSITE[d]))
    has_nb = np.zeros(px * py, dtype=bool)
    for d, (owners, peers) in pairs.items():
        builder.add("isend", owners, step=step, value=nbytes, peer=peers, tag=halo_tag(d))
        has_nb[owners] = True
    builder.add("waitall", np.flatnonzero(has_nb).astype(np.int32), step=step)
