"""Static D-mod-k routes of the Sunway platform under real SMPI: two flows share an up-port or do not."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.dmodk_routes import max_link_bytes
from waitlab.models.ops import OpBuilder
from waitlab.platforms import load_platform

SIZE = 64 * 2**20  # large enough that start-ups (a few us) are below 0.1% of the transfer
MPI_BW = 5.78363e9  # He et al. table 3, the platform's calibrated large-message bandwidth


def _two_flows(nodes: list[int]) -> float:
    """Ranks 0..3 on ``nodes`` (one each); 0 -> 2 and 1 -> 3 at once; seconds after the barrier."""
    sc = from_mapping({"scenario": {"name": "two-flows", "ranks": 4},
                       "platform": {"name": "sunway_taihulight", "ranks_per_node": 1, "placement": "nodes",
                                    "placement_nodes": nodes},
                       "application": {"kind": "fft", "steps": 1}, "simulation": {"timeout": 60}})
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
    assert _two_flows(nodes) == pytest.approx(expect, rel=0.01)
    # the step model's route rule agrees on which links are shared
    assert max_link_bytes([0, 1], nodes[2:], [SIZE, SIZE], 256, 54) == (2 if shared else 1) * SIZE
