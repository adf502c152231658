"""Issue 40, items 2 and 4-7: one test per class of the hostile inputs an independent corpus found.

Every case of ``tests/bad_inputs_issue40.py`` also runs through the corpus test (exit status 2, one line naming
the file and field, nothing left behind); here each class gets what the corpus test cannot see: a real ``cp``,
what ``--trust-edited`` marks, subprocesses (a terminal's view: no traceback, no hang), the bytes of a message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_inputs_corpus import CASES, GOOD, write
from bad_inputs_files import GOOD_RUN, TRACE, TRACE_SCENARIO
from bad_inputs_issue40 import (
    ACCEPTED,
    COMMANDS,
    HANGS,
    HAVE_OTF2,
    INTEGRITY,
    NOISY,
    SCOREP,
    TRACEBACKS,
    good_diagnosis,
)

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.simulator.ti_trace import parse_ti_trace

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not GOOD_RUN:
        d = tmp_path_factory.mktemp("good-run")
        write(d / "s.toml", GOOD)
        assert main(["run", str(d / "s.toml"), "-o", str(d / "run"), "--no-png", "-q"]) == 0
        GOOD_RUN.append(d / "run")
    return GOOD_RUN[0]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "waitlab.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_every_class_is_in_the_corpus() -> None:
    ids = {c.id for c in CASES}
    for group in (INTEGRITY, TRACEBACKS, ACCEPTED, NOISY, *([HANGS] if HAVE_OTF2 else [])):
        assert group and set(group) <= ids


def test_integrity_cannot_be_switched_off(good_run: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``cp r/* dest/`` leaves the record behind: every reader refuses, saying so; --trust-edited marks every
    output; a diagnosis is checked against its run."""
    dest = tmp_path / "dest"
    dest.mkdir()
    subprocess.run(f"cp {good_run}/* {dest}/", shell=True, check=False, capture_output=True)
    assert (dest / "events.parquet").is_file() and not (dest / ".waitlab").exists()  # what cp did
    before = sorted(p.name for p in dest.iterdir())
    for name, argv in COMMANDS.items():
        assert main(argv(dest, tmp_path)) == 2, name
        line = _one_line(capsys)
        assert f"{dest}/.waitlab" in line and "is missing" in line and "cp RUN/* DEST/" in line, line
        assert "--trust-edited" in line and "re-run `waitlab run`" in line, line
        assert sorted(p.name for p in dest.iterdir()) == before and not (tmp_path / "out").exists(), name
    with pytest.raises(InputError, match="integrity record"):
        api.load_run(dest)
    assert ".waitlab" in api.load_run(dest, trust_edited=True).edited
    assert api.integrity(good_run) == ""

    # --trust-edited reads it, and every output says so
    assert main(["diagnose", str(dest), "--no-truth", "--no-png", "--trust-edited", "-q"]) == 0
    assert ".waitlab" in json.loads((dest / "diagnosis" / "diagnosis.json").read_text())["metadata"]["trust_edited"]
    assert "Made from an edited results folder" in (dest / "report.html").read_text()  # the run's page gains it
    assert main(["export", str(dest), "--chrome", "-o", str(tmp_path / "x"), "--trust-edited", "-q"]) == 0
    assert ".waitlab" in json.loads((tmp_path / "x" / "trace.json").read_text())["otherData"]["trust_edited"]
    capsys.readouterr()
    assert main(["compare", str(good_run), str(dest), "--trust-edited"]) == 0
    out, err = capsys.readouterr()
    assert "note: B was read with --trust-edited" in out and err.count("waitlab: warning:") == 1
    assert main(["check-c", str(dest), "--trust-edited", "--json"]) == 0
    assert ".waitlab" in json.loads(capsys.readouterr().out)["trust_edited"][str(dest)]

    # the diagnosis waitlab diagnose wrote belongs to the run; the one of the edited copy does not (other events:
    # none here, so it is refused for its record only when copied alone)
    assert api.report(good_run, good_diagnosis()).is_file()
    assert json.loads(good_diagnosis().read_text())["run"]["ranks"] == 4
    alone = Path(shutil.copy(good_diagnosis(), tmp_path / "diagnosis.json"))
    with pytest.raises(InputError, match=r"\.waitlab: \(integrity record\): is missing"):
        api.report(good_run, alone)


def test_no_traceback_is_left(tmp_path: Path) -> None:
    """What ended in RecursionError, MemoryError, UnicodeDecodeError or the OTF2 bindings' traceback, seen from a
    terminal: one line, rc 2, nothing written."""
    deep = write(tmp_path / "s.toml", GOOD + "\n[simulation]\n" + ".".join(["k"] * 10_000) + " = 1\n")
    proc = _cli("run", str(deep), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "nests more than 64" in proc.stderr and not (tmp_path / "out").exists()
    if HAVE_OTF2:
        shutil.copytree(SCOREP, tmp_path / "exp")
        defs = tmp_path / "exp" / "traces.def"
        defs.write_bytes(defs.read_bytes().replace(b"int main(int, char**)", b"int m\xe9in(int, char**)"))
        proc = _cli("import-otf2", str(tmp_path / "exp" / "traces.otf2"), "-o", str(tmp_path / "imp"))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "unhandled python exception" not in proc.stderr and "not UTF-8" in proc.stderr, proc.stderr
        assert not (tmp_path / "imp").exists()


def test_what_was_accepted_silently_is_refused(tmp_path: Path) -> None:
    """A Latin-1 region is refused at its line and byte, not kept as U+FFFD; the same name in UTF-8 is kept."""
    body = TRACE.replace("0 compute 1e6\n", "0 compute 1e6\n0 enter R\xe9gion\n0 leave R\xe9gion\n")
    latin = write(tmp_path / "latin.txt", body.encode("latin-1"))
    with pytest.raises(InputError, match=r"line 4: is not UTF-8 text \(byte 0xe9 at column 10\)"):
        parse_ti_trace(latin, flops_per_second=1e9, n_ranks=2)
    utf8 = write(tmp_path / "utf8.txt", body.encode("utf-8"))
    names = parse_ti_trace(utf8, flops_per_second=1e9, n_ranks=2).ops.names
    assert "R\xe9gion" in names and not any("\ufffd" in n for n in names)


@pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / a C compiler not installed")
def test_a_fifo_in_an_archive_does_not_hang(tmp_path: Path) -> None:
    shutil.copytree(SCOREP, tmp_path / "exp")
    (tmp_path / "exp" / "traces" / "0.evt").unlink()
    os.mkfifo(tmp_path / "exp" / "traces" / "0.evt")  # nobody ever writes to it
    start = time.monotonic()
    proc = _cli("import-otf2", str(tmp_path / "exp" / "traces.otf2"), "-o", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "0.evt: (file): is not a regular file" in proc.stderr and time.monotonic() - start < 60
    assert not (tmp_path / "out").exists()


def test_noisy_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A binary trace is not echoed; SimGrid's abort on a setting is one line (checked before the run for the keys
    a bare engine knows, reduced from SMPI's own words for the others)."""
    write(tmp_path / "t" / "trace.txt", bytes(range(1, 128)) * 4)
    s = write(tmp_path / "s.toml", TRACE_SCENARIO)
    assert main(["run", str(s), "-o", str(tmp_path / "out"), "--no-png"]) == 2
    line = _one_line(capsys)
    assert line.isprintable() and "control character 0x01" in line, line
    for key, value, words in (("maxmin/precision", "banana", "as a number; 'banana' is not one"),
                              ("network/model", "Nonsense", "Valid models are: LV08"),
                              ("smpi/os", "banana", "Invalid factor in chunk 1: banana")):
        s = write(tmp_path / "c.toml", f'{GOOD}\n[simulation.config]\n"{key}" = "{value}"\n')
        assert main(["run", str(s), "-o", str(tmp_path / "out"), "--no-png"]) == 2, key
        line = _one_line(capsys)
        assert "c.toml" in line and words in line and "simulation.config" in line, line
        assert not (tmp_path / "out").exists()


@pytest.mark.simgrid
def test_a_dask_sweep_onto_a_full_disk_says_one_line(tmp_path: Path, small_disk: Path) -> None:
    """distributed's own log (a failed task's traceback, workers killed at the end) stays out of the terminal."""
    disk = small_disk
    with open(disk / "filler", "wb") as fh:  # room for the sweep's tables, not for a point
        fh.write(b"\0" * (shutil.disk_usage(disk).free - 100_000))
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3]\n'
          '[sweep]\nname = "full"\nworkers = 1\n')
    proc = _cli("sweep", str(tmp_path / "sw.toml"), "-o", str(disk / "out"), "--executor", "dask",
                timeout=300)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "No space left on device: the disk is full" in lines[0], proc.stderr
    assert not list((disk / "out" / "runs").glob(".*"))  # nothing partial
