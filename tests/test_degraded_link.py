"""Degraded network links: the platform rendering, the ledger rows (kind link) and their counterfactual truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.groundtruth import ground_truth, wait_metrics
from waitlab.experiments.pipeline import run, simulate, without_links
from waitlab.experiments.scenario import load_scenario
from waitlab.models.ops import CAUSE_KINDS, OpBuilder
from waitlab.models.perturb.link import link_ledger
from waitlab.platforms import load_platform, render_platform
from waitlab.platforms.degraded import degrade_links
from waitlab.platforms.smpi_factors import calibrate


def test_link_ledger_by_hand() -> None:
    # 3 ranks, node of rank = [0, 1, 1]; node 1 at a quarter of 1 MB/s: 1/(f B) - 1/B = 3e-6 s per byte
    b = OpBuilder(n_ranks=3)
    b.add("allreduce", [0, 1, 2], step=0, value=10.0)  # all_to_all: sent 3*10, received 3*10 = 60 bytes per rank
    b.add("send", 2, peer=0, value=100.0, step=1)
    b.add("recv", 0, peer=2, value=100.0, step=1)
    ops = link_ledger(b.build(), [0, 1, 1], {1: 0.25}, bandwidth=1e6)
    led = ops.ledger
    assert led.kind.tolist() == [CAUSE_KINDS.index("link")] * 3
    assert list(zip(led.rank.tolist(), led.step.tolist(), strict=True)) == [(1, 0), (2, 0), (2, 1)]
    assert led.seconds.tolist() == pytest.approx([60 * 3e-6, 60 * 3e-6, 100 * 3e-6])
    assert {ops.names[i] for i in led.region} == {"network"}
    assert link_ledger(b.build(), [0, 1, 1], {}, bandwidth=1e6).ledger.rank.size == 0
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        link_ledger(b.build(), [0, 1, 1], {1: 1.5}, bandwidth=1e6)


def test_render_scales_one_nic_and_refuses_what_it_cannot_name() -> None:
    m = load_platform("dawning_5000a")
    base = render_platform(m, 4, ranks_per_node=1, split_cores=True)
    deg = degrade_links(base, m, {2: 0.5})
    changed = [(a, b) for a, b in zip(base.xml.splitlines(), deg.xml.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and 'id="node-2-nic"' in changed[0][0]
    bw = calibrate(m).inter_node.bandwidth
    assert f'bandwidth="{bw!r}Bps"' in changed[0][0] and f'bandwidth="{bw / 2!r}Bps"' in changed[0][1]
    with pytest.raises(InputError, match="split_cores = true"):
        degrade_links(render_platform(m, 4, ranks_per_node=1), m, {2: 0.5})
    with pytest.raises(InputError, match="node 4 does not exist"):
        degrade_links(base, m, {4: 0.5})


def _scenario(tmp_path: Path, app: str, link: bool, name: str = "s.toml") -> Path:
    f = tmp_path / name
    text = ('[scenario]\nname = "link"\nranks = 4\n[platform]\nname = "dawning_5000a"\nranks_per_node = 1\n'
            "split_cores = true\n")
    if link:
        text += "[[platform.degraded_link]]\nnode = 1\nbandwidth_factor = 0.25\n"
    f.write_text(text + app)
    return f


def test_scenario_validation(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('[scenario]\nname = "x"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                 "[[platform.degraded_link]]\nnode = 1\nbandwidth_factor = 1.5\n[application]\nkind = \"stencil\"\n")
    with pytest.raises(InputError, match=r"platform\.degraded_link\[0\]\.bandwidth_factor"):
        load_scenario(f)
    f.write_text(f.read_text().replace("1.5", "0.5").replace("[application]", "[[platform.degraded_link]]\nnode = 1\n"
                                                                             "bandwidth_factor = 0.5\n[application]"))
    with pytest.raises(InputError, match="listed twice"):
        load_scenario(f)


PINGPONG = '[application]\nkind = "pingpong"\nsteps = 10\nmessage_bytes = 4000000\ncompute_seconds = 0.0\n'


@pytest.mark.simgrid
def test_pingpong_across_a_quarter_link_takes_the_hand_computed_extra(tmp_path: Path) -> None:
    # 20 messages of 4 MB cross node 1's NIC; each takes S / (bw_factor B) at full speed, 4x that at a quarter:
    # the extra is 20 * 3 * S / (bw_factor B) (latency unchanged)
    cal = calibrate(load_platform("dawning_5000a"))
    full = simulate(load_scenario(_scenario(tmp_path, PINGPONG, False, "a.toml"))).summary["makespan"]
    slow = simulate(load_scenario(_scenario(tmp_path, PINGPONG, True, "b.toml"))).summary["makespan"]
    expected = 20 * 3 * 4_000_000 / (cal.bw_factor[-1] * cal.inter_node.bandwidth)
    assert slow - full == pytest.approx(expected, rel=1e-3)


STENCIL = ('[application]\nkind = "stencil"\ndims = 1\nsteps = 2\ncompute_seconds = 0.001\nhalo_bytes = 1000000\n')


@pytest.mark.simgrid
def test_link_truth_is_the_run_without_the_link(tmp_path: Path) -> None:
    sc = load_scenario(_scenario(tmp_path, STENCIL, True))
    res = run(sc).result
    led = res.ops.ledger
    link = led.kind == CAUSE_KINDS.index("link")
    assert set(led.rank[link].tolist()) == {1}  # one rank per node: node 1 is rank 1
    base = wait_metrics(res.events, res.waits)
    gt = ground_truth(sc, res.ops, base, use_cache=False, n_candidates=4)
    plain = simulate(without_links(sc, [1]))  # an independent run of the scenario without the link
    expected = base["total_wait"] - wait_metrics(plain.events, plain.waits)["total_wait"]
    assert expected > 1e-3  # the slow link makes its neighbours wait (1 MB halos at a quarter of 2.5 GB/s)
    assert gt.cost_of("kind:link") == pytest.approx(expected, abs=1e-9)
    assert gt.cost_of("rank_region:1:network") == pytest.approx(expected, abs=1e-9)
    assert np.isclose(gt.cost_of("all"), expected)
    assert not gt.partial_noise
