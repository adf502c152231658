"""An independent reader of Chrome trace JSON that imports complete ("X") slices the way Perfetto does.

Perfetto (trace processor, JSON importer) turns a ``ts``/``dur`` number into integer nanoseconds as
``int64(double(int_part) + double(frac_digits) / 10**n_frac) * 1000.0)`` (truncation; json_parser.h's
StringToDouble and json_utils.h's CoerceToTs), older releases parse the decimal text exactly and drop
digits beyond the nanosecond.  It then sorts the slices of a track by (ts, longer first) and nests them
on a stack; a slice that starts inside the open one and ends after it is dropped
(``slice_drop_overlapping_complete_event``).  This module repeats those steps in plain Python.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def modern_ns(text: str) -> int:
    """Perfetto's current number path: a double built from integer and fraction parts, times 1000, truncated."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    assert "e" not in body.lower(), f"exponent in a timestamp: {text}"
    int_s, _, frac_s = body.partition(".")
    value = float(int(int_s)) + (float(int(frac_s)) / float(10 ** len(frac_s)) if frac_s else 0.0)
    value = -value if neg else value
    return int(value * 1000.0)  # int() truncates toward zero, like static_cast<int64_t>


def legacy_ns(text: str) -> int:
    """Older Perfetto: the decimal text read exactly, digits beyond the nanosecond dropped."""
    return int(Decimal(text) * 1000)


def load_slices(text: str) -> dict[Any, list[tuple[int, int, int, str]]]:
    """Per (pid, tid): (ts_ns, dur_ns, file order, name) of every X slice, with both readers required to agree."""
    doc = json.loads(text, parse_float=str, parse_int=str)
    tracks: dict[Any, list[tuple[int, int, int, str]]] = {}
    for i, ev in enumerate(doc["traceEvents"]):
        if ev.get("ph") != "X":
            continue
        ts, dur = modern_ns(ev["ts"]), modern_ns(ev["dur"])
        assert (ts, dur) == (legacy_ns(ev["ts"]), legacy_ns(ev["dur"])), f"readers disagree on {ev}"
        tracks.setdefault((ev["pid"], ev["tid"]), []).append((ts, dur, i, ev["name"]))
    return tracks


def dropped_slices(text: str) -> tuple[int, list[str]]:
    """(slices imported, descriptions of the slices Perfetto would drop as overlapping)."""
    n, drops = 0, []
    for track, slices in load_slices(text).items():
        stack: list[tuple[int, int]] = []  # (end, ts) of the open slices
        for ts, dur, _, name in sorted(slices, key=lambda s: (s[0], -s[1], s[2])):
            n += 1
            end = ts + dur
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and end > stack[-1][0]:
                drops.append(f"track {track}: {name} [{ts}, {end}] overlaps its parent ending at {stack[-1][0]}")
                continue
            stack.append((end, ts))
    return n, drops
