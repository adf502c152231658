"""Instrumentation records, trace buffers, swapping and spilling policies (pure, no SimGrid).

Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation
from waitlab.models.ops import ACTIONS, CAUSE_KINDS, OpBuilder, OpTable
from waitlab.models.perturb.insertion import Insertions, apply_insertions, key
from waitlab.models.perturb.instrumentation import Instrumentation, collective_points, select_records, step_points
from waitlab.models.perturb.spill_policies import (
    KeepInMemory,
    PaddedSyncFlush,
    PerRankFlush,
    SwapOutF,
    SynchronizedFlush,
    largest_safe_every,
    make_policy,
)
from waitlab.models.perturb.stage import PlatformFacts, perturb_ops
from waitlab.models.perturb.tracebuffer import BufferSpec, Flushes, Stream, SyncPoints, TauTooShort, buffer_state


def facts(n: int = 2, rpn: int = 1, memory: float = 1e12, bw: float = 1e6, lat: float = 0.0) -> PlatformFacts:
    return PlatformFacts(n_ranks=n, ranks_per_node=rpn, core_speed=1e9,
                         host_of_rank=tuple(f"node-{r // rpn}" for r in range(n)), node_of_rank=np.arange(n) // rpn,
                         node_memory=memory, disk_bandwidth=bw, disk_latency=lat)


def imbalanced(steps: int = 4) -> OpTable:
    """Rank 0 has region A every step (enter, compute, leave), then sends to rank 1; both barrier."""
    b = OpBuilder(2)
    for s in range(steps):
        b.add("enter", 0, step=s, region="A")
        b.add("compute", 0, step=s, value=0.01, region="A")
        b.add("leave", 0, step=s, region="A")
        b.add("compute", 1, step=s, value=0.01, region="B")
        b.add("send", 0, step=s, peer=1, value=1000)
        b.add("recv", 1, step=s, peer=0, value=1000)
        b.add("barrier", [0, 1], step=s)
    return b.build()


def names(ops: OpTable, rank: int) -> list[str]:
    return [ACTIONS[c] for c in ops.code[ops.rank == rank]]


# ---- records -----------------------------------------------------------------------------------------------


def test_records_of_mpi_regions_and_only() -> None:
    ops = imbalanced(1)
    # rank 0: enter(0) compute(1) leave(2) send(3) barrier(4); rank 1: compute(0) recv(1) barrier(2)
    rec = select_records(ops, Instrumentation(events="mpi", record_bytes=10, payload=1.0))
    assert rec.rank.tolist() == [0, 0, 1, 1]
    # after send (seq 3 -> before seq 4), after barrier; 10 + payload bytes (barrier moves none)
    assert rec.pos.tolist() == [key(4, 2), key(5, 2), key(2, 2), key(3, 2)]
    assert rec.bytes.tolist() == [1010.0, 10.0, 1010.0, 10.0]
    only = select_records(ops, Instrumentation(events="mpi", only=("recv",), record_bytes=16))
    assert only.rank.tolist() == [1] and only.bytes.tolist() == [16.0]
    reg = select_records(ops, Instrumentation(events="regions", record_bytes=8))
    # enter A -> after it (key(1, 2)); leave A -> before it (key(2, 6))
    assert reg.rank.tolist() == [0, 0] and reg.pos.tolist() == [key(1, 2), key(2, 6)]
    both = select_records(ops, Instrumentation(events="mpi", where="both", record_bytes=8, payload=1.0))
    assert len(both) == 8 and sorted(both.bytes.tolist()) == [8.0] * 6 + [1008.0] * 2
    with pytest.raises(ValueError, match="neither MPI actions nor regions"):
        select_records(ops, Instrumentation(only=("rcv",)))
    assert Instrumentation(fixed_cost=1e-6, copy_cost=1e-9).cost(np.array([1000.0])).tolist() == [pytest.approx(2e-6)]


def test_sync_points() -> None:
    ops = imbalanced(2)
    r, k, p = collective_points(ops)
    # barrier of rank 0 at seq 4 and 9, rank 1 at seq 2 and 5; sorted by (instance, rank)
    assert r.tolist() == [0, 1, 0, 1] and k.tolist() == [0, 0, 1, 1]
    assert p.tolist() == [key(5, 4), key(3, 4), key(10, 4), key(6, 4)]
    r, s, p = step_points(ops)
    assert s.tolist() == [0, 0, 1, 1] and p.tolist() == [key(5, 4), key(3, 4), key(10, 4), key(6, 4)]


# ---- buffer and swap ---------------------------------------------------------------------------------------


def test_swap_bytes_past_memory() -> None:
    # records of 60 bytes, 100 bytes of memory: resident 0, 60, 120 -> 0, 20 and 60 bytes swapped
    s = Stream.build(1, [0, 0, 0], [1, 2, 3], [60.0, 60.0, 60.0])
    st = buffer_state(s, Flushes.empty(), BufferSpec(memory=100.0, buffer_bytes=1e9, flush_rate=1.0))
    assert st.over.tolist() == [0.0, 20.0, 60.0] and st.peak.tolist() == [180.0]
    # a flush before the third record empties the buffer: no swap at all
    fl = Flushes(np.array([0]), np.array([2]), np.array([2]), np.zeros(1), np.array([-1]))
    st2 = buffer_state(s, fl, BufferSpec(memory=100.0, buffer_bytes=1e9, flush_rate=10.0, flush_latency=0.5))
    assert st2.over.tolist() == [0.0, 20.0, 0.0] and st2.flush_bytes.tolist() == [120.0]
    assert st2.flush_seconds.tolist() == [pytest.approx(0.5 + 12.0)]


def test_per_rank_flush_greedy_and_oversized_records() -> None:
    # buffer 250: records 100, 100, 300, 100 -> flush before the 300 (buffer 200), after it (it fills alone)
    s = Stream.build(1, [0] * 4, [10, 20, 30, 40], [100.0, 100.0, 300.0, 100.0])
    fl = PerRankFlush().plan(s, BufferSpec(1e9, 250.0, 1.0), SyncPoints.none(1), SyncPoints.none(1))
    assert fl.boundary.tolist() == [2, 3] and fl.pos.tolist() == [29, 39]


def _two_rank_stream() -> tuple[Stream, SyncPoints]:
    # rank 0 writes 300 bytes between collectives, rank 1 100 bytes; 4 collectives at keys 100, 200, 300, 400
    pos = [50, 150, 250, 350]
    s = Stream.build(2, [0] * 4 + [1] * 4, pos * 2, [300.0] * 4 + [100.0] * 4)
    pts = SyncPoints(2, np.array([0, 1] * 4), np.repeat(np.arange(4), 2), np.repeat([100, 200, 300, 400], 2))
    return s, pts


def test_swapout_f_equal_counts_and_durations() -> None:
    s, pts = _two_rank_stream()
    spec = BufferSpec(memory=1e9, buffer_bytes=1e9, flush_rate=1000.0, flush_latency=0.0)
    fl = SwapOutF(tau=1.0, every=2).plan(s, spec, pts, SyncPoints.none(2))
    # f after collectives 1 and 3 on both ranks; rank 0 writes 600 bytes (0.6 s) + 0.4 s pad, rank 1 0.2 + 0.8
    assert fl.rank.tolist() == [0, 0, 1, 1] and fl.point.tolist() == [1, 3, 1, 3]
    st = buffer_state(s, fl, spec)
    assert st.flush_bytes.tolist() == [600.0, 600.0, 200.0, 200.0]
    assert (st.flush_seconds + fl.pad).tolist() == pytest.approx([1.0] * 4)
    with pytest.raises(TauTooShort) as exc:
        SwapOutF(tau=0.5, every=2).plan(s, spec, pts, SyncPoints.none(2))
    assert exc.value.rank == 0 and exc.value.nbytes == 600.0
    # largest every keeping every rank below 700 bytes between f calls: rank 0 grows 300 per interval -> 2
    assert largest_safe_every(s, pts, 700.0) == 2


def test_vampir_and_padded_sync() -> None:
    s, pts = _two_rank_stream()
    spec = BufferSpec(memory=1e9, buffer_bytes=1000.0, flush_rate=1000.0)
    v = SynchronizedFlush(fill_level=0.5).plan(s, spec, pts, SyncPoints.none(2))
    # rank 0 passes 500 bytes at collective 1 (600): both flush there, and again at collective 3
    assert v.point.tolist() == [1, 3, 1, 3] and v.pad.tolist() == [0.0] * 4
    p = PaddedSyncFlush(trigger="fill", fill_level=0.5).plan(s, spec, pts, SyncPoints.none(2))
    st = buffer_state(s, p, spec)
    # rank 1 pads its 0.2 s write to rank 0's 0.6 s
    assert (st.flush_seconds + p.pad).tolist() == pytest.approx([0.6] * 4)
    pr = PaddedSyncFlush(trigger="predict", safety=1.0).plan(s, spec, pts, SyncPoints.none(2))
    # growth 300 per interval: at collective 2 (fill 900) 900 + 300 > 1000 -> flush; at 3 fill 300: no
    assert pr.point.tolist() == [2, 2]
    assert KeepInMemory().plan(s, spec, pts, SyncPoints.none(2)).rank.size == 0
    with pytest.raises(ValueError, match="unknown spilling policy 'lru'"):
        make_policy("lru")


# ---- insertion and the whole tracer ------------------------------------------------------------------------


def test_apply_insertions_keeps_order_and_ledger() -> None:
    ops = imbalanced(1)
    ins = Insertions.make(rank=[0, 0, 1], key=[key(4, 2), key(4, 2), key(0, 0)], tie=[1, 0, 0], action="overhead",
                          value=[0.2, 0.1, 0.3], kind="overhead", ref_row=[3, 3, 5])
    new, origin = apply_insertions(ops, ins)
    assert names(new, 0) == ["enter", "compute", "leave", "send", "overhead", "overhead", "barrier"]
    assert new.value[new.rank == 0][4:6].tolist() == [0.1, 0.2]  # tie order
    assert origin.tolist() == [0, 1, 2, 3, -1, -1, 4, -1, 5, 6, 7]
    assert new.ledger.total("overhead") == pytest.approx(0.6)
    assert new.tag.tolist() == [0] * 11
    assert (new.excess[new.cause >= 0] > 0).all()


def test_perturb_ops_per_rank_flush_positions() -> None:
    ops = imbalanced(4)
    cfg = parse_perturbation({"instrumentation": {"events": "all", "record_bytes": 100},
                              "tracing": {"policy": "per_rank", "buffer_bytes": 1000, "disk_bandwidth": 1e5,
                                          "disk_latency": 0.0}})
    p = perturb_ops(ops, cfg, facts(), seed=0)
    # rank 0 records 4 x 100 B per step (enter, leave, send, barrier): 400, 800, then 900, 1000 in step 2 and
    # the send record of step 2 does not fit: flush of 1000 B (0.01 s) right after the send
    r0 = names(p.ops, 0)
    first_flush = r0.index("flush")
    assert r0[first_flush - 1] == "send" and p.ops.step[p.ops.rank == 0][first_flush] == 2
    assert p.ops.value[p.ops.rank == 0][first_flush] == 1000.0
    assert "flush" not in names(p.ops, 1)  # rank 1 records 200 B per step: 800 B in 4 steps
    assert p.spill is not None and p.spill.flushes == 1 and p.spill.individual_flushes == 1
    assert p.ops.ledger.total("flush") == pytest.approx(0.01)
    # original operations keep their order
    assert [ACTIONS[c] for c in p.ops.code[p.origin >= 0]] == [ACTIONS[c] for c in ops.code]


def test_perturb_ops_costs_and_swap() -> None:
    ops = imbalanced(3)
    cfg = parse_perturbation({"instrumentation": {"events": "mpi", "record_bytes": 100, "fixed_cost": 1e-3,
                                                  "copy_cost": 1e-5},
                              "tracing": {"policy": "keep", "memory": 450, "swap_factor": 11.0}})
    p = perturb_ops(ops, cfg, facts(), seed=0)
    over = p.ops.code == 33  # overhead
    # 12 records of 100 B: each 1e-3 + 100 * 1e-5 = 2e-3 s
    assert over.sum() == 12 and p.ops.value[over].tolist() == pytest.approx([2e-3] * 12)
    # rank 0: records 100 B each (send, barrier) x 3 = 600 B; memory 450 -> 150 B swapped at 10 x 1e-5 s/B extra
    swap = (p.ops.code == 37) & (p.ops.rank == 0)
    assert p.ops.value[swap].sum() == pytest.approx(150 * 1e-5 * 10)
    assert p.ops.ledger.total("swap") == pytest.approx(2 * 150 * 1e-5 * 10)
    assert set(CAUSE_KINDS[k] for k in p.ops.ledger.kind.tolist()) == {"overhead", "swap"}


def test_tau_shorter_than_flush_and_unknown_policy_errors() -> None:
    ops = imbalanced(4)
    cfg = parse_perturbation({"instrumentation": {"events": "all", "record_bytes": 100},
                              "tracing": {"policy": "swapout_f", "tau": 0.001, "every": 2, "disk_bandwidth": 1e5}},
                             "t.toml")
    with pytest.raises(InputError) as exc:
        perturb_ops(ops, cfg, facts(), seed=0)
    # rank 0 writes 800 B after the second barrier: 8 ms > 1 ms
    assert exc.value.field == "tracing.tau" and "shorter than a flush" in exc.value.problem
    assert "rank 0" in exc.value.problem and "0.008" in exc.value.fix
    with pytest.raises(InputError) as exc2:
        parse_perturbation({"tracing": {"policy": "scorep"}}, "t.toml")
    assert exc2.value.field == "tracing.policy" and "per_rank" in exc2.value.fix
    with pytest.raises(InputError, match="must be > 0"):
        parse_perturbation({"tracing": {"tau": -1.0}}, "t.toml")
    with pytest.raises(InputError, match="has none"):
        b = OpBuilder(2)
        b.add("send", 0, peer=1, value=8)
        b.add("recv", 1, peer=0, value=8)
        perturb_ops(b.build(), parse_perturbation({"tracing": {"policy": "vampir_sync"}}), facts(), seed=0)


def test_no_perturbation_leaves_ops_unchanged() -> None:
    ops = imbalanced(2)
    p = perturb_ops(ops, parse_perturbation({"noise": {"model": "poisson", "rate": 0.0, "duration": 1e-3}}),
                    facts(), seed=0)
    assert p.ops is ops and p.origin.tolist() == list(range(len(ops)))


def test_without_causes_removes_tracer_operations() -> None:
    ops = imbalanced(4)
    cfg = parse_perturbation({"instrumentation": {"events": "all", "record_bytes": 100, "fixed_cost": 1e-3},
                              "tracing": {"policy": "per_rank", "buffer_bytes": 1000, "disk_bandwidth": 1e5}})
    p = perturb_ops(ops, cfg, facts(), seed=0)
    kinds = p.ops.ledger.kind
    flush = p.ops.code == 36
    assert p.ops.value[flush].tolist() == [1000.0]
    # removing the flush cause zeroes the flush (its value is bytes) and keeps the records
    cf = p.ops.without_causes(kinds == CAUSE_KINDS.index("flush"))
    assert cf.value[flush].tolist() == [0.0] and cf.excess[flush].tolist() == [0.0]
    assert cf.value[p.ops.code == 33].sum() == pytest.approx(p.ops.value[p.ops.code == 33].sum())
    everything = p.ops.without_causes(np.ones(len(kinds), bool))
    assert everything.value[p.origin < 0].sum() == 0.0
