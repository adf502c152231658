"""Check a platform's calibration with real SMPI pingpongs: ``waitlab calibrate PLATFORM``.

The factors themselves are derived in :mod:`waitlab.platforms.smpi_factors` (re-exported here):
:func:`calibrate` gives the settings, :func:`calibration_table` runs a pingpong per MPI-level figure
of the platform file and reports source figure, simulated time and relative error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from waitlab.errors import InputError
from waitlab.models.apps.pingpong import PingpongParams, generate
from waitlab.platforms.machine import machine_settings
from waitlab.platforms.model import PlatformModel, load_platform
from waitlab.platforms.render import render_platform
from waitlab.platforms.smpi_factors import Calibration, calibrate
from waitlab.simulator.replay import replay_ops

__all__ = ["Calibration", "calibrate", "calibration_table", "pingpong_time", "unmeasurable"]


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
        ``rel_error`` ((simulated - source) / source), ``default_s`` (same links, SMPI's default factors) and
        ``default_rel_error``.
    """
    model = load_platform(platform_name)
    rows = []
    if model.mpi is None:
        return pd.DataFrame(columns=["path", "size", "kind", "figure", "provenance", "source_s", "simulated_s",
                                     "rel_error", "default_s", "default_rel_error"])
    skipped = {path: v for path, v in unmeasurable(model).items() if model.mpi.points(path)}
    if skipped and all(path in skipped or not model.mpi.points(path) for path in PATHS):
        key = next(iter(skipped.values()))[0]
        raise InputError(model.file, key, "no [mpi] figure can be measured on this platform: "
                         + "; ".join(f"mpi.{path}: {why}" for path, (_, why) in skipped.items()),
                         "calibrate a platform with " + " or ".join(f"{k} >= 2 (for the mpi.{path} figures)"
                                                                    for path, (k, _) in skipped.items()))
    for path in PATHS:
        if path in skipped:
            continue
        for p in model.mpi.points(path):
            sim = pingpong_time(model, p.size, path, timeout=timeout)
            dflt = pingpong_time(model, p.size, path, calibrated=False, timeout=timeout)
            rows.append({"path": path, "size": p.size, "kind": p.kind, "figure": p.value,
                         "provenance": model.figure(p.key).provenance, "source_s": p.seconds,
                         "simulated_s": sim, "rel_error": (sim - p.seconds) / p.seconds, "default_s": dflt,
                         "default_rel_error": (dflt - p.seconds) / p.seconds})
    table = pd.DataFrame(rows)
    table.attrs["not_measured"] = [f"mpi.{path}: not measured: {why} ({key})" for path, (key, why) in skipped.items()]
    return table
