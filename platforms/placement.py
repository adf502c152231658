"""Rank placement: which node each MPI rank runs on.

A :class:`Placement` names a rule; :func:`place_ranks` applies it to ``n_ranks`` ranks with
``ranks_per_node`` slots per node and gives the node of every rank.  Nodes are numbered as the
platform renders them: node ``i`` sits in supernode (leaf switch) ``i // leaf_size``.

Rules
-----
``block``
    Ranks fill nodes in order: rank ``r`` on node ``r // ranks_per_node`` (what smpirun does with a
    hostfile listing every node ``ranks_per_node`` times; the default).
``cyclic``
    Round robin over the nodes: rank ``r`` on node ``r % n_nodes``.  Refused when all ranks are on one node (as
    without ``ranks_per_node`` or ``nodes`` when a node holds them all): it would be ``block``.
``random``
    A seeded random choice of ``n_ranks`` slots among the ``n_nodes * ranks_per_node`` slots
    (``numpy.random.default_rng(seed)``): same seed, same mapping.
``nodes``
    An explicit node list.  With ``n_ranks`` entries, entry ``r`` is rank ``r``'s node; with exactly the
    ``ceil(n_ranks / ranks_per_node)`` nodes the job needs, the ranks fill the listed nodes block-wise,
    ``ranks_per_node`` each, in list order (each node listed once).  Any other length is refused.
``supernodes``
    The nodes the job needs (``ceil(n_ranks / ranks_per_node)``) spread as evenly as possible over the
    first ``k`` supernodes (the first ``m % k`` supernodes get one node more), ranks block-wise over
    them.  He et al. (section 6.1, alltoall-test-1) ran the same job on 12 such "topology positions".

Examples
--------
>>> place_ranks(Placement("block"), 8, 2, 4, 256).tolist()
[0, 0, 1, 1, 2, 2, 3, 3]
>>> place_ranks(Placement("cyclic"), 8, 2, 4, 256).tolist()
[0, 1, 2, 3, 0, 1, 2, 3]
>>> place_ranks(Placement("supernodes", supernodes=2), 8, 2, 4, 256).tolist()
[0, 0, 1, 1, 256, 256, 257, 257]
>>> place_ranks(Placement("nodes", nodes=(5, 3)), 4, 2, 1, 256).tolist()
[5, 5, 3, 3]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError

__all__ = ["PLACEMENTS", "Placement", "place_ranks", "slot_of_rank"]

#: Placement rules (values of ``platform.placement``).
PLACEMENTS: tuple[str, ...] = ("block", "cyclic", "random", "nodes", "supernodes")


@dataclass(frozen=True)
class Placement:
    """A rank placement rule (see the module docstring).

    Attributes
    ----------
    kind : str
        One of :data:`PLACEMENTS`.
    seed : int
        ``random``: seed of the draw.
    nodes : tuple of int
        ``nodes``: the explicit node list.
    supernodes : int
        ``supernodes``: how many supernodes the job is spread over.
    """

    kind: str = "block"
    seed: int = 0
    nodes: tuple[int, ...] = ()
    supernodes: int = 1


def _fail(field: str, problem: str, fix: str) -> InputError:
    return InputError("platform", f"platform.{field}", problem, fix)


def place_ranks(placement: Placement, n_ranks: int, ranks_per_node: int, n_nodes: int, leaf_size: int,
                max_nodes: int | None = None) -> npt.NDArray[np.int64]:
    """The node of every rank under ``placement``.

    Parameters
    ----------
    placement : Placement
    n_ranks : int
        MPI ranks.
    ranks_per_node : int
        Rank slots used per node (no node gets more ranks than this).
    n_nodes : int
        Nodes available to ``block``, ``cyclic`` and ``random`` (nodes ``0 .. n_nodes - 1``).
    leaf_size : int
        Nodes per supernode (the platform's ``topology.leaf_size``).
    max_nodes : int, optional
        Nodes of the machine; explicit and supernode placements must stay below it.

    Raises
    ------
    waitlab.errors.InputError
        Unknown rule, a node over-filled, a node outside the machine, or more supernodes than nodes.
    """
    kind = placement.kind
    rpn = ranks_per_node
    limit = max_nodes if max_nodes is not None else np.iinfo(np.int64).max
    ranks = np.arange(n_ranks, dtype=np.int64)
    if kind == "block":
        return ranks // rpn
    if kind == "cyclic":
        if n_nodes == 1 and n_ranks > 1:  # round robin over one node is block: the setting would do nothing
            spread = (f"set ranks_per_node = {math.ceil(n_ranks / 2)} or nodes = 2 to deal them over 2 nodes (more "
                      "nodes: fewer ranks per node), or " if limit >= 2 else "")
            raise _fail("placement", f"placement = \"cyclic\" deals the ranks round robin over the nodes, but the "
                        f"job has one node, so its {n_ranks} ranks would be placed as block places them (without "
                        "ranks_per_node or nodes, a job gets as few nodes as hold its ranks)",
                        f"{spread}remove placement (block)")
        return ranks % n_nodes
    if kind == "random":
        slots = np.random.default_rng(placement.seed).permutation(n_nodes * rpn)[:n_ranks]
        return slots // rpn
    needed = math.ceil(n_ranks / rpn)
    if kind == "supernodes":
        k = placement.supernodes
        if k < 1 or k > needed:
            raise _fail("supernodes", f"{k} supernodes for {needed} nodes: every supernode must get at least one "
                        "node", f"use 1..{needed} supernodes (or more ranks)")
        if k * leaf_size > limit:
            raise _fail("supernodes", f"{k} supernodes of {leaf_size} nodes exceed the machine ({limit} nodes)",
                        f"use at most {limit // leaf_size} supernodes")
        counts = np.full(k, needed // k, dtype=np.int64)
        counts[: needed % k] += 1
        nodes = np.concatenate([s * leaf_size + np.arange(c, dtype=np.int64) for s, c in enumerate(counts)])
        return nodes[ranks // rpn]
    if kind == "nodes":
        if len(placement.nodes) == 0:
            raise _fail("placement_nodes", "placement = \"nodes\" needs a node list",
                        "add placement_nodes = [0, 1, ...]")
        outside = [n for n in placement.nodes if not 0 <= n < limit]  # before int64: 2**70 must not overflow
        if outside:
            raise _fail("placement_nodes", f"node {outside[0]} is outside the machine (nodes 0..{limit - 1})",
                        "list existing node numbers")
        listed = np.asarray(placement.nodes, dtype=np.int64)
        per_rank = len(listed) == n_ranks
        if per_rank:
            node = listed.copy()
        elif len(listed) == needed:
            node = listed[ranks // rpn]
        else:
            raise _fail("placement_nodes", f"{len(listed)} nodes listed; {n_ranks} ranks at {rpn} per node need "
                        f"{needed} (or one entry per rank)", f"list {needed} nodes or {n_ranks} entries")
        full = np.bincount(node, minlength=1)
        if full.max() > rpn:
            raise _fail("placement_nodes", f"node {int(full.argmax())} gets {int(full.max())} ranks, more than the "
                        f"{rpn} rank slots per node", "list each node at most ranks_per_node times" if per_rank else
                        "list each node once (each listed node gets ranks_per_node ranks)")
        return node
    raise _fail("placement", f"unknown placement {kind!r}", f"use one of: {', '.join(PLACEMENTS)}")


def slot_of_rank(node_of_rank: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of each rank among the ranks of its node, in rank order (its core slot).

    >>> slot_of_rank(np.array([3, 1, 3, 3, 1])).tolist()
    [0, 0, 1, 2, 1]
    """
    node = np.asarray(node_of_rank, dtype=np.int64)
    order = np.argsort(node, kind="stable")
    sorted_nodes = node[order]
    first = np.searchsorted(sorted_nodes, sorted_nodes, side="left")
    slot = np.empty_like(node)
    slot[order] = np.arange(len(node)) - first
    return slot
