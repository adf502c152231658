"""``waitlab import-otf2``: convert an OTF2 archive (e.g. Score-P's) once into a time-independent trace folder.

``[application] kind = "otf2"`` reads the archive on every run; a sweep over platforms re-reads it for every point.
:func:`import_otf2` reads it once (:func:`waitlab.simulator.otf2_import.read_otf2`, the same conversion as
``kind = "otf2"``: :func:`waitlab.models.otf2_ops.records_to_ops`) and writes waitlab's TI trace
(:func:`waitlab.simulator.trace.write_trace`, regions under their Score-P names), which ``kind = "trace"`` replays.

A TI trace holds compute as flops: the time between two MPI calls, times ``cpu_ratio``, is written as flops at the
core speed of ``platform`` (``flops = seconds x cpu_ratio x core speed``).  Replayed on that platform, compute takes
exactly what ``kind = "otf2"`` with the same ``cpu_ratio`` gives; on another platform it scales with that platform's
core speed (flops are flops), which is Dimemas' CPU ratio between the two platforms.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import tomli_w

from waitlab.errors import InputError
from waitlab.experiments.capture import REPLAY_NAME
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.run_folder import results_folder
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_ops
from waitlab.simulator.otf2_import import read_otf2
from waitlab.simulator.trace import write_trace

#: Description of the folder's ``import.json``.
META_NAME = "import.json"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def import_otf2(archive: str | Path, out: str | Path, *, platform: str = "dawning_5000a", cpu_ratio: float = 1.0,
                force: bool = False) -> tuple[Path, str]:
    """Convert the OTF2 archive ``archive`` (its anchor file, ``traces.otf2``) into a TI trace folder ``out``.

    Returns the trace's index and a scenario TOML that replays it on ``platform``.  The folder also gets
    ``import.json`` (the archive and its SHA-256, ``cpu_ratio``, platform and flops per second, ranks, operations)
    and that scenario as ``replay.toml``, and is renamed into place only when complete.

    Raises
    ------
    InputError
        One line naming the archive (or the option) for a file that is not an OTF2 archive, a truncated or
        inconsistent one, records that cannot be replayed (threads, one-sided MPI, I/O), an unknown platform or a
        ``cpu_ratio`` that is not a finite number > 0.
    """
    archive = Path(archive)
    if not (isinstance(cpu_ratio, int | float) and math.isfinite(cpu_ratio) and cpu_ratio > 0):
        raise InputError("(command line)", "--cpu-ratio", f"must be a finite number > 0, got {cpu_ratio!r}",
                         "the traced machine's core speed over the modeled one's, e.g. --cpu-ratio 1")
    try:
        ops = records_to_ops(read_otf2(archive), float(cpu_ratio))
    except Otf2Unreplayable as exc:
        raise InputError(str(archive), exc.where, exc.what, exc.fix) from None
    problem = first_mismatch(ops)
    if problem is not None:
        raise InputError(str(archive), f"({problem[0]})", problem[1], "the archive is inconsistent (truncated, or a "
                         "communicator or message is missing): record the run again")
    name = archive.resolve().parent.name or "otf2"
    scenario = from_mapping({"scenario": {"name": f"{name}-import", "ranks": ops.n_ranks},
                             "platform": {"name": platform},
                             "application": {"kind": "otf2", "trace": str(archive), "cpu_ratio": float(cpu_ratio)}},
                            "(command line)")
    speed = float(prepare(scenario).platform.core_speed)
    header = (f"waitlab import-otf2 of {archive.name} ({ops.n_ranks} ranks): compute = seconds between MPI calls x "
              f"cpu_ratio {float(cpu_ratio)!r} x {speed!r} flop/s ({platform})")
    out = Path(out)
    with results_folder(out, force, kind="capture") as partial:
        index = write_trace(ops, speed, partial, header=header, relative=True)
        meta: dict[str, Any] = {
            "archive": str(archive.resolve()), "archive_sha256": _digest(archive), "cpu_ratio": float(cpu_ratio),
            "platform": platform, "flops_per_second": speed, "ranks": ops.n_ranks, "operations": len(ops),
            "index": index.name, "regions": list(ops.names),
        }  # fmt: skip
        (partial / META_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        final = out / index.name
        text = tomli_w.dumps({"scenario": {"name": f"{name}-replay", "ranks": ops.n_ranks},
                              "platform": {"name": platform},
                              "application": {"kind": "trace", "trace": str(final.resolve())}})
        (partial / REPLAY_NAME).write_text(text)
    return final, text
