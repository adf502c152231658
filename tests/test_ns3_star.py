"""SimGrid's packet-level ns-3 binding on the star platform (platforms/ns3.py): a probe, not waitlab's model."""

from __future__ import annotations

import shutil

import pytest

from waitlab.experiments.reproduce.alltoall_points import alltoall_point
from waitlab.platforms import load_platform
from waitlab.platforms.ns3 import ns3_star

needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")


def test_star_has_one_link_per_node_at_the_mpi_figures() -> None:
    s = ns3_star(load_platform("dawning_5000a"), 20, 8)  # 3 nodes, the last one partly used
    assert s.xml.count("<host ") == 3 and s.xml.count("<link ") == 3 and s.xml.count("<route ") == 3
    assert s.hostfile.splitlines() == [f"node-{r // 8}" for r in range(20)]
    assert s.link_bandwidth == pytest.approx(1.5e9)  # Dawning's 1 MiB MPI figure
    assert s.link_latency == pytest.approx(0.8e-6)  # half of the 1.6 us MPI latency (two links per route)
    assert "<cluster" not in s.xml  # a cluster without backbone aborts ns-3 (zero-rate CSMA bus)


@needs_simgrid
@pytest.mark.simgrid
def test_ns3_alltoall_runs_and_respects_the_nic_bound() -> None:
    # 16 ranks on 2 nodes, 4 KiB: each node sends 8 x 8 messages to the other node through its one link, so
    # no schedule can beat 64 x 4096 B / 1.5 GB/s = 0.175 ms; TCP headers and slow start add, within 2x
    bound = 64 * 4096 / 1.5e9
    for alg in ("basic_linear", "pair"):
        t = alltoall_point("dawning_5000a", alg, 16, 4096, model="ns-3", timeout=120).seconds
        assert bound < t < 2 * bound, (alg, t, bound)
