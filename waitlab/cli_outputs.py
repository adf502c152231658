"""Sub-commands about outputs: compare two runs, export a run for other tools, plot a sweep, rebuild report.html."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.cli_common import dump, json_flag, say, trust_flag, warn_edited
from waitlab.errors import InputError


def _compare(sub: Any) -> None:
    p = sub.add_parser("compare", help="what changed from run A to run B: makespan, waits by pattern and region, "
                       "the ranks and steps that moved most")
    p.add_argument("run_a", type=Path, help="results folder of the reference run (A)")
    p.add_argument("run_b", type=Path, help="results folder of the changed run (B)")
    p.add_argument("--top", type=int, default=5, help="ranks and steps listed, those that moved most (default 5; "
                   "0 lists none); every total, wait pattern and region that moved is listed")
    p.add_argument("--png", type=Path, default=None, metavar="FILE", help="also draw the comparison into FILE")
    trust_flag(p)
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.top < 0:
            raise InputError("(command line)", "--top", f"must be >= 0, got {args.top}", "e.g. --top 5")
        cmp = api.compare(args.run_a, args.run_b, trust_edited=args.trust_edited)
        edited = warn_edited(args, args.run_a, args.run_b)
        if args.png is not None:
            try:
                api.compare_png(cmp, args.png)
            except InputError as exc:  # said of the flag the command line gave, not of the Python argument
                if exc.file != "(python call)":
                    raise
                raise InputError("(command line)", "--png", exc.problem, exc.fix) from None
        if args.json:
            dump({**cmp.to_dict(args.top), **({"trust_edited": edited} if edited else {})})
        say(args, cmp.text(args.top))
        if args.png is not None:
            say(args, f"picture written to {args.png}")
        return 0

    p.set_defaults(func=go)


def _export(sub: Any) -> None:
    p = sub.add_parser("export", help="export a results folder for other tools: OTF2 (Vampir, Scalasca), "
                       "Chrome/Perfetto trace, wait-propagation graph (GraphML)")
    p.add_argument("run", type=Path, help="results folder of `waitlab run`")
    for fmt, what in (("otf2", "OTF2 archive otf2/traces.otf2 (otf2-print, Vampir, Scalasca); the "
                              "default when no format flag is given"),
                      ("chrome", "Chrome trace trace.json, exact to the ns (ui.perfetto.dev, chrome://tracing)"),
                      ("graphml", "wait-propagation graph propagation.graphml (+ .png when small)")):
        p.add_argument(f"--{fmt}", action="store_true", help=what)
    p.add_argument("-o", "--output", type=Path, default=None, help="folder to write into (default: the run folder)")
    trust_flag(p)
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        formats = tuple(f for f in api.EXPORT_FORMATS if getattr(args, f))
        written = api.export(args.run, formats or ("otf2",), args.output, trust_edited=args.trust_edited)
        edited = warn_edited(args, args.run)
        if args.json:
            dump({**{k: str(v) for k, v in written.items()}, **({"trust_edited": edited} if edited else {})})
        for fmt, path in written.items():
            say(args, f"{fmt}: {path}")
        if "otf2" in written:
            say(args, f"read it: otf2-print {written['otf2']} | less")
        return 0

    p.set_defaults(func=go)


def _plot(sub: Any) -> None:
    p = sub.add_parser("plot", help="draw a sweep: each result against one swept key, a panel per value of "
                       "another, one line per value of the others")
    p.add_argument("sweep", type=Path, help="sweep folder written by `waitlab sweep` (holds sweep.csv)")
    p.add_argument("-o", "--output", type=Path, default=None, help="PNG file (default: SWEEP/sweep.png)")
    p.add_argument("--y", "--results", dest="results", default=None, metavar="COLUMNS",
                   help="comma-separated result columns, one row of panels each (default: makespan, total_wait, "
                   "max_rank_wait and every <op>_time)")
    p.add_argument("--x", default=None, metavar="KEY", help="swept key on the x axis (default: the one with the "
                   "most values)")
    p.add_argument("--facet", default=None, metavar="KEY", help="swept key whose values get a column of panels "
                   "each (default with 3+ keys: the remaining one with the fewest values)")
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        res = tuple(r.strip() for r in args.results.split(",") if r.strip()) if args.results else None
        path = api.plot(args.sweep, args.output, res, x=args.x, facet=args.facet)
        if args.json:
            dump({"picture": str(path), **api.plot_axes(args.sweep, res, x=args.x, facet=args.facet)})
        say(args, f"sweep picture written to {path}")
        return 0

    p.set_defaults(func=go)


def _report(sub: Any) -> None:
    p = sub.add_parser("report", help="(re)build RUNDIR/report.html: the offline, interactive report of a run "
                       "(with its diagnosis when `waitlab diagnose` wrote one)")
    p.add_argument("run", type=Path, help="results folder of `waitlab run`")
    p.add_argument("--diagnosis", type=Path, default=None,
                   help="diagnosis.json to include (default: RUN/diagnosis/diagnosis.json if present); it must be "
                   "the diagnosis of this run")
    trust_flag(p)
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        path = api.report(args.run, args.diagnosis, trust_edited=args.trust_edited)
        edited = warn_edited(args, args.run)
        if args.json:
            dump({"report": str(path), "bytes": path.stat().st_size, **({"trust_edited": edited} if edited else {})})
        say(args, f"report written to {path} (open it in a browser; it works offline)")
        return 0

    p.set_defaults(func=go)


#: Registered by :mod:`waitlab.cli` after ``diagnose`` (keeps the order of ``waitlab --help``).
COMMANDS = (_compare, _export, _plot, _report)
