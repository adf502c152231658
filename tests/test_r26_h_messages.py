"""Tester t8 of session 26, finding 8 (messages): ``waitlab --vers`` said only that COMMAND is required; the
wire-latency refusal said "1.5e-06 s is more than the 1.5e-06 s" for a latency just above the bound."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.platforms.model import load_platform

DATA = Path(str(resources.files("waitlab.platforms") / "data"))


@pytest.mark.parametrize("argv, message", [
    (["--vers"], "unrecognized arguments: --vers (did you mean --version?)"),
    (["--vers", "run", "x.toml"], "unrecognized arguments: --vers (did you mean --version?)"),
    (["--quiet", "run", "x.toml"], "unrecognized arguments: --quiet\n"),
    ([], "the following arguments are required: COMMAND"),  # no option at all: as before
])  # fmt: skip
def test_an_unknown_top_level_option_is_said(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("usage: waitlab [-h]") and f"waitlab: error: {message}" in err, err


def test_the_top_level_options_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("waitlab ")
    with pytest.raises(SystemExit) as exc:
        main(["-h"])
    assert exc.value.code == 0


def test_a_wire_latency_just_above_the_bound_shows_the_digits_that_differ(tmp_path: Path) -> None:
    # deepcomp_7000's [inter_node] latency (this line) and its [mpi] 8-byte figure are both 1.5e-6 s
    line = 'latency = { value = 1.5e-6, assumed = true, reason = "DDR InfiniBand MPI latency of 2008, about'
    text = (DATA / "deepcomp_7000.toml").read_text()
    assert text.count(line) == 1
    path = tmp_path / "above.toml"
    path.write_text(text.replace(line, line.replace("1.5e-6", "1.5000001e-6")))
    with pytest.raises(InputError) as info:
        load_platform(path)
    assert info.value.problem.startswith("1.5000001e-06 s is more than the 1.5e-06 s one way of 8 B that "
                                         "mpi.inter_node[0].latency gives"), info.value.problem
    path.write_text(text.replace(line, line.replace("1.5e-6", "1.5e-3")))  # far above: 4 digits, as before
    with pytest.raises(InputError) as info:
        load_platform(path)
    assert info.value.problem.startswith("0.0015 s is more than the 1.5e-06 s one way"), info.value.problem
