"""``waitlab analyze``: a measured OTF2 trace (Score-P's ``traces.otf2``) diagnosed as it was recorded.

A thin layer over the API, as ``waitlab run`` followed by ``waitlab diagnose --no-truth``: the scenario of the archive
read as recorded (:func:`waitlab.api.recorded_scenario`, ``kind = "recorded"``: no simulation), its results folder
(:func:`waitlab.api.run`), every built-in diagnosis model on its timestamps (:func:`waitlab.api.diagnose`, no ground
truth: nothing was injected) written to ``DIR/diagnosis/`` and into ``DIR/report.html``; then how to replay the same
trace on a modeled platform (``waitlab import-otf2``, ``kind = "otf2"``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from waitlab import api
from waitlab.cli_common import dump, json_flag, say
from waitlab.cli_workbench import model_flag
from waitlab.errors import Interrupted


def replay_text(archive: Path, name: str, ranks: int) -> str:
    """How to replay the trace on a modeled platform: ``waitlab import-otf2``, or a ``kind = "otf2"`` scenario."""
    anchor = str(archive.resolve()).replace("\\", "\\\\").replace('"', '\\"')
    return (f"what if it ran elsewhere? replay the same trace on a modeled platform (a simulation):\n"
            f"  waitlab import-otf2 {archive} -o traces/{name} --platform dawning_5000a   "
            f"# writes traces/{name}/replay.toml\n"
            f"or run a scenario that reads the archive each time:\n\n"
            f'[scenario]\nname = "{name}-replay"\nranks = {ranks}\n\n[platform]\nname = "dawning_5000a"\n\n'
            f'[application]\nkind = "otf2"\ntrace = "{anchor}"\ncpu_ratio = 1.0\n')


def analyze_command(sub: Any) -> None:
    """Add ``waitlab analyze``."""
    p = sub.add_parser("analyze", help="diagnose a measured OTF2 trace (Score-P's traces.otf2) as it was recorded: "
                       "wait states and every diagnosis model on its own timestamps, no simulation")
    p.add_argument("archive", type=Path, help="the archive's anchor file (traces.otf2)")
    p.add_argument("-o", "--output", type=Path, default=None, help="results folder (default: results/<name>)")
    p.add_argument("--force", action="store_true", help="replace an existing results folder")
    p.add_argument("--no-png", action="store_true", help="skip the pictures")
    model_flag(p, "besides every built-in one")
    json_flag(p)

    def go(args: argparse.Namespace) -> int:
        scenario = api.recorded_scenario(args.archive)
        out: Path = args.output or api.default_output(scenario.name)
        result = api.run(scenario, out, force=args.force, png=not args.no_png).result
        models = [*api.diagnosis_models(), *(args.model or [])]
        try:
            diag = api.diagnose(out, truth=False, models=models)
            api.write_report(diag, out / "diagnosis", png=not args.no_png)
            api.report(out, out / "diagnosis" / "diagnosis.json")  # report.html gains the models
        except KeyboardInterrupt as exc:  # the run's folder is complete: keep it, say how to finish
            shutil.rmtree(out / "diagnosis", ignore_errors=True)
            raise Interrupted(f"analyze interrupted by {api.signal_name(exc)} during the diagnosis: the results "
                              f"folder {out}/ of the trace as recorded is complete and kept, without its diagnosis; "
                              f"finish it with `waitlab diagnose {out} --no-truth` (or start over with --force)",
                              int(getattr(exc, "signum", 2))) from None
        replay = replay_text(args.archive, scenario.name.removesuffix("-recorded"), scenario.ranks)
        if args.json:
            dump({"output": str(out), "metadata": result.metadata, "summary": result.summary,
                  "diagnosis": api.report_dict(diag), "replay": replay})
        say(args, api.summary_text(result.summary, result.metadata))
        say(args, api.to_markdown(diag))
        say(args, f"results written to {out}/ (report.html, diagnosis/); no ground truth: nothing was injected into "
            "a recorded run\n")
        say(args, replay)
        for msg in diag.errors.values():  # the other models' results are in the report
            print(f"waitlab: error: {msg}", file=sys.stderr)
        return 1 if diag.errors else 0

    p.set_defaults(func=go)
