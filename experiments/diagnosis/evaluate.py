"""``waitlab evaluate``: every model on every case of a suite, scored against the counterfactual truth.

For each case (:mod:`~waitlab.experiments.diagnosis.suite`):

1. the run is simulated once and kept in waitlab's cache (``suite-runs/<scenario hash>-<code digest>/``, a
   results folder; :func:`waitlab.version.code_digest`: a changed waitlab simulates again); a cached run is read
   back, not simulated;
2. every model runs on it (:func:`~waitlab.experiments.diagnosis.registry.run_model`; a model that
   fails gets one error line naming it, the others are scored);
3. the truth (:func:`~waitlab.experiments.diagnosis.groundtruth.ground_truth`, cached re-runs): all
   causes, per region, per cause kind, the ``n_candidates`` (rank, region) pairs with the most injected
   seconds, every tied set of them (:func:`~waitlab.models.analysis.suite_scores.tie_sets`) and "balance
   the regions this model blames" per model;
4. the scores of each model (:func:`case_scores`); a (case, model) row is cached, keyed by the scenario,
   the model's source (a Python function: with its captured values and the module-level values it reads,
   :func:`function_state`; one without a source file, as in a notebook, or reading a value that cannot be pickled
   is not cached, :func:`cache_notes`), the scoring settings and waitlab's code, so a second evaluate
   re-simulates and re-scores nothing.

The leaderboard (:mod:`~waitlab.experiments.diagnosis.leaderboard`) aggregates them per model and cause class.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import os
import pickle
import shutil
import sys
import types
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.experiments.diagnosis.diagnose import load_source
from waitlab.experiments.diagnosis.groundtruth import (
    Bar,
    CauseSet,
    GroundTruth,
    default_cache_dir,
    default_executor,
    ground_truth,
    ledger_frame,
    metric_value,
    region_set,
    top_candidates,
    wait_metrics,
)
from waitlab.experiments.diagnosis.registry import (
    BUILTIN,
    ModelFailure,
    ModelRun,
    ModelSpec,
    check_model_list,
    entry_point_models,
    resolve_all,
    run_model,
)
from waitlab.experiments.diagnosis.sandbox import DEFAULT_TIMEOUT, IsolatedModel
from waitlab.experiments.diagnosis.scalasca_models import scalasca_specs
from waitlab.experiments.diagnosis.suite import Case, load_suite
from waitlab.experiments.leftovers import clean_stale_tmp, temporary_name
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.results import write_run
from waitlab.experiments.run_folder import MARKER, seal
from waitlab.experiments.scenario import Scenario
from waitlab.models.analysis import suite_scores
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.scoring import by_rank_region, by_region, culprits, spearman
from waitlab.models.analysis.suite_scores import (
    l1_error,
    relative,
    share_without_cause,
    shared_truth,
    tie_sets,
    top_hit,
)
from waitlab.models.analysis.ties import tie_counts
from waitlab.version import __version__, code_digest

#: Score columns of one (case, model) row, in leaderboard order.
SCORES = ("top1", "topk", "blame_error", "rank_error", "total_error", "false_blame", "spearman", "predicted",
          "realized")
#: Bump when the scores' definitions change (cached rows are then recomputed).
SCORES_VERSION = "1"


@dataclass(frozen=True)
class Settings:
    """What the scores depend on besides the case and the model."""

    top_k: int = 3
    n_candidates: int = 16
    culprit_share: float = 0.1

    def key(self) -> str:
        return f"k{self.top_k}-c{self.n_candidates}-s{self.culprit_share}-v{SCORES_VERSION}-{__version__}"


def all_models(extra: Sequence[str | Callable[..., pd.DataFrame] | ModelSpec] = (),
               timeout: float = DEFAULT_TIMEOUT) -> list[ModelSpec]:
    """The built-in models, every installed plug-in (entry points) and ``extra`` (the users' models get
    ``timeout`` seconds per run); ``extra`` must be a list (one text is refused, naming the argument ``models``)."""
    check_model_list(extra)
    return resolve_all([*BUILTIN.values(), *entry_point_models(timeout).values(), *extra], timeout=timeout)


class _StatePickler(pickle.Pickler):
    """Pickles a function's captured values for a digest: a module by its name (a closure may capture ``np``)."""

    def persistent_id(self, obj: Any) -> str | None:
        return obj.__name__ if isinstance(obj, types.ModuleType) else None


def captured_state(fn: Callable[..., Any]) -> bytes | None:
    """Digest of what a function's result can depend on beyond its source: its closure's values, its defaults
    (keyword-only ones too) and, for a bound method, its object; None when they cannot be pickled (then its scores
    are not cached)."""
    owner = getattr(fn, "__self__", None)
    fn = getattr(fn, "__func__", fn)
    buf = io.BytesIO()
    try:
        cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()]
        _StatePickler(buf, protocol=4).dump((owner, cells, getattr(fn, "__defaults__", None),
                                             getattr(fn, "__kwdefaults__", None)))
    except Exception:  # an empty cell (ValueError), a lambda or a lock captured: anything unpicklable
        return None
    return hashlib.sha256(buf.getvalue()).digest()


def _global_names(code: types.CodeType) -> set[str]:
    """The names a code object (and the functions, classes and comprehensions defined in it) looks up: its globals,
    and attribute names, which are skipped when the module holds no global of that name."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out


def function_state(fn: Callable[..., Any]) -> tuple[bytes | None, str]:
    """Digest of what a Python function given as a model computes with, or ``(None, why)`` when it cannot be made
    (its scores are then not cached).

    It is the function's source file (``None`` when there is none: a notebook cell, code typed in or made by
    ``exec``), its name and first line, what it captured (:func:`captured_state`) and the module-level names its
    code reads, each by value (pickled: ``SCALE = 0.5`` in a notebook or script is another model than
    ``SCALE = 1.0``); the functions of its own module it calls are followed the same way, modules are taken by
    name, and functions and classes of other modules by their module and name.  A value that cannot be pickled, or
    a callable that is not a function (a ``functools.partial``, an object with ``__call__``), is not digested.
    """
    if not isinstance(getattr(fn, "__func__", fn), types.FunctionType):
        return None, f"it is a {type(fn).__name__}, not a function: what it computes with cannot be read"
    h = hashlib.sha256()
    files: set[str] = set()
    seen: set[int] = set()
    todo: list[Callable[..., Any]] = [fn]
    while todo:
        f = todo.pop()
        func = getattr(f, "__func__", f)
        if id(func) in seen:
            continue
        seen.add(id(func))
        try:
            src = inspect.getsourcefile(func)
        except TypeError:
            src = None
        if src is None or not Path(src).is_file():
            return None, (f"the source of {func.__qualname__} is not a file (a notebook cell or code typed in), so "
                          "an edit of it could not be told")
        if src not in files:
            files.add(src)
            h.update(Path(src).read_bytes())
        state = captured_state(f)
        if state is None:
            return None, f"what {func.__qualname__} captured (its closure, defaults or object) cannot be pickled"
        h.update(f"{func.__module__}:{func.__qualname__}@{func.__code__.co_firstlineno}".encode() + state)
        module = func.__globals__
        for name in sorted(_global_names(func.__code__)):
            if name not in module:
                continue  # a builtin, or an attribute's name
            v = module[name]
            if isinstance(v, types.ModuleType):
                h.update(f"{name}=module {v.__name__};".encode())
            elif isinstance(v, types.FunctionType) and v.__module__ == func.__module__:
                h.update(f"{name}=function;".encode())
                todo.append(v)
            elif isinstance(v, type | types.FunctionType | types.BuiltinFunctionType):
                h.update(f"{name}={getattr(v, '__module__', '')}:{getattr(v, '__qualname__', '')};".encode())
            else:
                buf = io.BytesIO()
                try:
                    _StatePickler(buf, protocol=4).dump(v)
                except Exception:  # a lock, an open file, a generator: anything unpicklable
                    return None, f"{func.__qualname__} reads the global {name!r}, whose value cannot be pickled"
                h.update(f"{name}=".encode() + hashlib.sha256(buf.getvalue()).digest())
    return h.digest(), ""


def _digest(spec: ModelSpec) -> tuple[str | None, str]:
    """:func:`model_digest` and, when it is None, why."""
    h = hashlib.sha256(spec.key.encode())
    for fn in (spec.fn, spec.detail):
        if isinstance(fn, IsolatedModel) and fn.fn is not None:  # a Python function (in a forked child): its own
            fn = fn.fn
        if fn is None:
            continue
        if isinstance(fn, IsolatedModel):  # a user's model: its file (or plug-in version), not the proxy
            h.update(fn.version.encode())
            if fn.source is not None:
                try:
                    h.update(Path(fn.source).read_bytes())
                except OSError:
                    h.update(fn.source.encode())
            continue
        if not spec.builtin:  # a user's function: what it computes with, globals included
            state, why = function_state(fn)
            if state is None:
                return None, why
            h.update(state)
            continue
        try:  # waitlab's own code (its digest is part of every row's key)
            src = inspect.getsourcefile(fn)
            h.update(Path(src).read_bytes() if src else repr(fn).encode())
        except (TypeError, OSError):
            h.update(repr(fn).encode())
        builtin_state = captured_state(fn)
        if builtin_state is None:
            return None, "what it captured cannot be pickled"
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        h.update(f"{getattr(fn, '__qualname__', '')}@{getattr(code, 'co_firstlineno', '')}".encode() + builtin_state)
    h.update(json.dumps(spec.options, sort_keys=True, default=str).encode())
    return h.hexdigest()[:24], ""


def model_digest(spec: ModelSpec) -> str | None:
    """Digest of a model's source (its module's file) and options: a changed model is scored again.

    A Python function given as a model is digested with what it computes with (:func:`function_state`: its
    source file, name, first line, captured values and the module-level values it reads); None when that cannot be
    made (its scores are then not cached: :func:`cache_notes` says why).
    """
    return _digest(spec)[0]


def cache_notes(models: Sequence[Any], timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """One line per Python function (or :class:`ModelSpec` of one) in ``models`` whose scores are not cached, and
    why (:func:`function_state`); specs given as text (files, plug-ins) are keyed by their file and always cached."""
    out: list[str] = []
    for m in models:
        if isinstance(m, str) or not (callable(m) or isinstance(m, ModelSpec)):
            continue
        spec = resolve_all([m], timeout=timeout)[0]
        digest, why = _digest(spec)
        if digest is None:
            out.append(f"model {spec.key!r}: its scores are not cached ({why}): it is run and scored again on "
                       "every evaluate")
    return out


def _scoring_digest() -> str:
    h = hashlib.sha256()
    for mod in (suite_scores, sys.modules[__name__]):
        src = inspect.getsourcefile(mod)
        if src:
            h.update(Path(src).read_bytes())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------ the runs


def run_folder(cache: Path, scenario: Scenario) -> Path:
    """Where the run of a case is kept."""
    return cache / "suite-runs" / f"{scenario.hash()}-{code_digest()}"


def materialize(scenario: Scenario, folder: str) -> str:
    """Simulate a case and write its results folder (atomically: into ``NAME.tmpPID-HOST`` beside it, removed when
    the run fails, renamed when complete); picklable for executors."""
    dest = Path(folder)
    if (dest / MARKER).is_file():
        return folder
    shutil.rmtree(dest, ignore_errors=True)  # a run cached before runs carried their integrity record
    tmp = dest.with_name(temporary_name(dest.name))
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write_run(run_pipeline(scenario), tmp, png=False)
        seal(tmp)
    except BaseException:  # a failed or interrupted run leaves nothing in the cache (a killed one: clean_stale_tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, dest)
    except OSError:  # another process wrote it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def materialize_all(cases: Sequence[Case], cache: Path, executor: Executor | None, progress: bool) -> int:
    """Simulate the cases not in the cache; the number simulated (suite runs that a killed ``evaluate`` was writing
    are removed first)."""
    clean_stale_tmp(cache / "suite-runs")
    todo = [c for c in cases if not (run_folder(cache, c.scenario) / MARKER).is_file()]
    if not todo:
        return 0
    own = executor is None
    ex = default_executor() if own else executor
    assert ex is not None
    try:
        futs: dict[Future[str], Case] = {ex.submit(materialize, c.scenario, str(run_folder(cache, c.scenario))): c
                                         for c in todo}
        for f in Bar(as_completed(futs), total=len(futs), desc="suite runs", unit="run", disable=not progress,
                      file=sys.stderr):
            f.result()
    finally:
        if own:
            ex.shutdown(wait=True, cancel_futures=True)
    return len(todo)


# ------------------------------------------------------------------------------------------ scores


def _rr(s: pd.Series) -> pd.Series:
    """A (rank, region) series with plain tuple keys (rank int, region str)."""
    return pd.Series(s.to_numpy(float), index=pd.Index([(int(r), str(g)) for r, g in s.index], tupleize_cols=False),
                     dtype=float)


def case_scores(m: ModelRun, gt: GroundTruth, ledger: pd.DataFrame, ties: dict[tuple[tuple[int, str], ...], str],
                settings: Settings, culprit_regions: list[str]) -> dict[str, float]:
    """The scores of one model on one case (nan = n/a)."""
    metric = m.metric
    blame = m.blame()
    pred_rr = _rr(by_rank_region(blame))
    pred_reg = by_region(blame)
    true_rr = _rr(gt.cost("rank_region", metric))
    sets = {members: gt.cost_of(label, metric) for members, label in ties.items() if label in gt.reruns}
    true_rr = shared_truth(true_rr, sets) if sets else true_rr
    true_total = gt.cost_of("all", metric)
    true_reg = gt.cost("region", metric)
    partial = any(lbl.startswith("region:") for lbl in gt.partial_noise)
    # a (rank, region) whose re-run kept the profile noise (removed only as a whole) has no per-pair truth
    partial_rr = partial or any(lbl.startswith("rank_region:") for lbl in gt.partial_noise)
    pos = ledger["seconds"] > 0
    causal = {(int(r), str(g)) for r, g in zip(ledger.loc[pos, "rank"], ledger.loc[pos, "region"], strict=True)}
    costed = set(true_rr.index)
    known = [i for i in pred_rr.index if i in costed or i not in causal]
    out = {
        "top1": top_hit(pred_rr, true_rr, 1),
        "topk": top_hit(pred_rr, true_rr, settings.top_k),
        # per-region truth cannot remove noise injected through speed profiles: n/a then
        "blame_error": math.nan if partial else l1_error(pred_reg, true_reg, true_total),
        # per (rank, region): over the pairs whose truth is known (costed, or without any cause: truth 0)
        "rank_error": math.nan if partial_rr else l1_error(pred_rr[pred_rr.index.isin(known)], true_rr, true_total),
        "total_error": relative(m.attributed - true_total, true_total),
        "false_blame": share_without_cause(pred_rr, causal),
        "spearman": spearman(pred_rr.reindex(true_rr.index, fill_value=0.0), true_rr) if len(true_rr) > 1
        else math.nan,
        "predicted": math.nan,
        "realized": math.nan,
    }
    label = f"balance:{m.key}"
    if culprit_regions and label in gt.reruns:
        base = metric_value(gt.baseline, metric)
        if "improvement" in m.frame:  # the model's own prediction of what removing its items saves
            own = m.frame.groupby("region")["improvement"].sum()
            out["predicted"] = relative(float(own.reindex(culprit_regions).fillna(0.0).sum()), base)
        else:  # else: the wait its culprit regions hold (Wu et al.'s reading of a blame table)
            out["predicted"] = relative(float(pred_reg.reindex(culprit_regions).fillna(0.0).sum()), base)
        out["realized"] = relative(base - metric_value(gt.reruns[label], metric), base)
    return out


@dataclass
class CaseOutcome:
    """The rows of one case: per model its scores, cost and error (if it failed)."""

    case: Case
    rows: list[dict[str, Any]]
    simulated: int
    notes: list[str]


def _row_path(cache: Path, case: Case, spec: ModelSpec, settings: Settings) -> Path | None:
    """Where a (case, model) row is cached; None for a model whose digest cannot be made (:func:`model_digest`)."""
    digest = model_digest(spec)
    if digest is None:
        return None
    key = f"{case.scenario.hash()}-{digest}-{settings.key()}-{_scoring_digest()}-{code_digest()}"
    return cache / "evaluate" / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def evaluate_case(case: Case, specs: Sequence[ModelSpec], cache: Path, settings: Settings, *,
                  executor: Executor | None = None, use_cache: bool = True, progress: bool = False,
                  folder: Path | None = None) -> CaseOutcome:
    """Score every model on one case.

    The run is read from ``folder`` (a results folder), by default the cache's (:func:`materialize_all`).
    """
    rows: dict[str, dict[str, Any]] = {}
    for spec in specs:
        p = _row_path(cache, case, spec, settings)
        if use_cache and p is not None and p.is_file():
            try:
                rows[spec.key] = json.loads(p.read_text())
            except (OSError, ValueError):
                pass
    todo = [s for s in specs if s.key not in rows]
    simulated, notes = 0, []
    if todo:
        src = load_source(folder if folder is not None else run_folder(cache, case.scenario))
        ops = src.ops
        assert ops is not None  # read with the truth (load_source's default)
        run = RunData(src.events, src.waits, src.placement)  # what a trace holds: the ledger is the scorer's
        ledger = ledger_frame(ops)
        runs: dict[str, ModelRun] = {}
        for spec in todo:
            try:
                runs[spec.key] = run_model(spec, run)
            except ModelFailure as exc:
                rows[spec.key] = {"error": str(exc), "seconds": math.nan, **dict.fromkeys(SCORES, math.nan)}
                notes.append(f"{case.name}: {exc}")
        tc = tie_counts(run.events, run.waits, candidates=run.ties)  # waits split between tied culprits
        cands = top_candidates(ledger, settings.n_candidates)
        ties = {members: "tie:" + "+".join(f"{r}:{g}" for r, g in members) for members in tie_sets(ledger, cands)}
        pos = (ledger["seconds"] > 0).to_numpy()
        pairs = pd.Series(list(zip(ledger["rank"].astype(int), ledger["region"].astype(str), strict=True)),
                          dtype=object)
        extra = [CauseSet(lbl, "tie", members, pos & pairs.isin(list(members)).to_numpy())
                 for members, lbl in ties.items()]
        cul = {k: [str(c) for c in culprits(by_region(r.blame()), share=settings.culprit_share)]
               for k, r in runs.items()}
        extra += [region_set(ledger, c, f"balance:{k}") for k, c in cul.items() if c]
        gt = ground_truth(case.scenario, ops, wait_metrics(src.events, src.waits), candidates=[],
                          n_candidates=settings.n_candidates, extra_sets=extra, executor=executor,
                          cache_dir=cache / "counterfactuals", use_cache=use_cache, progress=progress,
                          speed_profiles=src.speed_profiles)
        simulated = gt.simulated
        for k, r in runs.items():
            rows[k] = {**case_scores(r, gt, ledger, ties, settings, cul[k]), "seconds": r.seconds, "error": "",
                       "exact_ties": tc["exact"], "near_ties": tc["near"]}
        for spec in todo:
            p = _row_path(cache, case, spec, settings)
            if use_cache and p is not None and not rows[spec.key].get("error"):
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(json.dumps(rows[spec.key], sort_keys=True) + "\n")
    out = [{"model": s.key, "name": s.name, "case": case.name, "cause": case.cause, "what": case.what,
            "ranks": case.scenario.ranks, "platform": case.scenario.platform.name, **rows[s.key]} for s in specs]
    return CaseOutcome(case, out, simulated, notes)


def evaluate(suite: str | Path | None = None, *, models: Sequence[str | Callable[..., pd.DataFrame] | ModelSpec] = (),
             only: Sequence[str] = (), executor: Executor | None = None, cache_dir: Path | None = None,
             use_cache: bool = True, progress: bool = False, settings: Settings | None = None,
             model_timeout: float = DEFAULT_TIMEOUT, scalasca: bool = False
             ) -> tuple[pd.DataFrame, list[str], dict[str, int]]:
    """Run and score every model on every case of a suite.

    ``scalasca``: also Scalasca's delay costs and critical path (:mod:`.scalasca_models`) when Scalasca is
    found; when it is not, one line on stderr says their rows are skipped and why.

    The users' models (specs, plug-ins) run in a child process each, ``model_timeout`` seconds per case at
    most (:mod:`~waitlab.experiments.diagnosis.sandbox`); a model that fails leaves its rows with an
    ``error`` and the others are scored.

    Returns
    -------
    rows : DataFrame
        One row per (case, model): the case's name, cause class, ranks, platform, the scores
        (:data:`SCORES`), the model's cost ``seconds`` and ``error`` (empty, or why the model failed).
    notes : list of str
        One line per model failure.
    counts : dict
        ``runs_simulated`` (suite runs) and ``reruns_simulated`` (counterfactual re-runs).
    """
    st = settings or Settings()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir().parent
    cases = load_suite(suite, only)
    specs = all_models(models, model_timeout)
    if scalasca:
        found, reason = scalasca_specs()
        specs += found
        if not found:
            print(f"waitlab: Scalasca's rows (delay costs, critical path) skipped: {reason}", file=sys.stderr)
    n_runs = materialize_all(cases, cache, executor, progress)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    reruns = 0
    for case in Bar(cases, desc="cases", unit="case", disable=not progress, file=sys.stderr):
        oc = evaluate_case(case, specs, cache, st, executor=executor, use_cache=use_cache, progress=False)
        rows += oc.rows
        notes += oc.notes
        reruns += oc.simulated
    return pd.DataFrame(rows), notes, {"runs_simulated": n_runs, "reruns_simulated": reruns}


__all__ = ["SCORES", "Settings", "all_models", "cache_notes", "captured_state", "case_scores", "evaluate",
           "evaluate_case", "function_state", "materialize", "materialize_all", "model_digest", "run_folder"]
