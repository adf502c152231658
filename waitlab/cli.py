"""waitlab command line: simulate MPI wait propagation with SimGrid SMPI.

Sub-commands: run, platforms, doctor (and more as they are added).  Errors in
input files or in SimGrid are printed as one message, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from waitlab.errors import WaitlabError

Command = Callable[[argparse.Namespace], int]
_REGISTRY: list[Callable[[Any], None]] = []


def subcommand(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register a function that adds one sub-command to the parser."""
    _REGISTRY.append(fn)
    return fn


@subcommand
def _run(sub: Any) -> None:
    p = sub.add_parser("run", help="simulate one scenario and write its results folder")
    p.add_argument("scenario", type=Path, help="scenario TOML file")
    p.add_argument("-o", "--output", type=Path, default=None, help="results folder (default: results/<name>)")
    p.add_argument("--force", action="store_true", help="replace an existing results folder")
    p.add_argument("--no-png", action="store_true", help="skip the timeline picture")

    def go(args: argparse.Namespace) -> int:
        from waitlab.experiments.outputs import summary_text
        from waitlab.experiments.run import run_scenario
        from waitlab.experiments.scenario import load_scenario

        scenario = load_scenario(args.scenario)
        out = args.output or Path("results") / scenario.name
        result = run_scenario(scenario, out, force=args.force, png=not args.no_png)
        print(summary_text(result.summary, result.metadata))
        print(f"results written to {out}/")
        return 0

    p.set_defaults(func=go)


@subcommand
def _platforms(sub: Any) -> None:
    p = sub.add_parser("platforms", help="list the platform models, or show one")
    p.add_argument("name", nargs="?", help="platform to show (built-in name or .toml path)")
    p.add_argument("--xml", type=int, metavar="RANKS", help="print the SimGrid XML rendered for RANKS ranks")

    def go(args: argparse.Namespace) -> int:
        from waitlab.platforms import describe_platform, list_platforms, load_platform, render_platform

        if args.name is None:
            for name in list_platforms():
                print(describe_platform(load_platform(name), short=True))
            return 0
        model = load_platform(args.name)
        if args.xml:
            print(render_platform(model, args.xml).xml)
        else:
            print(describe_platform(model))
        return 0

    p.set_defaults(func=go)


@subcommand
def _doctor(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check that SimGrid, smpirun, the replay extension and the bindings work")

    def go(args: argparse.Namespace) -> int:
        from waitlab.simulator.doctor import doctor

        return doctor()

    p.set_defaults(func=go)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="waitlab", description="Simulate wait propagation in BSP MPI programs "
                                     "with SimGrid SMPI.")
    from waitlab import __version__

    parser.add_argument("--version", action="version", version=f"waitlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _REGISTRY:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``waitlab`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except WaitlabError as exc:
        print(f"waitlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("waitlab: interrupted; no partial results were kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
