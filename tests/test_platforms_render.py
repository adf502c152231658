"""Tests of waitlab.platforms' rendering into SimGrid's XML and hostfile, and of what SimGrid makes of it.

Tests marked ``simgrid`` run tiny real SMPI replays (each well under a second), with hand-computed expectations.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from waitlab.platforms import (
    RenderedPlatform,
    calibrate,
    list_platforms,
    load_platform,
    render_platform,
)

#: The built-in platforms (``tests/test_platforms.py`` holds the list to the five named there).
BUILTIN = list_platforms()
REPLAY = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"
HAVE_SIMGRID = shutil.which("smpirun") is not None and Path(REPLAY).exists()
needs_simgrid = pytest.mark.skipif(not HAVE_SIMGRID, reason="SimGrid (smpirun, smpireplaymain) not installed")

# SMPI's default factors for messages > 65472 bytes (3.32 sg_config.cpp), and its 16-byte MPI envelope.
LAT_FACTOR_BIG = 11.6436
BW_FACTOR_BIG = 0.940694
ENVELOPE = 16
UNIT_FACTORS = ("--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1")


def replay(rp: RenderedPlatform, lines: Sequence[str], folder: Path, cfg: Sequence[str] = ()) -> dict[int, list[float]]:
    """Replay a shared TI trace on ``rp``; return, per rank, the end date of each logged action."""
    xml, hostfile = rp.write(folder)
    trace = folder / "trace.txt"
    trace.write_text("".join(line + "\n" for line in lines))  # a last line without newline would be dropped
    index = folder / "index.txt"
    index.write_text(f"{trace}\n")
    cmd = ["smpirun", "-no-privatize", "-np", str(rp.n_ranks), "-platform", str(xml), "-hostfile", str(hostfile),
           "-replay", str(index), "--log=smpi_replay.thres:verbose", "--log=smpi_replay.fmt:[%.12d]%e%m%n",
           "--log=xbt_cfg.thres:warning", "--log=smpi_config.thres:warning", *cfg, REPLAY]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, f"smpirun failed ({proc.returncode}):\n{err[-3000:]}"
    ends: dict[int, list[float]] = {}
    for line in (out + err).splitlines():
        m = re.match(r"^\[(\d+\.\d+)\] (\d+) (\w+) ", line)
        if m and m.group(3) != "Simulation":
            ends.setdefault(int(m.group(2)), []).append(float(m.group(1)))
    return ends


# ------------------------------------------------------------------------------------------------
# rendering (no SimGrid)


def test_render_layout_and_hostfile(tmp_path: Path) -> None:
    d = load_platform("dawning_5000a")
    rp = render_platform(d, 40)
    assert (rp.n_nodes, rp.ranks_per_node, rp.n_ranks, rp.core_speed) == (3, 16, 40, 7.6e9)
    assert rp.host_of_rank[:17] == ("node-0",) * 16 + ("node-1",)
    assert rp.node_of_rank == tuple(r // 16 for r in range(40))
    assert rp.hostfile == "".join(f"node-{r // 16}\n" for r in range(40))
    assert rp.hosts == ("node-0", "node-1", "node-2")
    sp = render_platform(d, 6, ranks_per_node=2, nodes=4, split_cores=True)
    assert sp.host_of_rank == ("node-0-core-0", "node-0-core-1", "node-1-core-0", "node-1-core-1",
                               "node-2-core-0", "node-2-core-1")
    assert len(sp.hosts) == 8 and sp.n_nodes == 4 and sp.split_cores
    xml_path, host_path = sp.write(tmp_path / "out")
    assert xml_path.read_text() == sp.xml and host_path.read_text() == sp.hostfile
    assert (xml_path.name, host_path.name) == ("platform.xml", "hostfile")


def test_render_is_deterministic() -> None:
    for name in BUILTIN:
        m = load_platform(name)
        for split in (False, True):
            a = render_platform(m, 16, split_cores=split, speed_profiles={"node-0" + ("-core-0" if split else ""):
                                                                          "0 1\n0.01 0.5\n"})
            b = render_platform(load_platform(name), 16, split_cores=split,
                                speed_profiles={"node-0" + ("-core-0" if split else ""): "0 1\n0.01 0.5\n"})
            assert a == b
    # profile order does not matter
    d = load_platform("dawning_5000a")
    p1 = render_platform(d, 48, speed_profiles={"node-0": "0 1\n", "node-2": "0 0.5\n"})
    p2 = render_platform(d, 48, speed_profiles={"node-2": "0 0.5\n", "node-0": "0 1\n"})
    assert p1.xml == p2.xml


def test_render_structure() -> None:
    s = load_platform("sunway_taihulight")
    one = render_platform(s, 1024)  # 256 nodes: exactly one supernode
    assert one.n_nodes == 256 and "spine" not in one.xml and 'core="4"' in one.xml
    assert 'speed="765000000000.0f"' in one.xml
    loop = calibrate(s).intra_node  # the loopback is chosen so that intra-node pingpongs meet the [mpi] figures
    assert f'loopback_bw="{loop.bandwidth!r}Bps" loopback_lat="{loop.latency!r}s"' in one.xml
    assert 'bw="7000000000.0Bps" lat="1.37e-06s"' in one.xml  # half the end-to-end latency per link
    assert "bb_" not in one.xml  # loopback + backbone crashes the 3.32 solver
    # 257 nodes, d_mod_k routing (the Sunway file): both supernodes rendered whole, floor(256 / 4.7) = 54 up-ports
    ft = render_platform(s, 1028)
    assert ft.n_nodes == 512 and len(ft.hosts) == 512 and ft.xml.count("<cluster ") == 1
    assert 'topology="FAT_TREE" topo_parameters="2;256,2;1,54;1,1"' in ft.xml
    assert 'bw="7000000000.0Bps" lat="1.37e-06s"' in ft.xml and "spine" not in ft.xml
    # the same with the aggregated ("balanced") uplink: 257 nodes, one tapered uplink per supernode
    s = dataclasses.replace(s, topology=dataclasses.replace(s.topology, routing="balanced"))
    two = render_platform(s, 1028)  # 257 nodes: a second supernode and the tapered uplinks
    assert two.n_nodes == 257
    assert two.xml.count("<cluster ") == 2 and '<router id="spine-switch"/>' in two.xml
    uplink = 256 * 7e9 / 4.7
    assert f'<link id="leaf-1-uplink" bandwidth="{uplink!r}Bps" latency="1e-07s"' in two.xml
    split = render_platform(s, 8, split_cores=True)
    assert split.xml.count("<cluster ") == 2 and 'core="1"' in split.xml
    assert f'lat="{loop.latency / 2!r}s"' in split.xml  # intra-node latency split over the two core links
    nic = 2.74e-6 / 2 - loop.latency / 2  # half the end-to-end latency minus one core link
    assert f'<link id="node-0-nic" bandwidth="7000000000.0Bps" latency="{nic!r}s"' in split.xml


def test_profiles_get_one_trace_each() -> None:
    rp = render_platform(load_platform("okita_myrinet"), 3, speed_profiles={"node-2": "0 1\n0.5 0.5\n",
                                                                              "node-0": "0 0.5\nPERIODICITY 1\n"})
    assert rp.xml.index('trace="speed-node-0"') < rp.xml.index('trace="speed-node-2"')
    assert rp.xml.count("<trace id=") == 2 and rp.xml.count('<trace_connect kind="SPEED"') == 2


# ------------------------------------------------------------------------------------------------
# real SimGrid runs


@needs_simgrid
@pytest.mark.simgrid
@pytest.mark.parametrize("name", BUILTIN)
def test_simgrid_accepts_rendered_platforms(name: str, tmp_path: Path) -> None:
    m = load_platform(name)
    capacity = m.max_nodes * m.node.cores
    sizes = [n for n in (4, 32, 256) if n <= capacity] + ([capacity] if capacity < 256 else [])
    if name == "dawning_5000a":
        sizes.append(200)  # 13 nodes: two leaf switches under the spine
    for n in sizes:
        for split in (False, True):
            rp = render_platform(m, n, split_cores=split)
            lines = [f"{r} init" for r in range(n)] + [f"{r} allreduce 8 0" for r in range(n)]
            ends = replay(rp, lines, tmp_path / f"{n}-{split}")
            assert sorted(ends) == list(range(n)), (name, n, split)
            assert all(0 < t[-1] < 1e-3 for t in ends.values())


@needs_simgrid
@pytest.mark.simgrid
@pytest.mark.parametrize("split", [False, True])
def test_point_to_point_hand_computed(split: bool, tmp_path: Path) -> None:
    """Rank 0 sends S bytes to a rank on its node, one on another node, one under another leaf switch."""
    d = load_platform("dawning_5000a")
    rp = render_platform(d, 26, ranks_per_node=2, split_cores=split)  # 13 nodes: leaf 0 = nodes 0-11
    assert rp.node_of_rank[1] == 0 and rp.node_of_rank[2] == 1 and rp.node_of_rank[24] == 12
    size = 1_000_000
    lines = [f"{r} init" for r in range(26)]
    lines += [f"0 send 1 0 {size}", f"0 send 2 0 {size}", f"0 send 24 0 {size}"]
    lines += [f"1 recv 0 0 {size}", f"2 recv 0 0 {size}", f"24 recv 0 0 {size}"]
    payload = size + ENVELOPE
    loop = calibrate(d).intra_node  # rendered loopback (calibrated to the intra-node [mpi] figures)
    intra = loop.latency + payload / loop.bandwidth
    inter = d.inter_node.latency + payload / d.inter_node.bandwidth
    cross = d.inter_node.latency + 2 * d.topology.hop_latency + payload / d.inter_node.bandwidth
    ends = replay(rp, lines, tmp_path / "unit", UNIT_FACTORS)
    t1, t2, t3 = ends[0]
    assert t1 == pytest.approx(intra, abs=1e-9)
    assert t2 - t1 == pytest.approx(inter, abs=1e-9)
    assert t3 - t2 == pytest.approx(cross, abs=1e-9)
    assert intra < inter < cross
    # SMPI's default piecewise factors (used unless overridden) stretch latency and shrink bandwidth
    ends = replay(rp, lines, tmp_path / "default")
    t1, t2, _ = ends[0]
    assert t1 == pytest.approx(LAT_FACTOR_BIG * loop.latency + payload / (BW_FACTOR_BIG * loop.bandwidth), abs=1e-9)
    assert t2 - t1 == pytest.approx(LAT_FACTOR_BIG * d.inter_node.latency
                                    + payload / (BW_FACTOR_BIG * d.inter_node.bandwidth), abs=1e-9)


@needs_simgrid
@pytest.mark.simgrid
def test_compute_takes_flops_over_core_speed(tmp_path: Path) -> None:
    for name, flops in (("dawning_5000a", 1.234e9), ("sunway_taihulight", 2.9e11), ("okita_myrinet", 3.7e7)):
        m = load_platform(name)
        for split in (False, True):
            rp = render_platform(m, 2, split_cores=split)
            ends = replay(rp, ["0 init", "1 init", f"0 compute {flops:.0f}", f"1 compute {2 * flops:.0f}"],
                          tmp_path / f"{name}-{split}")
            assert ends[0][0] == pytest.approx(flops / rp.core_speed, abs=1e-9)
            assert ends[1][0] == pytest.approx(2 * flops / rp.core_speed, abs=1e-9)


@needs_simgrid
@pytest.mark.simgrid
def test_speed_profiles_slow_the_right_hosts(tmp_path: Path) -> None:
    m = load_platform("okita_myrinet")  # 1 Gflop/s, one core per node
    profiles = {
        "node-0": "0 1\n0.009 0.5\nPERIODICITY 0.01\n",  # 1 ms at half speed every 10 ms
        "node-2": "0 1\n0.05 0.25\n",  # one-shot: quarter speed from 50 ms on
    }
    rp = render_platform(m, 3, speed_profiles=profiles)
    flops = 0.1 * rp.core_speed
    ends = replay(rp, ["0 init", "1 init", "2 init"] + [f"{r} compute {flops:.0f}" for r in range(3)], tmp_path / "a")
    assert ends[0][0] == pytest.approx(0.105, abs=1e-9)  # 10 periods give 0.095 s of work, then 5 ms at full speed
    assert ends[1][0] == pytest.approx(0.1, abs=1e-9)
    assert ends[2][0] == pytest.approx(0.05 + 0.05 / 0.25, abs=1e-9)
    # split cores: noise on one core of a node leaves the other core alone
    d = load_platform("dawning_5000a")
    sp = render_platform(d, 2, split_cores=True, speed_profiles={"node-0-core-1": "0 0.5\n"})
    f = 0.01 * sp.core_speed
    ends = replay(sp, ["0 init", "1 init", f"0 compute {f:.0f}", f"1 compute {f:.0f}"], tmp_path / "b")
    assert ends[0][0] == pytest.approx(0.01, abs=1e-9)
    assert ends[1][0] == pytest.approx(0.02, abs=1e-9)
    assert math.isclose(sum(t[0] for t in ends.values()), 0.03, abs_tol=1e-9)
