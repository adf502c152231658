"""Shared by the benchmarks that measure a ladder of rank counts, each in a fresh process (``--one``).

``bench_scale.py`` and ``bench_estimate.py`` run themselves once per rank count with ``--one`` (which prints one
JSON row), print a table line per row and the row itself, and compare consecutive rows by their growth exponent
(log time / log ranks).  While a run goes on they watch its SimGrid process through ``/proc``
(:func:`smpimain_procs`).  Not a benchmark itself; imported by those scripts (their folder is on ``sys.path``
when they run).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


def smpimain_procs(marker: str) -> Iterator[Path]:
    """``/proc/<pid>`` of every running ``smpimain`` whose environment holds ``marker`` (one run's own)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        proc = Path(f"/proc/{pid}")
        try:
            if b"smpimain" not in (proc / "cmdline").read_bytes():
                continue
            if marker.encode() not in (proc / "environ").read_bytes():
                continue
        except OSError:
            continue
        yield proc


def dash(x: object, fmt: str = "") -> str:
    """``x`` formatted with ``fmt``, or ``-`` when it was not measured (None)."""
    return "-" if x is None else format(x, fmt)


def exponent(a: dict, b: dict, key: str) -> float | None:
    """Growth exponent of ``key`` from row ``a`` to row ``b``: log(b / a) / log(ranks_b / ranks_a); None when
    either was not measured."""
    if not a.get(key) or not b.get(key):
        return None
    return math.log(b[key] / a[key]) / math.log(b["ranks"] / a["ranks"])


def run_ladder(ranks: Sequence[int], command: Callable[[int], list[str]], timeout: float,
               line: Callable[[dict, dict | None], str]) -> list[dict]:
    """Run ``command(n)`` for every ``n`` of ``ranks`` (each prints its JSON row last) and print, per rank count,
    ``line(row, previous row)`` and the row, or a ``FAILED`` line with the run's last words.

    Returns the rows of the runs that succeeded.
    """
    rows: list[dict] = []
    for n in ranks:
        out = subprocess.run(command(n), capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            print(f"{n:>7} FAILED: {(out.stderr.strip().splitlines() or [str(out.returncode)])[-1]}", flush=True)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        text = line(r, rows[-1] if rows else None)
        rows.append(r)
        print(text)
        print("        " + json.dumps(r), flush=True)
    return rows
