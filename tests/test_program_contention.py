"""Real programs get the same machine model as every other run (issue 39): the platform's contention laws act on a
program run through the same plugin as on a replay, run.json records the laws that acted, a program's capture
replays to the program's own figures, and the stock re-run recipe loads the plugin too."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from program_scenarios import PROGRAMS, needs_smpi

from waitlab import api
from waitlab.errors import SimulationError
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.contention import saturation_throughput
from waitlab.platforms import load_platform
from waitlab.simulator import smpi

S = 4 * 2**20  # each sender's message: 4 MiB (tests/programs/incast.c's default)


def incast(tmp: Path, contention: str, ranks: int = 5, platform: str = "dawning_5000a", rpn: int = 1) -> Scenario:
    """tests/programs/incast.c: ranks 1 .. ranks-1 each send S bytes to rank 0 at once."""
    path = tmp / f"incast-{contention}.toml"
    data = {"scenario": {"name": "incast", "ranks": ranks},
            "platform": {"name": platform, "ranks_per_node": rpn},
            "application": {"kind": "program", "sources": [str(PROGRAMS / "incast.c")]},
            "simulation": {"contention": contention}}
    sc = from_mapping(data, str(path))
    path.write_text(sc.to_toml())
    return sc


def makespan(folder: Path) -> float:
    return float(json.loads((folder / "summary.json").read_text())["makespan"])


@pytest.mark.simgrid
@needs_smpi
def test_incast_program_gets_the_hol_law_its_capture_and_stock_rerun_agree(tmp_path: Path) -> None:
    # Dawning 5000A, one rank per node: four 4 MiB messages into rank 0's switch output port.  The hand value:
    # the MPI-level rate B (mpi.inter_node's largest message, 1.5 GB/s) loses the HOL factor of 4 input ports at
    # the port's data rate P = 2.0 GB/s: min(1, P/B x f(4)), f(4) = 0.6553 (Karol et al. table; the exact chain of
    # waitlab.models.contention), 4/3 x 0.65524 = 0.8737; 4 x 4 MiB / (1.5e9 x 0.8737) = 12.80 ms.
    m = load_platform("dawning_5000a")
    assert m.mpi is not None and m.contention.port_bandwidth is not None
    last = m.mpi.inter_node[-1]
    b = last.size / last.seconds
    assert b == pytest.approx(1.5e9, rel=1e-3)
    factor = min(1.0, m.contention.port_bandwidth / b * saturation_throughput(4))
    assert factor == pytest.approx(0.8737, abs=1e-4)
    law, none = 4 * S / (b * factor), 4 * S / b  # 12.80 ms and 11.18 ms
    sc = incast(tmp_path, "platform")
    api.run(sc, tmp_path / "law")
    api.run(incast(tmp_path, "none"), tmp_path / "none")
    assert makespan(tmp_path / "law") == pytest.approx(law, rel=0.01)
    assert makespan(tmp_path / "none") == pytest.approx(none, rel=0.01)
    # run.json records the laws that acted: the HOL law on the 5 nodes' ports, the memory path on their loopbacks
    rec = json.loads((tmp_path / "law" / "run.json").read_text())["contention"]
    assert rec["law"] == "karol_hol" and rec["acted"] == {"hol": 5, "mem": 5}
    assert json.loads((tmp_path / "none" / "run.json").read_text())["contention"]["acted"] == {}
    # its capture is kept (the program and the replay have the same law) and replays to the run's figure
    index = api.capture(sc, tmp_path / "cap")
    check = json.loads((index.parent / "capture.json").read_text())["replay_check"]
    assert check["replay"]["makespan"] == pytest.approx(makespan(tmp_path / "law"), rel=1e-3)
    assert check["live"]["makespan"] == makespan(tmp_path / "law")
    # the stock re-run recipe ships the plugin and gives waitlab's number with stock smpirun
    rerun = tmp_path / "law" / "program" / "rerun"
    assert (rerun / "waitlab_contention.so").is_file() and "LD_PRELOAD=./waitlab_contention.so" in (
        rerun / "smpirun.sh").read_text()
    out = subprocess.run(["sh", str(rerun / "smpirun.sh"), "--cfg=smpi/display-timing:yes", "--log=root.thres:info"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.search(r"Simulated time: ([0-9.e+-]+) seconds", out.stdout + out.stderr)
    assert found is not None and float(found.group(1)) == pytest.approx(makespan(tmp_path / "law"), rel=1e-5)
    assert "waitlab contention: hol law on 5 links" in out.stdout + out.stderr


@pytest.mark.simgrid
@needs_smpi
def test_on_node_incast_program_shares_the_memory_path(tmp_path: Path) -> None:
    # DeepComp 7000, 8 ranks on one node: 7 x 4 MiB on-node messages into rank 0 together cannot exceed the
    # node's memory bandwidth (intra_node.memory_bandwidth), while each alone keeps the calibrated on-node rate.
    m = load_platform("deepcomp_7000")
    assert m.memory_bandwidth is not None
    api.run(incast(tmp_path, "platform", ranks=8, platform="deepcomp_7000", rpn=8), tmp_path / "law")
    assert 7 * S / makespan(tmp_path / "law") == pytest.approx(m.memory_bandwidth, rel=0.01)
    assert json.loads((tmp_path / "law" / "run.json").read_text())["contention"]["acted"].get("mem") == 1


@pytest.mark.simgrid
@needs_smpi
def test_osu_style_alltoall_capture_is_kept_under_the_law(tmp_path: Path) -> None:
    # 16 ranks on 4 nodes, 10 alltoalls of 64 KiB per peer (benchmarks/programs/alltoall.c): the traffic contends
    # (the law adds ~7% to the run); the capture of the program is kept and its replay gives the run's figures.
    src = Path(__file__).resolve().parents[1] / "benchmarks" / "programs" / "alltoall.c"

    def scenario(contention: str) -> Scenario:
        data = {"scenario": {"name": "alltoall", "ranks": 16},
                "platform": {"name": "dawning_5000a", "ranks_per_node": 4},
                "application": {"kind": "program", "sources": [str(src)]},
                "simulation": {"contention": contention}}
        return from_mapping(data, str(tmp_path / f"alltoall-{contention}.toml"))

    index = api.capture(scenario("platform"), tmp_path / "cap")
    check = json.loads((index.parent / "capture.json").read_text())["replay_check"]
    assert check["replay"] == pytest.approx(check["live"], rel=1e-3)
    api.run(scenario("none"), tmp_path / "none")
    assert check["live"]["makespan"] > 1.05 * makespan(tmp_path / "none")


def test_plugin_wrapper_and_the_laws_acted() -> None:
    plugin = Path("/cache/waitlab-contention-0123")
    assert smpi.plugin_wrapper([], plugin) == ["-wrapper", f"env LD_PRELOAD={plugin}"]
    assert smpi.plugin_wrapper(["-wrapper", "/usr/bin/setpriv --pdeathsig KILL", "-trace"], plugin) == \
        ["-wrapper", f"/usr/bin/setpriv --pdeathsig KILL env LD_PRELOAD={plugin}", "-trace"]
    with pytest.raises(smpi.ConfigKeyError, match="WAITLAB_CACHE"):
        smpi.plugin_wrapper([], Path("/my cache/waitlab-contention-0123"))
    out = "hello\nwaitlab contention: hol law on 5 links\nwaitlab contention: mem law on 5 links\nrank 0 done\n"
    assert smpi.laws_acted(out) == {"hol": 5, "mem": 5} and smpi.laws_acted("hello\n") == {}
    assert smpi.plugin_environment({"waitlab/contention": "hol:*_DOWN:inputs:1,0.75", "smpi/os": "0:1e-7:0"}) == \
        {"WAITLAB_CONTENTION": "hol:*_DOWN:inputs:1,0.75"}


@pytest.mark.simgrid
@needs_smpi
def test_a_law_that_did_not_act_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the plugin not loaded (ld.so ignores a missing LD_PRELOAD object): the run has no law, and says so
    monkeypatch.setattr(smpi, "contention_plugin", lambda: tmp_path / "missing-plugin")
    with pytest.raises(SimulationError, match="contention laws did not act"):
        api.run(incast(tmp_path, "platform"), tmp_path / "out")
