"""``waitlab reproduce``: the papers' tables and experiments, each a set of scenarios through the one pipeline."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.cli_common import bar as _bar
from waitlab.cli_common import dump as _dump
from waitlab.cli_common import json_flag as _json_flag
from waitlab.cli_common import say as _say
from waitlab.errors import InputError


def _say_written(args: argparse.Namespace, report: str, out: Path) -> None:
    """A reproduction's report, then the folder it was written to."""
    _say(args, report)
    _say(args, f"written to {out}/")


def _reproduce_okita(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["okita-spilling"]
    curve = range(128, 2304 + 1, 128) if args.curve else ()
    res = mod.reproduce(curve=curve)
    out = args.output or api.default_output("okita-spilling")
    mod.write(res, out, png=not args.no_png)
    _say(args, res.markdown())
    _say(args, "checks: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in res.checks.items()))
    if res.circular:  # compared with the figure an input was set from: shown, not counted
        _say(args, "circular, not checks (an input was set from the paper's figure): "
             + ", ".join(f"{k} {'ok' if v else 'off'}" for k, v in res.circular.items()))
    _say(args, f"written to {out}/ in {res.seconds:.1f} s")
    return 0 if all(res.checks.values()) else 1


def _reproduce_policies(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["spill-policies"]
    setup = mod.ComparisonSetup(steps=args.steps or 50)
    table = mod.compare(ranks=args.ranks or [256, 1024], setup=setup, progress=not args.quiet)
    out = args.output or api.default_output("spill-policies")
    mod.write(table, out, setup, png=not args.no_png)
    _say_written(args, mod.markdown(table), out)
    return 0


def _reproduce_wu(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["wu-lared-s"]
    ranks = args.ranks[0] if args.ranks else mod.PAPER["ranks"]
    with api.open_executor("local", workers=args.workers) as ex:
        rep = mod.reproduce(ranks=ranks, steps=args.steps or mod.PAPER["steps"], seed=args.seed or 0,
                            executor=ex, progress=_bar(args))
    seed = f"-seed{args.seed}" if args.seed else ""  # another seed: another folder, not the seed-0 one replaced
    out = args.output or api.default_output(f"wu-lared-s-{ranks}{seed}")
    mod.write(rep, out, png=not args.no_png)
    _say_written(args, rep.markdown(), out)
    return 0


def _reproduce_rao(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["rao-alltoall"]
    grid = mod.FULL_GRID if args.full else mod.STATEMENT_GRID if args.statements else None
    with api.open_executor("local", workers=args.workers) as ex:  # each point is its own SMPI run
        res = mod.reproduce(grid, progress=lambda msg: _say(args, msg), executor=ex)
    out = args.output or api.default_output("rao-alltoall")
    mod.write(res, out, png=not args.no_png)
    _say_written(args, mod.markdown(res), out)
    return 0


def _reproduce_he(args: argparse.Namespace) -> int:
    mod = api.REPRODUCTIONS["he-sunway"]
    ranks = args.ranks[0] if args.ranks else 128
    res = mod.reproduce(ranks=ranks, ranks_per_node=args.ranks_per_node or 1, progress=print)
    out = args.output or api.default_output("he-sunway")
    mod.write(res, out)
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
    "he-sunway": ("He et al.'s Sunway TaihuLight tables 2-4 and the topology-aware alltoall over 12 placements "
                  "(--ranks, default 128, one per node)", _reproduce_he),
}
#: The targets that read each target-specific option (its ``dest``): given to another target, it is refused, not
#: silently ignored.
OPTION_TARGETS: dict[str, tuple[str, ...]] = {
    "full": ("rao-alltoall",), "statements": ("rao-alltoall",), "curve": ("okita-spilling",),
    "ranks": ("spill-policies", "wu-lared-s", "he-sunway"), "steps": ("spill-policies", "wu-lared-s"),
    "seed": ("wu-lared-s",), "ranks_per_node": ("he-sunway",), "workers": ("wu-lared-s", "rao-alltoall"),
}
#: Targets that take one rank count.
ONE_RANK_COUNT = ("wu-lared-s", "he-sunway")


def check_options(target: str, args: argparse.Namespace, defaults: dict[str, Any]) -> None:
    """Refuse an option ``target`` does not read (given with a value other than its default), and several rank
    counts for a target that runs one.

    >>> try:
    ...     check_options("rao-alltoall", argparse.Namespace(seed=3, ranks=None), {"seed": None, "ranks": None})
    ... except InputError as e:
    ...     print(e.field, e.problem)
    --seed is only read by wu-lared-s, not by rao-alltoall
    """
    for dest, users in OPTION_TARGETS.items():
        if target not in users and getattr(args, dest, None) != defaults.get(dest):
            flag = "--" + dest.replace("_", "-")
            raise InputError("(command line)", flag, f"is only read by {' and '.join(users)}, not by {target}",
                             "leave it out")
    if target in ONE_RANK_COUNT and args.ranks is not None and len(args.ranks) > 1:
        raise InputError("(command line)", "--ranks", f"{target} runs one rank count, got {len(args.ranks)}",
                         f"give one, e.g. --ranks {args.ranks[0]}, and run the command once per rank count")


#: Former target names, still accepted.
ALIASES = {"lared-s": "wu-lared-s", "policies": "spill-policies"}


def reproduce_command(sub: Any) -> None:
    """Add ``waitlab reproduce``."""
    p = sub.add_parser("reproduce", help="reproduce a paper's table or an experiment: "
                       + ", ".join(REPRODUCTIONS))
    p.add_argument("target", choices=sorted([*REPRODUCTIONS, *ALIASES]),
                   help="; ".join(f"{k}: {v[0]}" for k, v in REPRODUCTIONS.items())
                   + "; former names, still accepted: " + ", ".join(f"{k} (= {v})" for k, v in ALIASES.items()))
    p.add_argument("-o", "--output", type=Path, default=None, help="output folder (default: results/<target>; "
                   "wu-lared-s: results/wu-lared-s-<ranks>, with -seed<N> for --seed N other than 0)")
    p.add_argument("--no-png", action="store_true", help="skip the plots")
    p.add_argument("--full", action="store_true", help="rao-alltoall: the full grid (hours on 2 cores)")
    p.add_argument("--statements", action="store_true", help="rao-alltoall: the default subset plus the 256-rank "
                   "points statements 12-15 need (none 'not run'; MPICH native and LAM simple at 256 ranks take hours "
                   "on 2 cores)")
    p.add_argument("--curve", action="store_true", help="okita-spilling: also simulate R = 128, 256, ..., 2304 MB")
    p.add_argument("--ranks", type=int, nargs="+", default=None, help="spill-policies: rank counts (default 256 1024); "
                   "wu-lared-s: ranks (default 960)")
    p.add_argument("--steps", type=int, default=None, help="spill-policies: BSP steps (default 50); wu-lared-s: steps "
                   "(default 3)")
    p.add_argument("--seed", type=int, default=None, help="wu-lared-s: scenario seed (default 0)")
    p.add_argument("--ranks-per-node", type=int, default=None, help="he-sunway: ranks per node of the alltoall "
                   "study (default 1)")
    p.add_argument("--workers", type=int, default=2, help="wu-lared-s: parallel counterfactual re-runs; "
                   "rao-alltoall: points simulated at once (default 2)")

    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        target = ALIASES.get(args.target, args.target)
        check_options(target, args, {dest: p.get_default(dest) for dest in OPTION_TARGETS})
        before = set(Path("results").glob("*")) if args.output is None else set()
        rc = REPRODUCTIONS[target][1](args)
        if args.json:  # the folder the reproduction wrote, its files, its report and its exit status
            out = args.output or next(iter(sorted(set(Path("results").glob(f"{target}*")) - before)), None) \
                or api.default_output(target)
            files = sorted(p.name for p in Path(out).iterdir()) if Path(out).is_dir() else []
            report = next((Path(out) / f for f in files if f.endswith(".md")), None)
            _dump({"target": target, "output": str(out), "exit_status": rc, "files": files,
                   "report": report.read_text(encoding="utf-8") if report else None})
        return rc

    p.set_defaults(func=go)
