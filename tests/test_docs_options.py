"""Every option a command's ``--help`` lists is documented: named somewhere in the pages under docs/.

An option counts as named when one of its spellings (``-o`` or ``--output``) appears as a whole word (not as the
start of a longer option: ``--top`` is not ``--top-k``).  Options hidden from ``--help`` (``argparse.SUPPRESS``, kept
for old scripts) are not listed, so not required; ``--help`` itself neither.  The reverse (every option the pages
give a command exists) is what running the pages' command blocks checks (tests/test_docs_commands.py).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from waitlab import cli

ROOT = Path(__file__).resolve().parents[1]


def pages() -> str:
    docs = ROOT / "docs"
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted([*docs.glob("*.md"), *docs.glob("lab/*.md")]))


def listed_options() -> dict[str, list[list[str]]]:
    """Per command, the spellings of every option its ``--help`` shows."""
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a.option_strings for a in p._actions
                   if a.option_strings and a.help != argparse.SUPPRESS and "--help" not in a.option_strings]
            for name, p in sub.choices.items()}


def named(spelling: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text) is not None


def test_the_check_sees_whole_options_only() -> None:
    assert named("--top", "`compare --top 3`") and not named("--top", "`diagnose --top-k 3`")
    assert named("-o", "run x.toml -o out") and not named("-o", "run--output")


def test_every_option_of_every_command_is_in_the_docs() -> None:
    text = pages()
    options = listed_options()
    assert len(options) >= 15 and ["--atol"] in options["check-c"]  # the parser was read
    missing = [f"{cmd} {'/'.join(spellings)}" for cmd, opts in options.items() for spellings in opts
               if not any(named(s, text) for s in spellings)]
    assert missing == [], "options of --help that no page of docs/ names"
