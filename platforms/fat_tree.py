"""The Sunway-style fat tree with static routes: SimGrid's ``FAT_TREE`` cluster (``topology.routing = "d_mod_k"``).

One SimGrid ``FAT_TREE`` cluster (``topo_parameters = "2;leaf_size,leaves;1,U;1,1"``) with
``U = floor(leaf_size / taper)`` top switches; every leaf (supernode) has one link of the node bandwidth to
each, and a message to node ``d`` climbs to top switch ``d mod U`` (SimGrid 3.32's D-mod-k,
src/kernel/routing/FatTreeZone.cpp: static destination-based routes, as InfiniBand fat trees use), so
messages whose destinations are congruent modulo ``U`` share an up-port.  The uplink capacity is
``U`` node links (54 x 7 GB/s for Sunway, against ``256 / 4.7 = 54.5`` for the aggregated "balanced"
uplink).  Every node of every used leaf is rendered (the fat tree needs them).  All links have half the
node-to-node latency: two nodes of one leaf are ``inter_node.latency`` apart as in the balanced rendering,
two of different leaves ``2 x inter_node.latency`` (``hop_latency`` is not used; the calibrated SMPI
latency factor is 0 above 64 KB, so large messages do not see it).  ``split_cores=True`` keeps the
balanced rendering.  The route rule is re-implemented, without SimGrid, in
:mod:`waitlab.models.apps.dmodk_routes` for the alltoall step model.

Examples
--------
>>> from waitlab.platforms import load_platform
>>> xml = d_mod_k_cluster(load_platform("sunway_taihulight"), 2, 1e9, 4, 7e9, 2e-6, 1e10, 1e-6)
>>> 'topology="FAT_TREE" topo_parameters="2;256,2;1,54;1,1"' in xml
True
"""

from __future__ import annotations

from waitlab.platforms.model import PlatformModel

__all__ = ["d_mod_k_cluster", "uses_d_mod_k"]


def _n(x: float) -> str:
    """Shortest round-trip decimal text of a float (deterministic, parsed exactly by strtod)."""
    return repr(float(x))


def uses_d_mod_k(model: PlatformModel, split: bool, n_leaves: int) -> bool:
    """Whether to render the static D-mod-k fat tree: ``topology.routing = "d_mod_k"``, several leaves, not split."""
    return model.topology.kind == "fat_tree" and model.topology.routing == "d_mod_k" and not split and n_leaves > 1


def d_mod_k_cluster(model: PlatformModel, n_leaves: int, speed: float, cores: int, bw: float, lat: float,
                     loop_bw: float, loop_lat: float) -> str:
    """One SimGrid ``FAT_TREE`` cluster: ``n_leaves`` leaves of ``leaf_size`` nodes under ``uplinks`` top switches.

    ``topo_parameters = "2;L,K;1,U;1,1"``: every node has one link to its leaf switch, every leaf switch one link
    to each of the ``U = floor(leaf_size / taper)`` top switches; all links have the node link's bandwidth and
    half the node-to-node latency (two nodes of one leaf are ``lat`` apart, of two leaves ``2 lat``), and a
    message to node ``d`` climbs to top switch ``d mod U`` (SimGrid's D-mod-k, FatTreeZone.cpp;
    re-implemented for the step model in :mod:`waitlab.models.apps.dmodk_routes`).
    """
    topo = model.topology
    last = n_leaves * topo.leaf_size - 1
    return (f'    <cluster id="fat-tree" prefix="node-" suffix="" radical="0-{last}" speed="{_n(speed)}f" '
            f'core="{cores}" bw="{_n(bw)}Bps" lat="{_n(lat / 2)}s" sharing_policy="SPLITDUPLEX" '
            f'loopback_bw="{_n(loop_bw)}Bps" loopback_lat="{_n(loop_lat)}s" topology="FAT_TREE" '
            f'topo_parameters="2;{topo.leaf_size},{n_leaves};1,{topo.uplinks};1,1"/>\n')
