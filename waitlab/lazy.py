"""Modules and names imported on first use.

:func:`lazy_attributes` serves a module's names from other modules (PEP 562): :mod:`waitlab` takes the API's names
from :mod:`waitlab.api` this way, and :mod:`waitlab.api` its tools and studies from :mod:`waitlab.api_results` and
:mod:`waitlab.api_studies`.  :class:`Deferred` is a module named at the top of the one that uses it and imported on
the first use of one of its attributes (the modules a run needs only after its SMPI stage).

>>> import types
>>> m = types.ModuleType("m")
>>> m.__dict__.update(__all__=["here", "dumps"], here=1)
>>> m.__getattr__, m.__dir__, lazy = lazy_attributes(vars(m), "json")
>>> sorted(lazy), m.dumps([1]), "dumps" in vars(m), "dumps" in dir(m)
(['dumps'], '[1]', True, True)
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, MutableMapping
from typing import Any


def lazy_attributes(namespace: MutableMapping[str, Any], *sources: str
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]], frozenset[str]]:
    """``__getattr__`` and ``__dir__`` for the module whose globals are ``namespace``, and the names they serve.

    The names of the module's ``__all__`` that are not in ``namespace`` yet are taken when first used from the first
    of the modules ``sources`` whose ``__all__`` has them (a source is imported only when the sources before it do not
    have the name), then kept in ``namespace`` (later uses are plain attribute reads).  A missing name that is one of
    the module's submodules is imported, as ``import waitlab.api`` would (``import waitlab`` then ``waitlab.api``
    works, as it does for a package without ``__getattr__`` once something imported the submodule).  Any other
    missing name raises :class:`AttributeError` as usual.
    """
    module = namespace["__name__"]
    lazy = frozenset(namespace["__all__"]) - set(namespace)

    def __getattr__(name: str) -> Any:
        if name not in lazy:
            if ("__path__" in namespace and not name.startswith("__")
                    and importlib.util.find_spec(f"{module}.{name}") is not None):
                return importlib.import_module(f"{module}.{name}")  # binds it in namespace too
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        for source in sources:
            owner = importlib.import_module(source)
            if name in getattr(owner, "__all__", ()):
                value = getattr(owner, name)
                namespace[name] = value
                return value
        raise AttributeError(f"module {module!r} has no attribute {name!r} (not in {', '.join(sources)})")

    def __dir__() -> list[str]:
        return sorted({*namespace, *lazy})

    return __getattr__, __dir__, lazy


class Deferred:
    """A module imported by :func:`importlib.import_module` when one of its attributes is first read: the normal
    import, on the thread that asks first (a module imported already is simply used).

    Declare it at the top of the module that uses it, beside an ``if TYPE_CHECKING:`` import of the same module under
    the same name, so that type checkers and readers see the real module:

    Its ``__name__`` is the module's, read without importing it:

    >>> import sys
    >>> sys.modules.pop("colorsys", None) and None
    >>> colorsys = Deferred("colorsys")
    >>> colorsys.__name__, "colorsys" in sys.modules
    ('colorsys', False)
    >>> round(colorsys.rgb_to_hsv(1.0, 0.0, 0.0)[2], 1), "colorsys" in sys.modules
    (1.0, True)
    """

    __slots__ = ("__name__",)

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)

    def __repr__(self) -> str:
        return f"Deferred({self.__name__!r})"
