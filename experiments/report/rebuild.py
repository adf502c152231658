"""Rebuild ``report.html`` of a results folder from its files (``waitlab report RUNDIR``, ``waitlab diagnose``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.report.html import write_html_report
from waitlab.experiments.results import load_run
from waitlab.models.analysis.summary import rank_budget


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(str(path), "(file)", f"cannot be read as JSON: {exc}",
                         "re-run the command that wrote it") from None
    return data if isinstance(data, dict) else None


def rebuild_report(folder: str | Path, diagnosis: dict[str, Any] | None = None) -> Path:
    """Write ``folder/report.html`` from the folder's tables, with the diagnosis of ``diagnosis`` (plain data,
    as ``diagnosis.json``) or, when not given, of ``folder/diagnosis/diagnosis.json`` if there is one."""
    run = load_run(folder)
    summary = _json(run.folder / "summary.json")
    if summary is None:
        raise InputError(str(run.folder / "summary.json"), "(file)", "is missing",
                         "re-run `waitlab run` to rewrite the folder")
    ranks = run.folder / "ranks.parquet"
    budget = pd.read_parquet(ranks) if ranks.is_file() else rank_budget(run.events, run.waits,
                                                                          run.scenario.ranks)
    diag = diagnosis if diagnosis is not None else _json(run.folder / "diagnosis" / "diagnosis.json")
    return write_html_report(run.folder, run.metadata, summary, run.events, run.waits, budget, run.ledger(), diag)
