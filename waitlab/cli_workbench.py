"""Sub-commands of the diagnosis workbench: ``waitlab evaluate`` and the ``--model`` option (issue 24)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.cli_common import bar, dump, json_flag, say
from waitlab.errors import InputError, Interrupted

#: Default of ``--model-timeout`` (:data:`waitlab.experiments.diagnosis.sandbox.DEFAULT_TIMEOUT`, not imported here:
#: the CLI's start-up stays light).
MODEL_TIMEOUT = 600.0


def model_flag(p: argparse.ArgumentParser, what: str, timeout: bool = True) -> None:
    """Add the repeatable ``--model`` option (``what``: which models it runs besides) and, with ``timeout``,
    ``--model-timeout``."""
    p.add_argument("--model", action="append", default=None, metavar="MODEL", type=_model_value,
                   help=f"a diagnosis model to run {what} (repeatable): package.module:function, "
                   "path/file.py:function, an installed plug-in or a built-in ("
                   + ", ".join(api.diagnosis_models()) + ")")
    if timeout:
        p.add_argument("--model-timeout", type=float, default=MODEL_TIMEOUT, metavar="SECONDS",
                       help="seconds a user's model (a --model spec or a plug-in, run in a process of its own) may "
                       f"take on one run before it is stopped (default {MODEL_TIMEOUT:g})")


def _model_value(text: str) -> str:
    """A ``--model`` value: an error about it names ``--model`` (:func:`waitlab.api.flag_value`)."""
    return api.flag_value(text, "--model")


def model_timeout(args: argparse.Namespace) -> float:
    """``--model-timeout``, checked."""
    t = float(args.model_timeout)
    if not t > 0 or t == float("inf"):
        raise InputError("(command line)", "--model-timeout", f"must be a positive number of seconds, got {t:g}",
                         f"e.g. --model-timeout {MODEL_TIMEOUT:g}")
    return t


def evaluate_command(sub: Any) -> None:
    """Add ``waitlab evaluate``."""
    p = sub.add_parser("evaluate", help="score every diagnosis model on a benchmark suite with known truth; "
                       "write a leaderboard")
    p.add_argument("suite", type=Path, nargs="?", default=None,
                   help="suite folder (suite.toml + scenario files); default: the built-in suite")
    p.add_argument("-o", "--output", type=Path, default=None, help="leaderboard folder (default results/leaderboard)")
    p.add_argument("--case", action="append", default=None, metavar="TEXT",
                   help="only the cases whose name contains TEXT (repeatable)")
    p.add_argument("--executor", choices=("local", "dask"), default="local", help="where the simulations go")
    p.add_argument("--workers", type=int, default=2, help="parallel simulations (default 2)")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler (--executor dask)")
    p.add_argument("--cache", type=Path, default=None, help="cache folder (default: waitlab's cache)")
    p.add_argument("--no-cache", action="store_true", help="simulate and score again even if cached")
    p.add_argument("--no-png", action="store_true", help="skip the figure")
    p.add_argument("--scalasca", action="store_true", help="also score Scalasca's delay costs and critical path "
                   "(needs Scalasca: WAITLAB_SCALASCA, scout.mpi on PATH, or scripts/build_scalasca.sh)")
    model_flag(p, "besides the built-in ones and the installed plug-ins")
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        if args.workers < 1:
            raise InputError("(command line)", "--workers", f"must be >= 1, got {args.workers}", "e.g. --workers 2")
        try:
            ev = api.evaluate(args.suite, args.output, models=tuple(args.model or ()), only=tuple(args.case or ()),
                              executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                              cache_dir=args.cache, use_cache=not args.no_cache, progress=bar(args),
                              png=not args.no_png, model_timeout=model_timeout(args), scalasca=args.scalasca)
        except KeyboardInterrupt as exc:  # open_executor stopped the running simulations; say what stays
            kept = ("nothing was kept (--no-cache)" if args.no_cache else "the suite runs and counterfactual "
                    "re-runs that finished are kept in the cache and are reused")
            raise Interrupted(f"evaluate interrupted by {api.signal_name(exc)}: running simulations were stopped, "
                              f"no leaderboard was written; {kept} when you run the same command again",
                              int(getattr(exc, "signum", 2))) from None
        out = ev.files[0].parent
        if args.json:
            dump({"output": str(out), **ev.counts, "notes": ev.notes})
        say(args, ev.files[0].read_text())
        cost = ev.rows.groupby("name", sort=False)["seconds"].sum()
        say(args, "model cost (s, whole suite): " + ", ".join(f"{k} {v:.3g}" for k, v in cost.items()))
        say(args, f"{ev.counts['runs_simulated']} suite runs and {ev.counts['reruns_simulated']} counterfactual "
             f"re-runs simulated (the rest from the cache)\nleaderboard written to {out}/")
        for msg in ev.notes:
            print(f"waitlab: error: {msg}", file=sys.stderr)
        return 1 if ev.notes else 0

    p.set_defaults(func=go)
