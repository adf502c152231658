"""One machine model: the same scenario gives the same bytes through ``waitlab run``, a one-point sweep and the
Rao et al. reproduction's own point; the HOL law and the memory path under real SMPI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from waitlab.cli import main
from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.reproduce.alltoall_points import alltoall_point, point_scenario
from waitlab.experiments.scenario import from_mapping
from waitlab.models.contention import saturation_throughput
from waitlab.models.ops import OpBuilder
from waitlab.platforms import load_platform

S = 4 * 2**20  # 4 MiB: latency is < 0.1% of the transfer


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "timing.json"}


@pytest.mark.simgrid
def test_run_sweep_and_reproduction_point_give_the_same_bytes(tmp_path: Path) -> None:
    sc = point_scenario("dawning_5000a", "ring", 16, 4096)
    (tmp_path / "point.toml").write_text(sc.to_toml())
    assert main(["run", str(tmp_path / "point.toml"), "-o", str(tmp_path / "run"), "--no-png", "-q"]) == 0
    again = tmp_path / "run" / "scenario.toml"
    assert main(["run", str(again), "-o", str(tmp_path / "rerun"), "--no-png", "-q"]) == 0
    assert files(tmp_path / "run") == files(tmp_path / "rerun")
    (tmp_path / "sweep.toml").write_text('base = "point.toml"\n[grid]\n"scenario.seed" = [0]\n'
                                         '[sweep]\nname = "one"\nworkers = 1\n')
    assert main(["sweep", str(tmp_path / "sweep.toml"), "-o", str(tmp_path / "sweep"), "-q"]) == 0
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    swept = [p for p in (tmp_path / "sweep").rglob("run.json")]
    assert len(swept) == 1
    sweep_json = json.loads(swept[0].read_text())
    assert sweep_json["smpi_config"] == run_json["smpi_config"]
    tables = sorted(p.name for p in (tmp_path / "run").glob("*.parquet"))
    assert "events.parquet" in tables
    for name in tables:  # the event, wait-state and operation tables: the same bytes
        assert (tmp_path / "run" / name).read_bytes() == (swept[0].parent / name).read_bytes(), name
    # run.json records the law and every solver setting
    cfg = run_json["smpi_config"]
    assert cfg["maxmin/precision"] == "0.001" and cfg["surf/precision"] == "1e-07"
    assert cfg["waitlab/contention"].startswith("hol:") and run_json["contention"]["law"] == "karol_hol"
    # the reproduction's own point: the same simulated time, to the bit, as waitlab run's makespan
    point = alltoall_point("dawning_5000a", "ring", 16, 4096)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert point.seconds == summary["makespan"] == json.loads(
        (swept[0].parent / "summary.json").read_text())["makespan"]
    assert point.seconds == simulate_ops(prepare(sc)).summary["makespan"]


def _incast(n_send: int, contention: str, platform: str = "dawning_5000a", rpn: int = 1,
            senders: list[int] | None = None) -> float:
    """``n_send`` ranks (1 .. n_send, or ``senders``) each send ``S`` bytes (blocking, rendezvous) to rank 0; the
    time of the last exit."""
    src = np.arange(1, n_send + 1, dtype=np.int32) if senders is None else np.asarray(senders, np.int32)
    n_ranks = int(src.max()) + 1
    b = OpBuilder(n_ranks=n_ranks)
    b.add("irecv", np.zeros(src.size, np.int32), step=0, value=S, peer=src, tag=1)
    b.add("waitall", [0], step=0)
    b.add("send", src, step=0, value=S, peer=np.zeros(src.size, np.int32), tag=1)
    sc = from_mapping({"scenario": {"name": "incast", "ranks": n_ranks},
                       "platform": {"name": platform, "ranks_per_node": rpn},
                       "application": {"kind": "fft", "steps": 1}, "simulation": {"contention": contention}})
    return float(simulate_ops(prepare(sc), b.build()).events["exit"].max())


def _without_port_rate(tmp_path: Path) -> str:
    """Dawning's file without ``[contention] port_bandwidth``: the law at the MPI-level rate (r = 1)."""
    text = (Path(__file__).resolve().parents[1] / "platforms" / "data" / "dawning_5000a.toml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("port_bandwidth")]
    path = tmp_path / "dawning_no_port.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.simgrid
def test_two_equal_flows_into_one_receive_link_get_three_quarters(tmp_path: Path) -> None:
    # Karol et al., N = 2: 0.75 of the port's capacity (test_contention.py derives it by hand).  Two 4 MiB
    # flows from two nodes into one node's receive link: fluid sharing takes T, the law T / 0.75.
    plat = _without_port_rate(tmp_path)
    ratio = _incast(2, "none", plat) / _incast(2, "platform", plat)
    assert ratio == pytest.approx(0.75, rel=0.01)
    assert _incast(1, "none", plat) == _incast(1, "platform", plat)  # one input: nothing to block


@pytest.mark.simgrid
def test_hol_loss_at_the_port_data_rate() -> None:
    # Dawning's ports carry 2.0 GB/s of data, one MPI message 1.5 GB/s: r = 4/3, factor min(1, r f(n)).
    # 2 inputs: 4/3 x 0.75 = 1, no loss; 4 inputs: 4/3 x 0.65524 = 0.87366 (Karol et al.: f(4) = 0.6553).
    assert _incast(2, "none") / _incast(2, "platform") == pytest.approx(1.0, rel=0.01)
    assert _incast(4, "none") / _incast(4, "platform") == pytest.approx(4 / 3 * 0.65524, rel=0.01)


@pytest.mark.simgrid
def test_flows_from_one_node_count_as_one_input(tmp_path: Path) -> None:
    # At the pure law (no port headroom, where 2 inputs would lose 25%): 2 senders on one node (2 ranks per
    # node), the receiver on another: one input port, no HOL loss.
    plat = _without_port_rate(tmp_path)
    # ranks 0,1 on node 0 and 2,3 on node 1: rank 1 sends on-node, ranks 2 and 3 from one node: one input
    assert _incast(3, "platform", plat, rpn=2) == pytest.approx(_incast(3, "none", plat, rpn=2), rel=1e-9)
    assert saturation_throughput(2) < 1


@pytest.mark.simgrid
def test_eight_flows_from_two_nodes_are_two_inputs(tmp_path: Path) -> None:
    # A ring-like step: 8 ranks per node, 4 ranks of node 1 and 4 of node 2 send to rank 0 (node 0): 8 flows
    # through 2 input ports, Karol et al.'s f(2) = 0.75 (hand-computed in test_contention.py).  The earlier
    # flow-count proxy took the 8 flows as ceil(8 / 8) = 1 input and charged nothing.
    plat = _without_port_rate(tmp_path)
    senders = [8, 9, 10, 11, 16, 17, 18, 19]
    ratio = _incast(8, "none", plat, rpn=8, senders=senders) / _incast(8, "platform", plat, rpn=8, senders=senders)
    assert ratio == pytest.approx(0.75, rel=0.01)


@pytest.mark.simgrid
def test_on_node_messages_share_the_memory_path() -> None:
    # 7 ranks of one DeepComp node send 4 MiB each to rank 0 on the same node: fluid FATPIPE loopback lets each
    # go at the calibrated on-node rate; the memory path caps their sum at intra_node.memory_bandwidth.
    m = load_platform("deepcomp_7000")
    assert m.memory_bandwidth is not None
    t_law = _incast(7, "platform", "deepcomp_7000", rpn=8)
    t_none = _incast(7, "none", "deepcomp_7000", rpn=8)
    assert t_law > t_none
    # The memory figure exactly (today's fluid loopback gave 7 x 2.5 GB/s); latency is < 0.1% of the time.
    assert 7 * S / t_law == pytest.approx(m.memory_bandwidth, rel=0.01)
    assert 7 * S / t_none > 2 * m.memory_bandwidth
    one = _incast(1, "platform", "deepcomp_7000", rpn=8)  # one message alone keeps the calibrated rate
    assert one == pytest.approx(_incast(1, "none", "deepcomp_7000", rpn=8), rel=1e-6)
