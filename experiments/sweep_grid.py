"""A sweep grid's platforms, checked before anything runs, and its values written readably into the tables (its
dotted keys, whose parts may be quoted, are :func:`waitlab.experiments.scenario.split_key`'s).

>>> shown({"smpi/allreduce": "rdb"}), shown([1, 2]), shown(0.5)
('smpi/allreduce=rdb', '[1, 2]', 0.5)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from waitlab.errors import InputError, WaitlabError
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.platforms import load_platform

__all__ = ["check_platforms", "shown"]


def shown(value: Any) -> Any:
    """A grid value as the tables (sweep.csv, failed.csv, plot legends) show it: a table as ``key=value`` pairs,
    a list in brackets, anything else as it is."""
    if isinstance(value, Mapping):
        return " ".join(f"{k}={shown(v)}" for k, v in value.items()) if value else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(shown(v)) for v in value) + "]"
    return value


def check_platforms(points: list[tuple[str, str]], file: str, read: Mapping[str, bytes] | None = None) -> None:
    """Load every distinct platform file of the grid (``points``: each point's label and ``platform.name``) once:
    one that is not valid is refused before anything runs, naming the first point that uses it.  ``read``: the
    files' bytes as the sweep read them (what its points simulate), by path."""
    seen: set[str] = set()
    for label, name in points:
        if name in seen or not is_platform_path(name):
            continue
        seen.add(name)
        try:
            load_platform(name, content=(read or {}).get(name))
        except InputError as exc:  # the platform file's own problem and fix
            raise InputError(file, f"grid ({label})", f"makes an invalid scenario: {exc.file}: {exc.field}: "
                             f"{exc.problem}", f"{exc.fix or 'fix that platform file'}, or change that grid value"
                             ) from None
        except WaitlabError as exc:
            raise InputError(file, f"grid ({label})", f"makes an invalid scenario: {exc}",
                             "fix that platform file, or change that grid value") from None
