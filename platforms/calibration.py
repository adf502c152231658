"""Check a platform's calibration with real SMPI pingpongs: ``waitlab calibrate PLATFORM``.

The factors themselves are derived in :mod:`waitlab.platforms.smpi_factors` (re-exported here):
:func:`calibrate` gives the settings, :func:`calibration_table` runs a pingpong per MPI-level figure
of the platform file and reports source figure, simulated time and relative error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from waitlab.models.apps.pingpong import PingpongParams, generate
from waitlab.platforms.machine import machine_settings
from waitlab.platforms.model import PlatformModel, load_platform
from waitlab.platforms.render import render_platform
from waitlab.platforms.smpi_factors import Calibration, calibrate
from waitlab.simulator.replay import replay_ops

__all__ = ["Calibration", "calibrate", "calibration_table", "pingpong_time"]


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
    return float(rep.events["exit"].max()) / (2 * steps)


def calibration_table(platform_name: str, *, timeout: float = 60.0) -> pd.DataFrame:
    """Every MPI-level figure of a platform against a simulated SMPI pingpong.

    Parameters
    ----------
    platform_name : str
        Built-in platform name or platform file path.

    Returns
    -------
    pandas.DataFrame
        One row per figure: ``path``, ``size`` (B), ``kind`` (latency | bandwidth), ``figure`` (the file's
        value), ``provenance``, ``source_s`` (one-way seconds it implies), ``simulated_s`` (calibrated SMPI),
        ``rel_error`` ((simulated - source) / source), ``default_s`` (same links, SMPI's default factors) and
        ``default_rel_error``.
    """
    model = load_platform(platform_name)
    rows = []
    if model.mpi is None:
        return pd.DataFrame(columns=["path", "size", "kind", "figure", "provenance", "source_s", "simulated_s",
                                     "rel_error", "default_s", "default_rel_error"])
    for path in ("inter_node", "intra_node"):
        for p in model.mpi.points(path):
            sim = pingpong_time(model, p.size, path, timeout=timeout)
            dflt = pingpong_time(model, p.size, path, calibrated=False, timeout=timeout)
            rows.append({"path": path, "size": p.size, "kind": p.kind, "figure": p.value,
                         "provenance": model.figure(p.key).provenance, "source_s": p.seconds,
                         "simulated_s": sim, "rel_error": (sim - p.seconds) / p.seconds, "default_s": dflt,
                         "default_rel_error": (dflt - p.seconds) / p.seconds})
    return pd.DataFrame(rows)
