"""Calibrate SMPI against a platform's MPI-level figures (SMPI's own calibration method).

SMPI predicts the one-way time of an ``S``-byte message over a route of latency ``L`` and bandwidth ``B``
as (Degomme et al., "Simulating MPI applications: the SMPI approach", IEEE TPDS 2017, section 4)::

    T(S) = o_s + o_r + lat_factor(S) * L + (S + 16) / (bw_factor(S) * B)        (S < eager threshold)
    T(S) =             lat_factor(S) * L + (S + 16) / (bw_factor(S) * B)        (rendezvous)

where 16 B is SMPI's message envelope, the factors are piecewise constant in ``S`` and the overheads
``o_s``, ``o_r`` may have a per-byte part ``c S`` below the eager threshold (the CPU copy of an eager message,
``c = 1 / copy_bandwidth``; then ``o_s + o_r`` reads ``o_s + o_r + 2 c S`` above), and
apply only to buffered (eager) sends in SMPI 3.32 (``Request::start``/``finish_wait``: ``osend``/``orecv``
run for detached messages, ``oisend`` for every ``MPI_Isend``).  SMPI's method fits a piecewise-linear
``T(S) = a_k + b_k S`` to
measured pingpongs, one segment per protocol range, and sets ``lat_factor_k = (a_k - o) / L`` and
``bw_factor_k = 1 / (b_k B)``.  Here the "measurements" are the figures of the platform file's ``[mpi]``
section: the segments join consecutive figures (and break at the eager threshold), so a simulated
pingpong reproduces every figure exactly, not SMPI's default factors (fitted on a 2009 Ethernet
cluster) stacked on top of them.

The factors are global in SMPI, so they are fitted to the inter-node figures on the rendered node links;
intra-node figures are then met by choosing the loopback's latency and bandwidth (a linear least-squares
problem, exact for two figures).

Everything here is pure; :func:`waitlab.platforms.calibration.calibration_table` checks the result
with real SMPI pingpongs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from waitlab.errors import InputError
from waitlab.models.vocabulary import EAGER_THRESHOLD
from waitlab.platforms.model import LinkSpec, PlatformModel
from waitlab.platforms.mpi_spec import MpiPoint, MpiSpec

#: The SimGrid setting of SMPI's eager threshold (the platform's ``[mpi] eager_threshold`` is rendered as it).
EAGER_SETTING = "smpi/send-is-detached-thresh"


def eager_threshold(smpi_config: Mapping[str, str]) -> int:
    """The eager threshold SMPI ran with: its setting in ``smpi_config`` (the SimGrid settings of a run), else
    SimGrid's default.

    >>> eager_threshold({"smpi/send-is-detached-thresh": "12288"}), eager_threshold({})
    (12288, 65536)
    """
    return int(float(smpi_config.get(EAGER_SETTING, EAGER_THRESHOLD)))

__all__ = ["ENVELOPE", "Calibration", "calibrate", "check_calibration"]

#: Bytes SMPI adds to every message on the wire ("MPI enveloppe size (tag+dest+communicator)",
#: ``payload_size_ = size_ + 16`` in smpi_request.cpp of SimGrid 3.32); factors are looked up by this payload.
ENVELOPE = 16


@dataclass(frozen=True)
class Calibration:
    """SMPI settings and rendered link figures that reproduce a platform's MPI-level figures.

    Attributes
    ----------
    smpi_config : dict of str to str
        ``--cfg`` settings (``smpi/lat-factor``, ``smpi/bw-factor``, ``smpi/os``, ``smpi/ois``, ``smpi/or``,
        ``smpi/send-is-detached-thresh``).  Empty when the platform has no ``[mpi]`` section (then SMPI's
        factors are switched off: ``lat-factor`` and ``bw-factor`` 1, so the links are the MPI figures).
    intra_node : LinkSpec
        Loopback latency and bandwidth to render.
    inter_node : LinkSpec
        Node link latency (end to end, split over the two private links) and bandwidth to render.
    breakpoints : tuple of int
        Threshold of each factor section (it covers sizes above it).
    lat_factor, bw_factor : tuple of float
        Factor of each segment.
    notes : tuple of str
        Figures the model cannot meet exactly (clamped factors), in words.
    """

    smpi_config: dict[str, str]
    intra_node: LinkSpec
    inter_node: LinkSpec
    breakpoints: tuple[int, ...]
    lat_factor: tuple[float, ...]
    bw_factor: tuple[float, ...]
    notes: tuple[str, ...]


def _n(x: float) -> str:
    return repr(float(x))


def _lines(points: tuple[MpiPoint, ...], fallback_bw: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Piecewise-linear T(S) through the points: (interior figure sizes, intercepts a, slopes b).

    Line ``k`` joins figures ``k`` and ``k + 1`` and serves sizes in ``(S_k, S_{k+1}]`` (the first line also
    serves smaller sizes, the last one larger sizes), so every figure lies on the line that serves it.
    """
    s = np.array([p.size for p in points], dtype=float)
    t = np.array([p.seconds for p in points], dtype=float)
    if len(s) == 1:  # one figure: the link bandwidth gives the slope
        b = np.array([1.0 / fallback_bw])
        return np.array([], dtype=float), t - b * s, b
    b = np.diff(t) / np.diff(s)  # slope between consecutive figures
    return s[1:-1], t[:-1] - b * s[:-1], b


@dataclass(frozen=True)
class _Sections:
    """The factor sections of the inter-node figures (see :func:`calibrate`): one per line of figures and protocol."""

    thresholds: np.ndarray  # a section covers sizes above its threshold
    first: np.ndarray  # smallest size of each section
    line: np.ndarray  # the line of figures (joining figures line and line + 1) that serves it
    overhead: np.ndarray  # o_s + o_r in eager sections, 0 in rendezvous ones
    copy: np.ndarray  # per-byte CPU cost c of one eager copy (0 in rendezvous sections)
    slope: np.ndarray  # b of each line (s per byte)
    lat_part: np.ndarray  # a_k - o - 16 (b_k - 2c) = lat_factor_k * L


def _sections(model: PlatformModel, mpi: MpiSpec) -> _Sections:
    link = model.inter_node
    interior, a, b = _lines(mpi.inter_node, link.bandwidth)
    eager = mpi.eager_threshold
    o = mpi.send_overhead + mpi.recv_overhead
    c = mpi.copy_per_byte  # per-byte CPU cost of one eager copy (sender and receiver each pay it)
    # A factor section "t:f" covers sizes > t (network_smpi.cpp of SimGrid 3.32): one section per line of
    # figures, split where the eager protocol (and with it o_s + o_r, smpi_request.cpp) stops.
    # sorted and distinct, as np.unique gives them (which imports numpy.ma: 0.008 s before a run's SMPI stage)
    thresholds = np.array(sorted({0.0, *map(float, interior), *([float(eager - 1)] if eager > 1 else [])}))
    first = thresholds + 1  # smallest size of each section
    line = np.searchsorted(interior, first, side="left")  # figures strictly below the section's sizes
    overhead = np.where(first < eager, o, 0.0)
    copy = np.where(first < eager, c, 0.0)
    net_b = b[line] - 2.0 * copy  # slope left to the network: b_k - 2c (eager)
    lat_part = a[line] - overhead - ENVELOPE * net_b  # a_k - o - 16 (b_k - 2c) = lat_factor_k * L
    return _Sections(thresholds, first, line, overhead, copy, b, lat_part)


def check_calibration(model: PlatformModel) -> None:
    """Refuse ``[mpi]`` figures SMPI cannot be calibrated to: one-line :class:`InputError` naming the figure.

    * An eager message cannot take less than its CPU overheads: every figure below the eager threshold must
      imply a one-way time above ``o_s + o_r + 2 c S`` (inter- and intra-node).  When every such figure is
      below, the overheads are named instead (they are what is out of scale).
    * (Consecutive inter-node figures implying a rate above the node link's are refused as the file is read:
      :func:`waitlab.platforms.mpi_spec.check_link_rate`.)
    * Every eager factor section of the inter-node figures must keep some network latency
      (``lat_factor = (a_k - o - 16 (b_k - 2c)) / L > 0``, :func:`calibrate`): a factor of 0 takes the latency
      out of SMPI's small messages.  (A rendezvous section whose line has no latency left keeps the clamped factor
      0 and a note: large messages are bandwidth-bound.)
    * The node link's latency (``inter_node.latency``, the wire) is at most the shortest one-way time of the
      inter-node figures: an MPI message cannot beat the wire it crosses.  (SimGrid also bounds every message's
      rate by ``network/TCP-gamma / (2 x route latency)`` with the link's own latency, before SMPI's latency
      factor: a link latency in the wrong unit, 1.5e-3 for 1.5 us, slowed 1 MiB messages by 79% unnoticed.)
      With fitted factors it is also above 0: the latency factor scales it, so a link latency of 0 loses the
      figures' MPI latency.  (The file's ``intra_node.latency`` has no such role: intra-node figures replace it
      with a fitted loopback latency, :func:`calibrate`.)
    """
    mpi = model.mpi
    if mpi is None:
        return
    file = model.file
    o = mpi.send_overhead + mpi.recv_overhead
    c = mpi.copy_per_byte
    eager_points = [p for path in ("inter_node", "intra_node") for p in mpi.points(path)
                    if p.size < mpi.eager_threshold]
    below = [p for p in eager_points if p.seconds <= o + 2.0 * c * p.size]
    if below and len(below) == len(eager_points) and len(eager_points) > 1:
        key = "mpi.send_overhead" if mpi.send_overhead >= mpi.recv_overhead else "mpi.recv_overhead"
        shortest = min(eager_points, key=lambda p: p.seconds)
        raise InputError(file, f"{key}.value", f"o_s + o_r = {o:.4g} s is at least the one-way time of every "
                         f"eager figure (the shortest: {shortest.key}, {shortest.seconds:.4g} s): a message cannot "
                         "take less than the CPU time of its send and receive calls",
                         f"give the CPU time of one {key.split('.')[1].split('_')[0]} call, so that o_s + o_r stays "
                         f"below {shortest.seconds - 2.0 * c * shortest.size:.4g} s (check the units: seconds)")
    if below:
        p = below[0]
        need = o + 2.0 * c * p.size
        raise InputError(file, f"{p.key}.value", f"implies {p.seconds:.4g} s one way for an eager message of "
                         f"{p.size} B, not more than its CPU overheads o_s + o_r"
                         f"{' + 2 S / copy_bandwidth' if c else ''} = {need:.4g} s: SMPI's latency would be zeroed",
                         _above(p, need) + ", or lower mpi.send_overhead / mpi.recv_overhead")
    if mpi.smpi_factors:  # factors 1: nothing is zeroed
        _check_latency_left(model, mpi)
    _check_wire_latency(model, mpi)


def _check_latency_left(model: PlatformModel, mpi: MpiSpec) -> None:
    """Refuse an eager factor section of the inter-node figures that leaves no network latency (see
    :func:`check_calibration`)."""
    file = model.file
    sec = _sections(model, mpi)
    bad = np.flatnonzero((sec.lat_part <= 0) & (sec.first < mpi.eager_threshold))  # rendezvous: clamped, noted
    if bad.size == 0:
        return
    k = int(bad[0])
    pts = mpi.inter_node
    j = int(sec.line[k])
    p = pts[j]
    # lat_part = t_j - b (s_j + 16) - o + 32 c with b the slope to figure j + 1 (or 1 / link bandwidth): solve
    # lat_part > 0 for t_j
    o_k, c_k = float(sec.overhead[k]), float(sec.copy[k])
    if len(pts) > 1:
        nxt = pts[j + 1]
        w = (p.size + ENVELOPE) / (nxt.size - p.size)
        need = (o_k - 2.0 * ENVELOPE * c_k + nxt.seconds * w) / (1.0 + w)
        line = f"the line through {p.key} and {nxt.key}"
    else:
        need = o_k - 2.0 * ENVELOPE * c_k + (p.size + ENVELOPE) / model.inter_node.bandwidth
        line = f"{p.key} with the link bandwidth (inter_node.bandwidth)"
    raise InputError(file, f"{p.key}.value", f"{line} leaves {float(sec.lat_part[k]):.3g} s of network latency for "
                     f"eager messages of {int(sec.first[k])} B and more (after o_s + o_r = {o_k:.4g} s and the "
                     "16-byte envelope): SMPI's latency factor would be 0 there",
                     _above(p, need) + ", or lower mpi.send_overhead / mpi.recv_overhead")


def _check_wire_latency(model: PlatformModel, mpi: MpiSpec) -> None:
    """Refuse an ``inter_node.latency`` above the shortest inter-node figure, or of 0 with fitted factors."""
    fastest = min(mpi.inter_node, key=lambda p: p.seconds)
    wire = model.inter_node.latency
    at_most = f"{fastest.seconds:.4g}"
    if float(at_most) > fastest.seconds:  # rounded up (a bandwidth figure's S / B): 4 digits rounded down
        unit = 10.0 ** (math.floor(math.log10(fastest.seconds)) - 3)
        at_most = f"{math.floor(fastest.seconds / unit) * unit:.4g}"
    if wire > fastest.seconds:  # as many digits as show the difference (1.5000001e-06 is more than 1.5e-06)
        digits = next(d for d in range(4, 18) if f"{wire:.{d}g}" != f"{fastest.seconds:.{d}g}")
        raise InputError(model.file, "inter_node.latency.value",
                         f"{wire:.{digits}g} s is more than the {fastest.seconds:.{digits}g} s one way of "
                         f"{fastest.size} B that {fastest.key} gives: the wire latency cannot exceed the MPI latency "
                         "measured over it",
                         f"give a value of at most {at_most} s (check the units: seconds), or check {fastest.key}")
    if wire <= 0 and mpi.smpi_factors:
        raise InputError(model.file, "inter_node.latency.value",
                         "is 0, but SMPI's latency factor, fitted to the [mpi] figures, scales it: the MPI latency "
                         f"of {fastest.key} would be lost",
                         f"give the wire's latency, above 0 and at most {at_most} s (the MPI latency measured over "
                         "it)")


def _above(p: MpiPoint, seconds: float) -> str:
    """The fix for figure ``p``: a one-way time above ``seconds`` (as a latency or a bandwidth)."""
    if p.kind == "latency":
        return f"give {p.key} more than {seconds:.4g} s"
    return f"give {p.key} less than {p.size / seconds:.4g} B/s" if seconds > 0 else f"check {p.key}"


def calibrate(model: PlatformModel) -> Calibration:
    """Derive SMPI's factors and overheads from ``model.mpi`` (see the module docstring).

    Examples
    --------
    >>> from waitlab.platforms.model import load_platform
    >>> c = calibrate(load_platform("dawning_5000a"))
    >>> sorted(c.smpi_config)[:3]
    ['smpi/bw-factor', 'smpi/lat-factor', 'smpi/ois']
    """
    mpi = model.mpi
    if mpi is None:
        return Calibration({"smpi/lat-factor": "0:1", "smpi/bw-factor": "0:1"}, model.intra_node, model.inter_node,
                           (0,), (1.0,), (1.0,), ())
    link = model.inter_node
    eager = mpi.eager_threshold
    o = mpi.send_overhead + mpi.recv_overhead
    c = mpi.copy_per_byte  # per-byte CPU cost of one eager copy (sender and receiver each pay it)
    sec = _sections(model, mpi)
    thresholds, first, lat_part = sec.thresholds, sec.first, sec.lat_part
    net_b = sec.slope[sec.line] - 2.0 * sec.copy  # slope left to the network: b_k - 2c (eager)
    notes: list[str] = []
    if np.any(lat_part < 0):
        bad = first[lat_part < 0].astype(int).tolist()
        notes.append(f"{model.name}: the line through the figures has less than the overheads ({o:.3g} s eager, "
                     f"0 rendezvous) of latency for sizes from {bad} B on; latency factor clamped at 0 there")
    lat_f = np.maximum(lat_part, 0.0) / link.latency if link.latency > 0 else np.ones_like(lat_part)
    if np.any(net_b <= 0):
        notes.append(f"{model.name}: a larger message has a shorter time (or the eager copy alone takes longer "
                     "than the figures); bandwidth factor capped")
    bw_f = 1.0 / (np.maximum(net_b, 1e-30) * link.bandwidth)
    if not mpi.smpi_factors:  # mpi.smpi_factors = false: the link figures are MPI-level, factors 1
        thresholds, lat_f, bw_f, notes = np.zeros(1), np.ones(1), np.ones(1), []
    intra = _fit_intra(model, mpi, thresholds, lat_f, bw_f, notes)
    # SimGrid looks the factors up by the network payload, message + envelope; the first section takes all sizes
    on_wire = np.where(thresholds > 0, thresholds + ENVELOPE, 0).astype(int)
    cfg = {
        "smpi/lat-factor": ";".join(f"{t}:{_n(f)}" for t, f in zip(on_wire, lat_f, strict=True)),
        "smpi/bw-factor": ";".join(f"{t}:{_n(f)}" for t, f in zip(on_wire, bw_f, strict=True)),
        "smpi/os": _overhead(mpi.send_overhead, c, eager),
        "smpi/ois": _overhead(mpi.send_overhead, c, eager),
        "smpi/or": _overhead(mpi.recv_overhead, c, eager),
        EAGER_SETTING: str(eager),
    }
    return Calibration(cfg, intra, link, tuple(int(t) for t in thresholds), tuple(float(x) for x in lat_f),
                       tuple(float(x) for x in bw_f), tuple(notes))


def _overhead(offset: float, per_byte: float, eager: int) -> str:
    """``smpi/os``-style sections: ``offset + per_byte * S`` below the eager threshold, ``offset`` from it on.

    A section ``t:offset:per_byte`` covers sizes above ``t`` (``smpi_host.cpp`` of SimGrid 3.32), so the second
    section starts at ``eager - 1``: messages of ``eager`` bytes and more are rendezvous (not copied by the CPU).
    """
    if per_byte == 0 or eager <= 1:
        return f"0:{_n(offset)}:0"
    return f"0:{_n(offset)}:{_n(per_byte)};{eager - 1}:{_n(offset)}:0"


def _fit_intra(model: PlatformModel, mpi: MpiSpec, thresholds: np.ndarray, lat_f: np.ndarray, bw_f: np.ndarray,
               notes: list[str]) -> LinkSpec:
    """Loopback (latency, bandwidth) meeting the intra-node figures under the inter-node factors."""
    pts = mpi.intra_node
    if not pts:
        return model.intra_node
    size = np.array([p.size for p in pts], dtype=float)
    target = np.array([p.seconds for p in pts], dtype=float)
    k = np.searchsorted(thresholds, size, side="left") - 1  # section with threshold < size
    eager = size < mpi.eager_threshold
    o = np.where(eager, mpi.send_overhead + mpi.recv_overhead + 2.0 * mpi.copy_per_byte * size, 0.0)
    wire = size + ENVELOPE
    # target - o = lat_f * L + (wire / bw_f) * (1 / B): linear in (L, 1/B)
    if not np.all(lat_f[k] > 0):  # no network latency to scale in a section (a clamped factor): not met
        sol = np.array([-1.0, 1.0])
    elif len(pts) == 1:
        lat = (target[0] - o[0] - wire[0] / (bw_f[k[0]] * model.intra_node.bandwidth)) / lat_f[k[0]]
        sol = np.array([lat, 1.0 / model.intra_node.bandwidth])
    else:
        design = np.column_stack([lat_f[k], wire / bw_f[k]])
        sol = np.linalg.lstsq(design, target - o, rcond=None)[0]
    if sol[0] < 0 or sol[1] <= 0:
        notes.append(f"{model.name}: the intra-node figures cannot be met with the inter-node factors "
                     f"(latency {sol[0]:.3g} s, 1/bandwidth {sol[1]:.3g}); the file's intra_node link is used")
        return model.intra_node
    return LinkSpec(bandwidth=float(1.0 / sol[1]), latency=float(sol[0]))
