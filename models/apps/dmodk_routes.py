"""Static destination-mod-k (D-mod-k) routes of a two-level fat tree, as SimGrid 3.32's ``FAT_TREE`` cluster makes them.

The tree (``topo_parameters = "2;L,K;1,U;1,1"``): ``K`` leaf switches (supernodes) of ``L`` nodes each, every
node with one link to its leaf switch, every leaf switch with one link to each of ``U`` top switches; every
link has the node link's bandwidth (split-duplex: each direction is its own link).  A message from node ``s``
to node ``d`` (node index = position in the tree) takes:

- the up direction of ``s``'s link to its leaf and the down direction of ``d``'s link from its leaf;
- if the two nodes are in different leaves, the up link of ``s``'s leaf to top switch ``u = d mod U`` and
  the down link of top switch ``u`` to ``d``'s leaf.

This is SimGrid 3.32's ``FatTreeZone::get_local_route`` (src/kernel/routing/FatTreeZone.cpp: on the way up
``d = destination->position / prod(parents below) mod (parents * ports)``; on the way down the only link to
the destination's subtree).  No SimGrid code is called here: the rule is re-implemented so that the step
model (:func:`waitlab.models.apps.alltoall_sunway.predict_seconds`) prices the routes the simulator uses.
Two messages share an up-port when their destinations are congruent modulo ``U``; consecutive destination
nodes never do (within ``U`` of each other), which is why D-mod-k serves shift permutations well and
scattered placements badly.

Examples
--------
Two leaves of 4 nodes, 2 top switches: 0 -> 4 and 1 -> 6 share leaf 0's up-port 0 (4 mod 2 = 6 mod 2); 0 -> 4
and 1 -> 5 do not.

>>> max_link_bytes(np.array([0, 1]), np.array([4, 6]), np.array([1.0, 1.0]), 4, 2)
2.0
>>> max_link_bytes(np.array([0, 1]), np.array([4, 5]), np.array([1.0, 1.0]), 4, 2)
1.0
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["link_bytes", "max_link_bytes", "up_port"]

IntArray = npt.NDArray[np.int64]


def up_port(dst_node: npt.ArrayLike, uplinks: int) -> IntArray:
    """The top switch (leaf up-port) a message to ``dst_node`` climbs to: ``dst_node mod uplinks`` (D-mod-k)."""
    return np.asarray(dst_node, dtype=np.int64) % uplinks


def link_bytes(src_node: npt.ArrayLike, dst_node: npt.ArrayLike, nbytes: npt.ArrayLike, leaf_size: int,
               uplinks: int) -> dict[str, npt.NDArray[np.float64]]:
    """Bytes each link carries when messages ``src_node[i] -> dst_node[i]`` of ``nbytes[i]`` run at once.

    Messages inside one node use no network link.  Returns per link kind an array indexed by link:
    ``node_up[n]``, ``node_down[n]``, ``leaf_up[leaf * uplinks + port]``, ``top_down[port * n_leaves + leaf]``.
    """
    s = np.asarray(src_node, dtype=np.int64)
    d = np.asarray(dst_node, dtype=np.int64)
    b = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), s.shape)
    off = s != d
    s, d, b = s[off], d[off], b[off]
    n_nodes = int(max(s.max(initial=0), d.max(initial=0))) + 1
    n_leaves = n_nodes // leaf_size + 1
    ls, ld = s // leaf_size, d // leaf_size
    cross = ls != ld
    port = up_port(d[cross], uplinks)
    def load(link: IntArray, weight: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
        return np.bincount(link, weight, n).astype(np.float64)

    return {
        "node_up": load(s, b, n_nodes),
        "node_down": load(d, b, n_nodes),
        "leaf_up": load(ls[cross] * uplinks + port, b[cross], n_leaves * uplinks),
        "top_down": load(port * n_leaves + ld[cross], b[cross], n_leaves * uplinks),
    }


def max_link_bytes(src_node: npt.ArrayLike, dst_node: npt.ArrayLike, nbytes: npt.ArrayLike, leaf_size: int,
                   uplinks: int) -> float:
    """Bytes on the busiest link (every link of the tree has the node link's bandwidth)."""
    loads = link_bytes(src_node, dst_node, nbytes, leaf_size, uplinks)
    return float(max(v.max(initial=0.0) for v in loads.values()))
