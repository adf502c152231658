"""Tester t4 of session 26, finding 4: ``waitlab capture`` and ``waitlab import-otf2`` printed the replay scenario
mixed with prose and wrote it nowhere (``capture ... > replay.toml`` was not TOML; ``--quiet`` printed nothing).
Both now write it into the trace folder as ``replay.toml`` (listed in the folder's record, so ``--force`` still
replaces the folder) and name it in what they print."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.experiments.run_folder import MARKER

try:
    import otf2  # noqa: F401

    HAVE_OTF2 = shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None

SCOREP = Path(__file__).parent / "data" / "scorep_ping_pong" / "traces.otf2"
PROGRAMS = Path(__file__).resolve().parent / "programs"


def _printed_replay(out: str, folder: Path) -> str:
    """The scenario printed after the line naming ``folder/replay.toml``."""
    head = f"its replay scenario: {folder / 'replay.toml'} (run it: waitlab run {folder / 'replay.toml'};"
    assert head in out, out
    return out.split(head, 1)[1].split("\n\n", 1)[1]


@pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / a C compiler not installed")
def test_import_otf2_writes_its_replay_scenario_into_the_trace_folder(tmp_path: Path, capsys) -> None:
    out = tmp_path / "t"
    assert main(["import-otf2", str(SCOREP), "-o", str(out)]) == 0
    replay = out / "replay.toml"
    text = replay.read_text()
    assert _printed_replay(capsys.readouterr().out, out).strip() == text.strip()
    # the scenario_ping_pong archive: 2 ranks, replayed from the folder's index on the default platform
    assert tomllib.loads(text) == {"scenario": {"name": "scorep_ping_pong-replay", "ranks": 2},
                                   "platform": {"name": "dawning_5000a"},
                                   "application": {"kind": "trace", "trace": str((out / "index.txt").resolve())}}
    assert api.load_scenario(replay).ranks == 2
    assert "replay.toml" in json.loads((out / MARKER).read_text())["files"]
    assert main(["import-otf2", str(SCOREP), "-o", str(out), "--quiet"]) == 2  # not replaced without --force
    assert main(["import-otf2", str(SCOREP), "-o", str(out), "--force", "--quiet"]) == 0  # its own folder
    assert capsys.readouterr().out == "" and replay.read_text() == text


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_capture_writes_a_replay_scenario_that_runs(tmp_path: Path, capsys) -> None:
    """late_sender.c: rank 0 computes 0.25 s before its send, so rank 1 waits 0.25 s (late sender); the scenario
    the capture wrote replays that on the captured placement (2 ranks on 1 node of dawning_5000a)."""
    (tmp_path / "ls.toml").write_text(f'[scenario]\nname = "ls"\nranks = 2\n\n[platform]\nname = "dawning_5000a"\n\n'
                                      f'[application]\nkind = "program"\nsources = ["{PROGRAMS / "late_sender.c"}"]\n')
    out = tmp_path / "traces" / "ls"
    assert main(["capture", str(tmp_path / "ls.toml"), "-o", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == ""  # --quiet: nothing printed, the scenario is in the folder
    text = (out / "replay.toml").read_text()
    data = tomllib.loads(text)
    assert data["application"] == {"kind": "trace", "trace": str((out / "index.txt").resolve())}
    assert data["scenario"]["name"] == "ls-replay" and data["platform"]["nodes"] == 1
    assert text == api.trace_scenario_text((out / "index.txt").resolve(), api.load_scenario(tmp_path / "ls.toml"))
    run = api.run(out / "replay.toml", tmp_path / "replayed")
    waits = run.result.waits
    assert float(waits["wait"].sum()) == pytest.approx(0.25, abs=1e-3)
    assert set(waits["pattern"].astype(str)) == {"late_sender"}
