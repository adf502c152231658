"""The ``[mpi]`` section of a platform file: MPI-level pingpong figures and per-message overheads.

Published latencies and bandwidths are MPI-level, end-to-end figures (Rao et al. §4.1's "MPI latency 1.6 us",
He et al. tables 2-3, measured by programs): what a pingpong between two ranks measures, not what a link is
rated.  This section states them, each with a source or marked assumed, and
:mod:`waitlab.platforms.calibration` derives SMPI's factors from them::

    [mpi]
    eager_threshold = { value = 12288, assumed = true, reason = "..." }   # bytes; rendezvous from here on
    send_overhead = { value = 4.0e-7, assumed = true, reason = "..." }    # o_s: CPU time of one send call, s
    recv_overhead = { value = 4.0e-7, assumed = true, reason = "..." }    # o_r: CPU time of one receive, s
    rma_protocol = "mvapich2"   # optional, "smpi" (default): the library's one-sided protocol (docs/rma.md)
    copy_bandwidth = { value = 1.3e9, assumed = true, reason = "..." }   # optional: B/s of an eager copy
    inter_node = [   # pingpong between two nodes of one leaf switch
      { size = 8, latency = { value = 1.6e-6, source = "Rao et al. §4.1 (1)" } },
      { size = 1048576, bandwidth = { value = 1.4e9, assumed = true, reason = "..." } },
    ]
    intra_node = [   # pingpong between two ranks of one node
      { size = 8, latency = { value = 5.0e-7, assumed = true, reason = "..." } },
    ]

``copy_bandwidth`` (optional) is the rate at which one rank's CPU copies an eager message into the
pre-registered send buffer and, on the receiver, out of it: both overheads then get a per-byte part
``1 / copy_bandwidth`` below the eager threshold (SMPI's ``smpi/os``, ``smpi/ois``, ``smpi/or`` accept
``size:offset:per-byte`` sections).  Rendezvous messages are copied by the NIC (zero-copy RDMA): no
per-byte CPU cost.

A point gives either ``latency`` (the one-way time of a ``size``-byte message: half a round trip) or
``bandwidth`` (``size`` divided by that one-way time).  Sizes are bytes, 1 to 2^31 - 1 (the largest message
SimGrid 3.32's replay sends), all different within a list.

``smpi_factors = false`` (optional, default true) says the file's ``inter_node`` link figures are already
MPI-level (derived from an MPI pingpong of the same machine, as Okita et al.'s Myrinet bandwidth is): SMPI's
latency and bandwidth factors are then 1 (``smpi/lat-factor`` and ``smpi/bw-factor`` ``0:1``) instead of
being fitted to the figures; the overheads and the eager threshold still apply.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from waitlab.errors import InputError, unknown_name
from waitlab.platforms.figures import LARGEST_MESSAGE, bandwidth, latency

__all__ = ["MAX_BW_FACTOR", "MPI_KEYS", "RMA_PROTOCOLS", "MpiPoint", "MpiSpec", "check_link_rate", "read_mpi",
           "rma_env"]

MPI_KEYS: tuple[str, ...] = ("eager_threshold", "send_overhead", "recv_overhead", "copy_bandwidth", "inter_node",
                              "intra_node", "rma_protocol", "smpi_factors")
#: One-sided protocols the measurement layer can add to SMPI's own (docs/rma.md, "MPI library protocol").
RMA_PROTOCOLS: tuple[str, ...] = ("smpi", "mvapich2")
PATHS: tuple[str, ...] = ("inter_node", "intra_node")
#: Largest SMPI bandwidth factor the inter-node figures may imply (:func:`check_link_rate`): a factor above 1 means
#: bytes crossing the node link faster than its rate.  The 1% margin lets rounded figures pass: published figures
#: have 2-4 significant digits, and the rate between two of them (the slope of the line through them) magnifies
#: their rounding (Okita et al.'s assumed 10 us latency and derived 128 KB rate imply 1.008 x its link).
MAX_BW_FACTOR = 1.01


@dataclass(frozen=True)
class MpiPoint:
    """One MPI-level pingpong figure.

    Attributes
    ----------
    size : int
        Message size in bytes.
    seconds : float
        One-way time of one message (half a round trip) the figure implies.
    key : str
        Dotted key of the figure, e.g. ``"mpi.inter_node[0].latency"``.
    kind : str
        ``"latency"`` or ``"bandwidth"`` (how the file states it).
    value : float
        The figure as the file states it (s or B/s).
    """

    size: int
    seconds: float
    key: str
    kind: str
    value: float


@dataclass(frozen=True)
class MpiSpec:
    """MPI-level figures of a platform (see the module docstring).

    Attributes
    ----------
    eager_threshold : int
        Messages of this many bytes and more use the rendezvous protocol (the sender waits for the receiver).
    send_overhead, recv_overhead : float
        CPU seconds one send / one receive call costs its rank (LogGP's o).
    inter_node, intra_node : tuple of MpiPoint
        Pingpong figures, sorted by size.
    copy_bandwidth : float or None
        B/s at which a rank copies an eager message into (sender) or out of (receiver) the MPI buffer; None:
        no per-byte CPU cost.
    rma_protocol : str
        One-sided protocol of the MPI library (:data:`RMA_PROTOCOLS`): ``"smpi"`` keeps SMPI 3.32's own,
        ``"mvapich2"`` adds MVAPICH2's lock, rendezvous and completion messages (docs/rma.md).
    smpi_factors : bool
        False: SMPI's latency and bandwidth factors are 1 (the link figures are MPI-level already).
    """

    eager_threshold: int
    send_overhead: float
    recv_overhead: float
    inter_node: tuple[MpiPoint, ...]
    intra_node: tuple[MpiPoint, ...]
    rma_protocol: str = "smpi"
    copy_bandwidth: float | None = None
    smpi_factors: bool = True

    @property
    def copy_per_byte(self) -> float:
        """CPU seconds per byte of one eager copy (0 without ``copy_bandwidth``)."""
        return 0.0 if self.copy_bandwidth is None else 1.0 / self.copy_bandwidth

    def points(self, path: str) -> tuple[MpiPoint, ...]:
        """The points of ``"inter_node"`` or ``"intra_node"``."""
        return self.inter_node if path == "inter_node" else self.intra_node


class _FigureReader(Protocol):
    def figure(self, dotted: str, entry: Any, *, integer: bool = ...,
               check: Callable[[float], str] = ...) -> float: ...


def _non_negative(v: float) -> str:
    return "" if v >= 0 else f"must be >= 0, got {v!r}"


def _points(reader: _FigureReader, file: str, sec: Mapping[str, Any], path: str) -> tuple[MpiPoint, ...]:
    fix = ("write e.g. inter_node = [ { size = 8, latency = { value = 1.6e-6, source = \"...\" } }, "
           "{ size = 1048576, bandwidth = { value = 1.4e9, assumed = true, reason = \"...\" } } ]")
    raw = sec.get(path, [])
    if not isinstance(raw, list):
        raise InputError(file, f"mpi.{path}", f"must be a list of points, got {type(raw).__name__}", fix)
    out: list[MpiPoint] = []
    for i, entry in enumerate(raw):
        where = f"mpi.{path}[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(file, where, f"must be a table with size and latency or bandwidth, got {entry!r}", fix)
        extra = sorted(set(entry) - {"size", "latency", "bandwidth"})
        if extra:
            raise unknown_name(file, f"{where}.{extra[0]}", extra[0], ("size", "latency", "bandwidth"),
                               "a point has only: size, latency or bandwidth")
        size = entry.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InputError(file, f"{where}.size", f"must be a whole number of bytes >= 1, got {size!r}",
                             "write size = 8 (bytes, no quotes)")
        if size > LARGEST_MESSAGE:
            raise InputError(file, f"{where}.size", f"{size} bytes is more than one message SimGrid 3.32's replay "
                             f"sends ({LARGEST_MESSAGE} bytes: it reads a size as a C int), so no pingpong can check "
                             "this figure", f"give the figure of a message of at most {LARGEST_MESSAGE} bytes "
                             "(check the unit: bytes)")
        kinds = [k for k in ("latency", "bandwidth") if k in entry]
        if len(kinds) != 1:
            raise InputError(file, where, "needs exactly one of latency or bandwidth",
                             "give latency = { ... } (one-way seconds) or bandwidth = { ... } (B/s), not both")
        kind = kinds[0]
        value = reader.figure(f"{where}.{kind}", entry[kind], check=latency if kind == "latency" else bandwidth)
        seconds = value if kind == "latency" else size / value
        out.append(MpiPoint(size, seconds, f"{where}.{kind}", kind, value))
    sizes = [p.size for p in out]
    if len(set(sizes)) != len(sizes):
        raise InputError(file, f"mpi.{path}", f"two points have the same size ({sizes})",
                         "keep one figure per message size")
    return tuple(sorted(out, key=lambda p: p.size))


def read_mpi(reader: _FigureReader, file: str, sec: Mapping[str, Any]) -> MpiSpec:
    """Validate the ``[mpi]`` table ``sec`` of ``file`` (keys already checked against :data:`MPI_KEYS`)."""

    def need(key: str, integer: bool = False, check: Callable[[float], str] = _non_negative) -> float:
        if key not in sec:
            raise InputError(file, f"mpi.{key}", "is missing",
                             f'add {key} = {{ value = ..., source = "..." }} (or assumed = true, reason = "...") '
                             "under [mpi]")
        return reader.figure(f"mpi.{key}", sec[key], integer=integer, check=check)

    eager = int(need("eager_threshold", integer=True))
    o_s, o_r = need("send_overhead", check=latency), need("recv_overhead", check=latency)
    copy_bw = (reader.figure("mpi.copy_bandwidth", sec["copy_bandwidth"], check=bandwidth)
               if "copy_bandwidth" in sec else None)
    inter, intra = _points(reader, file, sec, "inter_node"), _points(reader, file, sec, "intra_node")
    if not inter:
        raise InputError(file, "mpi.inter_node", "has no point", "give at least the MPI latency between two nodes")
    rma = sec.get("rma_protocol", "smpi")
    if rma not in RMA_PROTOCOLS:
        raise InputError(file, "mpi.rma_protocol", f"must be one of {', '.join(RMA_PROTOCOLS)}, got {rma!r}",
                         'write rma_protocol = "mvapich2" (or "smpi", SMPI\'s own one-sided semantics)')
    factors = sec.get("smpi_factors", True)
    if not isinstance(factors, bool):
        raise InputError(file, "mpi.smpi_factors", f"must be true or false, got {factors!r}",
                         "write smpi_factors = false (the link figures are MPI-level) or leave it out")
    return MpiSpec(eager, o_s, o_r, inter, intra, rma_protocol=str(rma), copy_bandwidth=copy_bw,
                   smpi_factors=factors)


def check_link_rate(mpi: MpiSpec, link_bandwidth: float, file: str) -> None:
    """Refuse consecutive inter-node figures whose extra bytes cross the node link faster than its rate.

    The slope of the line through two figures is the time per byte SMPI's bandwidth factor must give the link
    (``bw_factor = 1 / (b B)``, :func:`waitlab.platforms.smpi_factors.calibrate`): above :data:`MAX_BW_FACTOR`
    the figures are not physical (a typo, or figures of another network).  The error names the larger message's
    figure and the largest bandwidth (or shortest time) that stays at the link's rate.
    """
    pts = mpi.inter_node
    for p, nxt in itertools.pairwise(pts):
        extra, dt = nxt.size - p.size, nxt.seconds - p.seconds
        if dt > 0 and extra / dt <= MAX_BW_FACTOR * link_bandwidth:
            continue
        rate = f"{extra / dt:.4g} B/s, {extra / dt / link_bandwidth:.4g} times" if dt > 0 else \
            "an unbounded rate, faster than"
        need = p.seconds + extra / link_bandwidth  # the one-way time of nxt at the link's rate
        fix = (f"give {nxt.key} more than {need:.4g} s" if nxt.kind == "latency" else
               f"give {nxt.key} less than {nxt.size / need:.4g} B/s")
        raise InputError(file, f"{nxt.key}.value", f"implies {nxt.seconds:.4g} s one way for {nxt.size} B against "
                         f"{p.seconds:.4g} s for {p.size} B ({p.key}): the extra bytes cross at {rate} the node "
                         f"link's {link_bandwidth:.4g} B/s (inter_node.bandwidth), so SMPI's bandwidth factor would "
                         f"exceed {MAX_BW_FACTOR:g}: messages faster than the link",
                         fix + ", or check inter_node.bandwidth (the link's data rate)")


def rma_env(mpi: MpiSpec | None) -> dict[str, str]:
    """Environment of a program run that selects the measurement layer's one-sided protocol (empty for SMPI's)."""
    if mpi is None or mpi.rma_protocol == "smpi":
        return {}
    return {"WAITLAB_RMA_PROTOCOL": mpi.rma_protocol, "WAITLAB_RMA_EAGER": str(mpi.eager_threshold)}
