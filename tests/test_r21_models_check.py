"""``check_model`` cannot be fooled by a model that changes its input, lists ``sys.exit`` instead of ending the
caller, and says when a model names the top level ``"(top)"`` (round 21).  The tiny barrier case: 4 s of wait."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import waitlab
from waitlab.models.analysis.protocol import RunData

DOCS = Path(__file__).resolve().parents[1] / "docs" / "workbench.md"


def _inflate(run: RunData, **options: object) -> pd.DataFrame:
    run.waits["wait"] = run.waits["wait"] * 1000  # in place, then blames the inflated waits
    w = run.waits
    return pd.DataFrame({"rank": w["rank"].to_numpy(), "region": "(top level)", "seconds": w["wait"].to_numpy()})


def test_a_model_that_inflates_its_waits_in_place_is_caught() -> None:
    problems = waitlab.check_model(_inflate)
    # hand-computed: the barrier case has 2 + 2 = 4 s of wait, blamed x1000
    assert ("barrier, one late rank: returned a table the protocol does not allow: blames 4000 s, more than the "
            "run's 4 s of wait") in problems
    assert len(problems) == 6  # every case with wait (not "no wait", where 0 x 1000 = 0)


def test_sys_exit_is_a_problem_listed_not_the_end_of_the_caller() -> None:
    problems = waitlab.check_model(lambda run, **o: sys.exit(0))
    assert problems and all(f": called sys.exit(0) ({__file__}, line " in p for p in problems)
    assert len(problems) == 7  # one per case


def test_other_base_exceptions_are_listed_but_ctrl_c_goes_through() -> None:
    def gen_exit(run: RunData, **o: object) -> pd.DataFrame:
        raise GeneratorExit

    assert waitlab.check_model(gen_exit)[0].startswith(f"barrier, one late rank: raised GeneratorExit ({__file__}")

    def ctrl_c(run: RunData, **o: object) -> pd.DataFrame:  # runs in a child: Ctrl-C reaches waitlab's process
        os.kill(os.getppid(), signal.SIGINT)
        time.sleep(60)
        return pd.DataFrame()

    with pytest.raises(KeyboardInterrupt):
        waitlab.check_model(ctrl_c)


def test_a_model_naming_the_top_level_top_is_told() -> None:
    def top(run: RunData, **o: object) -> pd.DataFrame:
        return pd.DataFrame({"rank": [0], "region": ["(top)"], "seconds": [run.total_wait]})

    problems = waitlab.check_model(top)  # (the check diagnose and evaluate apply too: round 26)
    assert problems[0] == ('barrier, one late rank: returned a table the protocol does not allow: names the region '
                           '"(top)", which the run does not have: time outside every region is "(top level)"')


def test_the_docs_blame_zero_keeps_the_protocol_and_names_the_top_level() -> None:
    text = DOCS.read_text()
    block = re.search(r"```text\n(import pandas as pd\n\ndef blame_zero.*?)```", text, re.S)
    assert block is not None
    scope: dict[str, object] = {}
    exec(block.group(1), scope)  # the docs' own example
    blame_zero = scope["blame_zero"]
    assert waitlab.check_model(blame_zero) == []  # type: ignore[arg-type]
    assert '"(top)"' not in text.replace('a region named `"(top)"`', "")
