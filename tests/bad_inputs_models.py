"""The bad-input corpus, users' models and the leaderboard folder (issue 40).

- model files that cannot be imported (a syntax error, an exception, ``sys.exit`` or unbounded recursion at import,
  a missing dependency, NUL bytes, no such function) and specs that name nothing (``:good``, ``..:x``), given to
  ``waitlab evaluate --model``: refused before any simulation, one line naming the file (and line);
- ``waitlab evaluate -o`` into the current folder, a folder holding files waitlab did not write, the suite's own
  folder or the cache: refused up front by the one check of every command's output folder.

Every case must give exit status 2 and one line naming the file and the field (``tests/test_bad_inputs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bad_inputs_corpus import CASES, Built, Case, write

from waitlab.experiments.diagnosis.suite import BUILTIN_SUITE

#: The one cheap case of the built-in suite the commands name (nothing is simulated: the refusals come first).
CASE = "imbalance-one-late-16"


def _evaluate(d: Path, *more: str, out: str = "out") -> list[str]:
    return ["evaluate", "--case", CASE, "--cache", str(d / "cache"), "-o", out, "--no-png", "-q", *more]


def _model_file(text: str | bytes, field: str = "--model", name: str = "bad.py",
                spec: str = "bad.py:f") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        if isinstance(text, bytes):
            (d / name).write_bytes(text)
        else:
            write(d / name, text)
        return _evaluate(d, "--model", spec), name, field
    return build


MODEL_FILES: list[tuple[str, str | bytes]] = [
    ("syntax-error", "import pandas as pd\n\ndef f(run, **o:\n    return None\n"),
    ("raises-at-import", "raise RuntimeError('not configured')\n"),
    ("exits-at-import", "import sys\nsys.exit(0)\n"),
    ("os-exit-at-import", "import os\nos._exit(3)\n"),
    ("missing-dependency", "import waitlab_no_such_dependency\n\ndef f(run, **o):\n    return None\n"),
    ("nul-bytes", b"def f(run, **o):\n    return None\n\0\0\0\n"),
    ("recursion-at-import", "def r(n):\n    return r(n + 1)\n\nr(0)\n"),
    ("no-such-function", "def g(run, **o):\n    return None\n"),
    ("not-a-function", "f = 3\n"),
]
for _id, _text in MODEL_FILES:
    CASES.append(Case("model", f"model-{_id}", _model_file(_text)))


def _spec(spec: str, shown: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return _evaluate(d, "--model", spec), shown, "--model"
    return build


for _id, _spec_text, _shown in [("no-module", ":good", ":good"), ("dots", "..:x", ".."),
                                ("no-function", "mymodels:", "mymodels:"), ("bad-name", "my-models:f", "my-models"),
                                ("no-file", "missing.py:f", "missing.py"), ("not-py", "notes.txt:f", "notes.txt")]:
    CASES.append(Case("model", f"model-spec-{_id}", _spec(_spec_text, _shown)))


def _timeout(value: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return _evaluate(d, "--model-timeout", value), "(command line)", "--model-timeout"
    return build


for _v in ("0", "-5", "nan", "inf"):
    CASES.append(Case("model", f"model-timeout-{_v}", _timeout(_v)))


def _leaderboard(make: Callable[[Path], str], shown: Callable[[Path], str]) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return _evaluate(d, out=make(d)), shown(d), "(leaderboard folder)"
    return build


def _foreign(d: Path) -> str:
    write(d / "victim" / "thesis.tex", "not waitlab's")
    return str(d / "victim")


def _cache(d: Path) -> str:
    (d / "cache").mkdir()
    return str(d / "cache")


LEADERBOARD_CASES: list[tuple[str, Callable[[Path], str], Callable[[Path], str]]] = [
    ("root", lambda d: "/", lambda d: "/"),
    ("home", lambda d: str(Path.home()), lambda d: str(Path.home())),
    ("current-folder", lambda d: ".", lambda d: "."),
    ("parent-of-current", lambda d: "..", lambda d: ".."),
    ("foreign-folder", _foreign, lambda d: "victim"),
    ("the-suite-folder", lambda d: str(BUILTIN_SUITE), lambda d: str(BUILTIN_SUITE)),
    ("inside-the-suite", lambda d: str(BUILTIN_SUITE / "lb"), lambda d: str(BUILTIN_SUITE)),
    ("the-cache", _cache, lambda d: "cache"),
    ("a-file", lambda d: str(write(d / "lb.txt", "x")), lambda d: "lb.txt"),
]
for _id, _make, _shown in LEADERBOARD_CASES:
    CASES.append(Case("output folder", f"output-evaluate-{_id}", _leaderboard(_make, _shown)))
