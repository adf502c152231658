"""Command line: ``waitlab run|diagnose|platforms|doctor|...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from waitlab.errors import WaitlabError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="waitlab", description=__doc__)
    p.add_subparsers(dest="command", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except WaitlabError as exc:
        print(f"waitlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("waitlab: interrupted", file=sys.stderr)
        return 130
