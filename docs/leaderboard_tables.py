"""The tables of docs/leaderboard.md, taken from what ``waitlab evaluate`` writes.

docs/leaderboard.md includes ``docs/_leaderboard/tables.md`` (the overall table and the tables per cause class of
``leaderboard.md``) and ``docs/_leaderboard/cases.md`` (region error / false blame per case of two classes, from
``leaderboard.csv``).  ``tests/test_leaderboard_page.py`` runs ``waitlab evaluate`` on the built-in suite and fails
when either file differs from what it writes.  Rows of a model named Scalasca appear only where Scalasca is
installed; they are left out of both sides of the comparison.  To refresh the files::

    .venv/bin/waitlab evaluate -o results/leaderboard
    .venv/bin/python docs/leaderboard_tables.py results/leaderboard

``docs/_leaderboard/scalasca.md`` holds the Scalasca models' rows of the overall table, from a run with
``--scalasca`` (Scalasca installed; about 30 minutes on two cores, so no test re-runs it)::

    .venv/bin/waitlab evaluate --scalasca -o results/leaderboard-scalasca
    .venv/bin/python docs/leaderboard_tables.py --scalasca results/leaderboard-scalasca
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "docs" / "_leaderboard"
#: The two classes whose cases the page shows one by one, and the models in its columns.
CASE_CLASSES = ("sub-communicators", "one-sided")
CASE_MODELS = ("CWP-DM", "H-CWP-DM (earliest)", "H-CWP-DM (each)", "Critical-path imbalance", "Blame shifting",
               "Graph backtracking")


def without_scalasca(text: str) -> str:
    """``text`` without the table rows of a Scalasca model (present only where Scalasca is installed)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not (line.startswith("|") and "scalasca" in line.lower()))


def tables(leaderboard_md: str) -> str:
    """The ``## Overall`` and ``## ... by cause class`` sections of a ``leaderboard.md``, one heading level down."""
    sections = re.split(r"^(?=## )", leaderboard_md, flags=re.M)
    keep = [s for s in sections if s.startswith("## Overall") or s.split("\n")[0].endswith(" by cause class")]
    if len(keep) < 2:
        raise ValueError("leaderboard.md: no '## Overall' and '## ... by cause class' sections")
    return "".join("#" + s.rstrip("\n") + "\n\n" for s in keep).rstrip("\n") + "\n"


def scalasca_rows(leaderboard_md: str) -> str:
    """The overall table's header and the rows of the Scalasca models, from a ``leaderboard.md`` written by
    ``waitlab evaluate --scalasca``."""
    overall = tables(leaderboard_md).split("\n### ")[0].splitlines()
    head = [line for line in overall if line.startswith("|")][:2]
    rows = [line for line in overall if line.startswith("|") and "scalasca" in line.lower()]
    if not rows:
        raise ValueError("leaderboard.md: no Scalasca rows (was it written by `waitlab evaluate --scalasca`?)")
    return "\n".join(head + rows) + "\n"


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.0f}%"


def cases(leaderboard_csv: pd.DataFrame) -> str:
    """Region error / false blame of every case of :data:`CASE_CLASSES`, one column per model of
    :data:`CASE_MODELS`, as the leaderboard formats a share."""
    rows = leaderboard_csv[leaderboard_csv["cause"].isin(CASE_CLASSES)]
    lines = ["| case | " + " | ".join(CASE_MODELS) + " |", "| --- |" + " ---: |" * len(CASE_MODELS)]
    for case in dict.fromkeys(rows["case"]):
        cells = []
        for model in CASE_MODELS:
            (i,) = rows.index[(rows["case"] == case) & (rows["name"] == model)]
            cells.append(f"{_pct(float(rows.at[i, 'blame_error']))} / {_pct(float(rows.at[i, 'false_blame']))}")
        lines.append(f"| `{case}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def generate(folder: Path) -> dict[str, str]:
    """The two included files' text from a ``waitlab evaluate`` folder."""
    md = (folder / "leaderboard.md").read_text(encoding="utf-8")
    return {"tables.md": without_scalasca(tables(md)),
            "cases.md": cases(pd.read_csv(folder / "leaderboard.csv", keep_default_na=False,
                                          na_values=[""]))}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--scalasca":
        made = {"scalasca.md": scalasca_rows((Path(argv[1]) / "leaderboard.md").read_text(encoding="utf-8"))}
    elif len(argv) == 1:
        made = generate(Path(argv[0]))
    else:
        print("usage: docs/leaderboard_tables.py [--scalasca] LEADERBOARD_FOLDER (written by waitlab evaluate)",
              file=sys.stderr)
        return 2
    FOLDER.mkdir(exist_ok=True)
    for name, text in made.items():
        (FOLDER / name).write_text(text, encoding="utf-8")
        print(f"written: {(FOLDER / name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
