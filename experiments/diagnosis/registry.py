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
:class:`ModelFailure` naming the model and what went wrong, never a traceback.  A model named by a spec or
an entry point is the user's code: it is imported and run in a process of its own
(:mod:`~waitlab.experiments.diagnosis.sandbox`, with a time limit), as is a Python function (in a forked process);
the built-in models run in waitlab's.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import math
import numbers
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE, argument_label
from waitlab.experiments.diagnosis.sandbox import (
    DEFAULT_TIMEOUT,
    ENTRY_POINT_GROUP,
    IsolatedModel,
    SandboxError,
    describe_exception,
    measure,
    probe,
)
from waitlab.models.analysis import baselines, blame_models, graph_blame
from waitlab.models.analysis.measured import TRUTH_COLUMNS
from waitlab.models.analysis.metrics import metric_value, wait_metrics
from waitlab.models.analysis.protocol import RunData, as_blame, blame_problems, normalise

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


def entry_point_models(timeout: float = DEFAULT_TIMEOUT) -> dict[str, ModelSpec]:
    """Models registered by installed packages in the group :data:`ENTRY_POINT_GROUP` (imported only in the
    process that runs them)."""
    out: dict[str, ModelSpec] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        version = f"{ep.value}@{ep.dist.version if ep.dist is not None else ''}"
        out[ep.name] = ModelSpec(ep.name, ep.name, IsolatedModel(ep.value, None, timeout, tuple(sys.path), version))
    return out


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_FIX_SPEC = "write package.module:function or path/to/file.py:function"


def _check_spec(spec: str, where: str, key_name: str) -> None:
    """Refuse a ``module:function`` spec that cannot name a function, before any import."""
    module, _, attr = spec.rpartition(":")
    if not module or not attr:
        raise InputError(where, key_name, f"{spec!r} names no {'module' if not module else 'function'}", _FIX_SPEC)
    if not attr.isidentifier():
        raise InputError(where, key_name, f"{attr!r} in {spec!r} is not a Python function name", _FIX_SPEC)
    if module.endswith(".py") or "/" in module:
        path = Path(module)
        if path.suffix != ".py" or not path.is_file():
            raise InputError(where, key_name, f"no file {module}", "give an existing .py file or package.module")
    elif not _MODULE.fullmatch(module):
        raise InputError(where, key_name, f"{module!r} in {spec!r} is not a module name (dotted Python names)",
                         _FIX_SPEC)


def resolve(spec: str | Callable[..., pd.DataFrame] | ModelSpec, where: str | None = None,
            key_name: str | None = None, timeout: float = DEFAULT_TIMEOUT, python_name: str = "models") -> ModelSpec:
    """A :class:`ModelSpec` from a built-in key, an entry-point name, ``module:function`` or a function.

    A spec that names nothing, or whose module cannot be imported (a syntax error, an exception or a missing
    dependency at import: the import is tried in a child process, :func:`~.sandbox.probe`), is an
    :class:`~waitlab.errors.InputError` naming ``where`` and ``key_name`` (a file and its key); without ``where``,
    the command line's flag for a spec given there (:class:`~waitlab.experiments.diagnosis.names.FlagValue`), else
    the Python argument ``python_name`` (and ``model_timeout``).  Specs, plug-ins and functions (a
    :class:`ModelSpec` of one too, unless built in) run in a child process with ``timeout`` seconds per run (a
    function in a forked one, :class:`~.sandbox.IsolatedModel`).
    """
    if where is None:
        where, key_name = argument_label(spec, python_name)
        timeout_name = "--model-timeout" if where == "(command line)" else "model_timeout"
    else:
        key_name, timeout_name = key_name or "--model", "--model-timeout"
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not math.isfinite(timeout) \
            or timeout <= 0:  # checked for a built-in model too: a wrong time limit is wrong whatever it limits
        raise InputError(where, timeout_name, f"must be a positive number of seconds, got {timeout!r}",
                         f"e.g. {timeout_name} {DEFAULT_TIMEOUT:g}" if timeout_name.startswith("--") else
                         f"e.g. model_timeout={DEFAULT_TIMEOUT:g}")
    if isinstance(spec, ModelSpec):
        if spec.builtin or isinstance(spec.fn, IsolatedModel):
            return spec
        return replace(spec, fn=_forked(spec.key, spec.fn, timeout))
    if isinstance(spec, str):
        spec = str(spec)  # a command line's FlagValue: plain text from here on
    if isinstance(spec, str) and spec in BUILTIN:
        return BUILTIN[spec]
    if callable(spec):
        if hasattr(spec, "__name__"):
            name = f"{getattr(spec, '__module__', '?')}:{spec.__name__}"
        else:  # an object with __call__ (a functools.partial): by its class, not its address (the same every run)
            name = f"{type(spec).__module__}:{type(spec).__qualname__}"
        return ModelSpec(name, name, _forked(name, spec, timeout))
    if not isinstance(spec, str):
        raise InputError(where, key_name, f"{spec!r} is not a model name", _FIX_SPEC)
    if ":" not in spec:
        eps = entry_point_models(timeout)
        if spec in eps:
            return eps[spec]
        raise InputError(where, key_name, f"unknown model {spec!r}",
                         f"use package.module:function, an installed plug-in, or one of: {', '.join(BUILTIN)}")
    _check_spec(spec, where, key_name)
    try:
        source, name = probe(spec, timeout)
    except SandboxError as exc:
        module = spec.rpartition(":")[0]
        shows = f"python {module}" if module.endswith(".py") else f"python -c 'import {module}'"
        raise InputError(where, key_name, f"model {spec!r}: {exc}",
                         exc.fix or f"fix the model's file ({shows} shows the same error)") from None
    return ModelSpec(spec, name, IsolatedModel(spec, source, timeout, tuple(sys.path)))


def _forked(name: str, fn: Callable[..., pd.DataFrame], timeout: float) -> IsolatedModel:
    """A Python function as a model run in a forked child (``timeout`` seconds per run), keyed by its file."""
    try:
        src = inspect.getsourcefile(fn)
    except TypeError:
        src = None
    return IsolatedModel(name, src, timeout, fn=fn)


def resolve_all(specs: Sequence[str | Callable[..., pd.DataFrame] | ModelSpec], where: str | None = None,
                key_name: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                python_name: str = "models") -> list[ModelSpec]:
    """:func:`resolve` of each spec, duplicates (the same model twice) dropped.

    Two different models with one key (two lambdas, or two closures of one factory: ``module:name`` each) are an
    :class:`~waitlab.errors.InputError` naming the argument (a row or result per key: one would be dropped).
    """
    check_model_list(specs, where, key_name, python_name)
    out: dict[str, ModelSpec] = {}
    for s in specs:
        if isinstance(s, str) and s in out:
            continue
        m = resolve(s, where, key_name, timeout, python_name)
        if m.key in out and not _same(out[m.key], m):
            w, k = (where, key_name or python_name) if where is not None else argument_label(s, python_name)
            raise InputError(w, k, f"two different models are both named {m.key!r}",
                             "give each model a distinct name: a def of its own, or a ModelSpec(key, name, fn)")
        out.setdefault(m.key, m)
    return list(out.values())


def check_model_list(specs: object, where: str | None = None, key_name: str | None = None,
                     python_name: str = "models") -> None:
    """Refuse ``specs`` that are not a list of models (one text would be read letter by letter): an
    :class:`~waitlab.errors.InputError` naming ``where`` and ``key_name``, else the Python argument ``python_name``.

    >>> check_model_list(["cwpdm"])
    >>> check_model_list("cwpdm")
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: (python call): models: must be a list of models, got str 'cwpdm' (fix: e.g. \
models=['cwpdm'])
    """
    if isinstance(specs, str | bytes) or not isinstance(specs, Sequence):
        label = where if where is not None else "(python call)"
        raise InputError(label, key_name or python_name, f"must be a list of models, got {type(specs).__name__} "
                         f"{str(specs)[:80]!r}", f"e.g. {python_name}=[{str(specs)[:40]!r}]"
                         if isinstance(specs, str) else f"e.g. {python_name}=['cwpdm', 'mymodels:blame_zero']")


def _same(a: ModelSpec, b: ModelSpec) -> bool:
    """Whether two specs are the same model: one function (a Python function: the very object) and options."""
    def fn(m: ModelSpec) -> Any:
        return m.fn.fn if isinstance(m.fn, IsolatedModel) and m.fn.fn is not None else m.fn
    try:
        return bool(fn(a) == fn(b) and a.detail == b.detail and a.options == b.options)
    except ValueError:  # options holding arrays
        return False


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


_TRUTH_READ = re.compile(r"KeyError: '(" + "|".join(TRUTH_COLUMNS) + r")'|has no attribute 'ops'")


def hint(message: str) -> str:
    """``message`` with a pointer to the protocol when the model read what a measured trace does not hold."""
    if _TRUTH_READ.search(message):
        return (message + "; a model reads what a measured trace holds: no injected causes (cause, excess) and no "
                "cause ledger (run.ops), see docs/workbench.md")
    return message


def model_input(spec: ModelSpec, run: RunData) -> RunData:
    """The run a model is given: ``run`` itself for a built-in model (waitlab's code, which changes no table: they
    share what is derived from it, :attr:`RunData.index`) and a user's model in its own process (which gets the
    tables pickled), else a copy of its own (:meth:`RunData.copy`): what a function handed to the API changes in its
    tables changes nothing for the other models, nor for the checks of its output."""
    return run if spec.builtin or isinstance(spec.fn, IsolatedModel) else run.copy()


def run_model(spec: ModelSpec, run: RunData, *, memory: bool = False, **options: Any) -> ModelRun:
    """Run one model on ``run``; :class:`ModelFailure` (naming the model) if it raises or returns garbage.

    A user's model (a spec, a plug-in or a function, as :func:`resolve` makes them: :class:`~.sandbox.IsolatedModel`)
    runs in a child process: its exit, crash, time limit or exception is a :class:`ModelFailure` too (naming the
    model's file).  A function of a :class:`ModelSpec` not made by :func:`resolve` runs here, on a copy of the
    tables (:func:`model_input`); its exceptions, ``sys.exit`` included (not Ctrl-C), are a :class:`ModelFailure`.
    Its output is checked against the run as it was given.
    """
    opts = {**spec.options, **options}
    try:
        if spec.detail is not None and spec.frame is not None:
            detail, frame_of = spec.detail, spec.frame
            result, sec, peak = measure(lambda: detail(run, **opts), memory)
            frame = frame_of(result, run, opts)
        elif isinstance(spec.fn, IsolatedModel):
            frame, sec, peak = spec.fn.measure(run, opts, memory)
            result = None
        else:
            fn, own = spec.fn, [model_input(spec, run) for _ in range(1 + memory)]  # a second call with memory
            frame, sec, peak = measure(lambda: fn(own.pop(), **opts), memory)
            result = None
    except SandboxError as exc:
        src = spec.fn.source if isinstance(spec.fn, IsolatedModel) else None
        where = f" ({src})" if src and Path(src).name not in str(exc) else ""
        raise ModelFailure(hint(f"model {spec.key!r} {exc}{where}")) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a function given through the API may raise (or exit): report it, keep the others
        raise ModelFailure(hint(f"model {spec.key!r} {describe_exception(exc)}")) from None
    problems = blame_problems(frame, run)
    if problems:
        raise ModelFailure(f"model {spec.key!r} returned a table the protocol does not allow: " + "; ".join(problems))
    out = normalise(frame)
    metric = str(out.attrs.get("explains", "total_wait"))
    if "explains_wait" in out.attrs:
        denom = float(out.attrs["explains_wait"])
    else:  # the run's own figure of the wait the model says it explains
        denom = run.total_wait if metric == "total_wait" else metric_value(wait_metrics(run.events, run.waits), metric)
    return ModelRun(spec.key, spec.name, metric, out, sec, peak, denom, result)


__all__ = ["BUILTIN", "DEFAULT_DIAGNOSE", "DEFAULT_TIMEOUT", "ENTRY_POINT_GROUP", "ModelFailure", "ModelRun",
           "ModelSpec", "check_model_list", "entry_point_models", "hint", "model_input", "resolve", "resolve_all",
           "run_model"]
