"""The stencil's closing collective (barrier, reduce, gather, bcast, allgather): op tables by hand, waits on SMPI.

A 1-D open stencil on 4 ranks has 1 neighbour at the ends and 2 in the middle: per step a rank emits 2k halo
operations (irecv + isend per neighbour), a waitall, enter/compute/leave and the closing collective.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Replayer

from waitlab.errors import InputError
from waitlab.experiments.scenario import load_scenario
from waitlab.models.apps.imbalance import Imbalance
from waitlab.models.apps.registry import params_from_mapping
from waitlab.models.apps.stencil import StencilParams, generate
from waitlab.models.ops import ACTIONS


def _closing(ops, name):  # type: ignore[no-untyped-def]
    return ops.mask([name])


@pytest.mark.parametrize("collective", ["barrier", "reduce", "gather", "bcast", "allgather", "allreduce"])
def test_one_closing_collective_per_rank_and_step(collective: str) -> None:
    ops = generate(StencilParams(steps=3, dims=1, collective=collective, root=0), 4, seed=0)
    # per step: 2k + 1 (waitall) + 3 (region) + 1 (collective), k = 1, 2, 2, 1 neighbours
    assert ops.per_rank_counts().tolist() == [3 * (2 * k + 5) for k in (1, 2, 2, 1)]
    sel = _closing(ops, collective)
    assert sel.sum() == 3 * 4  # 3 steps x 4 ranks
    assert sorted(set(ops.step[sel].tolist())) == [0, 1, 2]
    # the collective is each step's last operation of every rank
    last = [ACTIONS[ops.code[(ops.rank == r) & (ops.step == 1)][-1]] for r in range(4)]
    assert last == [collective] * 4


def test_roots_bytes_and_flops_of_each_collective() -> None:
    kw = {"steps": 1, "dims": 1, "allreduce_bytes": 64, "allreduce_flops": 5.0}
    red = generate(StencilParams(collective="reduce", root=3, **kw), 4, seed=0)
    m = _closing(red, "reduce")
    assert red.peer[m].tolist() == [3, 3, 3, 3]
    assert red.value[m].tolist() == [64.0] * 4 and red.value2[m].tolist() == [5.0] * 4
    gat = generate(StencilParams(collective="gather", root=1, **kw), 4, seed=0)
    m = _closing(gat, "gather")
    assert gat.peer[m].tolist() == [1] * 4
    assert gat.value[m].tolist() == [64.0] * 4 and gat.value2[m].tolist() == [64.0] * 4  # bytes per rank
    bc = generate(StencilParams(collective="bcast", root=2, **kw), 4, seed=0)
    m = _closing(bc, "bcast")
    assert bc.peer[m].tolist() == [2] * 4 and bc.value[m].tolist() == [64.0] * 4
    bar = generate(StencilParams(collective="barrier", **kw), 4, seed=0)
    m = _closing(bar, "barrier")
    assert bar.peer[m].tolist() == [-1] * 4 and bar.value[m].tolist() == [0.0] * 4
    allr = generate(StencilParams(collective="allreduce", **kw), 4, seed=0)
    assert allr.peer[_closing(allr, "allreduce")].tolist() == [-1] * 4


def test_every_nth_step_and_never() -> None:
    ops = generate(StencilParams(steps=4, dims=1, collective="barrier", allreduce_every=2), 2, seed=0)
    assert ops.step[_closing(ops, "barrier") & (ops.rank == 0)].tolist() == [1, 3]
    none = generate(StencilParams(steps=4, dims=1, collective="barrier", allreduce_every=0), 2, seed=0)
    assert not _closing(none, "barrier").any()


def test_bad_collective_and_root_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"application.collective"):
        params_from_mapping("stencil", {"collective": "scan"}, "s.toml")
    with pytest.raises(InputError, match=r"application.root: collective 'barrier' has no root"):
        params_from_mapping("stencil", {"collective": "barrier", "root": 1}, "s.toml")
    with pytest.raises(ValueError, match="root 4 does not exist with 4 ranks"):
        generate(StencilParams(collective="reduce", root=4), 4, seed=0)
    f = tmp_path / "s.toml"
    f.write_text('[scenario]\nname = "x"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                 '[application]\nkind = "stencil"\ncollective = "reduce"\nroot = 7\n')
    with pytest.raises(InputError) as err:
        load_scenario(f)
    assert err.value.field == "application.root" and "below 4" in str(err.value)


# ---- on SMPI: the wait pattern each closing collective makes ------------------------------------------------


def _late_rank_1(collective: str, root: int = 0) -> StencilParams:
    # rank 1 computes 3 s, the others 1 s; no halo bytes: the collective is entered at 1 s and 3 s
    return StencilParams(steps=1, dims=1, halo_bytes=0, compute_seconds=1.0, collective=collective, root=root,
                         imbalance=(Imbalance("Stencil", ranks=[1], magnitude=2.0),))


@pytest.mark.simgrid
def test_barrier_waits_are_wait_at_barrier_on_everybody_but_the_late_rank(replay: Replayer) -> None:
    _, ws = replay(generate(_late_rank_1("barrier"), 4, seed=0))
    ws = ws[ws["op"] == "barrier"]
    assert set(ws["pattern"]) == {"wait_at_barrier"}
    assert sorted(ws["rank"].tolist()) == [0, 2, 3]
    assert ws["wait"].tolist() == pytest.approx([2.0] * 3, abs=1e-4)  # 3 s - 1 s


@pytest.mark.simgrid
def test_reduce_wait_is_early_reduce_on_the_root_only(replay: Replayer) -> None:
    _, ws = replay(generate(_late_rank_1("reduce", root=2), 4, seed=0))
    ws = ws[ws["op"] == "reduce"]
    assert len(ws) == 1
    w = ws.iloc[0]
    assert (w["rank"], w["pattern"], w["peer_rank"]) == (2, "early_reduce", 1)
    assert w["wait"] == pytest.approx(2.0, abs=1e-4)


# ---- sub-communicators: collective_comm = "row" | "column", halo_every -----------------------------------------


def test_row_and_column_communicators_by_hand() -> None:
    # a 3 x 2 grid (px = 3, py = 2): rank r at x = r % 3, y = r // 3; rows {0, 1, 2}, {3, 4, 5}; columns
    # {0, 3}, {1, 4}, {2, 5}; members in communicator-rank order (key = x for a row, y for a column)
    row = generate(StencilParams(steps=2, grid=(3, 2), collective_comm="row"), 6, seed=0)
    sel = row.mask(["allreduce"])
    assert row.comms == ((0, 1, 2), (3, 4, 5))
    assert dict(zip(row.rank[sel].tolist(), row.comm[sel].tolist(), strict=False)) == {0: 1, 1: 1, 2: 1,
                                                                                       3: 2, 4: 2, 5: 2}
    assert sel.sum() == 2 * 6 and (row.comm[~sel] == 0).all()  # halos stay on the world
    col = generate(StencilParams(steps=1, grid=(3, 2), collective="barrier", collective_comm="column"), 6, seed=0)
    sel = col.mask(["barrier"])
    assert col.comms == ((0, 3), (1, 4), (2, 5))
    assert col.comm[sel].tolist() == [1, 2, 3, 1, 2, 3]  # ranks 0..5 in order
    world = generate(StencilParams(steps=1, grid=(3, 2)), 6, seed=0)
    assert world.comms == () and (world.comm == 0).all()


def test_halo_every() -> None:
    # a 1-D grid of 2 ranks: one neighbour each, so a halo exchange is irecv + isend + waitall (3 ops per rank)
    every2 = generate(StencilParams(steps=4, dims=1, halo_every=2), 2, seed=0)
    assert every2.step[every2.mask(["waitall"]) & (every2.rank == 0)].tolist() == [0, 2]
    never = generate(StencilParams(steps=4, dims=1, halo_every=0), 2, seed=0)
    assert not never.mask(["irecv", "isend", "waitall"]).any()


def test_sub_communicator_needs_2d_and_no_root() -> None:
    with pytest.raises(InputError, match=r"application.collective_comm: 'row' needs dims = 2"):
        params_from_mapping("stencil", {"dims": 1, "collective_comm": "row"}, "s.toml")
    with pytest.raises(InputError, match=r"application.collective_comm: 'column' needs dims = 2 and a collective "
                                         r"without a root \(got dims = 2, collective = 'reduce'\)"):
        params_from_mapping("stencil", {"collective": "reduce", "collective_comm": "column"}, "s.toml")


@pytest.mark.simgrid
def test_row_allreduce_waits_stay_in_the_late_rank_row(replay: Replayer) -> None:
    # 2 x 2 grid, rows {0, 1} and {2, 3}, no halos: rank 1 computes 3 s, the others 1 s; only rank 0 (its
    # row-mate) waits, 2 s, at the row allreduce; row {2, 3} does not wait
    p = StencilParams(steps=1, grid=(2, 2), halo_every=0, compute_seconds=1.0, collective_comm="row",
                      imbalance=(Imbalance("Stencil", ranks=[1], magnitude=2.0),))
    _, ws = replay(generate(p, 4, seed=0))
    ws = ws[ws["wait"] > 1e-6]
    assert ws["rank"].tolist() == [0] and ws["pattern"].tolist() == ["wait_at_nxn"]
    assert ws["wait"].iloc[0] == pytest.approx(2.0, abs=1e-4)
