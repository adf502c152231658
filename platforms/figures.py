"""Sourced figures: one number of a platform file with its provenance, and the reader that checks them.

Every number of a platform file is an inline table ``{ value, source }`` or ``{ value, assumed = true,
reason }`` (see :mod:`waitlab.platforms.model` for the file format).  :class:`FigureReader` validates
them and collects a :class:`Figure` per number, in file order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waitlab.errors import InputError, unknown_name

__all__ = ["MAX_CORES", "MAX_LATENCY", "MIN_BANDWIDTH", "MIN_CORE_SPEED", "Figure", "FigureReader", "bandwidth",
           "core_count", "core_speed", "latency", "non_negative", "positive"]


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
#: Simulated times are int64 nanoseconds in the results (events, trace.json): they end at 2^63 ns = 9.22e9 s.
CLOCK_END_SECONDS = 2**63 / 1e9
#: Largest message SimGrid 3.32's replay takes (bytes): it reads a size as a C ``int``
#: (``waitlab.experiments.physics_limits.MAX_MESSAGE_BYTES``).
LARGEST_MESSAGE = 2**31 - 1
#: Smallest bandwidth accepted (B/s).  The largest message, 2^31 - 1 bytes, takes 2.1e9 s at 1 B/s, below the
#: 9.22e9 s where the int64-nanosecond clock ends; below 0.23 B/s that one message alone would pass it.
MIN_BANDWIDTH = 1.0
#: Largest latency or per-message overhead accepted (s).  The slowest path a platform describes (a disk, a
#: wide-area link) has a latency below 1 s; 1e3 s is a thousand times that, the cap [tracing] disk_latency has, and
#: still lets 9.2 million latency-bound messages follow each other on one rank before the clock ends.
MAX_LATENCY = 1e3
#: Smallest core speed accepted (flop/s).  A compute of t seconds reaches SimGrid as t x core_speed flops, and its
#: solver drops work below maxmin/precision x surf/precision (solver_precision <= 0.1 by the schema): a compute
#: as long as the timing precision keeps its work when core_speed >= solver_precision, so >= 0.1 flop/s; and the
#: flops SimGrid charges as they are (a reduction's allreduce_flops, 1 by default) take at most 1 s each at 1 flop/s.
MIN_CORE_SPEED = 1.0
#: Most rank slots per node: SimGrid 3.32 reads a host's ``core`` count with ``std::stoi`` (a C ``int``).
MAX_CORES = 2**31 - 1


def positive(v: float) -> str:
    return "" if 0 < v <= MAX_FIGURE else f"must be > 0, got {v!r}" if v <= 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


def non_negative(v: float) -> str:
    return "" if 0 <= v <= MAX_FIGURE else f"must be >= 0, got {v!r}" if v < 0 else \
        f"must be <= {MAX_FIGURE:g}, got {v!r}"


def latency(v: float) -> str:
    """A latency or per-message time in s: 0 .. :data:`MAX_LATENCY`."""
    if v < 0:
        return non_negative(v)
    return "" if v <= MAX_LATENCY else \
        f"must be <= {MAX_LATENCY:g} s, got {v!r} (longer times leave the int64-nanosecond clock of the results)"


def bandwidth(v: float) -> str:
    """A bandwidth in B/s: :data:`MIN_BANDWIDTH` .. :data:`MAX_FIGURE`."""
    if v <= 0:
        return positive(v)
    if v < MIN_BANDWIDTH:
        return (f"must be >= {MIN_BANDWIDTH:g} B/s, got {v!r} (slower, the largest message SimGrid's replay takes, "
                f"{LARGEST_MESSAGE} bytes, would take more than {LARGEST_MESSAGE / MIN_BANDWIDTH:.3g} s of the "
                f"{CLOCK_END_SECONDS:.3g} s the int64-nanosecond clock of the results holds)")
    return positive(v)


def core_speed(v: float) -> str:
    """A core speed in flop/s: :data:`MIN_CORE_SPEED` .. :data:`MAX_FIGURE`."""
    if v <= 0:
        return positive(v)
    if v < MIN_CORE_SPEED:
        return (f"must be >= {MIN_CORE_SPEED:g} flop/s, got {v!r} (SimGrid drops the work of short computes "
                "and a 1-flop reduction would take over 1 s)")
    return positive(v)


def core_count(v: float) -> str:
    """Rank slots of a node: 1 .. :data:`MAX_CORES`."""
    if v < 1:
        return positive(v)
    return "" if v <= MAX_CORES else f"must be <= {MAX_CORES}, got {v!r} (SimGrid reads a host's core count as a C int)"


#: Unit prefixes a figure written as text may use (decimal and binary).
_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 2.0**10, "Mi": 2.0**20,
             "Gi": 2.0**30, "Ti": 2.0**40, "m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "n": 1e-9}
#: Units a figure written as text may use: unit -> (the SI unit of the file, factor to it); longest first.
_UNITS = {"bit/s": ("bytes/s", 1 / 8), "flop/s": ("flop/s", 1.0), "flops": ("flop/s", 1.0), "B/s": ("bytes/s", 1.0),
          "b/s": ("bytes/s", 1 / 8), "Bps": ("bytes/s", 1.0), "bps": ("bytes/s", 1 / 8), "B": ("bytes", 1.0),
          "s": ("s", 1.0)}
_QUANTITY = re.compile(r"^\s*(?P<n>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>\S*)\s*$")


def si_unit(dotted: str, check: Callable[[float], str]) -> str:
    """The SI unit a figure is written in (``""`` for a count)."""
    by_check = {bandwidth: "bytes/s", latency: "s", core_speed: "flop/s", core_count: ""}
    if check in by_check:
        return by_check[check]
    key = dotted.rsplit(".", 1)[-1]
    for word, unit in (("bandwidth", "bytes/s"), ("latency", "s"), ("overhead", "s"), ("speed", "flop/s"),
                       ("memory", "bytes")):
        if word in key:
            return unit
    return ""


def _toml_number(v: float) -> str:
    """``v`` as a short TOML number that reads back exactly: 1.25e9, 4e-7, 17179869184."""
    text = re.sub(r"e(-?)0*(\d)", r"e\1\2", f"{v:.6g}".replace("e+", "e"))
    if float(text) == v:
        return text
    return str(int(v)) if v.is_integer() and abs(v) < 1e18 else repr(v)


def si_value(text: str, unit: str) -> float | None:
    """``text`` such as ``"10 Gb/s"`` in ``unit`` (bytes/s: 1.25e9), or None when it is no quantity of that unit."""
    m = _QUANTITY.match(text)
    if m is None:
        return None
    number, written = float(m.group("n")), m.group("unit")
    if not written:
        return number
    for name, (si, factor) in _UNITS.items():
        if written.endswith(name) and written[:-len(name)] in _PREFIXES and si == unit:
            return number * factor * _PREFIXES[written[:-len(name)]]
    return None


def number_hint(key: str, entry: Any, unit: str) -> str:
    """How to write the figure ``entry`` (text, say ``"10 Gb/s"``) as the plain SI number a platform file holds."""
    in_unit = f" in {unit}" if unit else ""
    value = si_value(entry, unit) if isinstance(entry, str) else None
    if value is None:
        return (f"write {key} = {{ value = <a plain number{in_unit}>, source = \"...\" }} (a TOML number, no "
                f"quotes or units), or {{ value = ..., assumed = true, reason = \"...\" }}")
    num = _toml_number(value)
    written = _QUANTITY.match(entry) if isinstance(entry, str) else None
    converted = f" ({entry.strip()!r} is {num} {unit})" if unit and written and written["unit"] else ""
    return (f"write {key} = {{ value = {num}, source = \"...\" }}: a plain TOML number in SI units{converted}, or "
            f"{{ value = {num}, assumed = true, reason = \"...\" }}")


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
                raise unknown_name(self.file, f"{name}.{key}", key, allowed,
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
            plain = isinstance(entry, int | float) and not isinstance(entry, bool)
            raise InputError(self.file, dotted, f"must be a table with value and source, got {entry!r}",
                             f"write {key} = {{ value = {entry!r}, source = \"...\" }} or {{ value = {entry!r}, "
                             "assumed = true, reason = \"...\" }" if plain else
                             number_hint(key, entry, si_unit(dotted, check)))
        for k in entry:
            if k not in ("value", "source", "assumed", "reason"):
                raise unknown_name(self.file, f"{dotted}.{k}", k, ("value", "source", "assumed", "reason"),
                                   "a figure has only: value, source, assumed, reason")
        if "value" not in entry:
            raise InputError(self.file, f"{dotted}.value", "is missing", f"write {example}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            unit = si_unit(dotted, check)
            num = si_value(value, unit) if isinstance(value, str) else None
            raise InputError(self.file, f"{dotted}.value", f"must be a number, got {value!r}",
                             f"write value = {_toml_number(num)}: a plain TOML number in SI units"
                             + (f" ({unit})" if unit else "") if num is not None else
                             "write a plain TOML number in SI units" + (f" ({unit})" if unit else "") + ", e.g. 7.6e9")
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
            bound = re.match(r"must be (.+?), got", problem)
            raise InputError(self.file, f"{dotted}.value", problem,
                             f"give a value {bound.group(1)}" if bound else "write a value in the allowed range")
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
