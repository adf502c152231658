"""Degraded network links: one node's link to its switch at a fraction of its bandwidth (cause kind ``link``).

With ``split_cores = true`` a rendered platform (:func:`~waitlab.platforms.render.render_platform`) gives
every node an explicit link to its leaf switch, ``node-<i>-nic``, with the calibrated inter-node bandwidth ``B``.
:func:`degrade_links` re-renders that link with bandwidth ``factor * B``; only the node's own traffic across the
network slows (its ranks' messages to each other use the node's cluster, not the NIC).

The default rendering (one multi-core host per node) puts the node links inside a SimGrid ``<cluster>``, which
has one bandwidth for all its nodes, and SimGrid 3.32 refuses a bandwidth profile on a cluster's link ("Cannot set
a bandwidth profile once the Link is sealed"); SimGrid's ``FAT_TREE`` cluster (d-mod-k routing) likewise names
its links by level, not by node.  A degraded link therefore needs ``split_cores = true``.

Examples
--------
>>> from waitlab.platforms import load_platform, render_platform
>>> m = load_platform("dawning_5000a")
>>> base = render_platform(m, 4, ranks_per_node=1, split_cores=True)
>>> def nic(p, i): return [ln.strip().split(" lat")[0] for ln in p.xml.splitlines() if f'<link id="node-{i}-nic"' in ln]
>>> nic(base, 3), nic(degrade_links(base, m, {3: 0.25}), 3)  # a quarter of 2.5 GB/s
(['<link id="node-3-nic" bandwidth="2500000000.0Bps"'], ['<link id="node-3-nic" bandwidth="625000000.0Bps"'])
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

from waitlab.errors import InputError
from waitlab.platforms.fat_tree import uses_d_mod_k
from waitlab.platforms.model import PlatformModel
from waitlab.platforms.render import RenderedPlatform

__all__ = ["MIN_BANDWIDTH_FACTOR", "degrade_links"]

#: Smallest bandwidth factor of a degraded link.  A link slower than a millionth of its model is broken, not
#: degraded; and the outputs keep times as int64 nanoseconds (at most 2**63 ns, about 9.2e9 s), which a factor
#: of 1e-15 overflows with 22 MB (22 * 2**20 B / (1e-15 * 2.5e9 B/s) = 9.2e12 s).  At 1e-6 a 2.5 GB/s link moves
#: 2.5 kB/s: it takes 2.3e13 B (23 TB) through that link to pass 9.2e9 s.
MIN_BANDWIDTH_FACTOR = 1e-6


def degrade_links(platform: RenderedPlatform, model: PlatformModel, factors: Mapping[int, float],
                  file: str = "platform") -> RenderedPlatform:
    """``platform`` with node ``n``'s link at ``factors[n]`` of its bandwidth, for every ``n`` of ``factors``.

    Raises
    ------
    waitlab.errors.InputError
        Not ``split_cores``, a fat-tree (d-mod-k) rendering, a node the platform does not have, or a factor
        outside [MIN_BANDWIDTH_FACTOR, 1).
    """
    if not factors:
        return platform
    n_leaves = math.ceil(platform.n_nodes / platform.leaf_size)
    if not platform.split_cores or uses_d_mod_k(model, platform.split_cores, n_leaves):
        raise InputError(file, "platform.degraded_link", "a degraded link needs one explicit link per node, "
                         "which only split_cores = true renders (and not a d-mod-k fat tree)",
                         "set split_cores = true in [platform]")
    xml = platform.xml
    for node in sorted(factors):
        f = float(factors[node])
        if node < 0 or node >= platform.n_nodes:
            raise InputError(file, "platform.degraded_link.node", f"node {node} does not exist: the platform is "
                             f"rendered with {platform.n_nodes} node(s)", f"use nodes 0..{platform.n_nodes - 1}")
        if not MIN_BANDWIDTH_FACTOR <= f < 1:
            raise InputError(file, "platform.degraded_link.bandwidth_factor", f"bandwidth_factor {f:g} is not in "
                             f"[{MIN_BANDWIDTH_FACTOR:g}, 1)", f"use a factor from {MIN_BANDWIDTH_FACTOR:g} to below 1")
        found = re.search(rf'<link id="node-{node}-nic" bandwidth="([^"]+)Bps"', xml)
        if found is None:  # the rendering changed: say so rather than leave the link as it was
            raise InputError(file, "platform.degraded_link", f"the rendered platform has no link node-{node}-nic",
                             "report this: waitlab's platform rendering and degraded links disagree")
        bandwidth = float(found.group(1))
        xml = xml[:found.start(1)] + repr(f * bandwidth) + xml[found.end(1):]
    return dataclasses.replace(platform, xml=xml)
