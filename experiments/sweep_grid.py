"""A sweep grid's keys and values: dotted keys whose parts may be quoted (``simulation.config."smpi/allreduce"``),
the grid's platforms checked before anything runs, and values written readably into the tables.

>>> split_key('simulation.config."smpi/allreduce"', "s.toml")
[('simulation', None), ('config', None), ('smpi/allreduce', None)]
>>> split_key("application.imbalance[0].magnitude", "s.toml")
[('application', None), ('imbalance', 0), ('magnitude', None)]
>>> shown({"smpi/allreduce": "rdb"}), shown([1, 2]), shown(0.5)
('smpi/allreduce=rdb', '[1, 2]', 0.5)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from waitlab.errors import InputError, WaitlabError
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.experiments.schema import SECTIONS
from waitlab.platforms import load_platform

__all__ = ["check_platforms", "set_grid_key", "shown", "split_key"]

_INDEX = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<i>\d+)\])?$")
#: A bare key part beyond names: a free key of a table such as ``simulation.config`` (``smpi/allreduce``).
_BARE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_/:+-]*$")
_FIX = ('write keys like "noise.duration", "application.imbalance[0].magnitude" or, for a key holding dots or '
        "other characters, quote that part: 'simulation.config.\"smpi/allreduce\"'")


def split_key(key: str, file: str) -> list[tuple[str, int | None]]:
    """The parts of a dotted grid key: ``(name, list index or None)``; a part in quotes is taken as it is."""
    parts: list[tuple[str, int | None]] = []
    i, n = 0, len(key)
    while True:
        if i < n and key[i] in "\"'":
            end = key.find(key[i], i + 1)
            if end < 0:
                raise InputError(file, key, f"the quote opened at character {i + 1} is not closed", _FIX)
            name = key[i + 1:end]
            if not name:
                raise InputError(file, key, "has an empty quoted part", _FIX)
            parts.append((name, None))
            i = end + 1
        else:
            end = key.find(".", i)
            end = n if end < 0 else end
            part = key[i:end].strip()
            m = _INDEX.match(part)
            if m is not None:
                parts.append((m.group("key"), None if m.group("i") is None else int(m.group("i"))))
            elif _BARE.match(part) and parts:
                parts.append((part, None))
            else:
                raise InputError(file, key, f"cannot read key part {part!r}", _FIX)
            i = end
        if i >= n:
            return parts
        if key[i] != ".":
            raise InputError(file, key, f"expected a dot after the quoted part, got {key[i]!r}", _FIX)
        i += 1


def set_grid_key(data: dict[str, Any], key: str, value: Any, file: str) -> None:
    """Set the scenario key ``key`` (a grid key, :func:`split_key`) of ``data`` to ``value``."""
    parts = split_key(key, file)
    if parts[0][0] not in SECTIONS or parts[0][1] is not None:
        raise InputError(file, key, f"{parts[0][0]!r} is not a scenario section",
                         f"start the key with one of: {', '.join(SECTIONS)}")
    node: Any = data
    for n, (name, idx) in enumerate(parts):
        last = n == len(parts) - 1
        if idx is None:
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, {})
                if not isinstance(node, dict):
                    raise InputError(file, key, f"{name} is not a table", "check the key")
            continue
        seq = node.get(name)
        if not isinstance(seq, list) or idx >= len(seq):
            raise InputError(file, key, f"{name}[{idx}] does not exist in the base scenario",
                             f"the base scenario has {len(seq) if isinstance(seq, list) else 0} entries")
        if last:
            seq[idx] = value
        else:
            node = seq[idx]


def shown(value: Any) -> Any:
    """A grid value as the tables (sweep.csv, failed.csv, plot legends) show it: a table as ``key=value`` pairs,
    a list in brackets, anything else as it is."""
    if isinstance(value, Mapping):
        return " ".join(f"{k}={shown(v)}" for k, v in value.items()) if value else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(shown(v)) for v in value) + "]"
    return value


def check_platforms(points: list[tuple[str, str]], file: str) -> None:
    """Load every distinct platform file of the grid (``points``: each point's label and ``platform.name``) once:
    one that is not valid is refused before anything runs, naming the first point that uses it."""
    seen: set[str] = set()
    for label, name in points:
        if name in seen or not is_platform_path(name):
            continue
        seen.add(name)
        try:
            load_platform(name)
        except InputError as exc:  # the platform file's own problem and fix
            raise InputError(file, f"grid ({label})", f"makes an invalid scenario: {exc.file}: {exc.field}: "
                             f"{exc.problem}", f"{exc.fix or 'fix that platform file'}, or change that grid value"
                             ) from None
        except WaitlabError as exc:
            raise InputError(file, f"grid ({label})", f"makes an invalid scenario: {exc}",
                             "fix that platform file, or change that grid value") from None
