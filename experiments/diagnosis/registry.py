"""The diagnosis-model registry: built-in models, entry points, ``package.module:function`` specs.

A model is a function ``model(run, **options) -> DataFrame`` (:mod:`waitlab.models.analysis.protocol`).
Models are found, in this order:

* by key among the built-in models (:data:`BUILTIN`: ``cwpdm``, ``hcwpdm``, ``hcwpdm_each``,
  ``critical_path``, ``blame_shifting``, ``profile``, ``graph``);
* by name in the entry-point group ``waitlab.diagnosis_models`` of installed packages
  (``[project.entry-points."waitlab.diagnosis_models"] mymodel = "mypkg.models:mymodel"``);
* as ``package.module:function`` (imported; the current folder is searched too) or
  ``path/to/file.py:function``.

:func:`run_model` runs one model safely: a model that raises or returns garbage gives a
:class:`ModelFailure` naming the model and what went wrong, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE
from waitlab.models.analysis import baselines, blame_models, graph_blame
from waitlab.models.analysis.protocol import RunData, as_blame, blame_problems, normalise

#: Entry-point group third-party packages register their models in.
ENTRY_POINT_GROUP = "waitlab.diagnosis_models"

Detail = Callable[..., Any]
Frame = Callable[[Any, RunData, dict[str, Any]], pd.DataFrame]


@dataclass(frozen=True)
class ModelSpec:
    """One model the workbench can run.

    Attributes
    ----------
    key : str
        Its key in reports and leaderboards (``cwpdm``, ``mymodels:blame_zero``, ...).
    name : str
        Display name.
    fn : callable
        The protocol function ``fn(run, **options) -> DataFrame``.
    options : dict
        Keyword options passed to ``fn``.
    detail, frame : callable, optional
        Built-in models: the function returning the model's own result, and its conversion to the
        protocol table (so the report can show the model's details without computing it twice).
    builtin : bool
    """

    key: str
    name: str
    fn: Callable[..., pd.DataFrame]
    options: dict[str, Any] = field(default_factory=dict)
    detail: Detail | None = None
    frame: Frame | None = None
    builtin: bool = False


def _builtin(key: str, fn: Callable[..., pd.DataFrame], detail: Detail | None = None,
             frame: Frame | None = None) -> ModelSpec:
    return ModelSpec(key, BUILTIN_NAMES[key], fn, detail=detail, frame=frame, builtin=True)


#: The built-in models, in report order (their names: :data:`~waitlab.experiments.diagnosis.names.BUILTIN_NAMES`).
BUILTIN: dict[str, ModelSpec] = {s.key: s for s in (
    _builtin("cwpdm", blame_models.cwpdm_model, blame_models.cwpdm_detail,
             lambda res, run, o: blame_models.cwpdm_frame(res)),
    _builtin("hcwpdm", blame_models.hcwpdm_earliest_model, blame_models.hcwpdm_earliest_detail,
             lambda res, run, o: blame_models.hcwpdm_frame(
                 res, blame_models.focus_ops(run.waits, o.get("focus_share", 0.9)))),
    _builtin("hcwpdm_each", blame_models.hcwpdm_each_model, blame_models.hcwpdm_each_detail,
             lambda res, run, o: blame_models.hcwpdm_frame(res)),
    _builtin("critical_path", baselines.critical_path_model),
    _builtin("blame_shifting", baselines.blame_shifting_model),
    _builtin("profile", baselines.profile_model),
    _builtin("graph", graph_blame.graph_model),
)}


def entry_point_models() -> dict[str, ModelSpec]:
    """Models registered by installed packages in the group :data:`ENTRY_POINT_GROUP` (loaded lazily)."""
    out: dict[str, ModelSpec] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        out[ep.name] = ModelSpec(ep.name, ep.name, _lazy(ep))
    return out


def _lazy(ep: importlib.metadata.EntryPoint) -> Callable[..., pd.DataFrame]:
    def fn(run: RunData, **options: Any) -> pd.DataFrame:
        return ep.load()(run, **options)
    return fn


def _import(module: str, where: str, key_name: str) -> Any:
    if module.endswith(".py") or os.sep in module:
        path = Path(module)
        if not path.is_file():
            raise InputError(where, key_name, f"no file {module}", "give an existing .py file or package.module")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise InputError(where, key_name, f"cannot import {module}", "give a .py file")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0] or os.getcwd() in sys.path:
            raise InputError(where, key_name, f"cannot import {module}: {exc}", "check the module name") from None
    sys.path.insert(0, os.getcwd())  # a model file in the current folder, as `python -m` would find it
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise InputError(where, key_name, f"cannot import {module}: {exc}",
                         "write package.module:function (the module on the Python path or in this folder)") from None


def resolve(spec: str | Callable[..., pd.DataFrame] | ModelSpec, where: str = "(command line)",
            key_name: str = "--model") -> ModelSpec:
    """A :class:`ModelSpec` from a built-in key, an entry-point name, ``module:function`` or a function.

    A spec that names nothing is an :class:`~waitlab.errors.InputError` naming ``where`` and ``key_name``.
    """
    if isinstance(spec, ModelSpec):
        return spec
    if callable(spec):
        name = f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__name__', repr(spec))}"
        return ModelSpec(name, name, spec)
    if spec in BUILTIN:
        return BUILTIN[spec]
    if ":" not in spec:
        eps = entry_point_models()
        if spec in eps:
            return eps[spec]
        raise InputError(where, key_name, f"unknown model {spec!r}",
                         f"use package.module:function, an installed plug-in, or one of: {', '.join(BUILTIN)}")
    module, _, attr = spec.rpartition(":")
    mod = _import(module, where, key_name)
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise InputError(where, key_name, f"{module} has no function {attr!r}",
                         "name a function defined in that module")
    return ModelSpec(spec, str(getattr(fn, "waitlab_name", spec)), fn)


def resolve_all(specs: Sequence[str | Callable[..., pd.DataFrame] | ModelSpec], where: str = "(command line)",
                key_name: str = "--model") -> list[ModelSpec]:
    """:func:`resolve` of each spec, duplicates (same key) dropped."""
    out: dict[str, ModelSpec] = {}
    for s in specs:
        m = resolve(s, where, key_name)
        out.setdefault(m.key, m)
    return list(out.values())


@dataclass(frozen=True)
class ModelRun:
    """One model's result on one run and what it cost to compute.

    ``frame`` is the protocol table; ``result`` the model's own result (built-in models) or None.
    """

    key: str
    name: str
    metric: str
    frame: pd.DataFrame
    seconds: float
    peak_bytes: int
    denominator: float
    result: Any = None

    @property
    def attributed(self) -> float:
        """Wait attributed by the model (sum of its blame)."""
        return float(self.frame["seconds"].sum())

    @property
    def unexplained(self) -> float:
        """Wait of its denominator the model did not attribute."""
        un = self.frame.attrs.get("unexplained")
        return float(un) if un is not None else max(0.0, self.denominator - self.attributed)

    def blame(self) -> pd.DataFrame:
        """``rank, region, callpath, cost``: the scoring interface."""
        return as_blame(self.frame)


class ModelFailure(Exception):
    """A model raised or returned something the protocol does not allow (the message names the model)."""


def _measure(fn: Callable[[], Any], memory: bool) -> tuple[Any, float, int]:
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    peak = 0
    if memory:
        tracemalloc.start()
        try:
            fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return out, seconds, peak


def run_model(spec: ModelSpec, run: RunData, *, memory: bool = False, **options: Any) -> ModelRun:
    """Run one model on ``run``; :class:`ModelFailure` (naming the model) if it raises or returns garbage."""
    opts = {**spec.options, **options}
    try:
        if spec.detail is not None and spec.frame is not None:
            detail, frame_of = spec.detail, spec.frame
            result, sec, peak = _measure(lambda: detail(run, **opts), memory)
            frame = frame_of(result, run, opts)
        else:
            fn = spec.fn
            frame, sec, peak = _measure(lambda: fn(run, **opts), memory)
            result = None
    except Exception as exc:  # a plug-in may raise anything: report it, keep the other models
        raise ModelFailure(f"model {spec.key!r} raised {type(exc).__name__}: {exc}") from None
    problems = blame_problems(frame, run)
    if problems:
        raise ModelFailure(f"model {spec.key!r} returned a table the protocol does not allow: " + "; ".join(problems))
    out = normalise(frame)
    metric = str(out.attrs.get("explains", "total_wait"))
    denom = float(out.attrs.get("explains_wait", run.total_wait))
    return ModelRun(spec.key, spec.name, metric, out, sec, peak, denom, result)


__all__ = ["BUILTIN", "DEFAULT_DIAGNOSE", "ENTRY_POINT_GROUP", "ModelFailure", "ModelRun", "ModelSpec",
           "entry_point_models", "resolve", "resolve_all", "run_model"]
