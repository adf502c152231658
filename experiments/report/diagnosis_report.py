"""The diagnosis report: ``diagnosis.md`` (tables of blame, scores and improvements), ``diagnosis.json``, figures,
and ``timing.json`` beside them (what a diagnosis measures of itself: the one file whose bytes change from one
diagnosis of a run to the next)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.diagnose import Diagnosis
from waitlab.experiments.report.critical_report import critical_path_dict, critical_path_markdown
from waitlab.experiments.report.diagnosis_plots import blame_figure, culprit_timeline
from waitlab.experiments.results import run_identity
from waitlab.experiments.run_folder import MARKER, check_output_folder, record_text
from waitlab.experiments.writer import replaced_files
from waitlab.models.analysis.cwpdm import CwpdmResult
from waitlab.models.analysis.hcwpdm import HcwpdmResult
from waitlab.models.analysis.scoring import by_rank_region, by_region

#: Blame below this many seconds (SimGrid's clock precision, ``timing_precision``; finer than a recorded trace's timer)
#: is rounding, not a finding: the tables and the most blamed pairs leave it out, and the report says so.
BLAME_FLOOR = 1e-9


def _pct(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def _num(x: float, unit: str = "") -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.4g}{unit}"


def _considered(metric: str, collectives: dict[str, float]) -> str:
    """What ``considered_wait[:OP+OP]`` counts, in words: the largest wait of each instance of a collective, every
    wait of a point-to-point operation (``collectives``: the run's collective operations).

    >>> _considered("considered_wait:allreduce+recv", {"allreduce": 2.0})
    'the largest wait of each instance of MPI_Allreduce, and every wait in MPI_Recv'
    """
    if ":" not in metric:
        return "the largest wait of each collective instance, and every point-to-point wait"
    ops = [o for o in metric.split(":", 1)[1].split("+") if o]
    coll = ", ".join("MPI_" + o.capitalize() for o in ops if o in collectives)
    p2p = ", ".join("MPI_" + o.capitalize() for o in ops if o not in collectives)
    parts = ([f"the largest wait of each instance of {coll}"] if coll else []) + \
        ([f"every wait in {p2p}"] if p2p else [])
    return ", and ".join(parts) or "no operation: the run has no wait"


def to_markdown(diag: Diagnosis) -> str:
    """The human-readable report."""
    if not isinstance(diag, Diagnosis):
        raise InputError("(python call)", "diag", f"must be a Diagnosis (what waitlab.diagnose returns), got "
                         f"{type(diag).__name__}", "pass the result of waitlab.diagnose(RUNDIR)")
    b = diag.baseline
    name = diag.scenario.name if diag.scenario is not None else diag.metadata.get("scenario", "?")
    lines = [f"# Diagnosis of `{name}`", ""]
    if diag.scenario is not None:
        sc = diag.scenario
        lines += [f"{sc.ranks} ranks, platform `{sc.platform.name}`, application `{sc.application_kind}`, "
                  f"seed {sc.seed}, scenario hash `{diag.metadata.get('scenario_hash') or sc.hash()}`.", ""]
        # (the run's hash, as run.json records it: the files its scenario reads may have changed since)
    p2p = b.get("considered_wait", b["collective_max_wait"]) - b["collective_max_wait"]  # considered_wait: both
    lines += [f"Total wait {b['total_wait']:.4g} s (makespan {b['makespan']:.4g} s); largest wait per collective "
              f"instance summed: {b['collective_max_wait']:.4g} s"
              + (f"; point-to-point wait (every one): {p2p:.4g} s" if p2p > 0 else "") + ". Wait by operation: "
              + ", ".join(f"MPI_{k.capitalize()} {v:.4g} s"  # as the blame and the critical path spell it
                          for k, v in sorted(b["wait_by_op"].items(), key=lambda kv: -kv[1])), ""]
    lines += ["## What each model blames", "", f"(Blame below {BLAME_FLOOR:g} s is rounding and is not listed.)", ""]
    if diag.models:  # the same report for the same run: what a diagnosis measures of itself is in timing.json
        measured = any(m.peak_bytes for m in diag.models)
        lines += [f"Each model's wall-clock seconds{' and peak memory' if measured else ''}"
                  + (" and how many counterfactual runs came from the cache" if diag.truth is not None else "")
                  + " are in `timing.json` beside this report, not in it: they change from one diagnosis to the "
                  "next, the report does not" + ("." if measured else " (peak memory not measured: "
                                                  "waitlab.diagnose(RUN, memory=True) measures it, with a second, "
                                                  "traced run)."), ""]
    for m in diag.models:
        reg = by_region(m.blame())
        what = "total wait" if m.metric == "total_wait" else _considered(m.metric, b.get("max_wait_by_op", {}))
        lines += [f"### {m.name}", "",
                  f"Explains {m.denominator:.4g} s of wait ({what}); attributed "
                  f"{m.attributed:.4g} s, unexplained {m.unexplained:.4g} s.", ""]
        if isinstance(m.result, CwpdmResult):
            w = m.result.waits
            lines += [f"Short-term cost {m.result.short_total:.4g} s, long-term {m.result.long_total:.4g} s; "
                      f"direct wait {w['direct'].sum():.4g} s, indirect {w['indirect'].sum():.4g} s; propagating "
                      f"{w['propagating'].sum():.4g} s, terminal {w['terminal'].sum():.4g} s "
                      f"({m.result.rounds} propagation rounds).", ""]
        elif isinstance(m.result, HcwpdmResult):
            lines += [f"Hotspots (>= {100 * m.result.threshold:g}% of the time): "
                      + ", ".join(f"`{h}`" for h in m.result.hotspots), ""]
        lines += ["| region | blamed (s) | share |", "| --- | ---: | ---: |"]
        total = float(reg.sum()) or 1.0
        for r, v in reg[reg >= BLAME_FLOOR].head(10).items():
            lines.append(f"| `{r}` | {v:.4g} | {_pct(v / total)} |")
        rr = by_rank_region(m.blame())
        rr = rr[rr >= BLAME_FLOOR].head(5)
        lines += ["", "Most blamed (rank, region): " + (", ".join(f"({r}, `{g}`) {v:.4g} s"
                                                               for (r, g), v in rr.items()) or "none"), ""]
    cp = diag.critical
    if cp is not None:
        lines += critical_path_markdown(cp)
    gt = diag.truth
    if gt is not None:
        lines += ["## Ground truth (counterfactual re-runs)", "",
                  f"Removing every injected cause removes {gt.all_causes:.4g} s of the {b['total_wait']:.4g} s "
                  f"of wait ({gt.distinct} counterfactual {'run' if gt.distinct == 1 else 'runs'}).", "",
                  "| region | injected (s) | true cost, total wait (s) | true cost, H-CWP-DM (earliest)'s "
                  "measure (s) |", "| --- | ---: | ---: | ---: |"]
        inj = gt.injected("region")
        tc = gt.cost("region")
        h_metric = next((m.metric for m in diag.models if m.key == "hcwpdm"), "considered_wait")
        tcc = gt.cost("region", h_metric)
        for r in tc.index:
            lines.append(f"| `{r}` | {inj.get(r, 0.0):.4g} | {tc[r]:.4g} | {tcc.get(r, float('nan')):.4g} |")
        kinds = gt.cost("kind")
        if len(kinds):
            lines += ["", "By cause kind: " + ", ".join(f"{k} {v:.4g} s" for k, v in kinds.items())]
        rr_all = gt.cost("rank_region")
        rr_t = rr_all[rr_all > 0].head(8)
        if len(rr_all):
            lines += ["", "Costliest candidate (rank, region): " + (", ".join(f"({r}, `{g}`) {v:.4g} s"
                                                                             for (r, g), v in rr_t.items()) or "none")]
            lines += ["", "(A candidate's true cost is the total wait minus the total wait re-simulated without that "
                      "rank's injected excess in that region" + (f"; {int((rr_all < 0).sum())} of the "
                      f"{len(rr_all)} candidates have a negative true cost and are not listed: removing their excess "
                      "made the run wait more: the rank then arrives earlier elsewhere and waits there itself, or "
                      "its partners' waits line up worse" if (rr_all < 0).any() else "") + ".)"]
        lines += ["", "## Scores", "",
                  "| model | top-k region | top-k (rank, region) | Spearman region | Spearman (rank, region) | "
                  "rel. error of total | false blame |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for m in diag.models:
            s = diag.scores.get(m.key, {})
            lines.append(f"| {m.name} | {_num(s.get('top_k_region', math.nan))} | "
                         f"{_num(s.get('top_k_rank_region', math.nan))} | {_num(s.get('spearman_region', math.nan))}"
                         f" | {_num(s.get('spearman_rank_region', math.nan))} | "
                         f"{_pct(s.get('relative_error_total', math.nan))} | "
                         f"{_num(s.get('false_blame_seconds', math.nan), ' s')} "
                         f"({_pct(s.get('false_blame_share', math.nan))}) |")
        lines += ["", "## Predicted vs realized improvement", "",
                  "Balancing a model's culprit regions (removing their injected excess on every rank):", "",
                  "| model | culprits | predicted | realized | makespan |", "| --- | --- | ---: | ---: | ---: |"]
        for m in diag.models:
            imp = diag.improvements.get(m.key)
            if imp:
                lines.append(f"| {m.name} | {', '.join(f'`{c}`' for c in diag.culprits[m.key])} | "
                             f"{_pct(imp['predicted'])} | {_pct(imp['realized'])} | {_pct(imp['makespan'])} |")
    if diag.notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in diag.notes]]
    return "\n".join(lines) + "\n"


def report_dict(diag: Diagnosis) -> dict[str, Any]:
    """``diagnosis.json``: the diagnosis as plain data, with the critical path of the run and the run it belongs to
    (``run``: :func:`~waitlab.experiments.results.run_identity`, checked by ``waitlab report --diagnosis``)."""
    cp = diag.critical
    ident = run_identity(diag.metadata, diag.events) if diag.events is not None else None
    return {**diag.to_dict(), "critical_path": critical_path_dict(cp) if cp is not None else None, "run": ident}


def timing_dict(diag: Diagnosis) -> dict[str, Any]:
    """``timing.json``: what a diagnosis measures of itself, kept out of ``diagnosis.json`` and ``diagnosis.md`` so
    that those give the same bytes for the same run (as ``waitlab evaluate`` keeps ``cost.csv`` apart): each model's
    wall-clock ``seconds`` and ``peak_bytes`` (0: not measured; ``waitlab.diagnose(RUN, memory=True)`` measures
    it) and the counterfactual runs simulated or read from the cache (``None`` without a ground truth)."""
    gt = getattr(diag, "truth", None)
    return {"models": {m.key: {"name": m.name, "seconds": float(m.seconds), "peak_bytes": int(m.peak_bytes)}
                       for m in getattr(diag, "models", ())},
            "counterfactual_runs": None if gt is None else
            {"total": gt.distinct, "simulated": gt.simulated, "from_cache": gt.distinct - gt.simulated}}


#: The figures a report may hold; one this diagnosis does not draw (``png=False``, or no event table for the culprit
#: timeline) is removed from the folder once the new report is in place.
FIGURES = ("blame_by_region.png", "culprit_timeline.png")


def write_report(diag: Diagnosis, out: Path, png: bool = True) -> list[Path]:
    """Write ``diagnosis.json``, ``diagnosis.md`` and the figures into ``out``, ``timing.json`` beside them
    (:func:`timing_dict`) and the folder's integrity record (``.waitlab``: the SHA-256 of ``diagnosis.json``);
    return the report's files (``timing.json`` is not one of them: it changes with every diagnosis).

    Every file is written beside its final name and the set is renamed into place only once all are written
    (:func:`~waitlab.experiments.writer.replaced_files`): a diagnosis that fails to write (disk full, ``ulimit -f``)
    leaves the folder's earlier diagnosis whole, and the error names the file.

    ``out`` must be new, empty, or a report folder of an earlier diagnosis (its record says so): a folder holding
    entries waitlab did not write (:func:`~waitlab.experiments.run_folder.check_output_folder`), or another folder
    of waitlab's (a run, whose record the report's would replace), is refused in one line before anything is written.
    """
    out = Path(out)
    check_report_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    names = ["diagnosis.json", "diagnosis.md"]
    with replaced_files(out) as files:
        files.path("diagnosis.json").write_text(json.dumps(report_dict(diag), indent=2, sort_keys=True) + "\n")
        files.path("diagnosis.md").write_text(to_markdown(diag))
        files.path("timing.json").write_text(json.dumps(timing_dict(diag), indent=2, sort_keys=True) + "\n")
        if png:
            blame_figure(diag, files.path("blame_by_region.png"))
            names.append("blame_by_region.png")
            if diag.events is not None and diag.waits is not None:
                culprit_timeline(diag.events, diag.waits, diag, files.path("culprit_timeline.png"))
                names.append("culprit_timeline.png")
        stale = [n for n in FIGURES if n not in names and (out / n).is_file()]  # of an earlier diagnosis
        record = record_text(out, "diagnosis", ("diagnosis.json",), files.staged, dropped=stale)
        files.path(MARKER).write_text(record)  # renamed last: it holds the new files' sums
    for name in stale:  # once the new report is in place: a figure of another diagnosis beside it would mislead
        (out / name).unlink()
    return [out / n for n in names]


def check_report_folder(out: Path) -> None:
    """Refuse ``out`` as a report folder unless it is new, empty, or holds the record of an earlier diagnosis (whose
    report a diagnosis rewrites: docs/outputs.md); :func:`write_report` checks it, and ``waitlab.api.diagnose(...,
    out=...)`` before the diagnosis runs."""
    check_output_folder(Path(out), "report folder", kind="diagnosis")
