"""docs/leaderboard.md shows what ``waitlab evaluate`` writes (issue 42).

The page includes ``docs/_leaderboard/tables.md`` and ``cases.md``; the slow test runs ``waitlab evaluate`` on the
built-in suite (cold: about 2 minutes on two quiet cores) and compares.  A Scalasca model's rows appear only where
Scalasca is installed: both sides are compared without them.  Refresh with ``docs/leaderboard_tables.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from docs_scripts import docs_script

ROOT = Path(__file__).resolve().parent.parent


def module() -> ModuleType:
    return docs_script("leaderboard_tables")


def test_the_page_includes_both_files_and_no_copied_table():
    page = (ROOT / "docs" / "leaderboard.md").read_text(encoding="utf-8")
    assert "```{include} _leaderboard/tables.md" in page and "```{include} _leaderboard/cases.md" in page
    assert not [line for line in page.splitlines() if line.startswith("| ")], "a table copied by hand"


def test_the_extraction_on_a_hand_written_leaderboard():
    mod = module()
    md = ("# Diagnosis leaderboard\n\nintro\n\n## Overall\n\n| model | x |\n| --- | ---: |\n| A | 1% |\n"
          "| Scalasca (delay) | 2% |\n\n## top-1 hit by cause class\n\n| model | c |\n| --- | ---: |\n| A | 5% |\n\n"
          "## Cases\n\n| case | cause |\n| --- | --- |\n| k | c |\n")
    assert mod.without_scalasca(mod.tables(md)) == ("### Overall\n\n| model | x |\n| --- | ---: |\n| A | 1% |\n\n"
                                                     "### top-1 hit by cause class\n\n| model | c |\n| --- | ---: |\n"
                                                     "| A | 5% |\n")
    rows = pd.DataFrame({"case": ["s", "s"], "cause": ["sub-communicators"] * 2, "name": ["CWP-DM", "Other"],
                         "blame_error": [0.004, 1.0], "false_blame": [float("nan"), 0.0]})
    mod.CASE_MODELS = ("CWP-DM",)
    assert mod.cases(rows).splitlines()[-1] == "| `s` | 0% / n/a |"


@pytest.mark.simgrid
@pytest.mark.slow
def test_the_page_tables_are_what_waitlab_evaluate_writes(tmp_path: Path):
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    from waitlab import api

    api.evaluate(out=tmp_path / "lb", cache_dir=tmp_path / "cache", png=False)
    fresh = module().generate(tmp_path / "lb")
    for name, text in fresh.items():
        shown = module().without_scalasca((ROOT / "docs" / "_leaderboard" / name).read_text(encoding="utf-8"))
        assert shown == text, (f"docs/_leaderboard/{name} differs from this waitlab's evaluate; refresh it with "
                               "docs/leaderboard_tables.py and re-read the page's text")
