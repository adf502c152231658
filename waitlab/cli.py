"""waitlab command line: simulate MPI wait propagation with SimGrid SMPI.

Sub-commands: run, platforms, doctor, capture (and more as they are added).  Errors in
input files or in SimGrid are printed as one message, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.errors import InputError, WaitlabError
from waitlab.interrupts import session
from waitlab.version import __version__

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
        scenario = api.load_scenario(args.scenario)
        out = args.output or api.default_output(scenario.name)
        result = api.run(scenario, out, force=args.force, png=not args.no_png)
        print(api.summary_text(result.result.summary, result.result.metadata))
        if result.perturbation is not None:
            print(api.report_text(result.perturbation.report))
            print(f"results written to {out}/ (unperturbed run in {out}/unperturbed/, report in "
                  f"{out}/perturbation.txt)")
        else:
            written = [f for f in ("timeline.png", "trace.json", "events.parquet") if (out / f).exists()]
            print(f"results written to {out}/ ({', '.join(written)})")
        print(f"next: waitlab diagnose {out}   # who caused the waits, scored against the injected truth")
        return 0

    p.set_defaults(func=go)


@subcommand
def _sweep(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run a what-if grid of scenarios (resumable; local processes or Dask)")
    p.add_argument("sweep", type=Path, help="sweep TOML file (base scenario + [grid])")
    p.add_argument("-o", "--output", type=Path, default=None, help="sweep folder (default: results/<name>)")
    p.add_argument("--executor", choices=("local", "dask"), default=None, help="override [sweep] executor")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: cores)")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")

    def go(args: argparse.Namespace) -> int:
        if args.workers is not None and args.workers < 1:
            raise InputError("(command line)", "--workers", f"must be >= 1, got {args.workers}", "e.g. --workers 2")
        sw = api.load_sweep(args.sweep)
        out = args.output or api.default_output(sw.name)
        table = api.sweep(sw, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                          progress=print)
        if len(table):
            print(table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
        print(f"sweep table written to {out}/sweep.csv")
        return 0 if len(table) == len(sw.points) else 3

    p.set_defaults(func=go)


@subcommand
def _platforms(sub: Any) -> None:
    p = sub.add_parser("platforms", help="list the platform models, or show one")
    p.add_argument("name", nargs="?", help="platform to show (built-in name or .toml path)")
    p.add_argument("--xml", type=int, metavar="RANKS", help="print the SimGrid XML rendered for RANKS ranks")

    def go(args: argparse.Namespace) -> int:
        if args.name is None:
            for name in api.platforms():
                print(api.describe(name, short=True))
            return 0
        print(api.describe(args.name, xml_ranks=args.xml))
        return 0

    p.set_defaults(func=go)


@subcommand
def _calibrate(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="simulated pingpong vs every MPI-level figure of a platform")
    p.add_argument("platform", help="built-in platform name or a platform .toml")

    def go(args: argparse.Namespace) -> int:
        table = api.calibrate(args.platform)
        print(table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
        return 0

    p.set_defaults(func=go)


@subcommand
def _doctor(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check that SimGrid, smpirun, the replay extension and the bindings work")

    def go(args: argparse.Namespace) -> int:
        return api.doctor()

    p.set_defaults(func=go)


@subcommand
def _capture(sub: Any) -> None:
    p = sub.add_parser("capture", help="record a real MPI program (kind = \"program\") once as a time-independent "
                       "trace that replays with kind = \"trace\"")
    p.add_argument("scenario", type=Path, help="scenario TOML file of the program")
    p.add_argument("-o", "--output", type=Path, default=None, help="trace folder (default: traces/<name>)")
    p.add_argument("--via", choices=("layer", "smpi"), default="layer",
                   help="waitlab's measurement layer (regions, call sites; default) or SMPI's own -trace-ti")
    p.add_argument("--force", action="store_true", help="replace an existing trace folder")

    def go(args: argparse.Namespace) -> int:
        scenario = api.load_scenario(args.scenario)
        out = args.output or api.default_output(scenario.name, root=Path("traces"))
        index = api.capture(scenario, out, via=args.via, force=args.force)
        print(f"trace of {scenario.ranks} ranks written to {out}/ (index {index.name})")
        print("replay it with a scenario such as:\n")
        print(api.trace_scenario_text(index.resolve(), scenario))
        return 0

    p.set_defaults(func=go)


@subcommand
def _check_c(sub: Any) -> None:
    p = sub.add_parser("check-c", help="check an event table with per-event overheads against condition C "
                       "(Okita et al., formula 3)")
    p.add_argument("events", type=Path, help="events.parquet or events.csv (or a results folder)")
    p.add_argument("--kinds", default="overhead,swap,flush,delay",
                   help="event kinds that count as overhead (comma-separated; default: %(default)s)")
    p.add_argument("--atol", type=float, default=1e-9, help="prefix sums closer than this are equal (s)")
    p.add_argument("--show", type=int, default=10, metavar="N", help="print the first N violations")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when condition C is violated")

    def go(args: argparse.Namespace) -> int:
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
        rep = api.check_c(args.events, atol=args.atol, kinds=kinds)
        print(rep.text())
        if len(rep.violations) and args.show > 0:
            print(rep.violations.head(args.show).to_string(index=False))
        return 1 if args.strict and not rep.holds else 0

    p.set_defaults(func=go)


@subcommand
def _diagnose(sub: Any) -> None:
    p = sub.add_parser("diagnose", help="run CWP-DM and H-CWP-DM on a run, compute the ground truth, score them")
    p.add_argument("source", type=Path, help="results folder of `waitlab run`, or a scenario TOML (simulated first)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="report folder (default: SOURCE/diagnosis, or results/<name>-diagnosis for a TOML)")
    p.add_argument("--threshold", type=float, default=0.01, help="H-CWP-DM hotspot threshold (default 0.01 = 1%%)")
    p.add_argument("--top-k", type=int, default=5, help="k of the top-k precision (default 5)")
    p.add_argument("--candidates", type=int, default=8,
                   help="(rank, region) pairs with the most injected seconds to cost individually (default 8)")
    p.add_argument("--no-truth", action="store_true", help="skip the counterfactual ground truth")
    p.add_argument("--no-cache", action="store_true", help="re-simulate counterfactuals even if cached")
    p.add_argument("--cache", type=Path, default=None,
                   help="counterfactual cache folder (default $WAITLAB_CACHE or ~/.cache/waitlab/counterfactuals)")
    p.add_argument("--executor", choices=("local", "dask"), default="local", help="where re-runs go")
    p.add_argument("--workers", type=int, default=2, help="parallel re-runs (default 2)")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler (--executor dask)")
    p.add_argument("--no-png", action="store_true", help="skip the figures")

    def go(args: argparse.Namespace) -> int:
        if args.workers < 1:
            raise InputError("(command line)", "--workers", f"must be >= 1, got {args.workers}", "e.g. --workers 2")
        with api.open_executor(args.executor, workers=args.workers, scheduler=args.scheduler) as ex:
            diag = api.diagnose(args.source, threshold=args.threshold, top_k=args.top_k,
                                n_candidates=args.candidates, truth=not args.no_truth, executor=ex,
                                cache_dir=args.cache, use_cache=not args.no_cache, progress=True)
        if args.output is not None:
            out = args.output
        elif args.source.is_dir():
            out = args.source / "diagnosis"
        else:
            out = api.default_output(diag.scenario.name if diag.scenario else args.source.stem, "-diagnosis")
        api.write_report(diag, out, png=not args.no_png)
        print(api.to_markdown(diag))
        print(f"report written to {out}/")
        return 0

    p.set_defaults(func=go)


def _reproduce_okita(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["okita-spilling"]
    curve = range(128, 2304 + 1, 128) if args.curve else ()
    res = mod.reproduce(curve=curve)
    out = args.output or api.default_output("okita-spilling")
    mod.write(res, out, png=not args.no_png)
    print(res.markdown())
    print("checks: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in res.checks.items()))
    print(f"written to {out}/ in {res.seconds:.1f} s")
    return 0 if all(res.checks.values()) else 1


def _reproduce_policies(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["spill-policies"]
    setup = mod.ComparisonSetup(steps=args.steps or 50)
    table = mod.compare(ranks=args.ranks or [256, 1024], setup=setup)
    out = args.output or api.default_output("spill-policies")
    mod.write(table, out, setup, png=not args.no_png)
    print(mod.markdown(table))
    print(f"written to {out}/")
    return 0


def _reproduce_wu(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["wu-lared-s"]
    ranks = args.ranks[0] if args.ranks else mod.PAPER["ranks"]
    with api.open_executor("local", workers=args.workers) as ex:
        rep = mod.reproduce(ranks=ranks, steps=args.steps or mod.PAPER["steps"], seed=args.seed or 0,
                            executor=ex, progress=True)
    out = args.output or api.default_output(f"wu-lared-s-{ranks}")
    mod.write(rep, out, png=not args.no_png)
    print(rep.markdown())
    print(f"written to {out}/")
    return 0


def _reproduce_rao(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["rao-alltoall"]
    res = mod.reproduce(mod.FULL_GRID if args.full else None, progress=print)
    out = args.output or api.default_output("rao-alltoall")
    mod.write(res, out, png=not args.no_png)
    print(mod.markdown(res))
    print(f"written to {out}/")
    return 0


#: ``waitlab reproduce`` targets, named after the papers: name -> (help, function(args) -> exit status).
REPRODUCTIONS: dict[str, tuple[str, Callable[[argparse.Namespace], int]]] = {
    "wu-lared-s": ("Wu et al.'s LARED-S case study: H-CWP-DM, CWP-DM and ground truth vs the paper (960 ranks; "
                   "--ranks to scale down)", _reproduce_wu),
    "okita-spilling": ("Okita et al.'s table 1 and figure 3: pingpong traced in memory, swapping, or spilled by "
                       "the swap-out function f", _reproduce_okita),
    "spill-policies": ("spilling-policy comparison on a BSP stencil (overhead, condition C, distortion)",
                       _reproduce_policies),
    "rao-alltoall": ("Rao et al.'s alltoall study on Dawning 5000A and DeepComp 7000: times and the agreement "
                     "table (a subset by default; --full for every rank count)", _reproduce_rao),
}
#: Former target names, still accepted.
ALIASES = {"lared-s": "wu-lared-s", "seed003": "okita-spilling", "policies": "spill-policies"}


@subcommand
def _reproduce(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's table or an experiment: "
                       + ", ".join(REPRODUCTIONS))
    p.add_argument("target", choices=sorted([*REPRODUCTIONS, *ALIASES]),
                   help="; ".join(f"{k}: {v[0]}" for k, v in REPRODUCTIONS.items()))
    p.add_argument("-o", "--output", type=Path, default=None, help="output folder (default: results/<target>)")
    p.add_argument("--no-png", action="store_true", help="skip the plots")
    p.add_argument("--full", action="store_true", help="rao-alltoall: the full grid (hours on 2 cores)")
    p.add_argument("--curve", action="store_true", help="okita-spilling: also simulate R = 128, 256, ..., 2304 MB")
    p.add_argument("--ranks", type=int, nargs="+", default=None, help="spill-policies: rank counts (default 256 1024); "
                   "wu-lared-s: ranks (default 960)")
    p.add_argument("--steps", type=int, default=None, help="spill-policies: BSP steps (default 50); wu-lared-s: steps "
                   "(default 3)")
    p.add_argument("--seed", type=int, default=None, help="wu-lared-s: scenario seed (default 0)")
    p.add_argument("--workers", type=int, default=2, help="wu-lared-s: parallel counterfactual re-runs (default 2)")

    def go(args: argparse.Namespace) -> int:
        return REPRODUCTIONS[ALIASES.get(args.target, args.target)][1](args)

    p.set_defaults(func=go)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="waitlab", description="Simulate wait propagation in BSP MPI programs "
                                     "with SimGrid SMPI.")
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
        with session():  # own scratch folder; first Ctrl-C stops cleanly, a second at once
            return int(args.func(args))
    except WaitlabError as exc:
        print(f"waitlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("waitlab: interrupted; no partial results were kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
