"""Application parameters as pydantic dataclasses, and their errors as (key, problem, fix).

Model parameters are frozen pydantic dataclasses (:func:`params`): pydantic
checks every field against its annotation whether the object comes from a TOML
table (:func:`from_mapping`) or from Python code.  Numeric fields declared with
:func:`num` carry their bounds and are strict (``true`` is not ``1``, ``"3"``
is not ``3``); infinities and NaN are refused everywhere.  Cross-field rules
live in ``__post_init__`` and raise :class:`ParamError` naming their key.
:func:`param_error` turns pydantic's first error into one :class:`ParamError`
with a dotted key (``steps``, ``imbalance[2].magnitude``), which the caller
turns into a :class:`waitlab.errors.InputError` with the file name.

Examples
--------
>>> @params
... class P:
...     steps: int = num(10, ge=1)
...     sizes: tuple[StrictInt, ...] = ()
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
import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar, cast, dataclass_transform, get_args, get_origin

from pydantic import ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from waitlab.errors import Picklable, problem_text

T = TypeVar("T")

#: pydantic configuration of every parameter dataclass: no unknown keys, no inf/NaN.  Each one's validator is built
#: when it is first used (``defer_build``), not when its module is imported: a run uses one application's
#: parameters (``import waitlab.cli``: 0.225 -> 0.213 s, median of 8 alternated; issue 25).
PARAMS_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)
#: An integer that is not a bool, a float or a string.
StrictInt = Annotated[int, Strict()]
#: A number (int or float) that is not a bool or a string.
StrictFloat = Annotated[float, Strict()]
#: ``true`` or ``false``, not ``1`` or ``"yes"``.
StrictBool = Annotated[bool, Strict()]


class ParamError(Picklable, ValueError):
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
        if not prefix:
            return self
        key = self.key
        sep = "" if not key or key.startswith("[") else "."
        return ParamError(f"{prefix}{sep}{key}", self.problem, self.fix)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(Field, dataclasses.field))
def params(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, keyword-only pydantic dataclass of model parameters."""
    return cast("type[T]", pydantic_dataclass(frozen=True, kw_only=True, config=PARAMS_CONFIG)(cls))


@dataclass_transform(frozen_default=True, field_specifiers=(Field, dataclasses.field))
def positional_params(cls: type[T]) -> type[T]:
    """Like :func:`params`, with positional arguments allowed (``Imbalance("Hydro", magnitude=1.0)``)."""
    return cast("type[T]", pydantic_dataclass(frozen=True, config=PARAMS_CONFIG)(cls))


def num(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
        doc: str = "") -> Any:
    """A strict numeric field with bounds (a pydantic ``Field``)."""
    return Field(default, ge=ge, gt=gt, le=le, strict=True, description=doc or None)


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def from_mapping(cls: type[T], data: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> T:
    """Build parameter dataclass ``cls`` from ``data`` (a TOML table).

    Raises
    ------
    ParamError
        Unknown key, wrong type, or a value the dataclass rejects, with its dotted key.
    """
    if not isinstance(data, Mapping):
        raise ParamError("", f"expected a table, got {_show(data)}", "write a TOML table [..] or {key = value}")
    table = {k: v for k, v in data.items() if k not in skip}
    try:
        return cast(T, _adapter(cls).validate_python(table))
    except ValidationError as exc:
        raise param_error(exc, cls) from None


def param_error(exc: ValidationError, cls: type | None = None) -> ParamError:
    """The first error of a pydantic :class:`ValidationError` as one :class:`ParamError`.

    Union members tag pydantic's locations with their type (``str``, ``tuple[int, ...]``); the tags are
    dropped, the most specific error is kept, and a plain type mismatch of a union lists the choices.
    """
    errors = exc.errors(include_url=False)
    for e in errors:
        e["loc"] = tuple(p for p in e["loc"] if isinstance(p, int) or _is_field_name(p))
    errors = [e for e in errors if e["type"] != "none_required"] or errors
    deepest = max(len(e["loc"]) for e in errors)
    same = [e for e in errors if len(e["loc"]) == deepest]
    err = same[0]
    loc = tuple(err["loc"])
    key = dotted(loc)
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, ParamError):
        # a validator of field ``f`` names ``f...``: anchor its key at the field's parent
        head = cause.key.split(".")[0].split("[")[0]
        parent = loc[:-1] if loc and head and loc[-1] == head else loc
        return cause.within(dotted(parent))
    leaf = str(next((p for p in reversed(loc) if isinstance(p, str)), key or "value"))
    if err["type"] == "missing" and loc:  # a required key missing next to an unknown key like it: name the typo
        unknown = [str(e["loc"][-1]) for e in errors if e["type"] in ("unexpected_keyword_argument", "extra_forbidden")
                   and e["loc"][:-1] == loc[:-1] and e["loc"]]
        typo = difflib.get_close_matches(leaf, unknown, n=1, cutoff=0.6)
        if typo:
            return ParamError(dotted((*loc[:-1], typo[0])), f"unknown key {typo[0]!r} (did you mean {leaf!r}?)",
                              f"rename {typo[0]} to {leaf}")
    if len(same) > 1 and all(e["type"] in _KINDS for e in same) and len({e["type"] for e in same}) > 1:
        kinds = " or ".join(dict.fromkeys(_KINDS[e["type"]] for e in same))
        return ParamError(key, f"expected {kinds}, got {_show(err.get('input'))}", f"see the documentation of {leaf}")
    return ParamError(key, *_problem(err, leaf, cls, loc))


_KINDS = {"int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
          "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
          "bool_parsing": "true or false", "string_type": "a string", "tuple_type": "a list",
          "list_type": "a list", "dict_type": "a table", "dataclass_type": "a table", "model_type": "a table",
          "dataclass_args_type": "a table"}


def _problem(err: Any, leaf: str, cls: type | None, loc: tuple[Any, ...]) -> tuple[str, str]:
    kind, ctx, given = err["type"], err.get("ctx") or {}, err.get("input")
    got = f", got {given!r}" if "input" in err else ""
    if kind == "greater_than_equal":
        return f"must be >= {_fmt(ctx['ge'])}{got}", f"set {leaf} to {_fmt(ctx['ge'])} or more"
    if kind == "greater_than":
        return f"must be > {_fmt(ctx['gt'])}{got}", f"set {leaf} to more than {_fmt(ctx['gt'])}"
    if kind == "less_than_equal":
        return f"must be <= {_fmt(ctx['le'])}{got}", f"set {leaf} to {_fmt(ctx['le'])} or less"
    if kind == "finite_number":
        return f"must be a finite number{got}", f"set {leaf} to a finite value"
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        names = _fields_at(cls, loc[:-1])
        return "unknown key", f"allowed keys: {', '.join(names)}" if names else ""
    if kind == "missing":
        return "is required", f"add {leaf} = ..."
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}{got}", f"use one of: {ctx.get('expected', '')}"
    if kind in ("too_short", "too_long"):
        return f"expected a list of {ctx.get('max_length', ctx.get('min_length'))} items{got}", \
            f"write {leaf} = [1, 2]"
    if kind in _KINDS:
        text = _KINDS[kind]
        example = {"an integer": f"write a whole number, e.g. {leaf} = 4",
                   "a number": f"write a number, e.g. {leaf} = 0.5", "true or false": f"write {leaf} = true",
                   "a string": f'write {leaf} = "..."', "a list": f"write {leaf} = [1, 2]",
                   "a table": f"write {leaf} as a table {{key = value}}"}[text]
        return f"expected {text}, got {_show(given)}", example
    return str(err["msg"]).removeprefix("Value error, "), ""


def _fields_at(cls: type | None, loc: tuple[Any, ...]) -> list[str]:
    """Field names of the parameter dataclass found by walking ``loc`` from ``cls`` (best effort)."""
    tp: Any = cls
    for part in loc:
        if isinstance(part, int):
            args = [a for a in get_args(tp) if a is not Ellipsis]
            tp = args[0] if args else None
            continue
        fields = getattr(tp, "__pydantic_fields__", None)
        if not fields or part not in fields:
            return []
        tp = fields[part].annotation
        while get_origin(tp) is not None and get_origin(tp) is not tuple:
            tp = next((a for a in get_args(tp) if hasattr(a, "__pydantic_fields__") or get_origin(a) is tuple),
                      None)
    fields = getattr(tp, "__pydantic_fields__", None)
    return [n for n in fields if not n.startswith("_")] if fields else []


#: Type tags pydantic puts in the location of a union member's error (not field names).
TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "tuple", "list", "dict"})


def _is_field_name(part: Any) -> bool:
    """A location part that names a field (not a union member's type tag such as ``str`` or ``tuple[int, ...]``)."""
    return isinstance(part, str) and part.isidentifier() and part not in TYPE_TAGS and not part[0].isupper()


def dotted(loc: Sequence[Any]) -> str:
    r"""A pydantic error location as a dotted key: ``("imbalance", 2, "magnitude")`` -> ``imbalance[2].magnitude``.

    A key that is not a bare word (blanks, control characters, dots, quotes, brackets, or empty) is quoted as TOML
    writes it, so the location stays on one line:

    >>> dotted(("config", "smpi/allreduce")), dotted(("config", "\n")), dotted(("config", "a.b"))
    ('config.smpi/allreduce', 'config."\\n"', 'config."a.b"')
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        key = str(part)
        if not key or any(c.isspace() or not c.isprintable() or c in '."[]' for c in key):
            key = json.dumps(key)
        out += f".{key}" if out else key
    return out


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"
