"""Rank placement: hand-computed mappings, errors, rendering, the scenario keys and the recorded table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab.errors import InputError
from waitlab.experiments.pipeline import prepare, run
from waitlab.experiments.results import write_result
from waitlab.experiments.scenario import from_mapping
from waitlab.experiments.schema import sweepable_keys
from waitlab.platforms import Placement, load_platform, place_ranks, render_platform


def test_block_cyclic_by_hand() -> None:
    assert place_ranks(Placement("block"), 6, 4, 2, 256).tolist() == [0, 0, 0, 0, 1, 1]
    assert place_ranks(Placement("cyclic"), 6, 4, 2, 256).tolist() == [0, 1, 0, 1, 0, 1]


def test_supernodes_uneven_split_by_hand() -> None:
    # 5 nodes over 2 supernodes of 4 nodes: 3 in supernode 0 (nodes 0..2), 2 in supernode 1 (nodes 4, 5)
    node = place_ranks(Placement("supernodes", supernodes=2), 10, 2, 5, 4)
    assert node.tolist() == [0, 0, 1, 1, 2, 2, 4, 4, 5, 5]


def test_explicit_nodes_both_forms() -> None:
    assert place_ranks(Placement("nodes", nodes=(7, 2)), 3, 2, 2, 4).tolist() == [7, 7, 2]
    assert place_ranks(Placement("nodes", nodes=(3, 1, 3)), 3, 2, 2, 4).tolist() == [3, 1, 3]


def test_random_is_seeded_and_respects_slots() -> None:
    a = place_ranks(Placement("random", seed=5), 40, 4, 16, 4)
    b = place_ranks(Placement("random", seed=5), 40, 4, 16, 4)
    c = place_ranks(Placement("random", seed=6), 40, 4, 16, 4)
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()
    assert np.bincount(a).max() <= 4 and a.max() < 16


@pytest.mark.parametrize(("placement", "n_ranks", "field"), [
    (Placement("nodes", nodes=(1, 1, 1)), 3, "placement_nodes"),  # 3 ranks on node 1 with 2 slots
    (Placement("nodes", nodes=(99, 98)), 4, "placement_nodes"),   # outside a 50-node machine
    (Placement("supernodes", supernodes=4), 4, "supernodes"),     # 2 nodes cannot fill 4 supernodes
    (Placement("diagonal"), 4, "placement"),
])
def test_bad_placements_name_the_key(placement: Placement, n_ranks: int, field: str) -> None:
    with pytest.raises(InputError) as err:
        place_ranks(placement, n_ranks, 2, 2, 4, max_nodes=50)
    assert f"platform.{field}" in str(err.value)


def test_render_follows_the_placement() -> None:
    model = load_platform("sunway_taihulight")
    rp = render_platform(model, 6, ranks_per_node=2, placement=Placement("supernodes", supernodes=3))
    assert rp.node_of_rank == (0, 0, 256, 256, 512, 512)
    assert rp.hostfile.splitlines() == ["node-0", "node-0", "node-256", "node-256", "node-512", "node-512"]
    # d_mod_k routing renders every node of the 3 supernodes in one fat tree (3 x 256 nodes)
    assert rp.n_nodes == 768 and 'topo_parameters="2;256,3;1,54;1,1"' in rp.xml
    split = render_platform(model, 3, ranks_per_node=2, split_cores=True, placement=Placement("cyclic"))
    assert split.host_of_rank == ("node-0-core-0", "node-1-core-0", "node-0-core-1")


def _scenario(platform: dict[str, object]) -> object:
    return from_mapping({"scenario": {"name": "pl", "ranks": 4},
                         "platform": {"name": "sunway_taihulight", "ranks_per_node": 1, **platform},
                         "application": {"kind": "fft", "steps": 1, "bytes_per_peer": 64,
                                         "compute_seconds": 0.001}})


def test_scenario_keys_are_sweepable_and_checked() -> None:
    keys = sweepable_keys()
    assert {"platform.placement", "platform.placement_seed", "platform.placement_nodes",
            "platform.supernodes"} <= set(keys)
    with pytest.raises(InputError, match="placement_nodes"):
        _scenario({"placement_nodes": [0, 1, 2, 3]})
    with pytest.raises(InputError, match="placement_nodes"):
        _scenario({"placement": "nodes"})
    prep = prepare(_scenario({"placement": "supernodes", "supernodes": 2}))  # type: ignore[arg-type]
    assert prep.platform.node_of_rank == (0, 1, 256, 257)


def test_double_listed_node_with_one_slot_is_refused() -> None:
    with pytest.raises(InputError, match="rank slots"):
        prepare(_scenario({"placement": "nodes", "placement_nodes": [3, 300, 3, 301]}))  # type: ignore[arg-type]


@pytest.mark.parametrize(("scenario", "platform", "field", "words"), [
    ({"ranks": 4}, {"name": "dawning_5000a", "ranks_per_node": 100}, "platform.ranks_per_node", "16 rank slots"),
    ({"ranks": 17}, {"name": "okita_myrinet"}, "scenario.ranks", "need 17 nodes, but okita_myrinet has only 16"),
    ({"ranks": 4}, {"name": "okita_myrinet", "nodes": 40}, "platform.nodes", "use nodes <= 16"),
])
def test_a_layout_that_does_not_fit_names_the_scenario_file_and_key(scenario: dict[str, object],
                                                                   platform: dict[str, object], field: str,
                                                                   words: str) -> None:
    sc = from_mapping({"scenario": {"name": "fit", **scenario}, "platform": platform,
                       "application": {"kind": "stencil", "steps": 1}}, "fit.toml")
    with pytest.raises(InputError) as exc:
        prepare(sc)
    assert (exc.value.file, exc.value.field) == ("fit.toml", field) and words in str(exc.value)


@pytest.mark.simgrid
def test_run_writes_placement_csv(tmp_path: Path) -> None:
    res = run(_scenario({"placement": "nodes", "placement_nodes": [3, 300, 4, 301]})).result  # type: ignore[arg-type]
    write_result(res, tmp_path, png=False)
    table = pd.read_csv(tmp_path / "placement.csv")
    assert table["node"].tolist() == [3, 300, 4, 301]
    assert table["supernode"].tolist() == [0, 1, 0, 1]
    assert res.metadata["supernodes_used"] == 2


def test_sweep_point_changes_the_placement() -> None:
    sc = _scenario({})
    pts = [sc.with_values({"platform.placement": "supernodes", "platform.supernodes": k})  # type: ignore[attr-defined]
           for k in (1, 2, 4)]
    assert [prepare(p).platform.node_of_rank for p in pts] == [(0, 1, 2, 3), (0, 1, 256, 257), (0, 256, 512, 768)]
    assert len({p.hash() for p in pts}) == 3


# ---- issue r22 (placement): a tester's findings -------------------------------------------------------------------

def test_a_node_beyond_int64_is_outside_the_machine() -> None:
    # 10**20 does not fit an int64: it must get the same one-line refusal as any node past the machine's end
    with pytest.raises(InputError, match=r"node 100000000000000000000 is outside the machine \(nodes 0\.\.49\)"):
        place_ranks(Placement("nodes", nodes=(4, 10**20, 5)), 7, 3, 3, 4, max_nodes=50)


def test_fill_mode_list_must_be_exactly_the_nodes_needed_each_once() -> None:
    # 7 ranks at 3 per node need ceil(7 / 3) = 3 nodes: 5 entries is neither 3 nor 7 (entries 8 and 9 were dropped)
    with pytest.raises(InputError, match="5 nodes listed; 7 ranks at 3 per node need 3"):
        place_ranks(Placement("nodes", nodes=(5, 6, 7, 8, 9)), 7, 3, 3, 4, max_nodes=50)
    # [5, 5, 7] fills node 5 twice (3 + 3 = 6 ranks > 3 slots): the fix says "once", not "at most ranks_per_node"
    with pytest.raises(InputError, match="node 5 gets 6 ranks") as err:
        place_ranks(Placement("nodes", nodes=(5, 5, 7)), 7, 3, 3, 4, max_nodes=50)
    assert "list each node once" in err.value.fix
    # one entry per rank: a node may be listed up to ranks_per_node (3) times
    assert place_ranks(Placement("nodes", nodes=(5, 5, 5, 6, 6, 6, 7)), 7, 3, 3, 4, 50).tolist() == [5, 5, 5, 6, 6,
                                                                                                       6, 7]


@pytest.mark.parametrize(("placement", "used"), [
    ({"placement": "nodes", "placement_nodes": [4, 7, 9]}, 10),  # highest node 9: 10 nodes
    ({"placement": "supernodes", "supernodes": 2}, 13),           # 3 nodes over 2 leaves of 12: nodes 0, 1, 12
])
def test_an_explicit_node_count_below_the_placement_is_refused(placement: dict[str, object], used: int) -> None:
    def scenario(nodes: int) -> object:
        return from_mapping({"scenario": {"name": "pl", "ranks": 7},
                             "platform": {"name": "deepcomp_7000", "ranks_per_node": 3, "nodes": nodes, **placement},
                             "application": {"kind": "stencil", "steps": 1}})
    with pytest.raises(InputError) as err:
        prepare(scenario(3))
    assert err.value.field == "platform.nodes" and f"use nodes >= {used}" in err.value.fix
    assert prepare(scenario(used)).platform.n_nodes == used


@pytest.mark.parametrize(("keys", "field", "fix"), [
    ({"supernodes": 3}, "supernodes", 'remove supernodes or set placement = "supernodes"'),
    ({"placement_seed": 4}, "placement_seed", 'remove placement_seed or set placement = "random"'),
    ({"placement": "cyclic", "placement_nodes": [1, 2]}, "placement_nodes",
     'remove placement_nodes or set placement = "nodes"'),
    ({"placement": "nodes"}, "placement_nodes", "add placement_nodes = [0, 1, ...]"),
])
def test_settings_the_placement_ignores_are_refused(keys: dict[str, object], field: str, fix: str) -> None:
    with pytest.raises(InputError) as err:
        from_mapping({"scenario": {"name": "pl", "ranks": 7},
                      "platform": {"name": "deepcomp_7000", "ranks_per_node": 3, **keys},
                      "application": {"kind": "stencil", "steps": 1}})
    assert err.value.field == f"platform.{field}" and err.value.fix == fix
