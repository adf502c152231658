"""The scenario reference of the docs, generated from the schema's section models and the applications' fields."""

from __future__ import annotations

import inspect
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from waitlab.experiments.schema import SECTION_MODELS
from waitlab.models.apps.imbalance import Imbalance
from waitlab.models.apps.registry import APPLICATIONS


def _type_text(annotation: Any) -> str:
    """A field's type as a reader writes it, from the type itself (not its ``str``, which spells out the
    constraints of an ``Annotated`` member).

    >>> _type_text(tuple[Annotated[int, "ge=0"], ...] | None), _type_text(int | Literal["auto"])
    ('tuple[int, ...] or None', "int or Literal['auto']")
    """
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None) or annotation is None:
        return "None"
    if origin is Annotated:
        return _type_text(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args)
    if origin is Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_text(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(?:[a-z_]\w*\.)+(\w+)", r"\1", str(annotation))  # typing.Any: Any


def _row(key: str, f: FieldInfo, doc: dict[str, str] | None = None) -> str:
    extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
    default = extra.get("default_text") or ("`required`" if f.is_required()  # a default the loader fills in
                                            else f"`{f.get_default(call_default_factory=True)!r}`")
    meaning = f.description or (doc or {}).get(key, "")
    return f"| `{key}` | {_type_text(f.annotation)} | {default} | {meaning} |"


def _dataclass_rows(cls: type) -> list[str]:
    """The rows of a parameter dataclass: its pydantic fields, described by its numpydoc docstrings."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        docs.update(docstring_fields(base.__doc__))
    fields = cls.__pydantic_fields__  # type: ignore[attr-defined]
    return [_row(key, f, docs) for key, f in fields.items()]


def docstring_fields(doc: str | None) -> dict[str, str]:
    """Field descriptions of a numpydoc ``Parameters``/``Attributes`` section (``name : type`` + indented text).

    >>> docstring_fields("P.\\n\\nAttributes\\n----------\\nsteps : int\\n    Number of steps.\\n")
    {'steps': 'Number of steps.'}
    """
    out: dict[str, str] = {}
    group: dict[str, list[str]] = {}
    current = ""
    for line in inspect.cleandoc(doc or "").splitlines():
        head = re.match(r"^([A-Za-z_]\w*(?:, [A-Za-z_]\w*)*) :", line)
        if head:
            names = head.group(1).split(", ")
            current = names[0]
            out.update({n: "" for n in names})
            group[current] = names
        elif line.startswith("    ") and current:
            for n in group[current]:
                out[n] = f"{out[n]} {line.strip()}".strip()
        elif line.strip() and not line.startswith(" "):
            current = ""
    return {k: _plain_rst(v) for k, v in out.items()}


def _plain_rst(text: str) -> str:
    """Docstring text for a Markdown table: roles and double backticks as code, no pipes."""
    return re.sub(r":\w+:`~?([^`]*)`", r"`\1`", text).replace("``", "`").replace("|", "/")


def reference_markdown() -> str:
    """The scenario reference (a Markdown table per section), generated from the schema."""
    lines = []
    for name, model in SECTION_MODELS.items():
        lines += [f"### `[{name}]`", "", (model.__doc__ or "").strip().split("\n")[0], "",
                  "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        lines += [_row(key, f) for key, f in model.model_fields.items()]
        lines.append("")
    for kind, cls in APPLICATIONS.items():
        title = _plain_rst((cls.__doc__ or "").strip().split("\n")[0])
        lines += [f"### `[application]` with `kind = \"{kind}\"`", "", title,
                  "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        lines += [*_dataclass_rows(cls), ""]
    lines += ["### `[[application.imbalance]]`", "", _plain_rst((Imbalance.__doc__ or "").strip().split("\n")[0])
              + " Any kind above takes these tables.", "", "| key | type | default | meaning |",
              "| --- | --- | --- | --- |", *_dataclass_rows(Imbalance), ""]
    return "\n".join(lines)
