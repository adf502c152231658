"""Check a platform's calibration with real SMPI pingpongs: ``waitlab calibrate PLATFORM``.

The factors themselves are derived in :mod:`waitlab.platforms.smpi_factors` (re-exported here):
:func:`calibrate` gives the settings, :func:`calibration_table` runs a pingpong per MPI-level figure
of the platform file and reports source figure, simulated time and relative error.

Every figure of the file's ``[mpi]`` section is a **fit target**: the SMPI factors are fitted so that the
pingpong meets it, so its error checks the fit (and SMPI's use of it), it does not validate the model.  Sourced
figures of the same machine that the fit did not use are in :data:`HELD_OUT`; :func:`calibration_table` simulates
them too (``attrs["held_out"]``, role ``held-out check``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from waitlab.errors import InputError
from waitlab.models.apps.pingpong import PingpongParams, generate
from waitlab.models.columns import values
from waitlab.platforms.machine import machine_settings
from waitlab.platforms.model import PlatformModel, load_platform
from waitlab.platforms.render import render_platform
from waitlab.platforms.smpi_factors import Calibration, calibrate
from waitlab.simulator.replay import replay_ops

__all__ = ["FIT_TARGET", "HELD_OUT", "HELD_OUT_CHECK", "MODEL_INPUT", "Calibration", "HeldOut", "calibrate",
           "calibration_table", "held_out_rows", "pingpong_time", "unmeasurable"]

#: Role of every row of :func:`calibration_table`: a figure the SMPI factors were fitted to.
FIT_TARGET = "fit target"
#: Role of every row of :func:`calibration_table` on a platform with ``[mpi] smpi_factors = false``: no factor is
#: fitted, the links are rendered from the figures.
MODEL_INPUT = "model input"
#: Role of a :data:`HELD_OUT` row: a sourced figure the fit did not use.
HELD_OUT_CHECK = "held-out check"


@dataclass(frozen=True)
class HeldOut:
    """A sourced MPI-level figure of a machine that its platform's SMPI factors were not fitted to.

    ``kind`` and ``value`` read as an ``[mpi]`` point does: ``latency`` (s, one-way time of a ``size``-byte
    message) or ``bandwidth`` (B/s: ``size`` over that one-way time).  ``label`` names it in a few words,
    ``source`` says where it is from and how it is read.
    """

    path: str
    size: int
    kind: str
    value: float
    label: str
    source: str

    @property
    def seconds(self) -> float:
        """One-way time the figure implies (s)."""
        return self.value if self.kind == "latency" else self.size / self.value


_TABLE3 = ("He et al. 2017 table 3 (32 puts per epoch), read as the fit reads the table's 4 MB rate: one "
           "message's one-way time = size / rate (at 1 KB the per-put reply word and the pipelining of the "
           "32 puts make that reading rough; `waitlab reproduce he-sunway` simulates the put stream itself)")
#: Sourced figures left out of each built-in platform's fit (``waitlab calibrate`` shows them as held-out checks).
#: Dawning 5000A and DeepComp 7000 have none: Rao et al. give only the 1.6 us latency and the 20 Gb/s link, and the
#: other figures are assumed.
HELD_OUT: dict[str, tuple[HeldOut, ...]] = {
    "sunway_taihulight": (
        HeldOut("inter_node", 65536, "latency", 9.83e-6, "He et al. table 2: 64 KB Parallel C put, 9.83 us",
                "He et al. 2017 table 2: 9.83 us for a 64 KB Parallel C one-sided put (not fitted: with the 1 KB "
                "put it implies 10.4 GB/s at the margin, above the 7 GB/s link)"),
        HeldOut("inter_node", 1024, "bandwidth", 202.94e6, "He et al. table 3: 1 KB Parallel C puts, 202.94 MB/s",
                _TABLE3),
        HeldOut("inter_node", 65536, "bandwidth", 5520.04e6,
                "He et al. table 3: 64 KB Parallel C puts, 5,520.04 MB/s", _TABLE3),
        HeldOut("inter_node", 65536, "bandwidth", 5867.44e6,
                "He et al. table 3: 64 KB puts, no reply word, 5,867.44 MB/s", _TABLE3),
    ),
}


def held_out_rows(model: PlatformModel, *, timeout: float = 60.0) -> list[dict[str, object]]:
    """The :data:`HELD_OUT` figures of ``model`` (by its name) against the calibrated pingpong, one dict each:
    ``path``, ``size``, ``kind``, ``figure``, ``label``, ``provenance`` (the source), ``source_s``,
    ``simulated_s``, ``rel_error`` and ``role`` (``held-out check``).  Paths the platform cannot measure are left
    out."""
    rows: list[dict[str, object]] = []
    skipped = unmeasurable(model)
    for h in HELD_OUT.get(model.name, ()):
        if h.path in skipped:
            continue
        sim = pingpong_time(model, h.size, h.path, timeout=timeout)
        rows.append({"path": h.path, "size": h.size, "kind": h.kind, "figure": h.value, "label": h.label,
                     "provenance": h.source,
                     "source_s": h.seconds, "simulated_s": sim, "rel_error": (sim - h.seconds) / h.seconds,
                     "role": HELD_OUT_CHECK})
    return rows


def pingpong_time(model: PlatformModel, size: int, path: str = "inter_node", *, calibrated: bool = True,
                  steps: int = 4, timeout: float = 60.0) -> float:
    """Simulated one-way time (half the mean round trip) of a ``size``-byte SMPI pingpong on ``model``.

    ``path`` is ``"inter_node"`` (ranks on two nodes of one leaf) or ``"intra_node"`` (one node).
    ``calibrated=False`` renders the same links but leaves SMPI's default factors and zero overheads.
    The calibrated run uses the one machine model (:func:`waitlab.platforms.machine.machine_settings`), as
    ``waitlab run`` does.
    """
    rpn = 1 if path == "inter_node" else 2
    rp = render_platform(model, 2, ranks_per_node=rpn)
    ops = generate(PingpongParams(steps=steps, message_bytes=int(size)), n_ranks=2)
    config = machine_settings(model, rp) if calibrated else {}
    with tempfile.TemporaryDirectory(prefix="waitlab-calib-") as tmp:
        xml, hostfile = rp.write(Path(tmp))
        rep = replay_ops(ops, xml, hostfile, rp.core_speed, config=config, timeout=timeout,
                         what=f"pingpong of {size} B on {model.name} ({path})")
    return float(values(rep.events, "exit").max()) / (2 * steps)


#: The two paths a pingpong measures.
PATHS: tuple[str, ...] = ("inter_node", "intra_node")


def unmeasurable(model: PlatformModel) -> dict[str, tuple[str, str]]:
    """Paths whose pingpong cannot run on ``model``: path -> (the platform key that prevents it, why).

    ``inter_node`` needs two nodes (one rank on each), ``intra_node`` two rank slots on one node.
    """
    out: dict[str, tuple[str, str]] = {}
    if model.max_nodes < 2:
        out["inter_node"] = ("machine.max_nodes", "a pingpong between two nodes needs 2 nodes, the platform has 1")
    if model.node.cores < 2:
        out["intra_node"] = ("node.cores", "a pingpong inside one node needs 2 rank slots, a node has 1")
    return out


def calibration_table(platform_name: str, *, timeout: float = 60.0) -> pd.DataFrame:
    """Every MPI-level figure of a platform against a simulated SMPI pingpong.

    Parameters
    ----------
    platform_name : str
        Built-in platform name or platform file path.

    Returns
    -------
    pandas.DataFrame
        One row per figure that can be measured on the platform (:func:`unmeasurable`: inter-node figures need
        two nodes, intra-node ones two rank slots per node; ``attrs["not_measured"]`` says which were left out, and
        a platform on which none can be measured is an :class:`~waitlab.errors.InputError`):
        ``path``, ``size`` (B), ``kind`` (latency | bandwidth), ``figure`` (the file's
        value), ``provenance``, ``source_s`` (one-way seconds it implies), ``simulated_s`` (calibrated SMPI),
        ``rel_error`` ((simulated - source) / source), ``default_s`` (same links, SMPI's default factors),
        ``default_rel_error`` and ``role``: ``fit target`` on every row, since the SMPI factors are fitted to these
        very figures (the errors check the fit, they do not validate the model; ``model input`` where the file sets
        ``[mpi] smpi_factors = false``: no factor is fitted, the links are rendered from the figures).
        ``attrs["held_out"]``: the platform's sourced figures that the fit did not use (:func:`held_out_rows`), as
        a list of rows.
    """
    model = load_platform(platform_name)
    rows = []
    if model.mpi is None:
        return pd.DataFrame(columns=["path", "size", "kind", "figure", "provenance", "source_s", "simulated_s",
                                     "rel_error", "default_s", "default_rel_error", "role"])
    skipped = {path: v for path, v in unmeasurable(model).items() if model.mpi.points(path)}
    if skipped and all(path in skipped or not model.mpi.points(path) for path in PATHS):
        key = next(iter(skipped.values()))[0]
        raise InputError(model.file, key, "no [mpi] figure can be measured on this platform: "
                         + "; ".join(f"mpi.{path}: {why}" for path, (_, why) in skipped.items()),
                         "calibrate a platform with " + " or ".join(f"{k} >= 2 (for the mpi.{path} figures)"
                                                                    for path, (k, _) in skipped.items()))
    role = FIT_TARGET if model.mpi.smpi_factors else MODEL_INPUT
    for path in PATHS:
        if path in skipped:
            continue
        for p in model.mpi.points(path):
            sim = pingpong_time(model, p.size, path, timeout=timeout)
            dflt = pingpong_time(model, p.size, path, calibrated=False, timeout=timeout)
            rows.append({"path": path, "size": p.size, "kind": p.kind, "figure": p.value,
                         "provenance": model.figure(p.key).provenance, "source_s": p.seconds,
                         "simulated_s": sim, "rel_error": (sim - p.seconds) / p.seconds, "default_s": dflt,
                         "default_rel_error": (dflt - p.seconds) / p.seconds, "role": role})
    table = pd.DataFrame(rows)
    table.attrs["held_out"] = held_out_rows(model, timeout=timeout)
    table.attrs["not_measured"] = [f"mpi.{path}: not measured: {why} ({key})" for path, (key, why) in skipped.items()]
    return table
