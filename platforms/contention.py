"""Contention laws of a platform (section ``[contention]`` of its file) and the plugin rules that apply them.

File format (every key optional; no section = ``law = "none"``, no memory path, no send-order cost)::

    [contention]
    law = "karol_hol"    # or "none": head-of-line blocking at the switch output ports
    memory_path = true   # the node's shared memory path: loopback capacity min(n C, M)
    send_order = true    # a rank's non-blocking sends leave one after the other (per-byte smpi/ois)
    port_bandwidth = { value = 2.0e9, source = "..." }   # optional: data rate of a switch port, B/s
    note = "free text"

``law = "karol_hol"``: a switch output port that ``n`` flows cross at once delivers ``C f(n)`` bytes/s,
``f`` = Karol, Hluchyj and Morgan's saturation throughput of an ``n``-input switch under uniform traffic
(:func:`waitlab.models.contention.hol_factors`: ``f(2) = 0.75``, ``f(8) = 0.618``, ``f(n) -> 2 - sqrt(2)``).
Ports: every switch-to-node link (``*_DOWN``), the leaf uplinks of the balanced rendering (both directions)
and the up- and down-ports between the leaf and top switches of the D-mod-k fat tree; not the nodes'
own send links (one input: nothing to block).  The law counts contending *input ports*, not flows: the plugin
follows every communication from start to end and counts, per port, the distinct links that feed it on the
communications' routes (the link just before the port: a source node's own link into its leaf switch, or the
link from another switch), so a node's ranks, which enter the switch through one port, count once.  A
communication counts from its start; SimGrid's flow count ``n`` of the link leaves out flows still in their
latency phase, and the plugin uses ``min(inputs, n)``.  docs/calibration.md measures the difference to the
earlier proxy (``ceil(n / k)`` inputs, ``k`` = ranks per node, kept as ``per_input`` for comparison) and to
counting flows.

``port_bandwidth`` (optional): the data rate ``P`` of a switch port, when it is above the MPI-level rate ``B``
of the platform's largest-message ``[mpi]`` figure (the rate SMPI's calibrated links deliver).  HOL blocking
happens in the switch, at the port's own rate; what limits one message to ``B`` is the host side (adapter and
I/O bus), which HOL blocking does not slow.  A port fed by ``n`` inputs then delivers ``min(B, P f(n))``, i.e.
the link's factor is ``min(1, r f(n))`` with ``r = P / B`` (:func:`port_factors`).  Without it ``r = 1``: the
loss applies to the MPI-level rate (the behaviour before ``port_bandwidth`` existed).  A ``port_bandwidth`` below
``B``, or without ``law = "karol_hol"`` or without ``[mpi]`` (no ``B``), is refused when the file is loaded
(:func:`check_contention`), as are ``memory_path`` without ``intra_node.memory_bandwidth`` and ``send_order``
without ``[mpi]``: settings that could not act.

``memory_path = true``: the loopback of every node (the intra-node path of SMPI's cluster) gets capacity
``min(n C, M)``: each of ``n`` on-node messages still gets the calibrated intra-node bandwidth ``C`` alone,
but together they cannot exceed ``M = intra_node.memory_bandwidth`` (divided by the large-message bandwidth
factor, which SMPI applies to every flow: the figure is MPI-level).

The laws reach SimGrid through waitlab's contention plugin (``simulator/native/waitlab_contention.cpp``, a shared
object loaded into every SMPI run that has rules: replays and real programs alike) as the setting
``waitlab/contention`` (rules, see :func:`plugin_rules`), which the simulator hands to the plugin in the
``WAITLAB_CONTENTION`` environment variable; it is recorded with every other setting in run.json, and how many links
each law was installed on (every rendered link it applies to, crossed by a message or not) in ``contention.acted``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, unknown_name
from waitlab.models.contention import LIMIT, hol_factors
from waitlab.platforms.figures import bandwidth
from waitlab.platforms.mpi_spec import MpiSpec

__all__ = ["CONTENTION_KEYS", "CONTENTION_LAWS", "HOL_SOURCE", "SETTING", "ContentionSpec", "check_contention",
           "plugin_rules", "port_factors", "read_contention"]

#: Laws a platform may name.
CONTENTION_LAWS: tuple[str, ...] = ("none", "karol_hol")
CONTENTION_KEYS: tuple[str, ...] = ("law", "memory_path", "send_order", "note", "port_bandwidth")
#: Where the HOL law comes from (shown by ``waitlab platforms NAME`` and recorded in run.json).
HOL_SOURCE = ("Karol, Hluchyj and Morgan, 'Input versus output queueing on a space-division packet switch', "
              "IEEE Trans. Commun. 35(12), 1987: saturation throughput of an N-input input-queued switch "
              "under uniform traffic (exact Markov chain of their model, waitlab.models.contention)")
#: The ``--cfg``-style key the plugin's rules travel under (handed to the plugin as ``WAITLAB_CONTENTION``).
SETTING = "waitlab/contention"  # a key of waitlab.simulator.smpi.PLUGIN_SETTINGS
#: Weight of a flow's cross-traffic on its reverse route in SimGrid 3.32's CM02 network model (network_cm02.cpp).
CROSSTRAFFIC = 0.05
#: Flow counts the HOL law lists explicitly; more flows get the last value (within 0.3% of 2 - sqrt(2)).
HOL_TABLE = 256


@dataclass(frozen=True)
class ContentionSpec:
    """A platform's contention laws (see the module docstring)."""

    law: str = "none"
    memory_path: bool = False
    send_order: bool = False
    note: str = ""
    port_bandwidth: float | None = None  # B/s of data a switch port carries (None: the MPI-level rate)


class _FigureReader(Protocol):
    def figure(self, dotted: str, entry: Any, *, integer: bool = ...,
               check: Callable[[float], str] = ...) -> float: ...


def read_contention(section: Mapping[str, Any], file: str, reader: _FigureReader | None = None) -> ContentionSpec:
    """Validate a ``[contention]`` table; one-line :class:`InputError` naming the key and the fix.

    ``reader`` (the platform file's figure reader) validates ``port_bandwidth`` (a figure with its source) and
    records it with the file's other figures; without it ``port_bandwidth`` is refused.
    """
    for key in section:
        if key not in CONTENTION_KEYS:
            raise unknown_name(file, f"contention.{key}", key, CONTENTION_KEYS,
                               f"allowed keys: {', '.join(CONTENTION_KEYS)}")
    law = section.get("law", "none")
    if law not in CONTENTION_LAWS:
        raise InputError(file, "contention.law", f"unknown law {law!r}",
                         f"use one of: {', '.join(repr(x) for x in CONTENTION_LAWS)}")
    flags = {}
    for key in ("memory_path", "send_order"):
        v = section.get(key, False)
        if not isinstance(v, bool):
            raise InputError(file, f"contention.{key}", f"must be true or false, got {v!r}", f"write {key} = true")
        flags[key] = v
    note = section.get("note", "")
    if not isinstance(note, str):
        raise InputError(file, "contention.note", f"must be a string, got {note!r}", 'write note = "..."')
    port = None
    if "port_bandwidth" in section:
        if reader is None:
            raise InputError(file, "contention.port_bandwidth", "needs the platform file's figure reader",
                             "load the file with waitlab.platforms.load_platform")
        port = reader.figure("contention.port_bandwidth", section["port_bandwidth"], check=bandwidth)
    return ContentionSpec(law, flags["memory_path"], flags["send_order"], note, port)


def check_contention(spec: ContentionSpec, file: str, mpi: MpiSpec | None, memory_bandwidth: float | None) -> None:
    """Refuse settings of a valid ``[contention]`` table that cannot apply to the rest of the platform file.

    ``memory_path`` needs ``intra_node.memory_bandwidth`` (the capacity shared); ``send_order`` needs ``[mpi]`` (its
    per-byte cost is the largest-message MPI-level rate); ``port_bandwidth`` needs ``law = "karol_hol"`` and
    ``[mpi]`` (the ratio ``r = P / B``) and must not be below that MPI-level rate ``B`` (module docstring).
    """
    if spec.memory_path and memory_bandwidth is None:
        raise InputError(file, "contention.memory_path", "needs intra_node.memory_bandwidth (the capacity the "
                         "node's messages share), which this file does not give",
                         'add memory_bandwidth = { value = ..., source = "..." } under [intra_node], or remove '
                         "memory_path")
    if spec.send_order and mpi is None:
        raise InputError(file, "contention.send_order", "needs the [mpi] section: the send-order cost is charged per "
                         "byte at the MPI-level rate of its largest inter_node figure",
                         "add [mpi] with its inter_node figures, or remove send_order")
    if spec.port_bandwidth is None:
        return
    if spec.law != "karol_hol":
        raise InputError(file, "contention.port_bandwidth", f'is only used by law = "karol_hol" (law is {spec.law!r})',
                         'remove port_bandwidth, or set law = "karol_hol"')
    if mpi is None:
        raise InputError(file, "contention.port_bandwidth", "needs the [mpi] section: the port's data rate acts "
                         "through its ratio to the MPI-level rate of the largest inter_node figure",
                         "add [mpi] with its inter_node figures, or remove port_bandwidth")
    last = mpi.inter_node[-1]
    rate = last.size / last.seconds
    if spec.port_bandwidth < rate:
        raise InputError(file, "contention.port_bandwidth.value",
                         f"{spec.port_bandwidth:g} B/s is below the MPI-level rate {rate:g} B/s ({last.key}, "
                         f"{last.size} B): a port slower than one message is not a head-of-line effect",
                         f"give the switch port's data rate, at least {rate:g} B/s, or remove port_bandwidth (the "
                         "law then acts on the MPI-level rate)")


def port_factors(n_max: int, ratio: float = 1.0) -> npt.NDArray[np.float64]:
    """Factor of a switch port's MPI-level capacity when ``n = 1 .. n_max`` inputs feed it: ``min(1, r f(n))``.

    ``f`` is Karol et al.'s saturation throughput (:func:`waitlab.models.contention.hol_factors`), ``r`` the
    port's data rate over the MPI-level rate (module docstring); ``r = 1`` gives ``f`` itself.
    """
    if ratio < 1.0:
        raise ValueError(f"a port slower than the MPI-level rate is not a HOL effect: ratio {ratio} < 1")
    return np.minimum(1.0, ratio * hol_factors(n_max))  # capacity = min(B, P f(n)) / B


def _n(x: float) -> str:
    return repr(float(x))


def hol_ports(d_mod_k_leaves: tuple[int, ...] = ()) -> tuple[str, ...]:
    """Link-name patterns of the switch output ports the HOL law applies to (module docstring).

    ``d_mod_k_leaves``: SimGrid ids of the leaf switches of a rendered ``FAT_TREE`` cluster (their links to the
    top switches are ``link_from_<leaf>_<top>_<k>``; the nodes' own links start at a node id).
    """
    return ("*_DOWN", "*-uplink_UP", *(f"link_from_{leaf}_*_UP" for leaf in d_mod_k_leaves))


def plugin_rules(spec: ContentionSpec, memory_bandwidth: float | None, bw_factor: float,
                 d_mod_k_leaves: tuple[int, ...] = (), per_input: int | None = None,
                 mpi_bandwidth: float | None = None) -> str:
    """The plugin's ``WAITLAB_CONTENTION`` rules for a rendered platform ('' when no law applies).

    Parameters
    ----------
    spec : ContentionSpec
    memory_bandwidth : float or None
        ``intra_node.memory_bandwidth`` (MPI-level B/s); needed when ``spec.memory_path``.
    bw_factor : float
        SMPI's large-message bandwidth factor (the memory figure is divided by it: network level).
    d_mod_k_leaves : tuple of int
        Leaf switch ids of a D-mod-k fat tree (:func:`hol_ports`).
    per_input : int or None
        None (the law): the plugin counts the input ports exactly (rule field ``inputs``).  An int ``k``
        gives the flow-count proxy instead (``n`` flows contend as ``ceil(n / k)`` inputs; ``k = 1``: every
        flow an input), kept to measure what the exact count changes.
    mpi_bandwidth : float or None
        MPI-level B/s of the platform's largest-message figure (with ``spec.port_bandwidth``: the port's
        headroom ``r = port_bandwidth / mpi_bandwidth``).
    """
    rules = []
    if spec.law == "karol_hol":
        f = port_factors(HOL_TABLE, port_ratio(spec, mpi_bandwidth))
        count = "inputs" if per_input is None else str(int(per_input))
        if per_input is not None and per_input < 1:
            raise ValueError(f"per_input must be at least 1, got {per_input}")
        rules.append("hol:" + "|".join(hol_ports(d_mod_k_leaves)) + f":{count}:"
                     + ",".join(f"{x:.6f}" for x in f))
    if spec.memory_path and memory_bandwidth is not None:
        # x (1 + 0.05): the loopback is its own reverse route, so it also carries every flow's cross-traffic
        # (weight 0.05, SimGrid 3.32 network_cm02.cpp, network/crosstraffic); a FATPIPE ignored it
        rules.append(f"mem:*_loopback:{_n(memory_bandwidth / bw_factor)}:{_n(1.0 + CROSSTRAFFIC)}")
    return ";".join(rules)


def port_ratio(spec: ContentionSpec, mpi_bandwidth: float | None) -> float:
    """``r = port_bandwidth / mpi_bandwidth`` (1 without a port figure); a port below the MPI rate is refused."""
    if spec.port_bandwidth is None or mpi_bandwidth is None:
        return 1.0
    return spec.port_bandwidth / mpi_bandwidth


def describe_law(spec: ContentionSpec, memory_bandwidth: float | None,
                 mpi_bandwidth: float | None = None) -> list[str]:
    """Lines for ``waitlab platforms NAME``: the law, its source and its values."""
    out = [f"contention law: {spec.law}"]
    if spec.law == "karol_hol":
        f = hol_factors(HOL_TABLE)
        shown = ", ".join(f"f({k})={f[k - 1]:.4f}" for k in (1, 2, 3, 4, 8, 16, 64))
        out += ["  HOL blocking at switch output ports: capacity x f(n), n = contending input ports "
                f"(distinct links feeding the port, counted per communication); {shown}; "
                f"f(n) -> 2 - sqrt(2) = {LIMIT:.4f}", f"  source: {HOL_SOURCE}"]
        r = port_ratio(spec, mpi_bandwidth)
        if spec.port_bandwidth is not None and r != 1.0:
            g = port_factors(HOL_TABLE, r)
            used = ", ".join(f"{k}: {g[k - 1]:.4f}" for k in (1, 2, 3, 4, 8, 16, 64))
            out.append(f"  at the port's data rate {spec.port_bandwidth / 1e9:.4g} GB/s (contention.port_bandwidth) "
                       f"= {r:.4g} x the MPI-level rate: factor min(1, {r:.4g} f(n)) = {used}")
    if spec.memory_path:
        mem = "no intra_node.memory_bandwidth: not applied" if memory_bandwidth is None else \
            f"min(n x C, {memory_bandwidth / 1e9:.4g} GB/s) (intra_node.memory_bandwidth)"
        out.append(f"  shared memory path: loopback capacity {mem}")
    order = ("a rank hands its isends to the NIC one after the other (per-byte smpi/ois)" if spec.send_order
             else "all isends start at once")
    out.append(f"  send order: {order}")
    if spec.note:
        out.append(f"  note: {spec.note}")
    return out


def law_record(spec: ContentionSpec, memory_bandwidth: float | None,
               mpi_bandwidth: float | None = None) -> dict[str, Any]:
    """What run.json records of the contention model (the law's values included)."""
    rec: dict[str, Any] = {"law": spec.law, "memory_path": spec.memory_path, "send_order": spec.send_order}
    if spec.law == "karol_hol":
        rec["source"] = HOL_SOURCE
        rec["hol_factors_1_to_16"] = [round(float(x), 6) for x in np.asarray(hol_factors(16))]
        r = port_ratio(spec, mpi_bandwidth)
        if r != 1.0:
            rec["port_bandwidth"] = spec.port_bandwidth
            rec["port_ratio"] = r
            rec["port_factors_1_to_16"] = [round(float(x), 6) for x in np.asarray(port_factors(16, r))]
    if spec.memory_path and memory_bandwidth is not None:
        rec["memory_bandwidth"] = memory_bandwidth
    return rec
