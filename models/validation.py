"""Frozen parameter dataclasses built from TOML-derived mappings, with field-path errors.

Model parameters are frozen dataclasses whose numeric fields carry their
bounds in the field metadata (see :func:`num`).  :func:`check_bounds` enforces
them in ``__post_init__``, so a bad value is rejected however the object was
made.  :func:`from_mapping` turns a TOML table into such a dataclass: it
rejects unknown keys, checks each value against the field's annotation,
converts lists to tuples and nested tables to nested dataclasses.  Every
problem is a :class:`ParamError` naming the offending key (``steps``,
``imbalance[2].magnitude``), which the caller turns into a
:class:`waitlab.errors.InputError` with the file name.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, kw_only=True)
... class P:
...     steps: int = num(10, ge=1)
...     sizes: tuple[int, ...] = ()
...     def __post_init__(self) -> None:
...         check_bounds(self)
>>> from_mapping(P, {"steps": 3, "sizes": [1, 2]})
P(steps=3, sizes=(1, 2))
>>> try:
...     from_mapping(P, {"steps": 0})
... except ParamError as e:
...     print(e)
steps: must be >= 1, got 0 (fix: set steps to 1 or more)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from waitlab.errors import problem_text

T = TypeVar("T")


class ParamError(ValueError):
    """A parameter value is invalid; ``key`` is its dotted path inside the table.

    Parameters
    ----------
    key : str
        Field path relative to the table being validated, e.g. ``"steps"`` or
        ``"imbalance[1].magnitude"``.
    problem : str
        What is wrong.
    fix : str
        What to write instead.

    Examples
    --------
    >>> str(ParamError("steps", "must be >= 1, got 0", "set steps = 1").within("imbalance[0]"))
    'imbalance[0].steps: must be >= 1, got 0 (fix: set steps = 1)'
    """

    def __init__(self, key: str, problem: str, fix: str = "") -> None:
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(problem_text(key, problem, fix))

    def within(self, prefix: str) -> ParamError:
        """The same error with ``prefix.`` in front of its key."""
        return ParamError(f"{prefix}.{self.key}" if self.key else prefix, self.problem, self.fix)


def num(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
        doc: str = "") -> Any:
    """A dataclass field with numeric bounds in its metadata (checked by :func:`check_bounds`)."""
    meta = {"ge": ge, "gt": gt, "le": le, "doc": doc}
    return dataclasses.field(default=default, metadata=meta)


def check_bounds(obj: Any) -> None:
    """Raise :class:`ParamError` for the first field of ``obj`` outside its bounds.

    Non-finite floats (nan, inf) are always rejected for bounded fields.
    """
    for f in dataclasses.fields(obj):
        meta = f.metadata
        if not meta or all(meta.get(k) is None for k in ("ge", "gt", "le")):
            continue
        value = getattr(obj, f.name)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ParamError(f.name, f"must be a finite number, got {value}", f"set {f.name} to a finite value")
        ge, gt, le = meta.get("ge"), meta.get("gt"), meta.get("le")
        if ge is not None and value < ge:
            raise ParamError(f.name, f"must be >= {_fmt(ge)}, got {value}", f"set {f.name} to {_fmt(ge)} or more")
        if gt is not None and value <= gt:
            raise ParamError(f.name, f"must be > {_fmt(gt)}, got {value}", f"set {f.name} to more than {_fmt(gt)}")
        if le is not None and value > le:
            raise ParamError(f.name, f"must be <= {_fmt(le)}, got {value}", f"set {f.name} to {_fmt(le)} or less")


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def describe_fields(cls: type) -> list[str]:
    """``name (type, default)`` strings of a dataclass's fields, for error messages."""
    return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def from_mapping(cls: type[T], data: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> T:
    """Build dataclass ``cls`` from ``data`` (a TOML table), validating keys and types.

    Parameters
    ----------
    cls : dataclass type
    data : mapping
        Keys are field names; values as :mod:`tomllib` produces them.
    skip : tuple of str
        Keys to ignore (e.g. ``kind``, which selects ``cls``).

    Raises
    ------
    ParamError
        Unknown key, wrong type, or a value the dataclass rejects.
    """
    if not isinstance(data, Mapping):
        raise ParamError("", f"expected a table, got {_show(data)}", "write a TOML table [..] or {key = value}")
    names = describe_fields(cls)
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in skip:
            continue
        if key not in names:
            raise ParamError(str(key), "unknown key", f"allowed keys: {', '.join(names)}")
        kwargs[key] = convert(value, hints[key], str(key))
    try:
        return cls(**kwargs)
    except ParamError:
        raise
    except (TypeError, ValueError) as exc:  # a check without a field path
        raise ParamError("", str(exc)) from exc


def convert(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp`` and convert it (lists -> tuples, tables -> dataclasses)."""
    origin = get_origin(tp)
    if tp is Any:
        return _freeze(value)
    if origin is Union or origin is types.UnionType:
        options = [a for a in get_args(tp) if a is not type(None)]
        errors = []
        for opt in options:
            try:
                return convert(value, opt, key)
            except ParamError as exc:
                errors.append(exc.problem)
        raise ParamError(key, f"expected {' or '.join(_type_name(o) for o in options)}, got {_show(value)}",
                         _example(options[0], key))
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
            raise ParamError(key, f"must be one of {', '.join(map(repr, allowed))}, got {_show(value)}",
                             f"write {key} = {allowed[0]!r}".replace("'", '"'))
        return value
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, list | tuple):
            raise ParamError(key, f"expected a list, got {_show(value)}", _example(tp, key))
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ParamError(key, f"expected a list of {len(args)} items, got {len(value)}", _example(tp, key))
        return tuple(convert(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, Mapping):
            raise ParamError(key, f"expected a table, got {_show(value)}", f"write [[...{key}]] entries as tables")
        try:
            return from_mapping(tp, value)
        except ParamError as exc:
            raise exc.within(key) from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamError(key, f"expected true or false, got {_show(value)}", f"write {key} = true")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamError(key, f"expected an integer, got {_show(value)}", _example(int, key))
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ParamError(key, f"expected a number, got {_show(value)}", _example(float, key))
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ParamError(key, f"expected a string, got {_show(value)}", f'write {key} = "..."')
        return value
    return _freeze(value)


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _freeze(v) for k, v in value.items()}
    return value


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is tuple:
        return "a list"
    if origin is Literal:
        return " or ".join(repr(a) for a in get_args(tp))
    if dataclasses.is_dataclass(tp):
        return "a table"
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false"}.get(tp, str(tp))


def _example(tp: Any, key: str) -> str:
    leaf = key.rsplit(".", 1)[-1]
    if get_origin(tp) is tuple:
        return f"write {leaf} = [1, 2]"
    if tp is int:
        return f"write a whole number, e.g. {leaf} = 4"
    if tp is float:
        return f"write a number, e.g. {leaf} = 0.5"
    return f"see the documentation of {leaf}"
