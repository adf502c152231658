"""A module's names imported from other modules on first use (PEP 562): :mod:`waitlab` takes the API's names from
:mod:`waitlab.api` this way, and :mod:`waitlab.api` its tools and studies from :mod:`waitlab.api_results` and
:mod:`waitlab.api_studies`.

>>> import types
>>> m = types.ModuleType("m")
>>> m.__dict__.update(__all__=["here", "dumps"], here=1)
>>> m.__getattr__, m.__dir__, lazy = lazy_attributes(vars(m), "json")
>>> sorted(lazy), m.dumps([1]), "dumps" in vars(m), "dumps" in dir(m)
(['dumps'], '[1]', True, True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping
from typing import Any


def lazy_attributes(namespace: MutableMapping[str, Any], *sources: str
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]], frozenset[str]]:
    """``__getattr__`` and ``__dir__`` for the module whose globals are ``namespace``, and the names they serve.

    The names of the module's ``__all__`` that are not in ``namespace`` yet are taken when first used from the first
    of the modules ``sources`` whose ``__all__`` has them (a source is imported only when the sources before it do not
    have the name), then kept in ``namespace`` (later uses are plain attribute reads).  Any other missing name raises
    :class:`AttributeError` as usual.
    """
    module = namespace["__name__"]
    lazy = frozenset(namespace["__all__"]) - set(namespace)

    def __getattr__(name: str) -> Any:
        if name not in lazy:
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
