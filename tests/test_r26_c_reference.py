"""Tester t4's finding 3: the generated scenario reference (docs/scenarios.md includes it) says what each key is.

Each key of a table has its own non-empty meaning (the lared_s regions, sigmas and segments were one shared sentence
each; ``allreduce_bytes`` had none), ``[scenario] name`` defaults to the file's stem as the loader does, types are
written as a reader would (``[noise] nodes`` was ``tuple[int)], ...] or None``), and ``[[application.imbalance]]``
has a table of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.schema_reference import _type_text, reference_markdown


def _tables() -> dict[str, list[list[str]]]:
    """Heading -> rows (key, type, default, meaning) of the generated reference."""
    out: dict[str, list[list[str]]] = {}
    heading = ""
    for line in reference_markdown().splitlines():
        if line.startswith("### "):
            heading = line[4:]
            out[heading] = []
        elif line.startswith("| `"):
            out[heading].append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def test_every_key_has_a_meaning_of_its_own() -> None:
    tables = _tables()
    assert len(tables) >= 13  # six sections, six application kinds, the imbalance tables
    for heading, rows in tables.items():
        meanings = [r[3] for r in rows]
        assert all(meanings), (heading, [r[0] for r in rows if not r[3]])
        shared = {m for m in meanings if meanings.count(m) > 1}
        assert not shared, (heading, [r[0] for r in rows if r[3] in shared])


def test_lared_s_keys_name_their_own_region() -> None:
    rows = {r[0]: r[3] for r in _tables()['`[application]` with `kind = "lared_s"`']}
    for key, region in (("hydro_seconds", "Hydro"), ("diffusion_seconds", "Diffusion"), ("update_seconds", "Update"),
                        ("hydro_jitter", "Hydro"), ("diffusion_jitter", "Diffusion"),
                        ("update_jitter", "Update"), ("if970_visits", "If_970"), ("if946_visits", "If_946")):
        names = {"If_970", "If_946"} if "_visits" in key else {"Hydro", "Diffusion", "Update"}
        others = names - {region}
        assert region in rows[f"`{key}`"] and not any(f"`{o}`" in rows[f"`{key}`"] for o in others), key
    assert rows["`allreduce_bytes`"] and rows["`allreduce_flops`"]


def test_scenario_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    row = next(r for r in _tables()["`[scenario]`"] if r[0] == "`name`")
    assert row[2] == "the file's stem"
    f = tmp_path / "noname.toml"  # what the loader does, independently of the table
    f.write_text('[scenario]\nranks = 4\n[platform]\nname = "dawning_5000a"\n[application]\nkind = "stencil"\n')
    assert load_scenario(f).name == "noname"


def test_types_are_written_from_the_type() -> None:
    row = next(r for r in _tables()["`[noise]`"] if r[0] == "`nodes`")
    assert row[1] == "tuple[int, ...] or None"
    assert _type_text(tuple[Annotated[int, Field(ge=0)], ...] | None) == "tuple[int, ...] or None"
    assert _type_text(int | Literal["auto"]) == "int or Literal['auto']"
    assert _type_text(dict[str, str | int]) == "dict[str, str or int]"


def test_imbalance_tables_have_their_keys() -> None:
    rows = _tables()["`[[application.imbalance]]`"]
    # the keys docs/applications.md lists for [[application.imbalance]]
    assert [r[0].strip("`") for r in rows] == ["region", "ranks", "distribution", "magnitude", "steps", "redraw",
                                               "spread"]
    assert rows[0][2] == "`required`" and rows[3][2] == "`0.0`"
