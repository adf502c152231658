"""Every waitlab exception survives pickling (a worker's error must reach the sweep, not kill the pool).

The exception classes are discovered, not listed: every module of the package is imported and every subclass
of ``BaseException`` defined in it is built from sample arguments, pickled and compared.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from typing import Any

import pytest

import waitlab


def _all_modules() -> None:
    for info in pkgutil.walk_packages(waitlab.__path__, "waitlab."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # optional dependencies (e.g. OTF2 bindings): their errors cannot occur either
            continue


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _waitlab_errors() -> list[type[BaseException]]:
    _all_modules()
    found = {c for c in _subclasses(BaseException) if c.__module__.startswith("waitlab.")}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _sample(annotation: Any, name: str) -> Any:
    text = str(annotation)
    if "tuple" in text:
        return ()
    if "float" in text:
        return 1.5
    if "int" in text:
        return 3
    return f"{name}-value"


def _build(cls: type[BaseException]) -> BaseException:
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return cls(*(_sample(p.annotation, p.name) for p in params))


ERRORS = _waitlab_errors()


def test_the_walk_finds_the_known_errors() -> None:
    names = {c.__name__ for c in ERRORS}
    assert {"InputError", "SimulationError", "EnvironmentProblem", "DeadlockError", "ConfigKeyError",
            "ParamError", "FieldProblem"} <= names


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_error_survives_pickle(cls: type[BaseException]) -> None:
    exc = _build(cls)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc)
    assert back.args == exc.args
    assert back.__dict__ == exc.__dict__
