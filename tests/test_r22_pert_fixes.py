"""Round 22 perturbation fixes: per-node shares of trace memory and disk, the fix of an ``only`` that selects
nothing, the first break of condition C, and the flush time of the report without the pads.

Every expected value is computed by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.perturb.condition_c import check_condition_c
from waitlab.models.perturb.instrumentation import Instrumentation
from waitlab.models.perturb.spill_policies import summarize_spill
from waitlab.models.perturb.stage import PerturbationConfig, PlatformFacts, buffer_spec, perturb_ops
from waitlab.models.perturb.tracebuffer import BufferSpec, Flushes, Stream, buffer_state


def _facts(node_of_rank: list[int], rpn: int, memory: float = 1e12, bw: float = 1e6,
           lat: float = 0.0) -> PlatformFacts:
    n = len(node_of_rank)
    return PlatformFacts(n_ranks=n, ranks_per_node=rpn, core_speed=1e9,
                         host_of_rank=tuple(f"node-{k}" for k in node_of_rank),
                         node_of_rank=np.asarray(node_of_rank, np.int64), node_memory=memory, disk_bandwidth=bw,
                         disk_latency=lat)


def _barriers(n: int, steps: int) -> OpTable:
    b = OpBuilder(n)
    for s in range(steps):
        for r in range(n):
            b.add("compute", r, step=s, value=0.01)
        b.add("barrier", list(range(n)), step=s)
    return b.build()


# ---- 1: shares by the ranks placed on the node, not the platform's ranks_per_node ----------------------------


def test_buffer_spec_shares_by_ranks_placed_on_each_node() -> None:
    cfg = parse_perturbation({"tracing": {"policy": "per_rank", "memory": 1024, "disk_bandwidth": 40000.0,
                                          "disk_latency": 0.001, "buffer_bytes": 200}}).tracing
    assert cfg is not None
    # 4 ranks on one node of a 16-core platform: each gets 1024 / 4 = 256 B and 40000 / 4 = 10000 B/s
    spec = buffer_spec(cfg, _facts([0, 0, 0, 0], rpn=16))
    assert spec.memory == pytest.approx(256.0) and spec.flush_rate == pytest.approx(10000.0)
    # a 192-byte flush: 0.001 + 192 / 10000 = 0.0202 s (not 0.001 + 192 / 2500 = 0.0778 s)
    assert spec.write_seconds([192.0], [0]).tolist() == pytest.approx([0.0202])
    # 13 ranks at 4 per node: nodes 0-2 hold 4 ranks (1200 / 4 = 300), node 3 holds rank 12 alone (1200)
    cfg2 = parse_perturbation({"tracing": {"policy": "keep", "memory": 1200, "disk_bandwidth": 1200.0}}).tracing
    assert cfg2 is not None
    spec2 = buffer_spec(cfg2, _facts([r // 4 for r in range(13)], rpn=4))
    ranks = np.arange(13)
    assert spec2.of("memory", ranks).tolist() == pytest.approx([300.0] * 12 + [1200.0])
    assert spec2.of("flush_rate", ranks).tolist() == pytest.approx([300.0] * 12 + [1200.0])
    assert spec2.of("buffer_bytes", ranks).tolist() == pytest.approx([300.0] * 12 + [1200.0])  # default: memory


def test_flush_and_swap_use_the_share_of_each_ranks_node() -> None:
    # 3 ranks, ranks 0 and 1 on node 0, rank 2 alone on node 1 of a 16-core platform; 4 barriers, one
    # 100-byte record each (events = "mpi"): 4 records per rank
    ops = _barriers(3, 4)
    facts = _facts([0, 0, 1], rpn=16, memory=450.0, bw=1000.0, lat=0.001)
    cfg = parse_perturbation({"instrumentation": {"events": "mpi", "record_bytes": 100, "fixed_cost": 0.0,
                                                  "copy_cost": 0.0},
                              "tracing": {"policy": "per_rank", "buffer_bytes": 250}})
    p = perturb_ops(ops, cfg, facts, seed=0)
    # a 250-byte buffer holds 2 records: one flush of 200 B per rank before its third record
    # ranks 0, 1: 1000 / 2 = 500 B/s -> 0.001 + 200 / 500 = 0.401 s; rank 2: 0.001 + 200 / 1000 = 0.201 s
    assert p.flushes.rank.tolist() == [0, 1, 2]
    assert p.state is not None and p.state.flush_bytes.tolist() == [200.0, 200.0, 200.0]
    assert p.state.flush_seconds.tolist() == pytest.approx([0.401, 0.401, 0.201])
    assert p.ops.ledger.total("flush") == pytest.approx(0.401 + 0.401 + 0.201)
    # keep: 450 B of node memory -> 225 B for ranks 0, 1 and 450 B for rank 2
    # ranks 0, 1: resident after each record 100, 200, 300, 400 -> 75 + 100 = 175 B swapped; rank 2: none
    keep = parse_perturbation({"instrumentation": {"events": "mpi", "record_bytes": 100, "fixed_cost": 0.0,
                                                   "copy_cost": 1e-5},
                               "tracing": {"policy": "keep", "swap_factor": 11.0}})
    pk = perturb_ops(ops, keep, facts, seed=0)
    assert pk.state is not None
    over = np.bincount(pk.records.rank, weights=pk.state.over, minlength=3)
    assert over.tolist() == pytest.approx([175.0, 175.0, 0.0])
    # each swapped byte costs 1e-5 * (11 - 1) s more: 2 * 175 * 1e-4 = 0.035 s
    assert pk.ops.ledger.total("swap") == pytest.approx(0.035)


# ---- 2: the fix of an only that selects nothing --------------------------------------------------------------


def test_only_mpi_name_under_region_events_fix_says_what_to_do() -> None:
    b = OpBuilder(2)
    b.add("enter", [0, 1], step=0, region="A")
    b.add("compute", [0, 1], step=0, value=0.01, region="A")
    b.add("leave", [0, 1], step=0, region="A")
    b.add("barrier", [0, 1], step=0)
    cfg = PerturbationConfig(instrumentation=Instrumentation(events="regions", only=("recv",)), source="b.toml")
    with pytest.raises(InputError) as exc:
        perturb_ops(b.build(), cfg, _facts([0, 1], rpn=1), seed=0)
    assert exc.value.field == "instrumentation.only" and "selects nothing" in exc.value.problem
    assert 'set events = "all" (or "mpi") to record recv' in exc.value.fix
    assert "use MPI action names" not in exc.value.fix


# ---- 3: the first break names one event: its rank, seq and start -------------------------------------------


def test_first_break_rank_event_and_time_belong_to_one_event() -> None:
    # barrier of 3 ranks: rank 1 pays 0.5 s of overhead (1.0 .. 1.5) and enters at 1.5; ranks 0 and 2 pay none and
    # enter at 0.5 and 0.25. Prefix sums 0, 0.5, 0: named is rank 1's barrier, which starts at 1.5 (make_events has
    # no seq column: seq is the row, 3)
    ev = make_events(rank=[0, 1, 1, 1, 2], op=["barrier", "compute", "overhead", "barrier", "barrier"],
                     enter=[0.5, 0.0, 1.0, 1.5, 0.25], exit=[2.0, 1.0, 1.5, 2.0, 2.0], match=[0, -1, -1, 0, 0],
                     kind=["mpi", "compute", "overhead", "mpi", "mpi"])
    rep = check_condition_c(ev)
    f = rep.first
    assert (f["rank"], f["seq"], f["op"], f["peer_rank"]) == (1, 3, "barrier", 0)
    assert f["difference"] == pytest.approx(0.5) and f["time"] == pytest.approx(1.5)  # not 0.25 (rank 2's)
    # point to point: rank 0 pays 0.5 s and sends at 0.5; rank 1 receives from 0.0: named the send, at 0.5
    ev2 = make_events(rank=[0, 0, 1], op=["overhead", "send", "recv"], enter=[0.0, 0.5, 0.0],
                      exit=[0.5, 0.5, 0.5], match=[-1, 0, 0], kind=["overhead", "mpi", "mpi"])
    f2 = check_condition_c(ev2).first
    assert (f2["rank"], f2["seq"], f2["time"]) == (0, 1, 0.5)


def test_first_break_ties_within_atol_name_the_lowest_rank() -> None:
    # ranks 0 and 1 both pay 0.5 s (rank 1 2e-12 s more, below atol = 1e-9): rank 0's barrier (row 2) is named, at
    # its start 1.5
    ev = make_events(rank=[0, 0, 0, 1, 1, 2], op=["compute", "overhead", "barrier", "overhead", "barrier", "barrier"],
                     enter=[0.0, 1.0, 1.5, 0.0, 0.5 + 2e-12, 0.2], exit=[1.0, 1.5, 2.0, 0.5 + 2e-12, 2.0, 2.0],
                     match=[-1, -1, 0, -1, 0, 0], kind=["compute", "overhead", "mpi", "overhead", "mpi", "mpi"])
    f = check_condition_c(ev).first
    assert (f["rank"], f["seq"], f["peer_rank"]) == (0, 2, 2) and f["time"] == pytest.approx(1.5)


# ---- 4: the report's flush time is the writing; pads are apart ----------------------------------------------


def test_spill_summary_flush_seconds_exclude_pads() -> None:
    # rank 0 flushes 200 B, rank 1 100 B at 1000 B/s: 0.2 s and 0.1 s of writing; rank 1 pads 0.1 s
    stream = Stream.build(2, rank=[0, 0, 1], pos=[10, 20, 10], nbytes=[100.0, 100.0, 100.0])
    spec = BufferSpec(memory=1e9, buffer_bytes=1e9, flush_rate=1000.0)
    fl = Flushes(np.array([0, 1]), np.array([2, 3]), np.array([29, 19]), np.array([0.0, 0.1]), np.array([0, 0]))
    st = buffer_state(stream, fl, spec)
    assert st.flush_seconds.tolist() == pytest.approx([0.2, 0.1])
    sm = summarize_spill("padded_sync", stream, fl, st, spec)
    assert sm.flush_seconds == pytest.approx(0.3) and sm.pad_seconds == pytest.approx(0.1)
