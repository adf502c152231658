"""Shared parts of the command line: the sub-command registry and the output helpers.

Progress bars go to stderr, only to a terminal, and never with ``--quiet`` or ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

Command = Callable[[argparse.Namespace], int]
_REGISTRY: list[Callable[[Any], None]] = []


def subcommand(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register a function that adds one sub-command to the parser."""
    _REGISTRY.append(fn)
    return fn


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout (nothing else)")


def trust_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust-edited", action="store_true",
                   help="read a results folder whose integrity record (.waitlab) is missing or whose files changed "
                   "since its run; every output then says it was made from an edited folder")


def warn_edited(args: argparse.Namespace, *folders: Any) -> dict[str, str]:
    """With ``--trust-edited``: one warning line on stderr per folder that is not its run's; ``folder -> why``."""
    if not getattr(args, "trust_edited", False):
        return {}
    from waitlab import api

    edited = {str(f): why for f in folders if Path(f).is_dir() and (why := api.integrity(f))}
    for f, why in edited.items():
        print(f"waitlab: warning: {f} was read with --trust-edited: {why}", file=sys.stderr)
    return edited


def bar(args: argparse.Namespace) -> bool:
    """Progress bars: on stderr, only when it is a terminal and neither --quiet nor --json is given."""
    return not args.quiet and not getattr(args, "json", False) and sys.stderr.isatty()


def progress_line(stream: TextIO | None = None) -> Callable[[Any], None]:
    """A one-line progress display for a terminal: each report rewrites the line (``\\r``), ``None`` clears it.

    The reports come at most once per second (``waitlab.simulator.progress``); only :func:`bar` callers use it.
    """
    def show(p: Any) -> None:
        out = stream or sys.stderr
        out.write("\r\x1b[K" if p is None else f"\r\x1b[K{p.text()}")
        out.flush()
    return show


def say(args: argparse.Namespace, text: str) -> None:
    """Print human-readable text unless --quiet or --json."""
    if not args.quiet and not getattr(args, "json", False):
        print(text)


def dump(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def frame(table: Any) -> list[dict[str, Any]]:
    return list(table.to_dict("records"))
