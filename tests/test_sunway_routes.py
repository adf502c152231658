"""Static D-mod-k routes of the Sunway platform under real SMPI: shared up-ports, and the choice that avoids them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.reproduce import he_alltoall
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.alltoall_sunway import choose_algorithm
from waitlab.models.apps.dmodk_routes import max_link_bytes
from waitlab.models.contention import saturation_throughput
from waitlab.models.ops import OpBuilder
from waitlab.platforms import load_platform

SIZE = 64 * 2**20  # large enough that start-ups (a few us) are below 0.1% of the transfer
MPI_BW = 5.78363e9  # He et al. table 3, the platform's calibrated large-message bandwidth


def _two_flows(nodes: list[int], contention: str = "platform") -> float:
    """Ranks 0..3 on ``nodes`` (one each); 0 -> 2 and 1 -> 3 at once; seconds after the barrier."""
    sc = from_mapping({"scenario": {"name": "two-flows", "ranks": 4},
                       "platform": {"name": "sunway_taihulight", "ranks_per_node": 1, "placement": "nodes",
                                    "placement_nodes": nodes},
                       "application": {"kind": "fft", "steps": 1},
                       "simulation": {"timeout": 60, "contention": contention}})
    b = OpBuilder(n_ranks=4)
    b.add("barrier", np.arange(4, dtype=np.int32), step=0)
    src, dst = np.array([0, 1]), np.array([2, 3])
    b.add("irecv", dst, step=1, value=np.full(2, float(SIZE)), peer=src, tag=1)
    b.add("isend", src, step=1, value=np.full(2, float(SIZE)), peer=dst, tag=1)
    b.add("waitall", np.arange(4, dtype=np.int32), step=1)
    ev = simulate_ops(prepare(sc), b.build()).events
    return float(ev["exit"].max()) - float(ev.loc[ev["op"] == "barrier", "exit"].max())


@pytest.mark.simgrid
@pytest.mark.parametrize(("nodes", "shared"), [
    ([0, 1, 256, 310], True),   # 256 mod 54 = 310 mod 54 = 40: one up-port of supernode 0 for both flows
    ([0, 1, 256, 257], False),  # up-ports 40 and 41
    ([0, 1, 2, 3], False),      # inside one supernode: no up-port at all
])
def test_two_flows_share_an_up_port_only_when_routed_so(nodes: list[int], shared: bool) -> None:
    model = load_platform("sunway_taihulight")
    assert model.topology.uplinks == 54  # floor(256 / 4.7)
    # hand calculation: each flow alone moves SIZE at the MPI-level 5.78 GB/s; two on one link take twice as long
    expect = (2 if shared else 1) * SIZE / MPI_BW
    assert _two_flows(nodes, "none") == pytest.approx(expect, rel=0.01)
    # with the platform's HOL law, two inputs contending for one up-port get f(2) = 0.75 of it (Karol et al.)
    expect_hol = (2 / saturation_throughput(2) if shared else 1) * SIZE / MPI_BW
    assert _two_flows(nodes) == pytest.approx(expect_hol, rel=0.01)
    # the step model's route rule agrees on which links are shared
    assert max_link_bytes([0, 1], nodes[2:], [SIZE, SIZE], 256, 54) == (2 if shared else 1) * SIZE


def _small_sunway(folder: Path) -> str:
    """The Sunway file with 8-node supernodes and taper 2: floor(8 / 2) = 4 up-ports per supernode."""
    text = Path(load_platform("sunway_taihulight").file).read_text(encoding="utf-8")
    text, n1 = re.subn(r"leaf_size = \{ value = 256,", "leaf_size = { value = 8,", text)
    text, n2 = re.subn(r"taper = \{ value = 4\.7,", "taper = { value = 2.0,", text)
    assert n1 == n2 == 1
    path = folder / "small_sunway.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.simgrid
def test_choice_avoids_ring_route_conflicts_under_smpi(tmp_path: Path) -> None:
    platform = _small_sunway(tmp_path)
    model = load_platform(platform)
    assert model.topology.uplinks == 4
    # 11 ranks over 3 supernodes: nodes 0-3, 8-11, 16-18.  Ring step 4 sends from supernode 1 (ranks 4-7) to
    # ranks 8, 9, 10, 0 = nodes 16, 17, 18, 0: nodes 16 and 0 are both port 0 (mod 4), one up-port for two
    # messages.  The 2-level ring's level-2 steps go to one supernode's nodes 8-11 or 16-18: distinct ports.
    prep = prepare(he_alltoall._scenario("3 supernodes", 11, 1, 8, 60.0, platform))
    node = np.asarray(prep.platform.node_of_rank)
    assert node.tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18]
    shape = he_alltoall.network_shape(model)
    chosen, _ = choose_algorithm(node, 8, shape, 2**20, candidates=("ring", "two_level_ring"))
    assert chosen == "two_level_ring"
    ring = he_alltoall.run_point("3 supernodes", "ring", 11, 1, 2**20, 60.0, platform).seconds
    two = he_alltoall.run_point("3 supernodes", "two_level_ring", 11, 1, 2**20, 60.0, platform).seconds
    assert two < 0.9 * ring  # SMPI (with the platform's HOL law) agrees: the choice gains over 10% here


@pytest.mark.simgrid
@pytest.mark.xfail(strict=True, reason="since issue 22 took the 64 KB figure out of the Sunway calibration, SMPI's "
                   "fluid ring here is 2.86 ms against the step model's 2.39 ms (+19%; 2.45 ms before); the "
                   "two-level ring still agrees (2.15 ms); not explained yet (docs/sunway.md)")
def test_step_model_matches_fluid_smpi(tmp_path: Path) -> None:
    platform = _small_sunway(tmp_path)
    model = load_platform(platform)
    prep = prepare(he_alltoall._scenario("3 supernodes", 11, 1, 8, 60.0, platform))
    node = np.asarray(prep.platform.node_of_rank)
    _, pred = choose_algorithm(node, 8, he_alltoall.network_shape(model), 2**20,
                               candidates=("ring", "two_level_ring"))
    # the step model (an independent, synchronous-step calculation with fluid sharing, no HOL law) is within 5%
    # of SMPI with fluid sharing for both
    fluid = {a: he_alltoall.run_point("3 supernodes", a, 11, 1, 2**20, 60.0, platform, contention="none").seconds
             for a in ("ring", "two_level_ring")}
    assert pred["ring"] == pytest.approx(fluid["ring"], rel=0.05)
    assert pred["two_level_ring"] == pytest.approx(fluid["two_level_ring"], rel=0.05)
