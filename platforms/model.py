"""Platform models: what a machine is, with the provenance of every figure.

A platform is described by a TOML file.  The built-in ones live in
``platforms/data/<name>.toml``; a user file of the same format can be loaded
by path.  All quantities are SI: bytes, bytes per second, seconds, flop/s.

File format
-----------
Every *number* is an inline table carrying its provenance: either a
``source`` (a seed paper with section/table, or a public figure) or
``assumed = true`` with a ``reason``::

    name = "my_cluster"                 # optional, defaults to the file stem
    description = "What this machine is."

    [machine]
    max_nodes = { value = 1920, source = "seed 001 §4.1 table 1" }

    [node]
    cores = { value = 16, source = "..." }          # MPI rank slots per node
    core_speed = { value = 7.6e9, source = "..." }  # flop/s of one slot
    memory = { value = 68719476736, source = "..." }  # bytes
    hardware_cores = { value = 260, source = "..." }  # optional, informative

    [intra_node]          # messages between ranks of one node
    bandwidth = { value = 4.0e9, assumed = true, reason = "..." }
    latency = { value = 5.0e-7, assumed = true, reason = "..." }

    [inter_node]          # node to node, through the leaf switch
    bandwidth = { value = 2.5e9, source = "..." }   # one node's link
    latency = { value = 1.6e-6, source = "..." }    # end to end, same leaf

    [topology]
    kind = "fat_tree"     # or "crossbar" (one switch; no other keys)
    note = "free text"    # optional
    leaf_size = { value = 12, assumed = true, reason = "..." }  # nodes per leaf switch
    taper = { value = 1.0, assumed = true, reason = "..." }     # down:up bandwidth at a leaf
    hop_latency = { value = 1.4e-7, assumed = true, reason = "..." }  # leaf <-> spine link

    [disk]                # where trace buffers are flushed to (per node)
    bandwidth = { value = 1.0e8, assumed = true, reason = "..." }
    latency = { value = 5.0e-3, assumed = true, reason = "..." }

    [trace]
    buffer_memory = { value = 34359738368, assumed = true, reason = "..." }  # bytes per node

Unknown keys, missing keys, figures without provenance, wrong types and
out-of-range values raise :class:`waitlab.errors.InputError` naming the file,
the dotted key, the problem and the fix.

Examples
--------
>>> m = load_platform("dawning_5000a")
>>> m.node.cores, m.node.core_speed, m.max_nodes
(16, 7600000000.0, 1920)
>>> m.figure("inter_node.latency").source.startswith("seed 001")
True
>>> "sunway_taihulight" in list_platforms()
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from waitlab.errors import InputError
from waitlab.platforms.mpi_spec import MPI_KEYS, MpiSpec, read_mpi
from waitlab.readers import read_toml

__all__ = [
    "DiskSpec",
    "Figure",
    "LinkSpec",
    "NodeSpec",
    "PlatformModel",
    "TopologySpec",
    "describe_platform",
    "list_platforms",
    "load_platform",
]

TOPOLOGY_KINDS = ("fat_tree", "crossbar")


@dataclass(frozen=True)
class Figure:
    """One number of a platform file and where it comes from.

    Attributes
    ----------
    key : str
        Dotted key in the file, e.g. ``"node.core_speed"``.
    value : float
        The number (SI units).
    source : str
        Where it comes from; ``""`` when assumed.
    assumed : bool
        True when the number is an assumption.
    reason : str
        Why the assumption is reasonable; ``""`` when sourced.
    """

    key: str
    value: float
    source: str
    assumed: bool
    reason: str

    @property
    def provenance(self) -> str:
        """``source`` or ``"assumed: <reason>"``."""
        return f"assumed: {self.reason}" if self.assumed else self.source


@dataclass(frozen=True)
class NodeSpec:
    """A compute node.

    Attributes
    ----------
    cores : int
        MPI rank slots per node (for Sunway: the 4 core groups).
    core_speed : float
        flop/s one rank gets alone on its slot.
    memory : int
        Bytes of memory per node.
    hardware_cores : int
        Physical cores (informative; equals ``cores`` unless given).
    """

    cores: int
    core_speed: float
    memory: int
    hardware_cores: int

    @property
    def speed(self) -> float:
        """Peak flop/s of the whole node (``cores * core_speed``)."""
        return self.cores * self.core_speed


@dataclass(frozen=True)
class LinkSpec:
    """A communication path: bandwidth in B/s, latency in s (network level, before SMPI's factors)."""

    bandwidth: float
    latency: float


@dataclass(frozen=True)
class TopologySpec:
    """Inter-node topology: leaf switches under one spine.

    Attributes
    ----------
    kind : str
        ``"fat_tree"`` (leaf switches + spine) or ``"crossbar"`` (one switch).
    leaf_size : int
        Nodes per leaf switch (for a crossbar: ``max_nodes``).
    taper : float
        Down:up bandwidth ratio at a leaf switch (1 = full bisection).
    hop_latency : float
        Latency of a leaf-to-spine link, in s (0 for a crossbar).
    note : str
        Free-text explanation from the file.
    """

    kind: str
    leaf_size: int
    taper: float
    hop_latency: float
    note: str


@dataclass(frozen=True)
class DiskSpec:
    """The per-node storage trace buffers are flushed to: bandwidth in B/s, latency in s."""

    bandwidth: float
    latency: float


@dataclass(frozen=True)
class PlatformModel:
    """A machine description loaded from a platform TOML file.

    Attributes
    ----------
    name : str
        Platform name (built-in name or the file's ``name``/stem).
    description : str
        Free text.
    file : str
        Path of the file it was loaded from.
    max_nodes : int
        Nodes of the real machine; renders may use fewer, never more.
    node : NodeSpec
    intra_node : LinkSpec
        Between ranks of the same node.
    inter_node : LinkSpec
        One node's network link; latency is end to end between two nodes
        under the same leaf switch.
    topology : TopologySpec
    disk : DiskSpec
    trace_buffer_memory : int
        Bytes per node available for trace buffers.
    figures : tuple of Figure
        Provenance of every number, in file order.
    mpi : MpiSpec or None
        MPI-level pingpong figures and per-message overheads (section ``[mpi]``, optional); what
        :mod:`waitlab.platforms.calibration` calibrates SMPI against.  None: the link figures are used as they are.
    memory_bandwidth : float or None
        ``intra_node.memory_bandwidth`` (optional): B/s all messages of one node share (its memory system);
        rendered with ``split_cores=True`` only (see :mod:`waitlab.platforms.render`).
    """

    name: str
    description: str
    file: str
    max_nodes: int
    node: NodeSpec
    intra_node: LinkSpec
    inter_node: LinkSpec
    topology: TopologySpec
    disk: DiskSpec
    trace_buffer_memory: int
    figures: tuple[Figure, ...]
    mpi: MpiSpec | None = None
    memory_bandwidth: float | None = None

    def figure(self, key: str) -> Figure:
        """The :class:`Figure` for a dotted key such as ``"node.core_speed"``.

        Raises
        ------
        KeyError
            If the platform has no such number.
        """
        for f in self.figures:
            if f.key == key:
                return f
        raise KeyError(f"{self.name} has no figure {key!r}; known: {', '.join(f.key for f in self.figures)}")

    @property
    def assumed(self) -> tuple[str, ...]:
        """Dotted keys of the figures that are assumptions."""
        return tuple(f.key for f in self.figures if f.assumed)


# --------------------------------------------------------------------------------------------------
# loading


def _data_dir() -> Path:
    return Path(str(resources.files("waitlab.platforms") / "data"))


def list_platforms() -> list[str]:
    """Names of the built-in platforms, sorted.

    Examples
    --------
    >>> list_platforms()[:2]
    ['dawning_5000a', 'deepcomp_7000']
    """
    return sorted(p.stem for p in _data_dir().glob("*.toml"))


def load_platform(name_or_path: str | Path) -> PlatformModel:
    """Load a built-in platform by name, or a platform TOML file by path.

    Parameters
    ----------
    name_or_path : str or Path
        A name from :func:`list_platforms`, or a path to a ``.toml`` file in the
        format described in this module's docstring.  Anything ending in
        ``.toml``, containing a path separator, or naming an existing file is a path.

    Returns
    -------
    PlatformModel

    Raises
    ------
    waitlab.errors.InputError
        Unknown name, unreadable file, bad TOML, or a malformed/missing/out-of-range key.
    """
    text = str(name_or_path)
    is_path = (isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text or "\\" in text
               or Path(text).is_file())
    if is_path:
        path = Path(text)
        if not path.is_file():
            raise InputError(text, "file", "platform file not found",
                             f"give an existing .toml path or a built-in name ({', '.join(list_platforms())})")
        default_name = path.stem
    else:
        known = list_platforms()
        if text not in known:
            raise InputError(text, "platform", f"unknown platform {text!r}",
                             f"use one of: {', '.join(known)}; or a path to a platform .toml file")
        path = _data_dir() / f"{text}.toml"
        default_name = text
    data = read_toml(path, "platform")
    return from_mapping(data, str(path), default_name=default_name)


_SECTIONS: dict[str, tuple[str, ...]] = {
    "machine": ("max_nodes",),
    "node": ("cores", "core_speed", "memory", "hardware_cores"),
    "intra_node": ("bandwidth", "latency", "memory_bandwidth"),
    "inter_node": ("bandwidth", "latency"),
    "topology": ("kind", "note", "leaf_size", "taper", "hop_latency"),
    "disk": ("bandwidth", "latency"),
    "trace": ("buffer_memory",),
    "mpi": MPI_KEYS,
}
_TOP_KEYS = ("name", "description", *_SECTIONS)


#: Largest figure accepted (flop/s, bytes, B/s, s): anything above is a typo, and SimGrid's doubles overflow.
MAX_FIGURE = 1e18


def _positive(v: float) -> str:
    return "" if 0 < v <= MAX_FIGURE else f"must be > 0, got {v!r}" if v <= 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


def _non_negative(v: float) -> str:
    return "" if 0 <= v <= MAX_FIGURE else f"must be >= 0, got {v!r}" if v < 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


class _Reader:
    """Reads sourced figures out of parsed TOML, collecting their provenance."""

    def __init__(self, data: Mapping[str, Any], file: str) -> None:
        self.data = data
        self.file = file
        self.figures: list[Figure] = []

    def section(self, name: str) -> Mapping[str, Any]:
        if name not in self.data:
            raise InputError(self.file, name, "section is missing",
                             f"add [{name}] with keys: {', '.join(_SECTIONS[name])}")
        sec = self.data[name]
        if not isinstance(sec, Mapping):
            raise InputError(self.file, name, f"must be a table, got {type(sec).__name__}", f"write it as [{name}]")
        allowed = _SECTIONS[name]
        for key in sec:
            if key not in allowed:
                raise InputError(self.file, f"{name}.{key}", "unknown key",
                                 f"allowed keys in [{name}]: {', '.join(allowed)}")
        return sec

    def number(self, section: str, key: str, *, integer: bool = False,
               check: Callable[[float], str] = _positive, required: bool = True) -> float | None:
        sec = self.section(section)
        dotted = f"{section}.{key}"
        example = f'{key} = {{ value = ..., source = "seed NNN §x table y" }}'
        if key not in sec:
            if not required:
                return None
            raise InputError(self.file, dotted, "is missing",
                             f"add {example} (or assumed = true, reason = \"...\") under [{section}]")
        return self.figure(dotted, sec[key], integer=integer, check=check)

    def figure(self, dotted: str, entry: Any, *, integer: bool = False,
               check: Callable[[float], str] = _positive) -> float:
        """Validate one ``{ value, source | assumed + reason }`` table found at ``dotted``; record its provenance."""
        key = dotted.rsplit(".", 1)[-1]
        example = f'{key} = {{ value = ..., source = "seed NNN §x table y" }}'
        if not isinstance(entry, Mapping):
            raise InputError(self.file, dotted, f"must be a table with value and source, got {entry!r}",
                             f"write {key} = {{ value = {entry!r}, source = \"...\" }} "
                             f"or {{ value = {entry!r}, assumed = true, reason = \"...\" }}")
        for k in entry:
            if k not in ("value", "source", "assumed", "reason"):
                raise InputError(self.file, f"{dotted}.{k}", "unknown key",
                                 "a figure has only: value, source, assumed, reason")
        if "value" not in entry:
            raise InputError(self.file, f"{dotted}.value", "is missing", f"write {example}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(self.file, f"{dotted}.value", f"must be a number, got {value!r}",
                             "write a plain TOML number in SI units, e.g. 7.6e9")
        if not math.isfinite(value):
            raise InputError(self.file, f"{dotted}.value", f"must be finite, got {value!r}", "write a finite number")
        if integer:
            if float(value) != int(value):
                raise InputError(self.file, f"{dotted}.value", f"must be a whole number, got {value!r}",
                                 f"write e.g. {int(value)}")
            value = int(value)
        else:
            value = float(value)
        problem = check(value)
        if problem:
            raise InputError(self.file, f"{dotted}.value", problem, "write a value in the allowed range")
        source = entry.get("source", "")
        assumed = entry.get("assumed", False)
        reason = entry.get("reason", "")
        if not isinstance(source, str) or not isinstance(reason, str):
            raise InputError(self.file, dotted, "source and reason must be strings", 'write source = "..."')
        if not isinstance(assumed, bool):
            raise InputError(self.file, f"{dotted}.assumed", f"must be true or false, got {assumed!r}",
                             "write assumed = true")
        if assumed and source.strip():
            raise InputError(self.file, dotted, "has both a source and assumed = true",
                             "keep source (a sourced figure) or assumed = true with a reason, not both")
        if assumed and not reason.strip():
            raise InputError(self.file, f"{dotted}.reason", "an assumed figure needs a reason",
                             'add reason = "why this value is plausible"')
        if not assumed and not source.strip():
            raise InputError(self.file, dotted, "has neither a source nor assumed = true",
                             'add source = "seed NNN §x table y" or assumed = true, reason = "..."')
        if not assumed and reason.strip():
            raise InputError(self.file, f"{dotted}.reason", "reason is only for assumed figures",
                             "rename it to source, or add assumed = true")
        self.figures.append(Figure(dotted, float(value), source.strip(), assumed, reason.strip()))
        return float(value)

    def string(self, section: str | None, key: str, default: str | None = None) -> str:
        sec = self.data if section is None else self.section(section)
        dotted = key if section is None else f"{section}.{key}"
        if key not in sec:
            if default is None:
                raise InputError(self.file, dotted, "is missing", f'add {key} = "..."')
            return default
        v = sec[key]
        if not isinstance(v, str):
            raise InputError(self.file, dotted, f"must be a string, got {v!r}", f'write {key} = "..."')
        return v


def from_mapping(data: Mapping[str, Any], file: str = "<platform>", default_name: str = "platform") -> PlatformModel:
    """Validate parsed TOML into a :class:`PlatformModel`.

    Parameters
    ----------
    data : Mapping
        The parsed TOML document.
    file : str
        Shown in error messages.
    default_name : str
        Name used when the document has no ``name``.

    Raises
    ------
    waitlab.errors.InputError
        Malformed, missing or out-of-range keys.
    """
    for key in data:
        if key not in _TOP_KEYS:
            raise InputError(file, key, "unknown key", f"allowed top-level keys: {', '.join(_TOP_KEYS)}")
    r = _Reader(data, file)
    name = r.string(None, "name", default=default_name)
    if not name.strip() or any(c.isspace() for c in name):
        raise InputError(file, "name", f"must be a non-empty word without spaces, got {name!r}",
                         'write e.g. name = "my_cluster"')
    description = r.string(None, "description", default="")

    def num(section: str, key: str, check: Callable[[float], str] = _positive) -> float:
        v = r.number(section, key, check=check)
        assert v is not None
        return float(v)

    def whole(section: str, key: str, check: Callable[[float], str] = _positive) -> int:
        v = r.number(section, key, integer=True, check=check)
        assert v is not None
        return int(v)

    max_nodes = whole("machine", "max_nodes")
    cores = whole("node", "cores")
    core_speed = num("node", "core_speed")
    memory = whole("node", "memory")
    hw = r.number("node", "hardware_cores", integer=True, required=False)
    node = NodeSpec(cores, core_speed, memory, cores if hw is None else int(hw))
    intra = LinkSpec(num("intra_node", "bandwidth"), num("intra_node", "latency", _non_negative))
    mem = r.number("intra_node", "memory_bandwidth", required=False)
    inter = LinkSpec(num("inter_node", "bandwidth"), num("inter_node", "latency", _non_negative))

    kind = r.string("topology", "kind")
    note = r.string("topology", "note", default="")
    if kind not in TOPOLOGY_KINDS:
        raise InputError(file, "topology.kind", f"unknown topology {kind!r}",
                         f"use one of: {', '.join(repr(k) for k in TOPOLOGY_KINDS)}")
    if kind == "fat_tree":
        topology = TopologySpec(kind, whole("topology", "leaf_size"), num("topology", "taper"),
                                num("topology", "hop_latency", _non_negative), note)
    else:
        extra = [k for k in ("leaf_size", "taper", "hop_latency") if k in r.section("topology")]
        if extra:
            raise InputError(file, f"topology.{extra[0]}", 'only meaningful for kind = "fat_tree"',
                             'remove it, or set kind = "fat_tree"')
        topology = TopologySpec(kind, max_nodes, 1.0, 0.0, note)

    disk = DiskSpec(num("disk", "bandwidth"), num("disk", "latency", _non_negative))
    buffer = whole("trace", "buffer_memory")
    if buffer > memory:
        raise InputError(file, "trace.buffer_memory.value",
                         f"{buffer} bytes is more than the node memory ({memory} bytes, node.memory)",
                         "give at most node.memory bytes")
    mpi = read_mpi(r, file, r.section("mpi")) if "mpi" in data else None
    return PlatformModel(name=name, description=description.strip(), file=file, max_nodes=max_nodes, node=node,
                         intra_node=intra, inter_node=inter, topology=topology, disk=disk,
                         trace_buffer_memory=buffer, figures=tuple(r.figures), mpi=mpi,
                         memory_bandwidth=None if mem is None else float(mem))


# --------------------------------------------------------------------------------------------------
# human-readable summaries


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    if unit == "s" and 0 < abs(value) < 1e-3:
        return f"{value * 1e6:.4g} us"
    if unit == "s" and 0 < abs(value) < 1:
        return f"{value * 1e3:.4g} ms"
    return f"{value:.4g} {unit}"


_UNITS = {
    "machine.max_nodes": "", "node.cores": "", "node.hardware_cores": "", "topology.leaf_size": "",
    "topology.taper": ":1", "node.core_speed": "flop/s", "node.memory": "B", "trace.buffer_memory": "B",
    "mpi.eager_threshold": "bytes",
}


def format_figure(f: Figure) -> str:
    """The figure's value with its unit, e.g. ``'7.6 Gflop/s'``."""
    unit = _UNITS.get(f.key)
    if unit is None:
        unit = "B/s" if f.key.endswith("bandwidth") else "s"
    if unit == "":
        return f"{int(f.value):,}"
    if unit == "bytes":
        return f"{int(f.value):,} B"
    if unit == ":1":
        return f"{f.value:g}:1"
    if unit == "B":
        return f"{f.value / 2**30:.4g} GiB"
    return _si(f.value, unit)


def describe_platform(model: PlatformModel, short: bool = False) -> str:
    """A human-readable summary of a platform.

    Parameters
    ----------
    model : PlatformModel
    short : bool
        One line instead of the full figure table.

    Examples
    --------
    >>> print(describe_platform(load_platform("seed003_myrinet"), short=True))
    seed003_myrinet: 16 nodes x 1 core @ 1 Gflop/s, 2 GiB; net 103.1 MB/s, 10 us; crossbar
    """
    n = model.node
    topo = model.topology.kind if model.topology.kind == "crossbar" else (
        f"fat tree, {model.topology.leaf_size} nodes/leaf, taper {model.topology.taper:g}:1")
    line = (f"{model.name}: {model.max_nodes:,} nodes x {n.cores} core{'s' if n.cores != 1 else ''} @ "
            f"{_si(n.core_speed, 'flop/s')}, "
            f"{n.memory / 2**30:.4g} GiB; net {_si(model.inter_node.bandwidth, 'B/s')}, "
            f"{_si(model.inter_node.latency, 's')}; {topo}")
    if short:
        return line
    out = [line, "", model.description, "", f"file: {model.file}", ""]
    width = max(len(f.key) for f in model.figures)
    for f in model.figures:
        tag = "ASSUMED" if f.assumed else "source "
        out.append(f"  {f.key:<{width}}  {format_figure(f):>14}  {tag}  {f.reason if f.assumed else f.source}")
    return "\n".join(out)
