"""The scenario reference of the docs, generated from the schema's section models and the applications' fields."""

from __future__ import annotations

import inspect
import re
from typing import Any

from pydantic.fields import FieldInfo

from waitlab.experiments.schema import SECTION_MODELS
from waitlab.models.apps.registry import APPLICATIONS


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    text = re.sub(r"Annotated\[(\w+), [^\]]*\]", r"\1", str(annotation))
    return re.sub(r"\b(?:[a-z_]\w*\.)+(\w+)", r"\1", text).replace("|", "or")


def _row(key: str, f: FieldInfo, doc: dict[str, str] | None = None) -> str:
    default = "required" if f.is_required() else repr(f.get_default(call_default_factory=True))
    meaning = f.description or (doc or {}).get(key, "")
    return f"| `{key}` | {_type_text(f.annotation)} | `{default}` | {meaning} |"


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
        fields = cls.__pydantic_fields__  # type: ignore[attr-defined]
        docs: dict[str, str] = {}
        for base in reversed(cls.__mro__):
            docs.update(docstring_fields(base.__doc__))
        lines += [_row(key, f, docs) for key, f in fields.items()]
        lines.append("")
    return "\n".join(lines)
