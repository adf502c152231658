"""waitlab command line: simulate MPI wait propagation with SimGrid SMPI.

Sub-commands: run, sweep, diagnose, compare, export, plot, check-c, reproduce, platforms, calibrate, doctor,
capture, evaluate, report, analyze.  Errors in input files or in SimGrid are printed as one message, without a
traceback.  Every command takes ``--quiet`` (no progress, no text summary); every one but doctor, capture and
import-otf2 takes ``--json``.
Progress bars go to stderr, and only to a terminal.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from waitlab import api, cli_analyze, cli_outputs, cli_reproduce, cli_workbench
from waitlab.cli_common import _REGISTRY, subcommand, trust_flag, warn_edited
from waitlab.cli_common import bar as _bar
from waitlab.cli_common import dump as _dump
from waitlab.cli_common import frame as _frame
from waitlab.cli_common import json_flag as _json_flag
from waitlab.cli_common import progress_line as _progress_line
from waitlab.cli_common import say as _say
from waitlab.errors import (
    EnvironmentProblem,
    InputError,
    Interrupted,
    WaitlabError,
    is_write_failure,
    out_of_memory,
    out_of_memory_text,
    removed_by,
    write_error,
)
from waitlab.interrupts import session
from waitlab.version import __version__


@subcommand
def _run(sub: Any) -> None:
    p = sub.add_parser("run", help="simulate one scenario and write its results folder")
    p.add_argument("scenario", type=Path, help="scenario TOML file (- reads it from standard input)")
    p.add_argument("-o", "--output", type=Path, default=None, help="results folder (default: results/<name>)")
    p.add_argument("--force", action="store_true", help="replace an existing results folder")
    p.add_argument("--png", action=argparse.BooleanOptionalAction, default=False,
                   help="also draw timeline.png (matplotlib: about 0.5 s of CPU); not drawn by default")
    p.add_argument("--chrome", action=argparse.BooleanOptionalAction, default=False,
                   help="also write trace.json, the Chrome/Perfetto trace of the first 200,000 events (0.1 s of CPU, "
                        "32 MB at 1,024 ranks x 20 steps); not written by default (`waitlab export --chrome RUN` "
                        "writes the whole run's later)")
    p.add_argument("--no-resource-check", action="store_true",
                   help="run even when the estimate (printed for 4,096 ranks or more) says it will not fit")
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        scenario = api.load_scenario(args.scenario)
        out = args.output or api.default_output(scenario.name)
        result = api.run(scenario, out, force=args.force, png=args.png, chrome=args.chrome,
                         check_resources=not args.no_resource_check, say=lambda m: _say(args, m),
                         smpi_progress=_progress_line() if _bar(args) else None)
        if args.json:
            pert = result.perturbation.report if result.perturbation is not None else None
            _dump({"output": str(out), "metadata": result.result.metadata, "summary": result.result.summary,
                   "perturbation": pert})
            return 0
        if args.quiet:  # nothing is printed: no text is built (api.summary_text imports the API's tools)
            return 0
        _say(args, api.summary_text(result.result.summary, result.result.metadata))
        if result.perturbation is not None:
            _say(args, api.report_text(result.perturbation.report))
            _say(args, f"results written to {out}/ (unperturbed run in {out}/unperturbed/, report in "
                 f"{out}/perturbation.txt)")
        else:
            written = [f for f in ("report.html", "timeline.png", "trace.json", "events.parquet") if (out / f).exists()]
            _say(args, f"results written to {out}/ ({', '.join(written)})")
        if result.result.metadata.get("source") == "recorded":  # read as recorded: nothing was injected
            _say(args, f"next: waitlab diagnose {out} --no-truth   # who caused the waits (no truth: nothing injected)")
        else:
            _say(args, f"next: waitlab diagnose {out}   # who caused the waits, scored against the injected truth")
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
    cli_workbench.model_flag(p, "and score at every point, besides [sweep] diagnose", timeout=False)
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.workers is not None and args.workers < 1:
            raise InputError("(command line)", "--workers", f"must be >= 1, got {args.workers}", "e.g. --workers 2")
        sw = api.load_sweep(args.sweep)
        if args.model:
            sw = api.with_models(sw, args.model)
        out = args.output or api.default_output(sw.name)
        bar = _bar(args)

        def say(msg: str) -> None:  # failures on stderr; with a bar, only the final count; else every line
            if msg.startswith("FAILED"):
                print(msg, file=sys.stderr)
            elif not bar or "points done" in msg:
                _say(args, msg)

        table = api.sweep(sw, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                          progress=say, bar=bar)
        if args.json:
            _dump({"output": str(out), "points": len(sw.points), "rows": _frame(table)})
        else:
            if len(table):
                _say(args, table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
            _say(args, f"sweep table written to {out}/sweep.csv\nnext: waitlab plot {out}   # each result "
                 "against a swept key, a line per value of the others")
        if len(table) != len(sw.points) or table.attrs.get("counts", {}).get("failed"):
            return 3  # a point is missing, or failed.csv lists one
        failed = table.attrs.get("model_failures") or []
        if failed:  # a model that failed is an error of the command (docs/workbench.md), its table is written
            print(f"waitlab: {len(failed)} diagnosis model run(s) failed, one row per model and point in "
                  f"{out}/model_failures.csv", file=sys.stderr)
            return 1
        return 0

    p.set_defaults(func=go)


@subcommand
def _platforms(sub: Any) -> None:
    p = sub.add_parser("platforms", help="list the platform models, or show one")
    p.add_argument("name", nargs="?", help="platform to show (built-in name or .toml path)")
    p.add_argument("extra", nargs="?", help=argparse.SUPPRESS)  # `platforms show NAME`: an alias of `platforms NAME`
    p.add_argument("--xml", type=int, metavar="RANKS", help="print the SimGrid XML rendered for RANKS ranks")
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.extra is not None:
            if args.name != "show":
                raise InputError("(command line)", args.extra, "`waitlab platforms` shows one platform: "
                                 f"got {args.name!r} and {args.extra!r}", f"waitlab platforms {args.name}")
            args.name = args.extra  # `waitlab platforms show NAME` = `waitlab platforms NAME`
        elif args.name == "show" and not Path("show").exists():
            raise InputError("(command line)", "show", "names no platform: `waitlab platforms NAME` shows one",
                             "e.g. waitlab platforms dawning_5000a (or waitlab platforms to list them)")
        if args.name is None and args.xml is not None:
            raise InputError("(command line)", "--xml", "renders one platform: name it", "e.g. waitlab platforms "
                             "dawning_5000a --xml 16")
        if args.name is None:  # old names (api.platform_aliases) still load but are not listed
            listing = [api.platform_sources(name) for name in api.platforms()]
            if args.json:
                _dump(listing)
                return 0
            for d in listing:
                _say(args, d["summary"])
                _say(args, f"    sources: {'; '.join(d['sources']) or 'none'} ({d['sourced']} figures sourced, "
                     f"{d['assumed']} assumed)")
            _say(args, "every figure with its source: waitlab platforms NAME")
            return 0
        if args.json:
            _dump({**api.platform_sources(args.name), "description": api.describe(args.name),
                   **({"xml": api.describe(args.name, xml_ranks=args.xml)} if args.xml is not None else {})})
            return 0
        _say(args, api.describe(args.name, xml_ranks=args.xml))  # (-q: the platform file is still checked)
        return 0

    p.set_defaults(func=go)


@subcommand
def _calibrate(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="fit check: simulated pingpong vs the MPI-level figures SMPI's factors "
                       "are fitted to (and a platform's sourced figures left out of the fit)")
    p.add_argument("platform", help="built-in platform name or a platform .toml")
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        table = api.calibrate(args.platform)
        if args.json:  # the fit targets, then the held-out checks (each row says which: "role")
            _dump(_frame(table) + list(table.attrs.get("held_out", ())))
        _say(args, api.calibration_text(table))
        return 0

    p.set_defaults(func=go)


@subcommand
def _doctor(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check that SimGrid, smpirun, the replay extension and the bindings work")

    def go(args: argparse.Namespace) -> int:
        return api.doctor(quiet=args.quiet)

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
    p.add_argument("--no-check", action="store_true",
                   help="keep the trace without replaying it and comparing with the live run")

    def go(args: argparse.Namespace) -> int:
        scenario = api.load_scenario(args.scenario)
        out = args.output or api.default_output(scenario.name, root=Path("traces"))
        index = api.capture(scenario, out, via=args.via, force=args.force, check=not args.no_check)
        _say_trace(args, f"trace of {scenario.ranks} ranks written to {out}/ (index {index.name})", index)
        return 0

    p.set_defaults(func=go)


@subcommand
def _import_otf2(sub: Any) -> None:
    p = sub.add_parser("import-otf2", help="convert an OTF2 archive (Score-P's traces.otf2) once into a "
                       "time-independent trace that replays with kind = \"trace\" on any platform")
    p.add_argument("archive", type=Path, help="the archive's anchor file (traces.otf2)")
    p.add_argument("-o", "--output", type=Path, required=True, help="trace folder to write")
    p.add_argument("--platform", default="dawning_5000a",
                   help="platform whose core speed turns compute seconds into flops (default: dawning_5000a)")
    p.add_argument("--cpu-ratio", type=float, default=1.0,
                   help="speed of the traced machine's core over the platform's (Dimemas' CPU ratio; default 1)")
    p.add_argument("--force", action="store_true", help="replace an existing trace folder")

    def go(args: argparse.Namespace) -> int:
        index, _ = api.import_otf2(args.archive, args.output, platform=args.platform, cpu_ratio=args.cpu_ratio,
                                   force=args.force)
        _say_trace(args, f"trace written to {args.output}/ (index {index.name})", index)
        return 0

    p.set_defaults(func=go)


def _say_trace(args: argparse.Namespace, written: str, index: Path) -> None:
    """Where a trace was written, then the scenario that replays it, ``replay.toml`` beside its index
    (``capture``, ``import-otf2``)."""
    replay = index.with_name("replay.toml")
    _say(args, written)
    _say(args, f"its replay scenario: {replay} (run it: waitlab run {replay}; copy it and change [platform] to "
         "replay elsewhere):\n")
    _say(args, replay.read_text())


@subcommand
def _check_c(sub: Any) -> None:
    p = sub.add_parser("check-c", help="check an event table with per-event overheads against condition C "
                       "(Okita et al., formula 3); exit status 1 when it is violated")
    p.add_argument("events", type=Path, help="events.parquet or events.csv (or a results folder)")
    p.add_argument("--kinds", default="overhead,swap,flush,delay",
                   help="event kinds that count as overhead (comma-separated; default: %(default)s)")
    p.add_argument("--atol", type=float, default=1e-9, help="prefix sums closer than this are equal (s)")
    p.add_argument("--show", type=int, default=10, metavar="N", help="print the first N violations (default 10; 0: "
                   "none)")
    p.add_argument("--strict", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for scripts
    trust_flag(p)
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.show < 0:
            raise InputError("(command line)", "--show", f"must be >= 0, got {args.show}", "e.g. --show 10")
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
        rep = api.check_c(args.events, atol=args.atol, kinds=kinds, trust_edited=args.trust_edited)
        edited = warn_edited(args, args.events)
        if args.json:
            _dump({"holds": rep.holds, "pairs": rep.pairs, "violating_pairs": rep.violating_pairs,
                   "collectives": rep.collectives, "violating_collectives": rep.violating_collectives,
                   "max_difference": rep.max_difference, "first": rep.first, "total_overhead": rep.total_overhead,
                   "violations": _frame(rep.violations.head(args.show)), "kinds": list(kinds),
                   "noise_booked": rep.noise_booked,
                   **({"trust_edited": edited} if edited else {})})
        _say(args, f"counted as overhead: event kinds {', '.join(kinds)} (--kinds picks them; e.g. --kinds "
             "swap,flush,delay counts only the spilling: swaps, flushes and the pads (delay) that equalise "
             "synchronised flushes, without the per-record overhead)")
        if rep.noise_booked:  # the run recorded where noise landed (noise_detours.parquet)
            _say(args, f"booked as noise, not overhead: {rep.noise_booked:.6g} s of OS-noise detour the run recorded "
                 "inside those events")
        _say(args, rep.text())
        if len(rep.violations) and args.show:
            _say(args, rep.violations.head(args.show).to_string(index=False))
        return 0 if rep.holds else 1

    p.set_defaults(func=go)


@subcommand
def _diagnose(sub: Any) -> None:
    p = sub.add_parser("diagnose", help="run CWP-DM and H-CWP-DM on a run, compute the ground truth, score them")
    p.add_argument("source", type=Path, help="results folder of `waitlab run`, or a scenario TOML (simulated first)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="report folder (default: SOURCE/diagnosis, and SOURCE/report.html gains the diagnosis; "
                   "results/<name>-diagnosis for a TOML). With -o only that folder is written: `waitlab report "
                   "SOURCE --diagnosis OUTPUT/diagnosis.json` rebuilds SOURCE's page with it")
    p.add_argument("--threshold", type=float, default=0.01, help="H-CWP-DM hotspot threshold (default 0.01 = 1%%)")
    p.add_argument("--tie-relative", type=float, default=0.0, metavar="F",
                   help="CWP-DM and H-CWP-DM share a wait among culprits that arrived within F of the wait of the "
                   "latest (e.g. 0.01; default 0: ties within 1 us only)")
    p.add_argument("--top-k", type=int, default=5, help="k of the top-k precision (default 5)")
    p.add_argument("--candidates", type=int, default=8,
                   help="(rank, region) pairs with the most injected seconds to cost individually (default 8)")
    p.add_argument("--no-truth", action="store_true", help="skip the counterfactual ground truth")
    p.add_argument("--no-cache", action="store_true", help="re-simulate counterfactuals even if cached")
    p.add_argument("--cache", type=Path, default=None,
                   help="counterfactual cache folder (default: counterfactuals/ in $WAITLAB_CACHE, else "
                   "$XDG_CACHE_HOME/waitlab, else ~/.cache/waitlab)")
    p.add_argument("--executor", choices=("local", "dask"), default="local", help="where re-runs go")
    p.add_argument("--workers", type=int, default=2, help="parallel re-runs (default 2)")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler (--executor dask)")
    p.add_argument("--no-png", action="store_true", help="skip the figures")
    cli_workbench.model_flag(p, "besides CWP-DM and H-CWP-DM")
    trust_flag(p)
    _json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.workers < 1:
            raise InputError("(command line)", "--workers", f"must be >= 1, got {args.workers}", "e.g. --workers 2")
        if not 0 <= args.threshold < 1:  # NaN fails this too
            raise InputError("(command line)", "--threshold", f"must be in [0, 1), got {args.threshold}",
                             "e.g. --threshold 0.01 (1%)")
        if not 0 <= args.tie_relative < 1:
            raise InputError("(command line)", "--tie-relative", f"must be in [0, 1), got {args.tie_relative}",
                             "e.g. --tie-relative 0.01 (1%)")
        if args.top_k < 1 or args.candidates < 0:
            raise InputError("(command line)", "--top-k" if args.top_k < 1 else "--candidates",
                             f"must be >= {1 if args.top_k < 1 else 0}", "e.g. --top-k 5 --candidates 8")
        if args.cache is not None and args.cache.exists() and not args.cache.is_dir():
            raise InputError(str(args.cache), "--cache", "is a file, not a folder",
                             "pass a folder for the counterfactual cache (it is created when missing)")
        models = [*api.DEFAULT_MODELS, *(args.model or [])]
        # a results folder is read once, for the diagnosis and for its report.html
        run = api.load_run(args.source, args.trust_edited) if args.source.is_dir() else None
        # the report folder is checked before any work (that of a scenario file is named after the run)
        given = args.output if args.output is not None else args.source / "diagnosis" if run is not None else None
        try:
            with api.open_executor(args.executor, workers=args.workers, scheduler=args.scheduler) as ex:
                diag = api.diagnose(run or args.source, threshold=args.threshold, tie_relative=args.tie_relative,
                                    top_k=args.top_k,
                                    n_candidates=args.candidates, truth=not args.no_truth, executor=ex,
                                    cache_dir=args.cache, use_cache=not args.no_cache, progress=_bar(args),
                                    models=models, trust_edited=args.trust_edited, out=given,
                                    model_timeout=cli_workbench.model_timeout(args))
        except KeyboardInterrupt as exc:  # the re-runs were stopped by open_executor; say what stays
            kept = ("nothing was kept (--no-cache)" if args.no_cache else "the counterfactual re-runs that "
                    "finished are kept in the cache (--cache; default ~/.cache/waitlab/counterfactuals) and are "
                    "reused")
            raise Interrupted(f"diagnose interrupted by {api.signal_name(exc)}: running re-runs were stopped, no "
                              f"report was written; {kept} when you run the same command again",
                              int(getattr(exc, "signum", 2))) from None
        if args.output is not None:
            out = args.output
        elif args.source.is_dir():
            out = args.source / "diagnosis"
        else:
            out = api.default_output(diag.scenario.name if diag.scenario else args.source.stem, "-diagnosis")
        api.write_report(diag, out, png=not args.no_png)
        page = run is not None and args.output is None  # the run's report.html gains its own diagnosis (not -o's)
        if run is not None and page:
            api.report(run, out / "diagnosis.json", trust_edited=args.trust_edited)
        if run is not None:
            warn_edited(args, args.source)
        if args.json:
            _dump({"output": str(out), **api.report_dict(diag)})
        if not args.quiet and not args.json:  # the text summary is built only when printed
            _say(args, api.to_markdown(diag))
        if diag.truth is not None:
            _say(args, api.cache_use(diag.truth))
        _say(args, f"report written to {out}/" + (f" and {args.source / 'report.html'}" if page else ""))
        for msg in diag.errors.values():  # the other models' results are in the report
            print(f"waitlab: error: {msg}", file=sys.stderr)
        return 1 if diag.errors else 0

    p.set_defaults(func=go)


for _add in cli_outputs.COMMANDS:  # compare, export, plot
    subcommand(_add)
subcommand(cli_workbench.evaluate_command)
subcommand(cli_analyze.analyze_command)
subcommand(cli_reproduce.reproduce_command)



class _Parser(argparse.ArgumentParser):
    """The parser of ``waitlab`` and of each sub-command: an option is taken only as written (``--otf`` is not
    ``--otf2``: an abbreviation could come to mean another option), and an argument the command does not know is
    refused with that command's usage line and the option it looks like."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        options = [o for action in self._actions for o in action.option_strings]
        if self._subparsers is not None:  # waitlab's own options, before the command: one it does not know is said
            before = []  # as such (argparse would first say that COMMAND is missing: `waitlab --vers`)
            for a in sys.argv[1:] if args is None else args:
                if not a.startswith("-") or a == "--":
                    break
                before.append(a)
            self._refuse([a for a in before if a.split("=", 1)[0] not in options], options)
        parsed, extra = super().parse_known_args(args, namespace)
        self._refuse(extra, options)  # a sub-command's own (argparse would say it with the top-level usage line)
        return parsed, extra

    def _refuse(self, extra: list[str], options: list[str]) -> None:
        """Refuse the arguments ``extra`` with this parser's usage line and the option the first looks like."""
        if extra:
            close = [m for a in extra if a.startswith("-") for m in
                     difflib.get_close_matches(a.split("=", 1)[0], options, n=1, cutoff=0.6)]
            self.error(f"unrecognized arguments: {' '.join(extra)}"
                       + (f" (did you mean {close[0]}?)" if close else ""))


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every registered sub-command."""
    parser = _Parser(prog="waitlab", description="Simulate wait propagation in BSP MPI programs with SimGrid SMPI.")
    parser.add_argument("--version", action="version", version=f"waitlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _REGISTRY:
        add(sub)
    for p in sub.choices.values():
        p.add_argument("-q", "--quiet", action="store_true", help="no progress and no text summary (errors only)")
    return parser


def _named(exc: WaitlabError, args: argparse.Namespace) -> WaitlabError:
    """A problem with the scheduler address given as ``--scheduler``, said of that option (the API names the sweep
    or the Python argument)."""
    address = getattr(exc, "address", None)
    named = getattr(exc, "named", None)
    if callable(named) and address is not None and address == getattr(args, "scheduler", None):
        renamed = named("(command line)", "--scheduler")
        return renamed if isinstance(renamed, WaitlabError) else exc
    return exc


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``waitlab`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with session():  # own scratch folder; first Ctrl-C stops cleanly, a second at once
            return int(args.func(args))
    except WaitlabError as exc:
        print(f"waitlab: error: {_named(exc, args)}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a write deep in a library that no writer path caught: the same one-line mapping
        if not is_write_failure(exc):
            raise
        print(f"waitlab: error: {write_error(exc, exc.filename or '(output)')}", file=sys.stderr)
        return 2
    except (MemoryError, ImportError, RuntimeError) as exc:  # numpy or Python could not allocate, the loader could
        # not map a lazily imported extension (pandas, pyarrow, Bokeh) or a thread not start under 'ulimit -v': one
        # line, nothing partial
        if not out_of_memory(exc):
            raise
        print(f"waitlab: error: {out_of_memory_text(exc)}", file=sys.stderr)
        return EnvironmentProblem.exit_code
    except KeyboardInterrupt as exc:  # the command's own account (sweep, diagnose), else the generic one
        removed = removed_by(exc)  # the folder being written, when there was one
        text = str(exc) or "interrupted; nothing partial was kept" + (
            f" ({removed}, being written, was removed)" if removed else "")
        print(f"waitlab: {text}", file=sys.stderr)
        return 128 + int(getattr(exc, "signum", 2))


if __name__ == "__main__":
    raise SystemExit(main())
