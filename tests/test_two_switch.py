"""Issue 44: a switch hop added to a contended alltoall cannot make it faster, unless the docs name the mechanism.

The job's 8 nodes sit on one leaf switch or 4 + 4 on two (``placement = "supernodes"``).  Under fluid sharing
(``contention = "none"``) the second switch adds a hop and a shared uplink and no capacity: ``basic_linear`` cannot
get faster.  ``2dmesh`` does, through SimGrid's latency-weighted sharing (its own test below).
Under DeepComp 7000's head-of-line law a node's switch port counts its contending *input ports*: 7 node links on
one switch, 3 node links and the uplink on two (the remote senders reach it through one port, as InfiniBand's
destination-based forwarding does), so the port delivers ``min(1, r f(4)) / min(1, r f(7))`` times more.  That
mechanism is what docs/calibration.md names, and it bounds the speed-up: the two-switch alltoall can be faster by
at most that ratio.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from waitlab.experiments.sweep import load_sweep, run_sweep
from waitlab.models.contention import hol_factors
from waitlab.platforms import load_platform
from waitlab.platforms.smpi_factors import calibrate

ROOT = Path(__file__).resolve().parents[1]
BASE = """[scenario]
name = "hop"
ranks = 16
seed = 1
[platform]
name = "deepcomp_7000"
ranks_per_node = 2
placement = "supernodes"
[application]
kind = "fft"
steps = 1
bytes_per_peer = 65536
[simulation]
alltoall = "basic_linear"
"""


@pytest.mark.simgrid
def test_a_second_switch_speeds_a_contended_alltoall_only_by_the_documented_mechanism(tmp_path):
    (tmp_path / "base.toml").write_text(BASE)
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"platform.supernodes" = [1, 2]\n'
                                      '"simulation.contention" = ["none", "platform"]\n[sweep]\nworkers = 1\n')
    table = run_sweep(load_sweep(tmp_path / "sw.toml"), tmp_path / "out")
    t = table.set_index(["simulation.contention", "platform.supernodes"])["alltoall_time"]
    # fluid sharing: the hop and the uplink cost time, never save it
    assert t["none", 2] >= t["none", 1]
    # the HOL law: port factor min(1, r f(n)) with r = port data rate / MPI-level rate (2.0 / 1.5 GB/s, the
    # platform file's contention.port_bandwidth and mpi.inter_node[1].bandwidth), n = 7 inputs vs 3 + 1
    r = 2.0e9 / 1.5e9
    f = hol_factors(8)
    one, two = min(1.0, r * f[7 - 1]), min(1.0, r * f[4 - 1])
    assert two / one == pytest.approx(1.0511, abs=1e-4)  # 0.8737 / 0.8312
    if t["platform", 2] < t["platform", 1]:
        doc = (ROOT / "docs" / "calibration.md").read_text()
        assert "## A second switch" in doc and "destination-based forwarding" in doc
        assert t["platform", 2] / t["platform", 1] >= one / two  # no more than the law's gain at the port


#: SimGrid 3.32's weight-S of its SMPI network model (network_cm02.cpp: ``set_default("network/weight-S", 8775)``)
WEIGHT_S = 8775.0
MESH = BASE.replace('alltoall = "basic_linear"', 'alltoall = "2dmesh"\ncontention = "none"').replace(
    "ranks_per_node = 2", "ranks_per_node = 4")


def _one_and_two(tmp_path, base):
    tmp_path.mkdir()
    (tmp_path / "base.toml").write_text(base)
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"platform.supernodes" = [1, 2]\n'
                                      "[sweep]\nworkers = 1\n")
    t = run_sweep(load_sweep(tmp_path / "sw.toml"), tmp_path / "out").set_index("platform.supernodes")
    return float(t["alltoall_time"][1]), float(t["alltoall_time"][2])


@pytest.mark.simgrid
def test_2dmesh_gains_from_a_second_switch_only_through_simgrids_latency_weighted_sharing(tmp_path):
    """2dmesh, 16 ranks on 4 nodes (2 + 2 on two leaves), fluid sharing: faster on two switches, by the head start
    SimGrid's sharing penalty gives the destination's leaf-mates, and by nothing once every route has one penalty.

    SimGrid 3.32's CM02/SMPI network model (network_cm02.cpp, ``communicate``) shares a saturated link among its
    flows in proportion to ``1 / p``, ``p`` = the route's latency + ``weight-S / bandwidth`` summed over its links.
    A route through the two uplinks has 2 hop latencies and 2 uplink terms more than one inside a leaf.  The
    column phase of SimGrid's ``alltoall__2dmesh`` starts with the 12 blocking 256 KiB sends of nodes 1, 2 and 3
    into node 0 (4 ranks per node, ``4 x 64 KiB`` per message), whose port they share with the 5% cross-traffic
    of node 0's own 4 sends to node 1; nothing else binds.  On one switch every flow has the same ``p``: all 16
    get ``C / 12.2`` and end together.  On two, node 1 is node 0's leaf-mate (``p_l``), nodes 2, 3 are not
    (``p_r``): the leaf-mates' flows get ``C / (4.2 + 8 p_l / p_r)``, end earlier and start the next step early.
    """
    model = load_platform("deepcomp_7000")
    cal = calibrate(model)
    link_bw, link_lat = cal.inter_node.bandwidth, cal.inter_node.latency / 2  # a node's link, as rendered
    uplink_bw = model.topology.leaf_size * link_bw / model.topology.taper
    p_l = 2 * link_lat + 2 * WEIGHT_S / link_bw
    p_r = p_l + 2 * model.topology.hop_latency + 2 * WEIGHT_S / uplink_bw
    assert p_r / p_l == pytest.approx(1.1015, abs=1e-4)  # 9.385 us / 8.52 us: a remote flow gets 9.2% less
    size = 4 * 65536
    head_start = size / (cal.bw_factor[-1] * link_bw) * (12.2 - (4.2 + 8 * p_l / p_r))
    assert head_start == pytest.approx(1.286e-4, rel=1e-3)  # 174.4 us x 8 x (1 - p_l / p_r)

    one, two = _one_and_two(tmp_path / "as_is", MESH)
    assert two < one  # the documented gain exists ...
    assert one - two == pytest.approx(head_start, rel=0.1)  # ... and is the leaf-mates' head start in step 0

    # every route with the same penalty: no hop latency, no weight-S.  The uplinks (12 node links each way) bind
    # nothing, so the two layouts pose SimGrid the same sharing problem: the same time to the last digit.
    flat = tmp_path / "flat.toml"
    flat.write_text((ROOT / "platforms" / "data" / "deepcomp_7000.toml").read_text().replace(
        "hop_latency = { value = 1.4e-7", "hop_latency = { value = 0.0"))
    same = MESH.replace('name = "deepcomp_7000"', f'name = "{flat}"').replace(
        'contention = "none"', 'contention = "none"\nconfig = { "network/weight-S" = "0" }')
    one_flat, two_flat = _one_and_two(tmp_path / "flat", same)
    assert one_flat == pytest.approx(one, rel=1e-9)  # the hop latency and weight-S do not touch a one-switch run
    assert two_flat == pytest.approx(one_flat, rel=1e-9)
    doc = (ROOT / "docs" / "calibration.md").read_text()
    assert "sharing penalty" in doc and "weight-S" in doc
