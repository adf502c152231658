"""Benchmark suites of ``waitlab evaluate``: scenario files, each labelled with the class of cause injected.

A suite is a folder holding ``suite.toml`` and scenario files::

    [[case]]
    file = "imbalance-one-late-16.toml"     # a scenario file of the folder
    cause = "compute imbalance"             # its cause class (leaderboard rows are grouped by it)
    what = "one late rank"                  # free text

The built-in suite (:func:`builtin_suite`, 58 cases in 12 cause classes at 16 to 256 ranks on three
platforms) ships with waitlab in ``waitlab/experiments/diagnosis/builtin_suite/``; its one-sided cases run
the C program ``rma_suite.c`` of that folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from waitlab.errors import InputError
from waitlab.experiments.scenario import Scenario, load_scenario
from waitlab.readers import read_toml

#: Folder of the built-in suite.
BUILTIN_SUITE = Path(__file__).resolve().parent / "builtin_suite"
INDEX = "suite.toml"


@dataclass(frozen=True)
class Case:
    """One case of a suite: a scenario and the class of its cause."""

    name: str
    file: Path
    cause: str
    what: str
    scenario: Scenario


def builtin_suite() -> Path:
    """The folder of the built-in suite."""
    return BUILTIN_SUITE


def suite_index(suite: str | Path | None = None) -> Path:
    """The ``suite.toml`` of a suite (its folder or the file itself; default the built-in suite), or one
    :class:`~waitlab.errors.InputError` naming the suite when there is none.

    >>> suite_index().name
    'suite.toml'
    >>> suite_index("/nonexistent")
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: /nonexistent: (suite): has no suite.toml (fix: pass a suite folder holding \
suite.toml ([[case]] tables with file, cause, what), or nothing for the built-in suite)
    """
    path = Path(suite) if suite is not None else BUILTIN_SUITE
    index = path / INDEX if path.is_dir() else path
    if not index.is_file():
        raise InputError(str(path), "(suite)", f"has no {INDEX}", "pass a suite folder holding suite.toml "
                         "([[case]] tables with file, cause, what), or nothing for the built-in suite")
    return index


def check_only(only: object) -> tuple[str, ...]:
    """``only`` of :func:`load_suite` as a tuple of texts, or one :class:`~waitlab.errors.InputError` naming the
    Python argument: one text is refused (it would be read letter by letter, and every case name holds an ``i``).

    >>> check_only(["late-16"])
    ('late-16',)
    >>> check_only("late-16")
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: (python call): only: must be a list of texts, got the text 'late-16' (fix: e.g. \
only=['late-16'])
    """
    if isinstance(only, str | bytes):
        raise InputError("(python call)", "only", f"must be a list of texts, got the text {only!r}",
                         f"e.g. only=[{only!r}]")
    if not isinstance(only, Sequence | set | frozenset) or not all(isinstance(o, str) for o in only):
        raise InputError("(python call)", "only", f"must be a list of texts (parts of case names), got {only!r}",
                         "e.g. only=['imbalance-one-late-16']")
    return tuple(only)


def load_suite(suite: str | Path | None = None, only: Sequence[str] = ()) -> list[Case]:
    """The cases of a suite folder (or its ``suite.toml``); default the built-in suite.

    Parameters
    ----------
    suite : path, optional
    only : sequence of str
        Keep the cases whose name contains one of these strings (all when empty); one text, not in a list, is
        refused (:func:`check_only`).
    """
    only = check_only(only)
    index = suite_index(suite)
    data = read_toml(index, "suite")
    entries = data.get("case")
    if not isinstance(entries, list) or not entries:
        raise InputError(str(index), "case", "is missing or empty", "add [[case]] tables with file, cause, what")
    cases: list[Case] = []
    for i, e in enumerate(entries):
        for key in ("file", "cause"):
            if not isinstance(e, dict) or not isinstance(e.get(key), str) or not e.get(key):
                raise InputError(str(index), f"case[{i}].{key}", "is missing or not a string",
                                 f"write {key} = \"...\" in every [[case]]")
        f = index.parent / e["file"]
        if not f.is_file():
            raise InputError(str(index), f"case[{i}].file", f"no scenario file {e['file']}",
                             "name a scenario file of the suite folder")
        sc = load_scenario(f)
        if only and not any(o in sc.name for o in only):
            continue
        cases.append(Case(sc.name, f, str(e["cause"]), str(e.get("what", "")), sc))
    names = [c.name for c in cases]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(str(index), "case", f"two cases have the scenario name {dup[0]!r}",
                         "give every scenario its own [scenario] name")
    if not cases:
        raise InputError(str(index), "case", f"no case matches {', '.join(only)}", "check the case names")
    return cases


__all__ = ["BUILTIN_SUITE", "Case", "builtin_suite", "check_only", "load_suite", "suite_index"]
