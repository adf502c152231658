"""Tester t4's finding 6: typo help everywhere, and the command line takes options only as written.

An unknown key or section that looks like an allowed one is named with it, wherever a scenario or a platform file is
read (:func:`waitlab.errors.unknown_name`, difflib); an abbreviated option is refused (``--otf`` was taken
as ``--otf2``); an unknown option of a sub-command is refused with that sub-command's usage line and the option it
looks like (it was the top-level usage, no suggestion); an empty scenario names every missing section in one line;
a scenario read from standard input says its relative paths are read from the current folder.
"""

from __future__ import annotations

import argparse
import io
import tomllib
from pathlib import Path

import pytest

from waitlab.cli import build_parser, main
from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping, load_scenario
from waitlab.platforms.model import load_platform

GOOD = '[scenario]\nname = "t"\nranks = 4\n\n[platform]\nname = "dawning_5000a"\n\n[application]\nkind = "stencil"\n'

PLATFORM = """name = "mine"
[machine]
max_nodes = { value = 64, source = "inventory" }
[node]
cores = { value = 16, source = "sheet" }
core_speed = { value = 2.0e10, assumed = true, reason = "2.5 GHz x 8" }
memory = { value = 68719476736, source = "sheet" }
[intra_node]
bandwidth = { value = 8.0e9, assumed = true, reason = "shm" }
latency = { value = 4.0e-7, assumed = true, reason = "shm" }
[inter_node]
bandwidth = { value = 1.25e10, source = "EDR" }
latency = { value = 1.0e-6, source = "osu" }
[topology]
kind = "fat_tree"
leaf_size = { value = 18, source = "36 ports" }
taper = { value = 2.0, source = "9 uplinks" }
hop_latency = { value = 1.0e-7, assumed = true, reason = "one hop" }
[disk]
bandwidth = { value = 5.0e8, assumed = true, reason = "NVMe" }
latency = { value = 1.0e-4, assumed = true, reason = "NVMe" }
[trace]
buffer_memory = { value = 17179869184, assumed = true, reason = "a quarter" }
"""


def _error(path: Path, text: str) -> InputError:
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_scenario(path)
    return exc.value


@pytest.mark.parametrize("text, field, typo, meant", [
    (GOOD + "stpes = 5\n", "application.stpes", "stpes", "steps"),
    (GOOD + '[simulaton]\nalltoall = "ring"\n', "simulaton", "simulaton", "simulation"),
    (GOOD + '[[application.imbalance]]\nregion = "Stencil"\nrank = [1]\nmagnitude = 0.1\n',
     "application.imbalance[0].rank", "rank", "ranks"),
    (GOOD + '[noise]\nmodle = "periodic"\n', "noise.modle", "modle", "model"),
    (GOOD.replace('name = "dawning_5000a"', 'name = "dawning_5000a"\nnodse = 2'), "platform.nodse", "nodse", "nodes"),
])  # fmt: skip
def test_scenario_typos_name_the_key_they_look_like(tmp_path: Path, text: str, field: str, typo: str,
                                                    meant: str) -> None:
    err = _error(tmp_path / "s.toml", text)
    what = "section" if "." not in field else "key"
    assert (err.field, err.problem, err.fix) == (field, f"unknown {what} {typo!r} (did you mean {meant!r}?)",
                                                 f"rename {typo} to {meant}")


def test_an_unknown_key_like_no_other_still_lists_the_allowed_ones(tmp_path: Path) -> None:
    err = _error(tmp_path / "s.toml", GOOD + "colour = 5\n")
    assert err.field == "application.colour" and err.problem == "unknown key"
    assert err.fix.startswith("allowed keys: steps, imbalance, dims")
    err = _error(tmp_path / "s.toml", GOOD + "[zebra]\n")
    assert (err.problem, err.fix.split(":")[0]) == ("unknown section", "allowed sections")


@pytest.mark.parametrize("old, new, field, typo, meant", [
    ("taper =", "tapper =", "topology.tapper", "tapper", "taper"),
    ('source = "inventory"', 'sorce = "inventory"', "machine.max_nodes.sorce", "sorce", "source"),
    ('name = "mine"', 'name = "mine"\ndescripton = "x"', "descripton", "descripton", "description"),
])  # fmt: skip
def test_platform_typos_name_the_key_they_look_like(tmp_path: Path, old: str, new: str, field: str, typo: str,
                                                    meant: str) -> None:
    good = tmp_path / "mine.toml"
    good.write_text(PLATFORM)
    assert load_platform(good).name == "mine"
    bad = tmp_path / "bad.toml"
    bad.write_text(PLATFORM.replace(old, new))
    with pytest.raises(InputError) as exc:
        load_platform(bad)
    assert (exc.value.field, exc.value.problem, exc.value.fix) == (
        field, f"unknown key {typo!r} (did you mean {meant!r}?)", f"rename {typo} to {meant}")


def test_an_empty_scenario_names_every_missing_section(tmp_path: Path) -> None:
    err = _error(tmp_path / "empty.toml", "")
    assert err.problem == "sections [scenario], [platform] and [application] are missing"
    assert err.fix == ('add [scenario] with ranks = 64, [platform] with name = "dawning_5000a", [application] with '
                       'kind = "stencil"')
    err = _error(tmp_path / "s.toml", GOOD.split("[application]")[0])  # one missing: as before
    assert (err.field, err.problem) == ("application", "section is missing")


def test_stdin_paths_are_said_to_be_relative_to_the_current_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    noise = GOOD + '[noise]\nmodel = "signature"\nfile = "sig.txt"\n'
    monkeypatch.setattr("sys.stdin", io.StringIO(noise))
    with pytest.raises(InputError) as exc:
        load_scenario("-")
    assert exc.value.field == "noise.file" and str(tmp_path / "sig.txt") in exc.value.problem
    assert "read from standard input are relative to the current folder" in exc.value.fix
    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD.replace('"dawning_5000a"', '"mine.toml"')))
    with pytest.raises(InputError) as exc:
        load_scenario("-")
    assert exc.value.field == "platform.name" and "relative to the current folder" in exc.value.fix
    (tmp_path / "sig.txt").write_text("0.0 0.001\n")  # there: read from the current folder
    monkeypatch.setattr("sys.stdin", io.StringIO(noise + "period = 0.5\n"))
    assert load_scenario("-").noise.file == str(tmp_path / "sig.txt")
    s = tmp_path / "sub"
    s.mkdir()
    with pytest.raises(InputError) as exc:  # a scenario file's platform: relative to its folder
        from_mapping(tomllib.loads(GOOD.replace('"dawning_5000a"', '"mine.toml"')), str(s / "a.toml"))
    assert exc.value.fix.startswith("relative paths are relative to the scenario file")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **action.choices}


def test_no_parser_takes_abbreviations() -> None:
    assert all(not p.allow_abbrev for p in _subparsers().values())


@pytest.mark.parametrize("argv, usage, message", [
    (["run", "x.toml", "--forse"], "usage: waitlab run ", "unrecognized arguments: --forse (did you mean --force?)"),
    (["export", "results/x", "--otf"], "usage: waitlab export ",
     "unrecognized arguments: --otf (did you mean --otf2?)"),
    (["run", "x.toml", "y.toml"], "usage: waitlab run ", "unrecognized arguments: y.toml\n"),
    (["diagnose", "r", "--workers=2", "--zzz"], "usage: waitlab diagnose ", "unrecognized arguments: --zzz\n"),
])  # fmt: skip
def test_an_unknown_option_gets_its_commands_usage_and_a_suggestion(argv: list[str], usage: str, message: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(usage) and f"error: {message}" in err, err
