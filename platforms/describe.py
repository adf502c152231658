"""Human-readable summaries of a platform model: figures with their units, and ``waitlab platforms`` text."""

from __future__ import annotations

from waitlab.platforms.contention import describe_law
from waitlab.platforms.figures import Figure
from waitlab.platforms.machine import mpi_bandwidth
from waitlab.platforms.model import PlatformModel

__all__ = ["describe_platform", "format_figure"]


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
    >>> from waitlab.platforms.model import load_platform
    >>> print(describe_platform(load_platform("okita_myrinet"), short=True))
    okita_myrinet: 16 nodes x 1 core @ 1 Gflop/s, 2 GiB; net 103.1 MB/s, 10 us; crossbar
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
    if model.mpi is not None:
        out.append(f"  {'mpi.rma_protocol':<{width}}  {model.mpi.rma_protocol:>14}  one-sided protocol (docs/rma.md)")
    out += ["", *describe_law(model.contention, model.memory_bandwidth, mpi_bandwidth(model))]
    return "\n".join(out)
