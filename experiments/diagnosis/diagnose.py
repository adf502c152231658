"""``waitlab diagnose``: run CWP-DM and H-CWP-DM on one run, compute the ground truth, score, report.

Input: a results folder of ``waitlab run`` (``run.json``, ``events.parquet``,
``waits.parquet``) or a scenario TOML (simulated first), or an in-memory
:class:`~waitlab.experiments.pipeline.RunResult`.

Models: CWP-DM (:func:`~waitlab.models.analysis.cwpdm.cwpdm`) and H-CWP-DM with both
collective pairings (``earliest`` as in Wu et al., and ``each``), each timed and
its peak memory measured (``tracemalloc``, a second run).

Ground truth (:mod:`~waitlab.experiments.diagnosis.groundtruth`): counterfactual re-runs
per region, per cause kind, of all causes, of candidate (rank, region) pairs
(the ledger's largest and each model's most blamed) and of "balance the
regions this model blames" for the predicted-vs-realized comparison.

Report (folder): ``diagnosis.json`` (everything), ``diagnosis.md`` (readable
report), ``blame_by_region.png`` (models and truth side by side),
``culprit_timeline.png`` (a timeline with the culprit regions highlighted) and
``timing.json`` (each model's wall-clock seconds and peak memory, the re-runs read
from the cache: the one file of the report whose bytes change from one diagnosis to the next).
Each model is compared with the truth in its own terms: CWP-DM and H-CWP-DM
"each" explain the total wait; H-CWP-DM "earliest" explains the largest wait of
each collective instance (plus point-to-point waits), as the paper's 41.6 s.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.groundtruth import (
    CauseSet,
    GroundTruth,
    Rerun,
    ground_truth,
    ledger_frame,
    metric_value,
    region_set,
    wait_metrics,
)
from waitlab.experiments.diagnosis.names import FlagValue
from waitlab.experiments.diagnosis.registry import (
    DEFAULT_DIAGNOSE,
    DEFAULT_TIMEOUT,
    ModelFailure,
    ModelRun,
    ModelSpec,
    resolve_all,
    run_model,
)
from waitlab.experiments.pipeline import noise_for, prepare
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.report.notebook import diagnosis_html
from waitlab.experiments.results import LoadedRun, load_run
from waitlab.experiments.scenario import Scenario, load_scenario
from waitlab.models.analysis.blame_models import focus_ops
from waitlab.models.analysis.critical_path import CriticalPath, critical_path
from waitlab.models.analysis.cwpdm import CwpdmResult
from waitlab.models.analysis.hcwpdm import DEFAULT_THRESHOLD, HcwpdmResult
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.scoring import by_rank_region, by_region, culprits, improvement, score
from waitlab.models.analysis.ties import NEAR_FRACTION, TIE_TOLERANCE, near_equal_waits, tie_counts
from waitlab.models.analysis.timeline_check import impossible_collectives, impossible_line
from waitlab.models.ops import OpTable

#: Built-in models that split a wait among tied culprits (they take the relative tie rule, ``tie_relative``).
TIE_SPLITTING = ("cwpdm", "hcwpdm", "hcwpdm_each")
#: The models of a diagnosis by default: key -> (display name, metric of the truth it is compared with).
MODELS: dict[str, tuple[str, str]] = {
    "cwpdm": ("CWP-DM", "total_wait"),
    "hcwpdm": ("H-CWP-DM (earliest)", "considered_wait"),
    "hcwpdm_each": ("H-CWP-DM (each)", "total_wait"),
}

ModelLike = str | Callable[..., pd.DataFrame] | ModelSpec


def run_models(events: pd.DataFrame, waits: pd.DataFrame, *, threshold: float = DEFAULT_THRESHOLD,
               focus_share: float = 0.9, memory: bool = True, models: Sequence[ModelLike] | None = None,
               placement: pd.DataFrame | None = None, errors: dict[str, str] | None = None,
               model_timeout: float = DEFAULT_TIMEOUT, tie_relative: float = 0.0) -> list[ModelRun]:
    """Run diagnosis models (default CWP-DM and H-CWP-DM, both pairings) on the same timelines.

    H-CWP-DM with the paper's "earliest" pairing looks at the waits of the dominant MPI operations
    (:func:`focus_ops`), as Wu et al. does for MPI_Allreduce; the other models at every wait.  Each model's
    time (and, with ``memory``, peak memory) is measured.  A model that fails
    (:class:`~waitlab.experiments.diagnosis.registry.ModelFailure`) is left out and its message put in
    ``errors`` (model key -> message); without ``errors`` the failure is raised.  The models read the tables as a
    measured trace holds them (:class:`~waitlab.models.analysis.protocol.RunData`): no cause ledger, no injected
    seconds.  A user's model (a spec, a plug-in, a function) runs in a child process, ``model_timeout`` seconds at
    most.
    ``tie_relative`` > 0 switches the relative tie rule on in the built-in models that split ties (CWP-DM,
    H-CWP-DM; :mod:`waitlab.models.analysis.ties`).
    """
    return _run_models(RunData(events, waits, placement), threshold=threshold, focus_share=focus_share,
                       memory=memory, models=models, errors=errors, model_timeout=model_timeout,
                       tie_relative=tie_relative)


def _run_models(run: RunData, *, threshold: float, focus_share: float, memory: bool,
                models: Sequence[ModelLike] | None, errors: dict[str, str] | None, model_timeout: float,
                tie_relative: float) -> list[ModelRun]:
    specs = resolve_all(list(models) if models is not None else list(DEFAULT_DIAGNOSE), timeout=model_timeout)
    out = []
    for spec in specs:
        opts: dict[str, Any] = {}
        if spec.builtin and spec.key in ("hcwpdm", "hcwpdm_each"):
            opts["threshold"] = threshold
        if spec.builtin and spec.key == "hcwpdm":
            opts["focus_share"] = focus_share
        if spec.builtin and tie_relative > 0 and spec.key in TIE_SPLITTING:
            opts["tie_relative"] = tie_relative
        try:
            out.append(run_model(spec, run, memory=memory, **opts))
        except ModelFailure as exc:
            if errors is None:
                raise
            errors[spec.key] = str(exc)
    return out


@dataclass
class Diagnosis:
    """Everything ``waitlab diagnose`` reports."""

    scenario: Scenario | None
    metadata: dict[str, Any]
    baseline: dict[str, Any]
    models: list[ModelRun]
    truth: GroundTruth | None
    culprits: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    improvements: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # model key -> why it was left out
    events: pd.DataFrame | None = field(default=None, repr=False)
    waits: pd.DataFrame | None = field(default=None, repr=False)

    def model(self, key: str) -> ModelRun:
        return next(m for m in self.models if m.key == key)

    @cached_property
    def critical(self) -> CriticalPath | None:
        """The run's critical path (computed on first use, once), or None without its tables."""
        if self.events is None or self.waits is None or not len(self.events):
            return None
        return critical_path(self.events, self.waits)

    def _repr_html_(self) -> str:  # a notebook shows each model next to the ground truth
        return diagnosis_html(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``diagnosis.json``): the same bytes for the same run.  What changes from one diagnosis to
        the next (each model's wall-clock ``seconds`` and ``peak_bytes``, the re-runs simulated rather than read from
        the cache) is left out: ``waitlab diagnose`` writes it into ``timing.json`` beside the report."""
        models: dict[str, Any] = {}
        for m in self.models:
            reg = by_region(m.blame())
            rr = by_rank_region(m.blame())
            d: dict[str, Any] = {
                "name": m.name, "compared_with": m.metric, "explains_wait": m.denominator,
                "attributed": m.attributed, "unexplained": m.unexplained,
                "by_region": {str(k): float(v) for k, v in reg.items()},
                "top_rank_region": [{"rank": int(r), "region": str(g), "cost": float(v)}
                                    for (r, g), v in rr.head(20).items()],
                "culprits": self.culprits.get(m.key, []),
                "scores": self.scores.get(m.key, {}),
                "improvement": self.improvements.get(m.key, {}),
            }
            if isinstance(m.result, CwpdmResult):
                w = m.result.waits
                d.update(short=m.result.short_total, long=m.result.long_total, rounds=m.result.rounds,
                         direct=float(w["direct"].sum()), indirect=float(w["indirect"].sum()),
                         propagating=float(w["propagating"].sum()), terminal=float(w["terminal"].sum()),
                         long_by_wait_type={c[5:]: float(m.result.costs[c].sum())
                                            for c in m.result.costs.columns if c.startswith("long_")})
            elif isinstance(m.result, HcwpdmResult):
                d.update(hotspots=list(m.result.hotspots), threshold=m.result.threshold,
                         pairing=m.result.pairing)
            models[m.key] = d
        return _plain({
            "scenario": self.scenario.resolved() if self.scenario is not None else None,
            "metadata": self.metadata, "baseline": self.baseline, "models": models,
            "truth": _without(self.truth.to_dict([m.metric for m in self.models]), "simulated_reruns")
            if self.truth is not None else None,
            "notes": self.notes,
            **({"errors": self.errors} if self.errors else {}),
        })


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item") and callable(x.item):
        return _plain(x.item())
    return x


def diagnose(events: pd.DataFrame, waits: pd.DataFrame, *, scenario: Scenario | None = None,
             ops: OpTable | None = None, metadata: Mapping[str, Any] | None = None, truth: bool = True,
             threshold: float = DEFAULT_THRESHOLD, top_k: int = 5, n_candidates: int = 8,
             culprit_share: float = 0.1, executor: Executor | None = None, cache_dir: Path | None = None,
             use_cache: bool = True, progress: bool = False, memory: bool = False,
             speed_profiles: Mapping[str, str] | None = None, rerun: Rerun | None = None,
             extra_sets: Sequence[CauseSet] = (), focus_share: float = 0.9,
             models: Sequence[ModelLike] | None = None, placement: pd.DataFrame | None = None,
             model_timeout: float = DEFAULT_TIMEOUT, tie_relative: float = 0.0) -> Diagnosis:
    """Run both models, the ground truth (needs ``scenario`` and ``ops``) and the scores.

    Parameters
    ----------
    events, waits : DataFrame
        The run's event table and wait states.
    scenario, ops : optional
        The scenario and the operations it replayed; without them there is no ground truth.
    truth : bool
        Compute the counterfactual ground truth.
    threshold : float
        H-CWP-DM hotspot threshold.
    focus_share : float
        H-CWP-DM (earliest) looks at the MPI operations holding this share of the wait (:func:`focus_ops`).
    top_k : int
        k of the top-k precision.
    n_candidates : int
        (rank, region) pairs with the most injected seconds costed individually.
    culprit_share : float
        A region is a culprit of a model when it holds at least this share of the model's blame.
    executor, cache_dir, use_cache, progress, speed_profiles, rerun, extra_sets
        See :func:`~waitlab.experiments.diagnosis.groundtruth.ground_truth`.
    memory : bool
        Measure each model's peak memory (runs it a second time under tracemalloc).
    models : sequence, optional
        The models (built-in keys, ``package.module:function`` specs, functions or
        :class:`~waitlab.experiments.diagnosis.registry.ModelSpec`); default CWP-DM and H-CWP-DM.
        A model that raises, runs past ``model_timeout`` or returns what the protocol does not allow is left out,
        with one line on stderr (``waitlab: error: model ...``) and a note naming it (``Diagnosis.errors``); the
        others are kept.
    placement : DataFrame, optional
        ``rank, node, ...`` of the run (given to the models).
    model_timeout : float
        Seconds a user's model (a spec, a plug-in or a Python function) may take on the run: it runs in a child
        process (a function in a forked one, :mod:`~waitlab.experiments.diagnosis.sandbox`), stopped past them.
    tie_relative : float
        The relative tie rule (0: off, the default): in CWP-DM and H-CWP-DM, culprits that arrived within this
        fraction of a wait of its latest culprit share it (:mod:`waitlab.models.analysis.ties`).  Either way the
        notes give the share of the wait decided between culprits within
        :data:`~waitlab.models.analysis.ties.NEAR_FRACTION` of the wait of each other.
    """
    check_options(threshold=threshold, top_k=top_k, n_candidates=n_candidates, tie_relative=tie_relative)
    baseline = wait_metrics(events, waits)
    errors: dict[str, str] = {}
    run = RunData(events, waits, placement)  # what the built-in models derive from the events is made once
    run_list = _run_models(run, threshold=threshold, focus_share=focus_share, memory=memory, models=models,
                           errors=errors, model_timeout=model_timeout, tie_relative=tie_relative)
    diag = Diagnosis(scenario=scenario, metadata=dict(metadata or {}), baseline=baseline, models=run_list,
                     truth=None, events=events, waits=waits, errors=errors)
    diag.notes += list(errors.values())
    flags = {str(m) for m in models or () if isinstance(m, FlagValue)}  # the command line says those itself
    for key, msg in errors.items():
        if key not in flags:
            print(f"waitlab: error: {msg} (left out of the diagnosis: Diagnosis.errors)", file=sys.stderr)
    impossible = impossible_line(impossible_collectives(events))
    if impossible:
        diag.notes.append(impossible)
    # on the tables the models read (their rows: run.ties'), where the hidden operations are no candidates
    ties = tie_counts(run.events, run.waits, candidates=run.ties)
    near = near_equal_waits(run.events, run.waits, NEAR_FRACTION, TIE_TOLERANCE, tie_relative, run.ties)
    del run
    near_seconds = float(waits["wait"].to_numpy()[near].sum()) if len(waits) else 0.0
    total_wait = float(waits["wait"].sum()) if len(waits) else 0.0
    near_share = near_seconds / total_wait if total_wait > 0 else 0.0
    diag.metadata["ties"] = {**ties, "tolerance": TIE_TOLERANCE, "relative": tie_relative,
                             "near_fraction": NEAR_FRACTION, "near_equal_waits": int(near.sum()),
                             "near_equal_seconds": near_seconds, "near_equal_share": near_share}
    if near.any():
        diag.notes.append(f"fragile blame: {100 * near_share:.1f}% of the wait ({int(near.sum())} wait states, "
                          f"{near_seconds:.6g} s) was blamed on one culprit while another arrived within "
                          f"{100 * NEAR_FRACTION:g}% of the wait of it; every model that follows the wait states' "
                          "culprits inherits that split (diagnose --tie-relative F shares a wait among culprits "
                          "within F of it in CWP-DM and H-CWP-DM)")
    if ties["exact"] or ties["near"]:
        diag.notes.append(f"ties: {ties['exact']} waits split equally between exactly tied culprits and "
                          f"{ties['near']} between culprits arriving within {TIE_TOLERANCE * 1e6:g} us of each other "
                          f"(near ties; {ties['culprits']} culprits in all)")
    for m in run_list:
        diag.culprits[m.key] = [str(c) for c in culprits(by_region(m.blame()), share=culprit_share)]
    if not truth:
        return diag
    if scenario is None or ops is None:
        diag.notes.append("no scenario or operations: ground truth skipped")
        return diag
    ledger = ledger_frame(ops)
    if not (ledger["seconds"] > 0).any():
        diag.notes.append("nothing was injected into this run (the cause ledger is empty): there is no ground "
                          "truth to score the models against, so only the models are reported")
        return diag
    cands: list[tuple[int, str]] = []
    for m in run_list:
        cands += [(int(r), str(g)) for r, g in by_rank_region(m.blame()).index[:top_k]]
    extra = [region_set(ledger, diag.culprits[m.key], f"balance:{m.key}") for m in run_list if diag.culprits[m.key]]
    extra += list(extra_sets)
    gt = ground_truth(scenario, ops, baseline, candidates=cands, n_candidates=n_candidates, extra_sets=extra,
                      executor=executor, cache_dir=cache_dir, use_cache=use_cache, progress=progress,
                      speed_profiles=speed_profiles, rerun=rerun)
    diag.truth = gt
    if gt.partial_noise:
        diag.notes.append("system noise from SimGrid speed profiles and degraded links can only be removed as a "
                          "whole: the per-region and per-rank truths keep them (" + ", ".join(gt.partial_noise) + ")")
    pos = ledger["seconds"] > 0  # false blame: blame on a (rank, region) without injected seconds, as in evaluate
    causal = set(zip(ledger.loc[pos, "rank"].astype(int), ledger.loc[pos, "region"].astype(str), strict=True))
    for m in run_list:
        blame = m.blame()
        diag.scores[m.key] = score(
            by_region(blame), gt.cost("region", m.metric), predicted_rank_region=by_rank_region(blame),
            true_rank_region=gt.cost("rank_region", m.metric), attributed=m.attributed,
            true_total=gt.cost_of("all", m.metric), causal=causal, k=top_k)
        label = f"balance:{m.key}"
        if label in gt.reruns:
            reg = by_region(blame)
            predicted = float(reg.reindex(diag.culprits[m.key]).fillna(0.0).sum())
            imp = improvement(predicted, metric_value(baseline, m.metric), metric_value(gt.reruns[label], m.metric))
            imp["makespan"] = (baseline["makespan"] - gt.reruns[label]["makespan"]) / baseline["makespan"] \
                if baseline["makespan"] else math.nan
            diag.improvements[m.key] = imp
    return diag


# ------------------------------------------------------------------------------------------ inputs

#: The numeric options of :func:`diagnose`: name -> (test, valid range, example).
_OPTIONS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    "threshold": (lambda v: 0 <= v < 1, "a number in [0, 1)", "threshold=0.01 (1%)"),
    "tie_relative": (lambda v: 0 <= v < 1, "a number in [0, 1)",
                     "tie_relative=0.01 (culprits within 1% of the wait share it)"),
    "top_k": (lambda v: isinstance(v, numbers.Integral) and int(v) >= 1, "a whole number >= 1", "top_k=5"),
    "n_candidates": (lambda v: isinstance(v, numbers.Integral) and int(v) >= 0, "a whole number >= 0",
                     "n_candidates=8"),
    "model_timeout": (lambda v: v > 0, "a number of seconds > 0", "model_timeout=600"),
}


def check_options(**values: Any) -> None:
    """Refuse a numeric option of :func:`diagnose` out of its range (an :class:`~waitlab.errors.InputError` naming
    the Python argument; the command line checks its flags before).

    >>> check_options(threshold=0.01, top_k=5)
    >>> check_options(top_k=0)
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: (python call): top_k: must be a whole number >= 1, got 0 (fix: e.g. top_k=5)
    """
    for name, value in values.items():
        test, valid, example = _OPTIONS[name]
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not test(value):  # NaN fails the ranges too
            raise InputError("(python call)", name, f"must be {valid}, got {value!r}", f"e.g. {example}")



@dataclass(frozen=True)
class Source:
    """What a diagnosis reads: the run's tables, its scenario and operations, and its noise profiles (the last two
    None for a results folder read without the ground truth, which alone needs them)."""

    events: pd.DataFrame
    waits: pd.DataFrame
    scenario: Scenario
    ops: OpTable | None
    metadata: dict[str, Any]
    speed_profiles: Mapping[str, str] | None = None
    placement: pd.DataFrame | None = None


def noise_profiles(scenario: Scenario, horizon: float | None) -> Mapping[str, str] | None:
    """The speed profiles (system noise) a perturbed run used, redrawn from its seed and horizon."""
    prep = prepare(scenario)
    if prep.perturbation is None or horizon is None or not prep.perturbation.noise.has_detours:
        return None
    return noise_for(prep, float(horizon)).speed_profiles or None


def _run_source(run: LoadedRun, truth: bool) -> Source:
    placement = pd.read_csv(run.folder / "placement.csv") if (run.folder / "placement.csv").is_file() else None
    if not truth:  # the operations (0.6 GB at 9 M) and the noise profiles are the ground truth's
        return Source(run.events, run.waits, run.scenario, None, dict(run.metadata), None, placement)
    if run.changed is not None:  # the truth simulates the run again: not with files it did not read
        raise run.changed
    return Source(run.events, run.waits, run.scenario, run.ops, dict(run.metadata),
                  noise_profiles(run.scenario, run.metadata.get("noise_horizon")), placement)


def load_source(path: Path | LoadedRun, trust_edited: bool = False, truth: bool = True) -> Source:
    """A results folder of ``waitlab run`` (read back, nothing re-simulated; checked against its integrity record
    unless ``trust_edited``; or already read back) or a scenario TOML (run now).  Without ``truth`` a results
    folder's operations and noise profiles are not read (``Source.ops`` and ``speed_profiles`` are None)."""
    if isinstance(path, LoadedRun):
        return _run_source(path, truth)
    path = Path(path)
    if path.is_dir():
        return _run_source(load_run(path, trust_edited), truth)
    if not path.exists():  # as `waitlab run` says of a missing scenario
        raise InputError(str(path), "(path)", "does not exist",
                         "check the path: a results folder written by `waitlab run`, or a scenario file")
    if path.suffix == ".toml":
        scenario = load_scenario(path)
        r = run_pipeline(scenario)
        profiles = r.perturbation.noise.speed_profiles if r.perturbation is not None else None
        return Source(r.result.events, r.result.waits, scenario, r.result.ops, dict(r.result.metadata),
                      profiles or None, r.result.placement)
    raise InputError(str(path), "(path)", "is neither a results folder nor a .toml scenario",
                     "pass the folder written by `waitlab run` or a scenario file")


def diagnose_path(path: Path | LoadedRun, trust_edited: bool = False, **kwargs: Any) -> Diagnosis:
    """:func:`diagnose` of a results folder (or a run read back from one) or scenario TOML."""
    src = load_source(path, trust_edited, bool(kwargs.get("truth", True)))
    # the report of a run needs its critical path: made first, while only the tables are in memory (after the
    # models its event-sized arrays would come on top of what they leave behind: 0.1 GB more peak at 7 M events)
    critical = critical_path(src.events, src.waits) if len(src.events) else None
    diag = diagnose(src.events, src.waits, scenario=src.scenario, ops=src.ops, metadata=src.metadata,
                    speed_profiles=src.speed_profiles, placement=src.placement, **kwargs)
    diag.__dict__["critical"] = critical  # Diagnosis.critical (a cached property), already made
    diag.metadata.setdefault("source", str(path.folder if isinstance(path, LoadedRun) else path))
    return diag


__all__ = [
    "MODELS",
    "Diagnosis",
    "ModelFailure",
    "ModelRun",
    "Source",
    "check_options",
    "diagnose",
    "diagnose_path",
    "focus_ops",
    "load_source",
    "noise_profiles",
    "run_models",
]
