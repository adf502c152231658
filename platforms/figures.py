"""Sourced figures: one number of a platform file with its provenance, and the reader that checks them.

Every number of a platform file is an inline table ``{ value, source }`` or ``{ value, assumed = true,
reason }`` (see :mod:`waitlab.platforms.model` for the file format).  :class:`FigureReader` validates
them and collects a :class:`Figure` per number, in file order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waitlab.errors import InputError

__all__ = ["Figure", "FigureReader", "non_negative", "positive"]


@dataclass(frozen=True)
class Figure:
    """One number of a platform file and where it comes from.

    Attributes
    ----------
    key : str
        Dotted key in the file, e.g. ``"node.core_speed"``.
    value : float
        The number (SI units).
    source : str
        Where it comes from; ``""`` when assumed.
    assumed : bool
        True when the number is an assumption.
    reason : str
        Why the assumption is reasonable; ``""`` when sourced.
    """

    key: str
    value: float
    source: str
    assumed: bool
    reason: str

    @property
    def provenance(self) -> str:
        """``source`` or ``"assumed: <reason>"``."""
        return f"assumed: {self.reason}" if self.assumed else self.source



#: Largest figure accepted (flop/s, bytes, B/s, s): anything above is a typo, and SimGrid's doubles overflow.
MAX_FIGURE = 1e18


def positive(v: float) -> str:
    return "" if 0 < v <= MAX_FIGURE else f"must be > 0, got {v!r}" if v <= 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


def non_negative(v: float) -> str:
    return "" if 0 <= v <= MAX_FIGURE else f"must be >= 0, got {v!r}" if v < 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


class FigureReader:
    """Reads sourced figures out of parsed TOML, collecting their provenance.

    ``sections`` maps each allowed section to its allowed keys.
    """

    def __init__(self, data: Mapping[str, Any], file: str, sections: Mapping[str, tuple[str, ...]]) -> None:
        self.data = data
        self.file = file
        self.sections = sections
        self.figures: list[Figure] = []

    def section(self, name: str) -> Mapping[str, Any]:
        if name not in self.data:
            raise InputError(self.file, name, "section is missing",
                             f"add [{name}] with keys: {', '.join(self.sections[name])}")
        sec = self.data[name]
        if not isinstance(sec, Mapping):
            raise InputError(self.file, name, f"must be a table, got {type(sec).__name__}", f"write it as [{name}]")
        allowed = self.sections[name]
        for key in sec:
            if key not in allowed:
                raise InputError(self.file, f"{name}.{key}", "unknown key",
                                 f"allowed keys in [{name}]: {', '.join(allowed)}")
        return sec

    def number(self, section: str, key: str, *, integer: bool = False,
               check: Callable[[float], str] = positive, required: bool = True) -> float | None:
        sec = self.section(section)
        dotted = f"{section}.{key}"
        example = f'{key} = {{ value = ..., source = "Author et al. §x table y" }}'
        if key not in sec:
            if not required:
                return None
            raise InputError(self.file, dotted, "is missing",
                             f"add {example} (or assumed = true, reason = \"...\") under [{section}]")
        return self.figure(dotted, sec[key], integer=integer, check=check)

    def figure(self, dotted: str, entry: Any, *, integer: bool = False,
               check: Callable[[float], str] = positive) -> float:
        """Validate one ``{ value, source | assumed + reason }`` table found at ``dotted``; record its provenance."""
        key = dotted.rsplit(".", 1)[-1]
        example = f'{key} = {{ value = ..., source = "Author et al. §x table y" }}'
        if not isinstance(entry, Mapping):
            raise InputError(self.file, dotted, f"must be a table with value and source, got {entry!r}",
                             f"write {key} = {{ value = {entry!r}, source = \"...\" }} "
                             f"or {{ value = {entry!r}, assumed = true, reason = \"...\" }}")
        for k in entry:
            if k not in ("value", "source", "assumed", "reason"):
                raise InputError(self.file, f"{dotted}.{k}", "unknown key",
                                 "a figure has only: value, source, assumed, reason")
        if "value" not in entry:
            raise InputError(self.file, f"{dotted}.value", "is missing", f"write {example}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(self.file, f"{dotted}.value", f"must be a number, got {value!r}",
                             "write a plain TOML number in SI units, e.g. 7.6e9")
        if not math.isfinite(value):
            raise InputError(self.file, f"{dotted}.value", f"must be finite, got {value!r}", "write a finite number")
        if integer:
            if float(value) != int(value):
                raise InputError(self.file, f"{dotted}.value", f"must be a whole number, got {value!r}",
                                 f"write e.g. {int(value)}")
            value = int(value)
        else:
            value = float(value)
        problem = check(value)
        if problem:
            raise InputError(self.file, f"{dotted}.value", problem, "write a value in the allowed range")
        source = entry.get("source", "")
        assumed = entry.get("assumed", False)
        reason = entry.get("reason", "")
        if not isinstance(source, str) or not isinstance(reason, str):
            raise InputError(self.file, dotted, "source and reason must be strings", 'write source = "..."')
        if not isinstance(assumed, bool):
            raise InputError(self.file, f"{dotted}.assumed", f"must be true or false, got {assumed!r}",
                             "write assumed = true")
        if assumed and source.strip():
            raise InputError(self.file, dotted, "has both a source and assumed = true",
                             "keep source (a sourced figure) or assumed = true with a reason, not both")
        if assumed and not reason.strip():
            raise InputError(self.file, f"{dotted}.reason", "an assumed figure needs a reason",
                             'add reason = "why this value is plausible"')
        if not assumed and not source.strip():
            raise InputError(self.file, dotted, "has neither a source nor assumed = true",
                             'add source = "Author et al. §x table y" or assumed = true, reason = "..."')
        if not assumed and reason.strip():
            raise InputError(self.file, f"{dotted}.reason", "reason is only for assumed figures",
                             "rename it to source, or add assumed = true")
        self.figures.append(Figure(dotted, float(value), source.strip(), assumed, reason.strip()))
        return float(value)

    def string(self, section: str | None, key: str, default: str | None = None) -> str:
        sec = self.data if section is None else self.section(section)
        dotted = key if section is None else f"{section}.{key}"
        if key not in sec:
            if default is None:
                raise InputError(self.file, dotted, "is missing", f'add {key} = "..."')
            return default
        v = sec[key]
        if not isinstance(v, str):
            raise InputError(self.file, dotted, f"must be a string, got {v!r}", f'write {key} = "..."')
        return v
