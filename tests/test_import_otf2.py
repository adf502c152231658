"""``waitlab import-otf2`` (issue 25): an OTF2 archive converted once into a TI trace folder replays exactly as
``kind = "otf2"`` on the platform it was converted for, and bad input is one line."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError

try:
    import otf2  # noqa: F401

    HAVE_OTF2 = shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
pytestmark = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / a C compiler not installed")

SCOREP = Path(__file__).parent / "data" / "scorep_ping_pong" / "traces.otf2"


def test_import_writes_a_trace_folder_and_a_scenario(tmp_path: Path) -> None:
    index, text = api.import_otf2(SCOREP, tmp_path / "t", platform="dawning_5000a", cpu_ratio=2.0)
    meta = json.loads((tmp_path / "t" / "import.json").read_text())
    assert meta["ranks"] == 2 and meta["cpu_ratio"] == 2.0 and meta["regions"] == ["main"]
    assert index.is_file() and index.parent == tmp_path / "t"
    scenario = tomllib.loads(text)
    assert scenario["application"] == {"kind": "trace", "trace": str(index.resolve())}
    assert scenario["scenario"]["ranks"] == 2 and scenario["platform"]["name"] == "dawning_5000a"
    # the trace holds the Score-P region and the 8 sends / 8 receives per rank of the ping-pong
    text_lines = "".join(p.read_text() for p in sorted((tmp_path / "t").glob("*.txt")) if p != index)
    assert "enter main" in text_lines and "leave main" in text_lines
    assert sum(ln.split()[1:2] == ["send"] for ln in text_lines.splitlines()) == 16
    # converting again gives the same bytes (deterministic)
    api.import_otf2(SCOREP, tmp_path / "u", platform="dawning_5000a", cpu_ratio=2.0)
    for f in sorted((tmp_path / "t").iterdir()):
        if f.suffix == ".txt":
            assert f.read_bytes() == (tmp_path / "u" / f.name).read_bytes()


@pytest.mark.simgrid
def test_imported_trace_replays_as_the_archive_does(tmp_path: Path) -> None:
    """kind = "trace" on the converted folder gives the events of kind = "otf2" on the same platform."""
    shutil.copytree(SCOREP.parent, tmp_path / "exp")
    _, text = api.import_otf2(tmp_path / "exp" / "traces.otf2", tmp_path / "t", platform="dawning_5000a",
                                  cpu_ratio=3.0)
    (tmp_path / "trace.toml").write_text(text)
    (tmp_path / "otf2.toml").write_text('[scenario]\nname = "direct"\nranks = 2\n[platform]\nname = "dawning_5000a"'
                                        '\n[application]\nkind = "otf2"\ntrace = "exp/traces.otf2"\ncpu_ratio = 3.0\n')
    via_trace = api.run(tmp_path / "trace.toml", tmp_path / "a").result
    direct = api.run(tmp_path / "otf2.toml", tmp_path / "b").result
    a, b = via_trace.events, direct.events
    assert len(a) == len(b) and list(a["op"].astype(str)) == list(b["op"].astype(str))
    assert a["exit"].max() == pytest.approx(b["exit"].max(), rel=1e-9)
    assert a["exit"].to_numpy() == pytest.approx(b["exit"].to_numpy(), rel=1e-9, abs=1e-12)
    wa = via_trace.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    wb = direct.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    assert wa.sum() > 0 and wa.to_numpy() == pytest.approx(wb.to_numpy(), rel=1e-9, abs=1e-12)
    assert set(via_trace.waits["region"].astype(str)) == {"main"}


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.otf2").write_text("not an archive\n")
    for argv, needle in (
        ([str(tmp_path / "missing.otf2")], "does not exist"),
        ([str(tmp_path / "junk.otf2")], "cannot be read as OTF2"),
        ([str(SCOREP), "--cpu-ratio", "-1"], "--cpu-ratio"),
        ([str(SCOREP), "--cpu-ratio", "nan"], "--cpu-ratio"),
        ([str(SCOREP), "--platform", "no_such_machine"], "no_such_machine"),
    ):
        code = main(["import-otf2", *argv, "-o", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code != 0 and needle in err and "\n" not in err and "Traceback" not in err, (argv, err)
        assert not (tmp_path / "out").exists()  # nothing partial left
    api.import_otf2(SCOREP, tmp_path / "out")
    with pytest.raises(InputError):  # an existing folder is not replaced without force
        api.import_otf2(SCOREP, tmp_path / "out")
    api.import_otf2(SCOREP, tmp_path / "out", force=True)
