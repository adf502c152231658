"""Wait-state rules on hand-built event tables, and invariants with hypothesis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.models.analysis import waitstates as W
from waitlab.models.analysis.rma_epochs import has_rma
from waitlab.models.analysis.summary import rank_budget
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.simulator.export import read_table, write_table


def test_late_sender_clipped_to_time_in_receive():
    # recv enters at 1, send enters at 4, but recv left at 3 (cannot happen in reality): clip to 2
    ev = make_events(rank=[0, 1], op=["send", "recv"], enter=[4.0, 1.0], exit=[4.0, 3.0], match=[0, 0],
                     done=[0, 1], peer=[1, 0])
    ws = wait_states(ev)
    assert ws["wait"].tolist() == [2.0]
    assert ws["pattern"].tolist() == ["late_sender"]


def test_late_receiver_only_for_rendezvous_messages():
    kw = dict(rank=[0, 1], op=["send", "recv"], enter=[1.0, 3.0], exit=[3.5, 3.5], match=[0, 0], done=[0, 1],
              peer=[1, 0])
    big = wait_states(make_events(**kw, nbytes=[1 << 20, 1 << 20]))
    assert big[["rank", "pattern", "wait"]].values.tolist() == [[0, "late_receiver", 2.0]]
    small = wait_states(make_events(**kw, nbytes=[8, 8]))
    assert len(small) == 0


def test_late_broadcast_and_early_reduce():
    # bcast rooted at 2 entered at t=5; others at 1 and 3
    ev = make_events(rank=[0, 1, 2, 0, 1, 2], op=["bcast"] * 3 + ["reduce"] * 3,
                     enter=[1.0, 3.0, 5.0, 6.0, 9.0, 7.0], exit=[5.5, 5.5, 5.5, 9.5, 9.5, 9.5],
                     match=[0, 0, 0, 1, 1, 1], peer=[2, 2, 2, 0, 0, 0])
    ws = wait_states(ev)
    got = {(r, p): w for r, p, w in ws[["rank", "pattern", "wait"]].itertuples(index=False)}
    assert got == {(0, "late_broadcast"): 4.0, (1, "late_broadcast"): 2.0, (0, "early_reduce"): 3.0}


def test_early_scan_uses_prefix_maximum():
    ev = make_events(rank=[0, 1, 2, 3], op=["scan"] * 4, enter=[2.0, 1.0, 4.0, 3.0], exit=[5.0] * 4,
                     match=[0] * 4)
    ws = wait_states(ev)
    got = dict(zip(ws["rank"], ws["wait"], strict=True))
    assert got == {1: 1.0, 3: 1.0}  # rank 1 waits for rank 0 (2-1), rank 3 for rank 2 (4-3)
    assert dict(zip(ws["rank"], ws["peer_rank"], strict=True)) == {1: 0, 3: 2}


def _bsp_events(compute: np.ndarray, latency: float) -> tuple[list[int], list[str], list[float], list[float],
                                                              list[int]]:
    """Timelines of steps of compute + allreduce, built the way a BSP program behaves."""
    n_steps, n_ranks = compute.shape
    rank, op, enter, exit_, match = [], [], [], [], []
    t = np.zeros(n_ranks)
    for s in range(n_steps):
        e = t + compute[s]
        x = np.full(n_ranks, e.max() + latency)
        for r in range(n_ranks):
            rank += [r, r]
            op += ["compute", "allreduce"]
            enter += [t[r], e[r]]
            exit_ += [e[r], x[r]]
            match += [-1, s]
        t = x
    return rank, op, enter, exit_, match


compute_matrix = st.integers(1, 4).flatmap(lambda steps: st.integers(2, 6).flatmap(
    lambda ranks: st.lists(st.floats(0.0, 2.0, allow_nan=False), min_size=steps * ranks, max_size=steps * ranks)
    .map(lambda v: np.array(v).reshape(steps, ranks))))


@settings(max_examples=60, deadline=None)
@given(compute_matrix, st.floats(0.0, 1e-3))
def test_invariants_nonnegative_budget_and_expected_wait(compute, latency):
    rank, op, enter, exit_, match = _bsp_events(compute, latency)
    ev = make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match)
    ws = wait_states(ev)
    assert (ws["wait"] > 0).all()
    # independent expectation: each rank waits max(compute of the step) - its own compute
    expected = (compute.max(axis=1, keepdims=True) - compute).sum(axis=0)
    got = np.bincount(ws["rank"], weights=ws["wait"], minlength=compute.shape[1])
    np.testing.assert_allclose(got, expected, atol=1e-9)
    budget = rank_budget(ev, ws)
    total = budget[["compute", "perturbation", "communication", "wait", "idle"]].sum(axis=1)
    np.testing.assert_allclose(total, max(exit_), atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(compute_matrix, st.randoms(use_true_random=False))
def test_relabelling_ranks_relabels_waits(compute, rnd):
    n = compute.shape[1]
    perm = list(range(n))
    rnd.shuffle(perm)
    base = _bsp_events(compute, 1e-6)
    inv = np.argsort(perm)
    relabelled = _bsp_events(compute[:, inv], 1e-6)  # new rank perm[r] does old rank r's work
    w1 = wait_states(make_events(rank=base[0], op=base[1], enter=base[2], exit=base[3], match=base[4]))
    w2 = wait_states(make_events(rank=relabelled[0], op=relabelled[1], enter=relabelled[2], exit=relabelled[3],
                                 match=relabelled[4]))
    a = np.bincount(w1["rank"], weights=w1["wait"], minlength=n)
    b = np.bincount(w2["rank"], weights=w2["wait"], minlength=n)
    np.testing.assert_allclose(b[perm], a, atol=1e-12)


def test_zero_imbalance_zero_wait():
    rank, op, enter, exit_, match = _bsp_events(np.full((3, 4), 0.7), 0.0)
    assert len(wait_states(make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match))) == 0


@pytest.mark.parametrize("n", [1, 3])
def test_no_events(n):
    ev = make_events(rank=list(range(n)), op=["compute"] * n, enter=[0.0] * n, exit=[1.0] * n)
    assert len(wait_states(ev)) == 0


@pytest.mark.parametrize("categorical", [True, False])
def test_rank_budget_sums_each_class_as_its_rows_alone_bit_for_bit(categorical: bool):
    # the former method, one masked bincount per column, gives the same floats (not only close ones)
    rng = np.random.default_rng(11)
    n, ranks = 5000, 7
    kinds = np.array(["compute", "mpi", "region", "noise", "sleep", "delay", "other"], dtype=object)
    kind = kinds[rng.integers(0, len(kinds), n)]
    enter = rng.random(n) * 100
    ev = pd.DataFrame({"rank": rng.integers(0, ranks, n).astype(np.int32), "enter": enter,
                       "exit": enter + rng.random(n) ** 3,
                       "kind": pd.Categorical(kind) if categorical else kind})
    if categorical:
        ev.loc[:9, "kind"] = np.nan  # a missing kind is a leaf of no column
    waits = pd.DataFrame({"rank": np.array([0, 3, 3], np.int32), "wait": [0.5, 0.25, 0.125]})
    got = rank_budget(ev, waits, ranks + 1)  # one rank without events
    k = ev["kind"].astype(object).to_numpy()
    dur = ev["exit"].to_numpy() - ev["enter"].to_numpy()

    def masked(mask: np.ndarray) -> np.ndarray:
        return np.bincount(ev["rank"].to_numpy()[mask], weights=dur[mask], minlength=ranks + 1)

    wait = np.array([0.5, 0, 0, 0.375, 0, 0, 0, 0])
    expected = {"compute": masked(np.isin(k, ["compute", "sleep"])),  # a sleep is the application's
                "perturbation": masked(np.isin(k, ["noise", "overhead", "flush", "swap", "delay"])),
                "communication": masked(k == "mpi") - wait, "wait": wait,
                "idle": ev["exit"].max() - masked(k != "region")}
    for col, values in expected.items():
        assert got[col].to_numpy().tobytes() == values.tobytes(), col
    assert got["rank"].tolist() == list(range(ranks + 1))


def test_has_rma_looks_at_rows_not_only_categories():
    from_labels = pd.Categorical(["send", "recv", "region"], categories=["send", "recv", "region", "put", "fence"])
    ev = pd.DataFrame({"op": from_labels})
    assert not has_rma(ev)  # RMA labels among the categories, no RMA row
    ev.loc[1, "op"] = "put"
    assert has_rma(ev)
    assert not has_rma(pd.DataFrame({"op": pd.Categorical(["send", "recv"])}))  # no RMA label at all
    assert not has_rma(pd.DataFrame({"op": pd.Categorical([None, "send"], categories=["send", "put"])}))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([0.0, 1e-13, 0.5, 1.0, 2.0]), st.integers(0, 99)),
                max_size=40), st.booleans())
def test_one_wait_per_blocking_operation_is_its_latest_partner(rows: list[tuple[int, float, int]],
                                                               one_each: bool) -> None:
    # issue 25: blockers that are all different and in row order (blocking receives) skip the sort; the result is
    # the same as for any blockers: per blocker, its largest wait and the first partner that has it
    if one_each:
        rows = [(b, w, p) for b, (_, w, p) in zip(range(0, 3 * len(rows), 3), rows, strict=False)]
    blocker = np.array([r[0] for r in rows], np.int64)
    wait = np.array([r[1] for r in rows], np.float64)
    partner = np.array([r[2] for r in rows], np.int64)
    acc = W._empty()
    W._add_max_per_blocker(acc, "late_sender", blocker, wait, partner)
    got = list(zip(*(np.concatenate(acc[k] or [np.zeros(0)]).tolist() for k in ("event", "wait", "peer_event")),
                   strict=True))
    want: dict[int, tuple[float, int]] = {}
    for b, w, p in rows:
        if w > W.EPSILON and (b not in want or w > want[b][0]):
            want[b] = (w, p)
    assert got == [(b, w, p) for b, (w, p) in sorted(want.items())]


def test_a_table_with_call_names_and_no_wait_writes_its_waits(tmp_path: Path) -> None:
    # a program's sendrecv with no wait: the op column of the (empty) wait table still holds strings for Arrow
    ev = make_events(rank=[0, 1], op=["send", "recv"], enter=[1.0, 2.0], exit=[1.0, 2.0], match=[0, 0], done=[0, 1],
                     peer=[1, 0])
    ev["call"] = pd.Categorical(["MPI_Sendrecv", "MPI_Sendrecv"])
    waits = wait_states(ev)
    assert len(waits) == 0
    write_table(waits, tmp_path / "waits.parquet", {})
    assert read_table(tmp_path / "waits.parquet")[0].columns.tolist() == waits.columns.tolist()


def test_a_waitall_of_an_exchange_waits_once_not_as_late_sender_and_late_receiver() -> None:
    # rank 0 enters its exchange (isend of 100 kB, irecv, waitall) at 0; rank 1 enters its own at 0.1 s.  Rank 0's
    # waitall waits 0.1 s for rank 1: its data comes late (late sender) and its own rendezvous send waits for the
    # same late rank (late receiver) -- one wait of 0.1 s, booked as the late sender (Scalasca's rule)
    ev = make_events(rank=[0, 0, 0, 1, 1, 1], op=["isend", "irecv", "waitall"] * 2,
                     enter=[0.0, 0.0, 0.0, 0.1, 0.1, 0.1], exit=[0.0, 0.0, 0.1001, 0.1, 0.1, 0.1001],
                     match=[0, 1, -1, 1, 0, -1], done=[2, 2, -1, 5, 5, -1], peer=[1, 1, -1, 0, 0, -1],
                     nbytes=[100_000, 100_000, 0, 100_000, 100_000, 0])
    ws = wait_states(ev)
    assert ws[["event", "pattern"]].astype(str).values.tolist() == [["2", "late_sender"]]
    assert ws["wait"].tolist() == pytest.approx([0.1])
    budget = rank_budget(ev, ws)
    assert (budget[["compute", "communication", "wait"]].to_numpy() >= -1e-12).all()  # no negative communication
