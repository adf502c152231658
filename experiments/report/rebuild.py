"""Rebuild ``report.html`` of a results folder from its files (``waitlab report RUNDIR``, ``waitlab diagnose``).

A diagnosis shown in the page must be the diagnosis of that run: ``diagnosis.json`` names the run it was made
from (``run``: scenario hash, ranks, digest of the event table) and its folder's integrity record
(``.waitlab``) holds its SHA-256, written by :func:`waitlab.experiments.report.diagnosis_report.write_report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.report.html import write_html_report
from waitlab.experiments.results import EDITED_KEY, LoadedRun, load_run, run_identity
from waitlab.experiments.run_folder import file_digest, read_record
from waitlab.models.analysis.summary import rank_budget
from waitlab.readers import read_json

#: Largest diagnosis.json read (bytes): a diagnosis lists at most a few hundred regions per model.
MAX_DIAGNOSIS_BYTES = 32 << 20
_REDIAGNOSE = ("run `waitlab diagnose RUN` again (copy its folder whole: `cp -a`), or pass --trust-edited to use it "
               "anyway, the report then marked as made from an edited diagnosis")
_FIX = "pass the diagnosis.json `waitlab diagnose RUN` wrote for this run (RUN/diagnosis/diagnosis.json)"


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = read_json(path, path.name, MAX_DIAGNOSIS_BYTES, "re-run the command that wrote it")
    return data if isinstance(data, dict) else None


def read_diagnosis(path: Path, trust_edited: bool = False) -> tuple[dict[str, Any], str]:
    """A ``diagnosis.json`` read with bounds and checked against its folder's integrity record; returns the data
    and, with ``trust_edited``, why it is not the file ``waitlab diagnose`` wrote ("" when it is)."""
    data = read_json(path, "diagnosis", MAX_DIAGNOSIS_BYTES, _FIX)
    edited = ""
    try:
        sums = read_record(path.parent, "diagnosis", _REDIAGNOSE)["sha256"]
        if sums.get(path.name) != file_digest(path):
            raise InputError(str(path), "(file)", "was changed after `waitlab diagnose` wrote it (its SHA-256 "
                             "is not the one in its folder's .waitlab)", _REDIAGNOSE)
    except InputError as exc:
        if not trust_edited:
            raise
        edited = str(exc).split(" (fix: ")[0]
    return data, edited


def check_belongs(diagnosis: Any, where: str, run: LoadedRun) -> dict[str, Any]:
    """Refuse a diagnosis that is not a diagnosis, or not the diagnosis of ``run``."""
    if not isinstance(diagnosis, dict) or not isinstance(diagnosis.get("models"), dict):
        raise InputError(where, "models", "is missing: this is not a diagnosis written by `waitlab diagnose`", _FIX)
    ident = diagnosis.get("run")
    if not isinstance(ident, dict):
        raise InputError(where, "run", "is missing: the diagnosis does not name the run it was made from "
                         "(written by an older waitlab, or not by waitlab)", "run `waitlab diagnose RUN` again")
    want = run_identity(run.metadata, run.events)
    for key, value in want.items():
        if ident.get(key) != value:
            raise InputError(where, f"run.{key}", f"is {ident.get(key)!r}, but the results folder {run.folder} has "
                             f"{value!r}: this is the diagnosis of another run", _FIX)
    return diagnosis


def rebuild_report(folder: str | Path | LoadedRun, diagnosis: str | Path | dict[str, Any] | None = None,
                   trust_edited: bool = False) -> Path:
    """Write ``folder/report.html`` from the folder's tables, with the diagnosis ``diagnosis`` (a
    ``diagnosis.json`` or its plain data) or, when not given, ``folder/diagnosis/diagnosis.json`` if there is
    one.  The folder and the diagnosis must pass their integrity records unless ``trust_edited``, and the
    diagnosis must be this run's."""
    run = folder if isinstance(folder, LoadedRun) else load_run(folder, trust_edited)
    meta = dict(run.metadata)
    summary = _json(run.folder / "summary.json")
    if summary is None:
        raise InputError(str(run.folder / "summary.json"), "(file)", "is missing",
                         "re-run `waitlab run` to rewrite the folder")
    if diagnosis is None and (run.folder / "diagnosis" / "diagnosis.json").is_file():
        diagnosis = run.folder / "diagnosis" / "diagnosis.json"
    diag: dict[str, Any] | None = None
    if isinstance(diagnosis, str | Path):
        data, edited = read_diagnosis(Path(diagnosis), trust_edited)
        diag = check_belongs(data, str(diagnosis), run)
        if edited:
            meta[EDITED_KEY] = "; ".join(filter(None, (meta.get(EDITED_KEY), edited)))
    elif diagnosis is not None:
        diag = check_belongs(diagnosis, "(diagnosis)", run)
    ranks = run.folder / "ranks.parquet"
    budget = pd.read_parquet(ranks) if ranks.is_file() else rank_budget(run.events, run.waits,
                                                                          run.scenario.ranks)
    return write_html_report(run.folder, meta, summary, run.events, run.waits, budget, run.ledger(), diag)
