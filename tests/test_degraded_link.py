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
    # all_to_all: sent 3*10, received 3*10 = 60 bytes per rank, one third of them with rank 0 on the other node
    b.add("allreduce", [0, 1, 2], step=0, value=10.0)
    b.add("send", 2, peer=0, value=100.0, step=1)
    b.add("recv", 0, peer=2, value=100.0, step=1)
    ops = link_ledger(b.build(), [0, 1, 1], {1: 0.25}, bandwidth=1e6)
    led = ops.ledger
    assert led.kind.tolist() == [CAUSE_KINDS.index("link")] * 3
    assert list(zip(led.rank.tolist(), led.step.tolist(), strict=True)) == [(1, 0), (2, 0), (2, 1)]
    assert led.seconds.tolist() == pytest.approx([20 * 3e-6, 20 * 3e-6, 100 * 3e-6])
    assert {ops.names[i] for i in led.region} == {"network"}
    assert link_ledger(b.build(), [0, 1, 1], {}, bandwidth=1e6).ledger.rank.size == 0
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        link_ledger(b.build(), [0, 1, 1], {1: 1.5}, bandwidth=1e6)


def test_link_ledger_counts_only_messages_that_leave_the_node() -> None:
    # node of rank = [0, 1, 1], node 1 at a quarter of 1 MB/s: 3e-6 s per crossing byte
    b = OpBuilder(n_ranks=3)
    b.add("send", 1, peer=2, value=1000.0, step=0)  # ranks 1 and 2 share node 1: never on its link
    b.add("recv", 2, peer=1, value=1000.0, step=0)
    assert link_ledger(b.build(), [0, 1, 1], {1: 0.25}, bandwidth=1e6).ledger.rank.size == 0
    b.add("bcast", [0, 1, 2], peer=0, value=10.0, step=1)  # ranks 1, 2 receive 10 B from root 0 on node 0
    b.add("bcast", [0, 1, 2], peer=1, value=10.0, step=2)  # root 1 sends 3 x 10 B, 10 to node 0; rank 2: on-node
    led = link_ledger(b.build(), [0, 1, 1], {1: 0.25}, bandwidth=1e6).ledger
    assert list(zip(led.rank.tolist(), led.step.tolist(), strict=True)) == [(1, 1), (1, 2), (2, 1)]
    assert led.seconds.tolist() == pytest.approx([10 * 3e-6, 10 * 3e-6, 10 * 3e-6])


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


@pytest.mark.parametrize(("line", "field", "fix"), [
    # 1e-15 of 2.5 GB/s: 22 x 2**20 B take 9.2e12 s, past the 9.2e9 s of int64 nanoseconds; below 1e-6 is refused
    ("node = 1\nbandwidth_factor = 1e-15", "bandwidth_factor", "give bandwidth_factor a value that is >= 1e-06"),
    ("node = 1\nbandwidth_factor = 0.0", "bandwidth_factor", "give bandwidth_factor a value that is >= 1e-06"),
    ("node = -1\nbandwidth_factor = 0.5", "node", "give node a value that is >= 0"),
    ("node = 1", "bandwidth_factor", "add bandwidth_factor = ..."),
])
def test_degraded_link_errors_name_the_key_and_its_fix(tmp_path: Path, line: str, field: str, fix: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('[scenario]\nname = "x"\nranks = 2\n[platform]\nname = "dawning_5000a"\nsplit_cores = true\n'
                 f"[[platform.degraded_link]]\n{line}\n[application]\nkind = \"stencil\"\n")
    with pytest.raises(InputError) as err:
        load_scenario(f)
    assert err.value.field == f"platform.degraded_link[0].{field}" and err.value.fix.startswith(fix)


def test_the_smallest_factor_is_accepted() -> None:
    m = load_platform("dawning_5000a")
    base = render_platform(m, 2, ranks_per_node=1, split_cores=True)
    bw = calibrate(m).inter_node.bandwidth
    assert f'bandwidth="{bw * 1e-6!r}Bps"' in degrade_links(base, m, {1: 1e-6}).xml
    with pytest.raises(InputError, match=r"bandwidth_factor 9e-07 is not in \[1e-06, 1\)"):
        degrade_links(base, m, {1: 9e-7})


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


def test_link_ledger_reads_a_sub_communicators_root_as_a_world_rank() -> None:
    # nodes of ranks [0, 0, 1, 1], node 1 at a quarter of 1 MB/s (3e-6 s per crossing byte); a bcast of 10 B on
    # the communicator of world ranks (1, 2) rooted at world rank 2 (roots are world ranks on any communicator):
    # the root's message to rank 1 leaves node 1 (10 B), its message to itself does not
    b = OpBuilder(n_ranks=4)
    b.add("bcast", [1, 2], peer=2, value=10.0, step=0, comm=b.comm_id((1, 2)))
    led = link_ledger(b.build(), [0, 0, 1, 1], {1: 0.25}, bandwidth=1e6).ledger
    assert list(zip(led.rank.tolist(), led.step.tolist(), strict=True)) == [(2, 0)]
    assert led.seconds.tolist() == pytest.approx([10 * 3e-6])
