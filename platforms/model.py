"""Platform models: what a machine is, with the provenance of every figure.

A platform is described by a TOML file.  The built-in ones live in
``platforms/data/<name>.toml``; a user file of the same format can be loaded
by path.  All quantities are SI: bytes, bytes per second, seconds, flop/s.

File format
-----------
Every *number* is an inline table carrying its provenance: either a
``source`` (a source paper with section/table, or a public figure) or
``assumed = true`` with a ``reason``::

    name = "my_cluster"                 # optional, defaults to the file stem
    description = "What this machine is."

    [machine]
    max_nodes = { value = 1920, source = "Rao et al. §4.1 table 1" }

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
>>> m.figure("inter_node.latency").source.startswith("Rao et al.")
True
>>> "sunway_taihulight" in list_platforms()
True
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from waitlab.errors import InputError
from waitlab.platforms.contention import ContentionSpec, check_contention, read_contention
from waitlab.platforms.figures import (
    Figure,
    FigureReader,
    bandwidth,
    core_count,
    core_speed,
    latency,
    positive,
    unknown_name,
)
from waitlab.platforms.mpi_spec import MPI_KEYS, MpiSpec, check_link_rate, read_mpi
from waitlab.readers import MAX_DEPTH, MAX_TOML_BYTES, not_a_file, read_bytes, read_toml, toml_depth, toml_text_depth

__all__ = [
    "DiskSpec",
    "Figure",
    "LinkSpec",
    "NodeSpec",
    "PlatformModel",
    "TopologySpec",
    "list_platforms",
    "load_platform",
    "read_platform_file",
]

TOPOLOGY_KINDS = ("fat_tree", "crossbar")
#: How a fat tree routes leaf-to-leaf messages: ``balanced`` = one aggregated uplink per leaf, shared perfectly;
#: ``d_mod_k`` = ``floor(leaf_size / taper)`` parallel up-ports of the node bandwidth, chosen by destination
#: (static D-mod-k routes, SimGrid's ``FAT_TREE`` cluster; see platforms/render.py).
TOPOLOGY_ROUTINGS = ("balanced", "d_mod_k")


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
    routing : str
        One of :data:`TOPOLOGY_ROUTINGS` (default ``"balanced"``).
    """

    kind: str
    leaf_size: int
    taper: float
    hop_latency: float
    note: str
    routing: str = "balanced"

    @property
    def uplinks(self) -> int:
        """Parallel up-ports per leaf under ``d_mod_k`` routing: ``floor(leaf_size / taper)``, at least 1."""
        return max(1, int(self.leaf_size // self.taper))


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
        rendered with ``split_cores=True`` as a backbone, and as the shared memory path law of
        ``[contention] memory_path`` otherwise (see :mod:`waitlab.platforms.contention`).
    contention : ContentionSpec
        Section ``[contention]`` (optional): head-of-line blocking law, shared memory path, send-order cost.
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
    contention: ContentionSpec = field(default_factory=ContentionSpec)

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


#: Deprecated names of built-in platforms (old scenario files still run): alias -> current name.
PLATFORM_ALIASES: dict[str, str] = {"seed000_cluster": "wu_cluster", "seed003_myrinet": "okita_myrinet"}


def list_platforms() -> list[str]:
    """Names of the built-in platforms, sorted.

    Examples
    --------
    >>> list_platforms()[:2]
    ['dawning_5000a', 'deepcomp_7000']
    """
    return sorted(p.stem for p in _data_dir().glob("*.toml"))


def load_platform(name_or_path: str | Path, content: bytes | None = None) -> PlatformModel:
    """Load a built-in platform by name, or a platform TOML file by path.

    Parameters
    ----------
    name_or_path : str or Path
        A name from :func:`list_platforms` (or a deprecated alias from
        :data:`PLATFORM_ALIASES`, which loads the current file), or a path to a ``.toml`` file in the
        format described in this module's docstring.  Anything ending in
        ``.toml``, containing a path separator, or naming an existing file is a path.
    content : bytes, optional
        The platform file's bytes as already read (:func:`read_platform_file`; a scenario keeps them from when
        it was loaded): parsed instead of reading the file again, so that what is simulated is what was hashed.

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
        raw = content if content is not None else read_platform_file(path)
        return _own_name(from_mapping(_toml_of(raw, str(path)), str(path), default_name=path.stem), path)
    text = PLATFORM_ALIASES.get(text, text)
    known = list_platforms()
    if text not in known:
        raise InputError(text, "platform", f"unknown platform {text!r}",
                         f"use one of: {', '.join(known)}; or a path to a platform .toml file")
    return from_mapping(read_toml(_data_dir() / f"{text}.toml", "platform"), str(_data_dir() / f"{text}.toml"),
                        default_name=text)


def _own_name(model: PlatformModel, path: Path) -> PlatformModel:
    """``model`` loaded from ``path``, named with that path too when its name is a built-in platform's but the file
    is not that platform's own data file (a copy, edited or not, keeps the built-in's ``name`` line): runs, sweeps
    and calibrations would otherwise label it as the built-in one."""
    builtin = PLATFORM_ALIASES.get(model.name, model.name)
    if builtin not in list_platforms():
        return model
    try:
        if path.resolve() == (_data_dir() / f"{builtin}.toml").resolve():
            return model
    except (OSError, RuntimeError):
        pass
    return dataclasses.replace(model, name=f"{model.name} ({path})")


def read_platform_file(path: str | Path) -> bytes:
    """The bytes of a platform file, read once (:func:`load_platform` parses them; a scenario hashes them)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "file", f"platform file {not_a_file(path)}",
                         f"give an existing .toml path or a built-in name ({', '.join(list_platforms())})")
    return read_bytes(path, "platform", MAX_TOML_BYTES)


def _toml_of(raw: bytes, file: str) -> dict[str, Any]:
    """A platform file's bytes parsed as :func:`waitlab.readers.read_toml` parses a file: the same checks and
    errors (encoding, NUL bytes, nesting, syntax)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(file, "(encoding)", f"not UTF-8 text (line {line}, byte {exc.start})",
                         "save the platform file as UTF-8") from None
    text = text.removeprefix("\ufeff")
    if "\0" in text:
        raise InputError(file, "(syntax)", "holds NUL bytes: not a TOML text file", "give a platform .toml file")
    if text.count("[") + text.count("{") > MAX_DEPTH and toml_text_depth(text) > MAX_DEPTH:
        raise InputError(file, "(syntax)", f"nests arrays or inline tables more than {MAX_DEPTH} deep",
                         "a platform file nests a few levels; flatten it")
    if text.count(".") > MAX_DEPTH:  # a dotted key of thousands of parts: refused before the parser nests them
        for no, line_text in enumerate(text.splitlines(), 1):
            if line_text.split("=", 1)[0].count(".") > MAX_DEPTH:
                raise InputError(file, f"line {no}", f"a key nests more than {MAX_DEPTH} tables deep (dotted key)",
                                 "a platform file nests a few levels; flatten it")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(file, "(syntax)", f"not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except RecursionError:
        raise InputError(file, "(syntax)", "nested too deeply", "flatten the arrays") from None
    if toml_depth(data) > MAX_DEPTH:
        raise InputError(file, "(syntax)", f"nests tables, arrays or dotted keys more than {MAX_DEPTH} deep",
                         "a platform file nests a few levels; flatten it")
    return data


_SECTIONS: dict[str, tuple[str, ...]] = {
    "machine": ("max_nodes",),
    "node": ("cores", "core_speed", "memory", "hardware_cores"),
    "intra_node": ("bandwidth", "latency", "memory_bandwidth"),
    "inter_node": ("bandwidth", "latency"),
    "topology": ("kind", "note", "leaf_size", "taper", "hop_latency", "routing"),
    "disk": ("bandwidth", "latency"),
    "trace": ("buffer_memory",),
    "mpi": MPI_KEYS,
}
_TOP_KEYS = ("name", "description", *_SECTIONS, "contention")


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
            raise unknown_name(file, key, key, _TOP_KEYS, f"allowed top-level keys: {', '.join(_TOP_KEYS)}")
    r = FigureReader(data, file, _SECTIONS)
    name = r.string(None, "name", default=default_name)
    if not name.strip() or any(c.isspace() for c in name):
        raise InputError(file, "name", f"must be a non-empty word without spaces, got {name!r}",
                         'write e.g. name = "my_cluster"')
    description = r.string(None, "description", default="")

    def num(section: str, key: str, check: Callable[[float], str] = positive) -> float:
        v = r.number(section, key, check=check)
        assert v is not None
        return float(v)

    def whole(section: str, key: str, check: Callable[[float], str] = positive) -> int:
        v = r.number(section, key, integer=True, check=check)
        assert v is not None
        return int(v)

    max_nodes = whole("machine", "max_nodes")
    cores = whole("node", "cores", core_count)
    speed = num("node", "core_speed", core_speed)
    memory = whole("node", "memory")
    hw = r.number("node", "hardware_cores", integer=True, required=False, check=core_count)
    node = NodeSpec(cores, speed, memory, cores if hw is None else int(hw))
    intra = LinkSpec(num("intra_node", "bandwidth", bandwidth), num("intra_node", "latency", latency))
    mem = r.number("intra_node", "memory_bandwidth", required=False, check=bandwidth)
    inter = LinkSpec(num("inter_node", "bandwidth", bandwidth), num("inter_node", "latency", latency))

    kind = r.string("topology", "kind")
    note = r.string("topology", "note", default="")
    if kind not in TOPOLOGY_KINDS:
        raise InputError(file, "topology.kind", f"unknown topology {kind!r}",
                         f"use one of: {', '.join(repr(k) for k in TOPOLOGY_KINDS)}")
    if kind == "fat_tree":
        routing = r.string("topology", "routing", default="balanced")
        if routing not in TOPOLOGY_ROUTINGS:
            raise InputError(file, "topology.routing", f"unknown routing {routing!r}",
                             f"use one of: {', '.join(repr(k) for k in TOPOLOGY_ROUTINGS)}")
        topology = TopologySpec(kind, whole("topology", "leaf_size"), num("topology", "taper"),
                                num("topology", "hop_latency", latency), note, routing)
    else:
        extra = [k for k in ("leaf_size", "taper", "hop_latency", "routing") if k in r.section("topology")]
        if extra:
            raise InputError(file, f"topology.{extra[0]}", 'only meaningful for kind = "fat_tree"',
                             'remove it, or set kind = "fat_tree"')
        topology = TopologySpec(kind, max_nodes, 1.0, 0.0, note)

    disk = DiskSpec(num("disk", "bandwidth", bandwidth), num("disk", "latency", latency))
    buffer = whole("trace", "buffer_memory")
    if buffer > memory:
        raise InputError(file, "trace.buffer_memory.value",
                         f"{buffer} bytes is more than the node memory ({memory} bytes, node.memory)",
                         "give at most node.memory bytes")
    mpi = read_mpi(r, file, r.section("mpi")) if "mpi" in data else None
    if mpi is not None:  # before the contention laws, which compare their port rate with these figures
        check_link_rate(mpi, inter.bandwidth, file)
    sec = data.get("contention", {})
    if not isinstance(sec, Mapping):
        raise InputError(file, "contention", f"must be a table, got {type(sec).__name__}", "write it as [contention]")
    contention = read_contention(sec, file, r)
    check_contention(contention, file, mpi, None if mem is None else float(mem))
    model = PlatformModel(name=name, description=description.strip(), file=file, max_nodes=max_nodes, node=node,
                         intra_node=intra, inter_node=inter, topology=topology, disk=disk,
                         trace_buffer_memory=buffer, figures=tuple(r.figures), mpi=mpi,
                         memory_bandwidth=None if mem is None else float(mem), contention=contention)
    from waitlab.platforms.smpi_factors import check_calibration  # imports this module: here, not at the top

    check_calibration(model)
    return model
