"""Errors of the Python API name the Python argument, the command line's its flag (round 21); ``diagnose`` refuses
out-of-range options before it reads anything; ``export`` takes one format name."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario_files import TINY

import waitlab
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.diagnosis.diagnose import run_models
from waitlab.experiments.diagnosis.names import FlagValue
from waitlab.models.analysis.waitstates import make_events, wait_states


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("r21")
    (d / "s.toml").write_text(TINY)
    waitlab.run(d / "s.toml", d / "run")
    return d / "run"


@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"threshold": -1}, "threshold", "must be a number in [0, 1), got -1"),
    ({"threshold": float("nan")}, "threshold", "must be a number in [0, 1), got nan"),
    ({"top_k": 0}, "top_k", "must be a whole number >= 1, got 0"),
    ({"top_k": 2.5}, "top_k", "must be a whole number >= 1, got 2.5"),
    ({"n_candidates": -1}, "n_candidates", "must be a whole number >= 0, got -1"),
    ({"tie_relative": 1.0}, "tie_relative", "must be a number in [0, 1), got 1.0"),
    ({"model_timeout": 0}, "model_timeout", "must be a number of seconds > 0, got 0"),
    ({"models": "cwpdm"}, "models", "must be a list of models, got the text 'cwpdm'"),
])
def test_diagnose_refuses_an_option_out_of_range_naming_it(kwargs: dict[str, object], field: str, words: str,
                                                          tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:  # before anything is read: the folder does not even exist
        waitlab.diagnose(tmp_path / "nothing", **kwargs)  # type: ignore[arg-type]
    assert (exc.value.file, exc.value.field) == ("(python call)", field)
    assert words in exc.value.problem and "--" not in str(exc.value)


def test_a_models_error_names_the_python_argument_or_the_flag() -> None:
    ev = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 2.0], exit=[2.0, 2.0], match=[0, 0])
    with pytest.raises(InputError) as exc:
        run_models(ev, wait_states(ev), models=["nosuch"])
    assert str(exc.value).startswith("(python call): models: unknown model 'nosuch'")
    with pytest.raises(InputError) as exc:
        run_models(ev, wait_states(ev), models=[FlagValue("nosuch", "--model")])
    assert str(exc.value).startswith("(command line): --model: unknown model 'nosuch'")
    with pytest.raises(InputError) as exc:
        waitlab.check_model("nosuch")
    assert str(exc.value).startswith("(python call): model: unknown model 'nosuch'")
    with pytest.raises(InputError) as exc:
        run_models(ev, wait_states(ev), models=["a:b"], model_timeout=-1)
    assert str(exc.value).startswith("(python call): model_timeout: must be a positive number of seconds, got -1")


def test_diagnose_from_python_names_models(folder: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.diagnose(folder, models=["nosuch"], truth=False)
    assert str(exc.value).startswith("(python call): models: unknown model 'nosuch'")


def test_the_command_line_keeps_its_flags(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(folder), "--no-truth", "-o", str(tmp_path / "d"), "--model", "nosuch", "-q"]) == 2
    assert "waitlab: error: (command line): --model: unknown model 'nosuch'" in capsys.readouterr().err


def test_export_takes_one_format_name(folder: Path, tmp_path: Path) -> None:
    written = waitlab.api.export(folder, "chrome", tmp_path / "x")
    assert list(written) == ["chrome"] and written["chrome"] == tmp_path / "x" / "trace.json"
    assert written["chrome"].is_file()


@pytest.mark.parametrize(("formats", "words"), [
    (("otf2", "pdf"), "unknown export format 'pdf'"),
    ("pdf", "unknown export format 'pdf'"),
    ((), "must be a format name or a tuple of them, got ()"),
    (3, "must be a format name or a tuple of them, got 3"),
])
def test_export_refuses_a_wrong_format_naming_the_argument(formats: object, words: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        waitlab.api.export(tmp_path / "nothing", formats)  # type: ignore[arg-type]
    assert (exc.value.file, exc.value.field) == ("(python call)", "formats") and words in exc.value.problem
    assert "['" not in str(exc.value)


def test_diagnose_with_an_output_folder_leaves_the_run_untouched(folder: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    page = (folder / "report.html").read_bytes()
    assert main(["diagnose", str(folder), "--no-truth", "--no-png", "-o", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "diagnosis.json").is_file()
    assert (folder / "report.html").read_bytes() == page  # written only where asked
    assert not (folder / "diagnosis").exists()
    out = capsys.readouterr().out
    assert f"report written to {tmp_path / 'd'}/\n" in out and "report.html" not in out.splitlines()[-1]


def test_diagnose_refuses_a_tie_relative_out_of_range_naming_the_flag(folder: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(folder), "--no-truth", "--tie-relative", "2", "-q"]) == 2
    assert "waitlab: error: (command line): --tie-relative: must be in [0, 1), got 2.0" in capsys.readouterr().err
