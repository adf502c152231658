"""A sweep grid's platforms, checked before anything runs, and its values written readably into the tables (its
dotted keys, whose parts may be quoted, are :func:`waitlab.experiments.scenario.split_key`'s).

>>> shown({"smpi/allreduce": "rdb"}), shown([1, 2]), shown(0.5)
('smpi/allreduce=rdb', '[1, 2]', 0.5)
>>> label((("application.message_bytes", True), ("platform.name", "wu_cluster")))
'application.message_bytes=true, platform.name=wu_cluster'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from waitlab.errors import InputError, WaitlabError
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.experiments.scenario import split_key
from waitlab.platforms import list_platforms, load_platform

__all__ = ["builtin_file", "check_keys", "check_platforms", "label", "shown", "spelled"]


def shown(value: Any) -> Any:
    """A grid value as the tables (sweep.csv, failed.csv, plot legends) show it: a table as ``key=value`` pairs,
    a list in brackets, anything else as it is."""
    if isinstance(value, Mapping):
        return " ".join(f"{k}={shown(v)}" for k, v in value.items()) if value else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(shown(v)) for v in value) + "]"
    return value


def spelled(value: Any) -> Any:
    """A grid value as a message names it: :func:`shown`, with ``true`` and ``false`` spelled as in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={spelled(v)}" for k, v in value.items()) if value else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(spelled(v)) for v in value) + "]"
    return value


def label(values: Iterable[tuple[str, Any]]) -> str:
    """A grid point as messages and the progress lines name it: ``key=value, ...`` (:func:`spelled`)."""
    return ", ".join(f"{k}={spelled(v)}" for k, v in values)


def check_keys(keys: Iterable[str], file: str) -> None:
    """Refuse two grid keys that set the same setting: one names a table (or list) the other reaches into, or both
    name the same key spelled two ways.  The later key would overwrite the earlier one's value at every point, whose
    row would show a value that was not used.

    >>> check_keys(["simulation.config.smpi/allreduce", "application.imbalance[0].magnitude"], "s.toml")
    >>> try:
    ...     check_keys(["simulation.config.smpi/allreduce", "simulation.config"], "s.toml")
    ... except InputError as exc:
    ...     print(exc.problem.split(" set ")[0])
    the keys 'simulation.config.smpi/allreduce' and 'simulation.config'
    """
    seen: list[tuple[str, list[tuple[str, int | None]]]] = []
    for key in keys:
        parts = split_key(key, file)
        for other, before in seen:
            if not (_covers(before, parts) or _covers(parts, before)):
                continue
            outer, inner = (other, key) if _covers(before, parts) else (key, other)
            how = "(the same key, spelled two ways)" if before == parts else f"({outer!r} holds {inner!r})"
            raise InputError(file, "grid", f"the keys {other!r} and {key!r} set the same setting {how}: the later "
                             "key would overwrite the earlier one's value at every point", "keep one of the two keys")
        seen.append((key, parts))


def _covers(a: list[tuple[str, int | None]], b: list[tuple[str, int | None]]) -> bool:
    """Whether the key of parts ``a`` sets what the key of parts ``b`` sets: the same key, or a table or list that
    holds it (``application.imbalance`` holds ``application.imbalance[0].magnitude``)."""
    n = len(a)
    if n > len(b) or a[:-1] != b[:n - 1] or a[-1][0] != b[n - 1][0]:
        return False
    return a[-1][1] is None or a[-1][1] == b[n - 1][1]


def builtin_file(name: str) -> str | None:
    """The built-in platform whose own data file a grid's platform file ``name`` is, else None: the built-in name
    and that path are two values that mean the same platform.  (A copy of the file elsewhere is a file of its own,
    which may be edited while a sweep runs: it is not taken for the built-in.)"""
    if not is_platform_path(name):
        return None
    try:
        path = Path(name).resolve()
    except (OSError, RuntimeError):
        return None
    return _builtin_files().get(path)


@functools.cache
def _builtin_files() -> dict[Path, str]:
    """The data files of the built-in platforms (resolved paths) and their names."""
    data = Path(str(resources.files("waitlab.platforms") / "data"))
    return {(data / f"{name}.toml").resolve(): name for name in list_platforms()}


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
