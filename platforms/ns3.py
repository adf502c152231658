"""A platform SimGrid 3.32's packet-level ns-3 binding can run: a star of point-to-point links.

Debian's libsimgrid 3.32 links ns-3 (``ldd`` lists ``libns3-*.so.37``), so ``--cfg=network/model:ns-3``
is available, but the platforms :mod:`waitlab.platforms.render` writes abort it with SIGFPE even at two
ranks.  The cause is in ``src/surf/network_ns3.cpp`` of 3.32 (``clusterCreation_cb``): every ``<cluster>`` is
built as private point-to-point links to the cluster's router *plus a CSMA bus* of the backbone's bandwidth
``bb_bw``, which is 0 when the cluster has no backbone; ns-3 then divides by a zero data rate.  A cluster
with a backbone runs, but its nodes then share one half-duplex CSMA medium (an Ethernet bus, not a switch).
What runs and means a switch is this file's star: every node one full-duplex point-to-point link to one
router (a store-and-forward IP switch with drop-tail queues).

What ns-3 models differently from SMPI's fluid model (and why it is a probe, not waitlab's model of an
InfiniBand machine): every message is a TCP flow of packets, so queues, incast and TCP's congestion control
exist; InfiniBand's lossless credit-based flow control does not.  Messages between two ranks of one node
finish at once (ns-3 refuses a route from a host to itself; SimGrid warns and completes them immediately).
SMPI's lat/bw factors do not apply under ns-3, so the links take the MPI-level figures directly: bandwidth of
the largest inter-node figure, latency half the smallest figure's one-way time per link (two links per route).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from waitlab.platforms.model import PlatformModel
from waitlab.platforms.render import XML_HEADER

__all__ = ["NS3_CONFIG", "Ns3Star", "ns3_star"]

#: Settings of an ns-3 run: the packet-level model, SMPI's factors off (they belong to the fluid model).
NS3_CONFIG: dict[str, str] = {"network/model": "ns-3", "smpi/lat-factor": "0:1", "smpi/bw-factor": "0:1"}


@dataclass(frozen=True)
class Ns3Star:
    """A rendered star: ``xml`` platform text, ``hostfile`` text (one line per rank), ``core_speed`` (flop/s)."""

    xml: str
    hostfile: str
    core_speed: float
    n_ranks: int
    link_bandwidth: float
    link_latency: float

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Write ``ns3_platform.xml`` and ``ns3_hostfile`` into ``folder``; return their paths."""
        xml, hosts = folder / "ns3_platform.xml", folder / "ns3_hostfile"
        xml.write_text(self.xml)
        hosts.write_text(self.hostfile)
        return xml, hosts


def ns3_star(model: PlatformModel, n_ranks: int, ranks_per_node: int) -> Ns3Star:
    """Render ``n_ranks`` ranks, ``ranks_per_node`` per node, as a star of point-to-point links (see above).

    Examples
    --------
    >>> from waitlab.platforms.model import load_platform
    >>> s = ns3_star(load_platform("dawning_5000a"), 16, 8)
    >>> s.xml.count("<host "), s.hostfile.count("node-1"), round(s.link_bandwidth / 1e9, 3)
    (2, 8, 1.5)
    """
    if n_ranks < 1 or ranks_per_node < 1:
        raise ValueError(f"need at least one rank and one rank per node, got {n_ranks}, {ranks_per_node}")
    nodes = -(-n_ranks // ranks_per_node)
    if model.mpi is not None:
        last, first = model.mpi.inter_node[-1], model.mpi.inter_node[0]
        bw = last.size / last.seconds if len(model.mpi.inter_node) > 1 else model.inter_node.bandwidth
        lat = first.seconds / 2
    else:
        bw, lat = model.inter_node.bandwidth, model.inter_node.latency / 2
    speed = model.node.core_speed
    lines = [XML_HEADER.rstrip("\n"),
             f"  <!-- waitlab ns-3 star for {model.name}: {nodes} nodes, one point-to-point link each to a router -->",
             '  <zone id="world" routing="Floyd">']
    lines += [f'    <host id="node-{n}" speed="{speed!r}f" core="{model.node.cores}"/>' for n in range(nodes)]
    lines.append('    <router id="switch"/>')
    lines += [f'    <link id="link-{n}" bandwidth="{bw!r}Bps" latency="{lat!r}s"/>' for n in range(nodes)]
    lines += [f'    <route src="node-{n}" dst="switch"><link_ctn id="link-{n}"/></route>' for n in range(nodes)]
    lines += ["  </zone>", "</platform>", ""]
    hostfile = "".join(f"node-{r // ranks_per_node}\n" for r in range(n_ranks))
    return Ns3Star("\n".join(lines), hostfile, speed, n_ranks, float(bw), float(lat))
