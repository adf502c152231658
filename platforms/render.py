"""Render a :class:`~waitlab.platforms.model.PlatformModel` to SimGrid 3.32 XML and an smpirun hostfile.

Structure of the rendered platform
----------------------------------
Nodes are grouped into leaf switches of ``topology.leaf_size`` nodes; leaves
hang under one spine (only rendered when there is more than one leaf).

Default (``split_cores=False``): each leaf is one flat SimGrid ``<cluster>``
whose hosts are the nodes (``core`` = rank slots per node, ``speed`` = one
slot's flop/s).  A node's private split-duplex link is its network link
(``inter_node.bandwidth``, half of ``inter_node.latency``, so two nodes of one
leaf are ``inter_node.latency`` apart); ranks of one node talk over the
cluster loopback (``intra_node``; a FATPIPE link, so on-node messages do not
share bandwidth).  No backbone (``bb_*``) is ever rendered: SimGrid 3.32's
solver crashes on clusters with both loopback and backbone under heavy
alltoall traffic.

``split_cores=True``: each node is a cluster of single-core hosts (one per
rank slot) joined by split-duplex links of ``intra_node.bandwidth`` and half
the ``intra_node.latency``; its gateway reaches the leaf switch through the
node's network link, whose latency is reduced by the core-link latency so that
uncontended on-node and off-node message times equal the default rendering
(clamped at 0 if ``intra_node.latency > inter_node.latency``).  Use it to put
a different speed profile (noise) on every core.  With an ``intra_node.memory_bandwidth`` figure,
the node cluster gets a shared backbone of that bandwidth: all messages of the node's cores share
the node's memory bandwidth (the default rendering cannot: its loopback is a FATPIPE).

Leaves connect to the spine through one split-duplex uplink each, of
``leaf_size * inter_node.bandwidth / taper`` bytes/s and ``hop_latency``
seconds: a leaf-to-leaf message crosses two more links than a message inside
a leaf.  This is the "two-level cluster with a narrower uplink" model of the
Sunway supernodes (taper 4.7); it balances load perfectly over the uplink
capacity (no static-routing collisions).  This is ``topology.routing =
"balanced"`` (the default).

``topology.routing = "d_mod_k"`` (the Sunway file; more than one leaf, not
split): one SimGrid ``FAT_TREE`` cluster with static destination-mod-k routes
through ``floor(leaf_size / taper)`` parallel up-ports per leaf
(:mod:`waitlab.platforms.fat_tree`).
``split_cores=True`` keeps the balanced rendering.

Host names: ``node-<i>`` (default) or ``node-<i>-core-<j>`` (split).  The
hostfile has one line per rank (smpirun maps rank ``r`` to line
``r mod lines``), so ranks land exactly on :attr:`RenderedPlatform.host_of_rank`.

Examples
--------
>>> from waitlab.platforms import load_platform
>>> rp = render_platform(load_platform("dawning_5000a"), 20)
>>> rp.n_nodes, rp.ranks_per_node, rp.host_of_rank[15], rp.host_of_rank[16]
(2, 16, 'node-0', 'node-1')
>>> rp.hostfile.splitlines()[16]
'node-1'
>>> render_platform(load_platform("dawning_5000a"), 20).xml == rp.xml
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from waitlab.errors import InputError
from waitlab.platforms.fat_tree import d_mod_k_cluster, uses_d_mod_k
from waitlab.platforms.model import PlatformModel
from waitlab.platforms.mpi_spec import rma_env
from waitlab.platforms.placement import Placement, place_ranks, slot_of_rank
from waitlab.platforms.smpi_factors import calibrate
from waitlab.platforms.xml_text import escape, quoteattr

__all__ = ["RenderedPlatform", "render_platform"]

#: The first lines of every SimGrid platform file waitlab writes.
XML_HEADER = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
"""


@dataclass(frozen=True)
class RenderedPlatform:
    """A platform ready for ``smpirun -platform platform.xml -hostfile hostfile``.

    Attributes
    ----------
    name : str
        The platform model's name.
    xml : str
        SimGrid platform XML (deterministic: same inputs, same bytes).
    hostfile : str
        One host name per line, line ``r`` for rank ``r``.
    core_speed : float
        flop/s one rank gets alone on its core (``compute F`` takes ``F / core_speed`` s).
    n_nodes : int
        Nodes in the platform.
    ranks_per_node : int
        Rank slots per node (at most this many ranks share a node; where they go: ``placement``).
    host_of_rank : tuple of str
        SimGrid host of every rank.
    node_of_rank : tuple of int
        Node index of every rank.
    hosts : tuple of str
        Every host of the platform, in XML order (valid keys for ``speed_profiles``).
    split_cores : bool
        Whether every rank slot is its own single-core host.
    placement : Placement
        The placement rule that gave ``node_of_rank``.
    leaf_size : int
        Nodes per leaf switch (supernode): rank ``r`` is in supernode ``node_of_rank[r] // leaf_size``.
    smpi_config : dict of str to str
        SimGrid ``--cfg`` settings that calibrate SMPI to the platform's MPI-level figures
        (:func:`waitlab.platforms.smpi_factors.calibrate`); merge them under a scenario's own settings.
    program_env : dict of str to str
        Environment of a real program's run: the measurement layer's one-sided protocol
        (:func:`waitlab.platforms.mpi_spec.rma_env`, ``[mpi] rma_protocol``).
    """

    name: str
    xml: str
    hostfile: str
    core_speed: float
    n_nodes: int
    ranks_per_node: int
    host_of_rank: tuple[str, ...]
    node_of_rank: tuple[int, ...]
    hosts: tuple[str, ...]
    split_cores: bool
    smpi_config: dict[str, str] = field(default_factory=dict)
    placement: Placement = field(default_factory=Placement)
    leaf_size: int = 1
    program_env: dict[str, str] = field(default_factory=dict)

    @property
    def n_ranks(self) -> int:
        """Number of MPI ranks."""
        return len(self.host_of_rank)

    def write(self, folder: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``platform.xml`` and ``hostfile`` into ``folder`` (created if needed).

        Returns
        -------
        tuple of Path
            ``(platform_xml_path, hostfile_path)``.
        """
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        xml_path = out / "platform.xml"
        host_path = out / "hostfile"
        xml_path.write_text(self.xml, encoding="utf-8")
        host_path.write_text(self.hostfile, encoding="utf-8")
        return xml_path, host_path


def _n(x: float) -> str:
    """Shortest round-trip decimal text of a float (deterministic, parsed exactly by strtod)."""
    return repr(float(x))


def _int_arg(model: PlatformModel, field: str, value: object, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(model.name, field, f"must be a whole number, got {value!r}", fix)
    if value < 1:
        raise InputError(model.name, field, f"must be >= 1, got {value}", fix)
    return value


def _layout(model: PlatformModel, n_ranks: int, ranks_per_node: int | None, nodes: int | None) -> tuple[int, int]:
    n_ranks = _int_arg(model, "n_ranks", n_ranks, "ask for at least one rank")
    cores = model.node.cores
    if ranks_per_node is None and nodes is not None:
        # only the node count given: spread the ranks evenly over those nodes
        n_given = _int_arg(model, "nodes", nodes, "ask for at least one node")
        rpn = min(cores, math.ceil(n_ranks / n_given))
    elif ranks_per_node is None:
        rpn = cores
    else:
        rpn = _int_arg(model, "ranks_per_node", ranks_per_node, f"use 1..{cores}")
        if rpn > cores:
            raise InputError(model.name, "ranks_per_node",
                             f"{rpn} ranks per node, but a {model.name} node has {cores} rank slots (node.cores)",
                             f"use ranks_per_node <= {cores}")
    if nodes is None:
        n_nodes = math.ceil(n_ranks / rpn)
    else:
        n_nodes = _int_arg(model, "nodes", nodes, "ask for at least one node")
    if n_nodes > model.max_nodes:
        raise InputError(model.name, "nodes",
                         f"{n_ranks} ranks at {rpn} per node need {n_nodes} nodes, but {model.name} has only "
                         f"{model.max_nodes} (machine.max_nodes)" if nodes is None else
                         f"{n_nodes} nodes requested, but {model.name} has only {model.max_nodes} "
                         "(machine.max_nodes)",
                         f"use at most {_ranks(model.max_nodes * rpn)} at {rpn} per node"
                         + (f" (at most {model.max_nodes * cores} with {cores} per node)" if rpn != cores else "")
                         if nodes is None else
                         f"use nodes <= {model.max_nodes}")
    if n_nodes * rpn < n_ranks:
        raise InputError(model.name, "n_ranks",
                         f"{n_ranks} ranks do not fit on {n_nodes} nodes x {rpn} ranks per node",
                         _fit_fix(n_ranks, n_nodes, rpn, cores, model.max_nodes))
    return rpn, n_nodes


def _fit_fix(n_ranks: int, n_nodes: int, rpn: int, cores: int, max_nodes: int) -> str:
    """What makes ``n_ranks`` fit when ``n_nodes`` nodes x ``rpn`` ranks do not: more nodes (within the machine),
    more ranks per node (within a node's ``cores``), or fewer ranks; only the options that exist.

    >>> _fit_fix(40, 2, 16, 16, 1000)
    'use nodes >= 3, or at most 32 ranks (2 nodes x 16 ranks per node; a node has 16 rank slots)'
    >>> _fit_fix(10, 2, 4, 16, 1000)
    'use nodes >= 3, or ranks_per_node >= 5, or at most 8 ranks'
    """
    options = []
    if math.ceil(n_ranks / rpn) <= max_nodes:
        options.append(f"nodes >= {math.ceil(n_ranks / rpn)}")
    need = math.ceil(n_ranks / n_nodes)
    if need <= cores:
        options.append(f"ranks_per_node >= {need}")
    options.append(f"at most {n_nodes * rpn} ranks")
    full = "" if need <= cores else f" ({n_nodes} nodes x {rpn} ranks per node; a node has {cores} rank slots)"
    return "use " + ", or ".join(options) + full


def _check_profile(host: str, text: str) -> list[str]:
    """Validate a deterministic SimGrid speed profile body; return its cleaned lines."""
    field = f"speed_profiles[{host!r}]"
    fix = "write lines 'TIME SCALE' (seconds, fraction of peak speed, times non-decreasing), optionally " \
          "'PERIODICITY P' to repeat every P seconds or 'LOOPAFTER D'"
    if not isinstance(text, str):
        raise InputError("speed_profiles", field, f"must be a string, got {type(text).__name__}", fix)
    lines: list[str] = []
    last = 0.0
    period: float | None = None
    loop_after: float | None = None
    n_points = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#%":
            continue
        parts = line.split()
        try:
            if parts[0] in ("PERIODICITY", "LOOPAFTER"):
                if len(parts) != 2:
                    raise ValueError(line)
                v = float(parts[1])
                if not v >= 0 or (parts[0] == "PERIODICITY" and v == 0):
                    raise InputError("speed_profiles", field, f"{parts[0]} must be > 0, got {parts[1]}", fix)
                if parts[0] == "PERIODICITY":
                    period = v
                else:
                    loop_after = v
            else:
                if len(parts) != 2:
                    raise ValueError(line)
                t, s = float(parts[0]), float(parts[1])
                if not (math.isfinite(t) and math.isfinite(s)) or t < 0 or s < 0:
                    raise InputError("speed_profiles", field,
                                     f"time and scale must be finite and >= 0 in {line!r}", fix)
                if t < last:
                    raise InputError("speed_profiles", field, f"times must not decrease: {line!r} after {last}",
                                     fix)
                last = t
                n_points += 1
        except ValueError:
            raise InputError("speed_profiles", field, f"cannot read line {line!r}", fix) from None
        lines.append(" ".join(parts))
    if n_points == 0:
        raise InputError("speed_profiles", field, "has no 'TIME SCALE' line", fix)
    if period is not None and loop_after is not None:
        raise InputError("speed_profiles", field, "has both PERIODICITY and LOOPAFTER",
                         "keep one of them (SimGrid 3.32 rejects the combination)")
    if period is not None and period < last:
        raise InputError("speed_profiles", field, f"PERIODICITY {period:g} is shorter than the last time {last:g}",
                         "make the period at least the last time of the pattern")
    return lines


def render_platform(model: PlatformModel, n_ranks: int, ranks_per_node: int | None = None,
                    nodes: int | None = None, split_cores: bool = False,
                    speed_profiles: Mapping[str, str] | None = None,
                    placement: Placement | None = None) -> RenderedPlatform:
    """Render ``n_ranks`` MPI ranks on a scaled-down copy of ``model``.

    Parameters
    ----------
    model : PlatformModel
        From :func:`~waitlab.platforms.load_platform`.
    n_ranks : int
        Number of MPI ranks.
    ranks_per_node : int, optional
        Rank slots used per node; default ``model.node.cores``.  At most ``model.node.cores``.
    nodes : int, optional
        Nodes to render; default ``ceil(n_ranks / ranks_per_node)`` or up to the highest node the placement
        uses.  At most ``model.max_nodes``; extra nodes stay idle.  A placement using a node at or above an
        explicit ``nodes`` is refused.
    split_cores : bool
        Render one single-core host per rank slot instead of one multi-core host per node.
    speed_profiles : Mapping of str to str, optional
        Host name -> SimGrid speed profile body (lines ``TIME SCALE``; SCALE is a
        fraction of the host's peak speed; a ``PERIODICITY P`` line repeats the
        pattern every P seconds).  Each profile becomes its own ``<trace>`` (id
        ``speed-<host>``) attached with ``<trace_connect kind="SPEED">``.  With
        ``split_cores=False`` a profile slows every rank of that node.
    placement : Placement, optional
        Which node each rank runs on (:mod:`waitlab.platforms.placement`); default block-wise.  The
        platform is rendered up to the highest node used, so a rank on node ``i`` sits in leaf switch
        ``i // leaf_size`` (idle nodes are rendered too: they share nothing with the job but the uplink).

    Returns
    -------
    RenderedPlatform

    Raises
    ------
    waitlab.errors.InputError
        Too many nodes, ranks that do not fit, ranks per node above the core
        count, an unknown host or a malformed profile.
    """
    rpn, n_nodes = _layout(model, n_ranks, ranks_per_node, nodes)
    split = bool(split_cores)
    leaf_size = model.topology.leaf_size
    place = placement or Placement()
    node_arr = place_ranks(place, n_ranks, rpn, n_nodes, leaf_size, model.max_nodes)
    used = int(node_arr.max()) + 1
    if nodes is not None and used > n_nodes:  # an explicit node count is the count, not a hint
        raise InputError(model.name, "nodes", f"{nodes} nodes requested, but placement = \"{place.kind}\" puts "
                         f"ranks on node {used - 1}", f"use nodes >= {used}, or remove nodes")
    n_nodes = max(n_nodes, used)
    slot_arr = slot_of_rank(node_arr)
    n_leaves = math.ceil(n_nodes / leaf_size)
    d_mod_k = uses_d_mod_k(model, split, n_leaves)
    if d_mod_k:  # SimGrid's fat tree needs every node of every leaf
        n_nodes = n_leaves * leaf_size
    calibration = calibrate(model)
    # links as calibrated: the loopback may be chosen to meet intra-node MPI figures (smpi_factors.py)
    intra, inter, node = calibration.intra_node, calibration.inter_node, model.node

    # the node's memory system, shared by all its messages: a backbone of the per-node cluster (split_cores only;
    # the default rendering's loopback is a FATPIPE, and SimGrid 3.32 crashes on a loopback with a backbone)
    # The figure is MPI-level (what the messages get), the backbone network-level: divide by the large-message
    # bandwidth factor, which SMPI applies to every flow crossing it.
    bus = ("" if model.memory_bandwidth is None else
           f' bb_bw="{_n(model.memory_bandwidth / calibration.bw_factor[-1])}Bps" bb_lat="0.0s"'
           ' bb_sharing_policy="SHARED"')
    if split:
        hosts = tuple(f"node-{i}-core-{j}" for i in range(n_nodes) for j in range(rpn))
        host_of_rank = tuple(f"node-{i}-core-{j}" for i, j in zip(node_arr.tolist(), slot_arr.tolist(), strict=True))
    else:
        hosts = tuple(f"node-{i}" for i in range(n_nodes))
        host_of_rank = tuple(f"node-{i}" for i in node_arr.tolist())
    node_of_rank = tuple(node_arr.tolist())

    out = [XML_HEADER]
    out.append(f"  <!-- waitlab platform {escape(model.name)}: {n_ranks} ranks on {n_nodes} nodes x {rpn} rank slots"
               f", {n_leaves} leaf switch{'es' if n_leaves > 1 else ''}, split_cores={split} -->\n")
    out.append('  <zone id="world" routing="Floyd">\n')
    leaf_gateways: list[str] = []
    if d_mod_k:
        out.append(d_mod_k_cluster(model, n_leaves, node.core_speed, node.cores, inter.bandwidth, inter.latency,
                                    intra.bandwidth, intra.latency))
    for leaf in range(0 if d_mod_k else n_leaves):
        first = leaf * leaf_size
        last = min(n_nodes, first + leaf_size) - 1
        if not split:
            gw = f"leaf-{leaf}-switch"
            out.append(
                f'    <cluster id="leaf-{leaf}" prefix="node-" suffix="" radical="{first}-{last}" '
                f'speed="{_n(node.core_speed)}f" core="{node.cores}" '
                f'bw="{_n(inter.bandwidth)}Bps" lat="{_n(inter.latency / 2)}s" sharing_policy="SPLITDUPLEX" '
                f'loopback_bw="{_n(intra.bandwidth)}Bps" loopback_lat="{_n(intra.latency)}s" router_id="{gw}"/>\n')
        else:
            gw = f"leaf-{leaf}-switch"
            nic_lat = max(0.0, inter.latency / 2 - intra.latency / 2)
            out.append(f'    <zone id="leaf-{leaf}" routing="Floyd">\n')
            out.append(f'      <zone id="leaf-{leaf}-sw" routing="Full">\n        <router id="{gw}"/>\n'
                       "      </zone>\n")
            for i in range(first, last + 1):
                out.append(
                    f'      <cluster id="node-{i}" prefix="node-{i}-core-" suffix="" radical="0-{rpn - 1}" '
                    f'speed="{_n(node.core_speed)}f" core="1" bw="{_n(intra.bandwidth)}Bps" '
                    f'lat="{_n(intra.latency / 2)}s" sharing_policy="SPLITDUPLEX" router_id="node-{i}-router"{bus}/>\n')
            for i in range(first, last + 1):
                out.append(f'      <link id="node-{i}-nic" bandwidth="{_n(inter.bandwidth)}Bps" '
                           f'latency="{_n(nic_lat)}s" sharing_policy="SPLITDUPLEX"/>\n')
            for i in range(first, last + 1):
                out.append(f'      <zoneRoute src="node-{i}" dst="leaf-{leaf}-sw" gw_src="node-{i}-router" '
                           f'gw_dst="{gw}"><link_ctn id="node-{i}-nic" direction="UP"/></zoneRoute>\n')
            out.append("    </zone>\n")
        leaf_gateways.append(gw)
    if n_leaves > 1 and not d_mod_k:
        uplink_bw = leaf_size * inter.bandwidth / model.topology.taper
        out.append('    <zone id="spine" routing="Full">\n      <router id="spine-switch"/>\n    </zone>\n')
        for leaf in range(n_leaves):
            out.append(f'    <link id="leaf-{leaf}-uplink" bandwidth="{_n(uplink_bw)}Bps" '
                       f'latency="{_n(model.topology.hop_latency)}s" sharing_policy="SPLITDUPLEX"/>\n')
        for leaf, gw in enumerate(leaf_gateways):
            out.append(f'    <zoneRoute src="leaf-{leaf}" dst="spine" gw_src="{gw}" gw_dst="spine-switch">'
                       f'<link_ctn id="leaf-{leaf}-uplink" direction="UP"/></zoneRoute>\n')
    out.append("  </zone>\n")

    if speed_profiles:
        index = {h: k for k, h in enumerate(hosts)}
        unknown = sorted(h for h in speed_profiles if h not in index)
        if unknown:
            raise InputError("speed_profiles", f"speed_profiles[{unknown[0]!r}]", "no such host in the platform",
                             f"use host names like {hosts[0]!r} .. {hosts[-1]!r} (RenderedPlatform.hosts)")
        # One <trace> per host: SimGrid 3.32 keys trace_connect by trace id, so a trace attached to
        # several hosts silently reaches only the first of them.
        for host in sorted(speed_profiles, key=index.__getitem__):
            body = "\n".join(escape(line) for line in _check_profile(host, speed_profiles[host]))
            tid = f"speed-{host}"
            out.append(f'  <trace id={quoteattr(tid)} periodicity="-1">\n{body}\n  </trace>\n')
            out.append(f'  <trace_connect kind="SPEED" trace={quoteattr(tid)} element={quoteattr(host)}/>\n')
    out.append("</platform>\n")

    return RenderedPlatform(
        name=model.name, xml="".join(out), hostfile="".join(h + "\n" for h in host_of_rank),
        core_speed=node.core_speed, n_nodes=n_nodes, ranks_per_node=rpn, host_of_rank=host_of_rank,
        node_of_rank=node_of_rank, hosts=hosts, split_cores=split, smpi_config=dict(calibration.smpi_config),
        placement=place, leaf_size=leaf_size, program_env=rma_env(model.mpi),
    )


def _ranks(n: int) -> str:
    """``n`` ranks, spelled for a message (``1 rank``, ``2 ranks``)."""
    return f"{n} rank" if n == 1 else f"{n} ranks"
