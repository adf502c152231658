"""The Python API refuses arguments of the wrong kind in one line naming the argument (a notebook user's mistakes),
before anything runs or is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scenario_files import TINY

import waitlab
from waitlab.errors import InputError


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(TINY)
    return p


CALLS: dict[str, tuple[Callable[[Path, Path], Any], str]] = {
    "scenario as a number": (lambda s, t: waitlab.run(5, t / "out"), "scenario: must be the path of a scenario"),
    "scenario as None": (lambda s, t: waitlab.run(None), "got NoneType"),
    "scenario as a dict": (lambda s, t: waitlab.run({"scenario": {}}), "got dict"),
    "scenario as TOML text": (lambda s, t: waitlab.run("[scenario]\nranks = 2\n"), "scenario: is a text of 2 lines"),
    "out as a number": (lambda s, t: waitlab.run(s, 7), "out: must be the path of a results folder"),
    "force as a string": (lambda s, t: waitlab.run(s, t / "out", force="no"), "force: must be True or False"),
    "load_run of a number": (lambda s, t: waitlab.load_run(3), "folder: must be the path of a results folder"),
    "diagnose of None": (lambda s, t: waitlab.diagnose(None), "source: must be the path of a results folder"),
    "export of a number": (lambda s, t: waitlab.export(3), "run_folder: must be the path of a results folder"),
    "to_markdown of a number": (lambda s, t: waitlab.to_markdown(5), "diag: must be a Diagnosis"),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_a_wrong_argument_is_one_line_naming_it(case: str, scenario: Path, tmp_path: Path) -> None:
    call, words = CALLS[case]
    with pytest.raises(InputError) as exc:
        call(scenario, tmp_path)
    assert exc.value.file == "(python call)" and words in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_no_event_table_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "plat.toml"
    bad.write_text("[machine]\nname = 'x'\ncores = { value = 2, source = 'x' }\n")  # line 3: 2 CSV fields
    with pytest.raises(InputError) as exc:
        waitlab.load_events(bad)
    assert "cannot be read as an event table" in str(exc.value) and "\n" not in str(exc.value)
