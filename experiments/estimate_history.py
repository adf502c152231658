"""The estimate learns from measurement: each estimated run's SMPI time is kept, and later estimates of the same
application on the same platform are corrected by what was measured (issue 23).

The time model of :mod:`waitlab.experiments.estimate` is fitted to LARED-S-like runs on Dawning 5000A. Other
applications and platforms can cost SimGrid far more per event: a 2-D stencil on Sunway TaihuLight at 4,096
ranks was predicted at 3 s and its SMPI stage took 64 s (its halo exchanges keep thousands of flows active,
and each solver round touches all of them). So every run that was estimated (:data:`PREFLIGHT_RANKS` ranks or
more) appends one line to ``<cache>/estimate_history.jsonl``: application kind, platform, ranks, events, the
model's SMPI seconds and the measured SMPI seconds. :func:`learned_factor` picks the record of the same
application kind and platform whose rank count is nearest below (else nearest above) and scales the model's
SMPI time by measured / predicted.  Records of another version of the time model (:data:`MODEL_VERSION`) are
not used.

Examples
--------
>>> recs = [{"kind": "stencil", "platform": "sunway_taihulight", "ranks": 4096, "predicted": 2.0, "measured": 64.0,
...          "model": MODEL_VERSION}]
>>> learned_factor(recs, "stencil", "sunway_taihulight", 20480)
(32.0, 'x32 from a measured run of stencil on sunway_taihulight at 4,096 ranks (larger runs cost at least this)')
>>> learned_factor(recs, "lared_s", "sunway_taihulight", 20480)
(1.0, '')
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from waitlab.simulator.build import cache_dir

#: The history file, under waitlab's cache (``$WAITLAB_CACHE`` or ``~/.cache/waitlab``).
HISTORY_NAME = "estimate_history.jsonl"
#: Records kept (the oldest go first).
HISTORY_LIMIT = 500
#: Version of the time model whose predictions the records hold: a record of another version is not used (its
#: measured / predicted says nothing about today's model).  2: the measured step laws (issue 23).
MODEL_VERSION = 2


def history_path() -> Path:
    return cache_dir() / HISTORY_NAME


def read_history(path: Path | None = None) -> list[dict[str, Any]]:
    """The records of ``path`` (default :func:`history_path`); unreadable lines are skipped."""
    p = path or history_path()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()[-HISTORY_LIMIT:]
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if _valid(rec):
            out.append(rec)
    return out


def _valid(rec: Any) -> bool:
    if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str) or not isinstance(rec.get("platform"), str):
        return False
    try:
        values = (float(rec["ranks"]), float(rec["predicted"]), float(rec["measured"]))
    except (KeyError, TypeError, ValueError):
        return False
    return all(math.isfinite(v) and v > 0 for v in values)


def record_run(kind: str, platform: str, ranks: int, events: int, predicted: float, measured: float,
               path: Path | None = None) -> None:
    """Append one measured run (best effort: a cache that cannot be written changes nothing)."""
    rec = {"kind": kind, "platform": platform, "ranks": int(ranks), "events": int(events),
           "predicted": float(predicted), "measured": float(measured), "model": MODEL_VERSION}
    if not _valid(rec):
        return
    p = path or history_path()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        old = p.read_text(encoding="utf-8").splitlines()[-(HISTORY_LIMIT - 1):] if p.exists() else []
        p.write_text("\n".join([*old, json.dumps(rec, sort_keys=True)]) + "\n", encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return


def learned_factor(records: Iterable[Mapping[str, Any]], kind: str, platform: str, ranks: int) -> tuple[float, str]:
    """``(measured / predicted, explanation)`` of the nearest measured run of ``kind`` on ``platform``.

    Nearest: the largest rank count at or below ``ranks``, else the smallest above it; ``(1.0, "")`` when no run
    of that kind and platform was measured.  A factor from a smaller run is a lower bound for a larger one when
    the SMPI cost per event grows with the ranks, and the explanation says so.
    """
    same = [r for r in records if r["kind"] == kind and r["platform"] == platform
            and r.get("model", 1) == MODEL_VERSION]
    if not same:
        return 1.0, ""
    below = [r for r in same if int(r["ranks"]) <= ranks]
    rec = (max(below, key=lambda r: int(r["ranks"])) if below
           else min(same, key=lambda r: int(r["ranks"])))
    factor = float(rec["measured"]) / float(rec["predicted"])
    n = int(rec["ranks"])
    note = (f"x{factor:.3g} from a measured run of {kind} on {platform} at {n:,} ranks"
            + (" (larger runs cost at least this)" if n < ranks and factor > 1 else ""))
    return factor, note
