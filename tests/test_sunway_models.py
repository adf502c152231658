"""He et al.'s models: alltoall schedules and the step model, the Parallel C put, task scheduling; tiny SMPI runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.cli import build_parser
from waitlab.experiments.reproduce import he_put, he_sunway
from waitlab.models.apps.alltoall_sunway import (
    SUNWAY_ALLTOALL_ALGORITHMS,
    NetworkShape,
    check_complete,
    choose_algorithm,
    emit_schedule,
    predict_seconds,
    schedule,
)
from waitlab.models.apps.dmodk_routes import link_bytes, max_link_bytes, up_port
from waitlab.models.apps.parallel_c_put import emit_put, put_seconds, stream_seconds
from waitlab.models.apps.task_scheduling import TaskScheduling, calibrate, overhead_seconds
from waitlab.models.ops import ACTIONS, OpBuilder


@pytest.mark.parametrize("algorithm", SUNWAY_ALLTOALL_ALGORITHMS)
@pytest.mark.parametrize("sn", [[0] * 8, [0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 0, 1, 2]])
def test_every_schedule_delivers_every_block(algorithm: str, sn: list[int]) -> None:
    check_complete(schedule(algorithm, np.array(sn), 100.0), len(sn), 100.0)


def test_two_level_ring_keeps_levels_apart() -> None:
    sn = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    steps = schedule("two_level_ring", sn, 1.0).steps
    crossing = [bool((sn[s] != sn[d]).all()) for s, d, _ in steps]
    inside = [bool((sn[s] == sn[d]).all()) for s, d, _ in steps]
    # level 1: largest group has 3 members -> 2 steps inside; then only crossing steps
    assert inside[:2] == [True, True] and all(crossing[2:])


def test_row_column_aggregates() -> None:
    s = schedule("row_column", np.zeros(6, np.int64), 10.0)  # 3 x 2 grid: 1 row step of 30 B, 2 column steps of 20 B
    assert [float(b[0]) for _, _, b in s.steps] == [30.0, 20.0, 20.0]


def test_step_model_by_hand() -> None:
    shape = NetworkShape(node_bandwidth=1e9, uplink_bandwidth=0.5e9, latency=1e-6)
    # 2 ranks on 2 nodes of one supernode: 1 step of 1e6 B at 1e9 B/s
    assert predict_seconds(schedule("ring", np.zeros(2, np.int64), 1e6), [0, 1], 4, shape) == pytest.approx(
        1e-6 + 1e-3)
    # same on two supernodes: the 0.5e9 B/s uplink binds
    assert predict_seconds(schedule("ring", np.array([0, 1]), 1e6), [0, 4], 4, shape) == pytest.approx(
        1e-6 + 2e-3)
    # ranks on one node: no network, start-ups only: ring 3 steps of 1 message per rank; simple spread 1 window
    # in which every rank sends 3 messages, one start-up each (per-message overheads are the rank's CPU time)
    best, pred = choose_algorithm([0, 0, 0, 0], 4, shape, 1e6)
    assert pred["ring"] == pytest.approx(3e-6) and pred["simple_spread"] == pytest.approx(3e-6)
    # row-column on a 2 x 2 grid: 1 row step + 1 column step, one message per rank each -> 2 start-ups, cheapest
    assert pred["row_column"] == pytest.approx(2e-6) and best == "row_column"
    # ties go to the earlier candidate
    assert choose_algorithm([0, 0, 0, 0], 4, shape, 1e6, candidates=("ring", "pairwise"))[0] == "ring"


def test_d_mod_k_routes_by_hand() -> None:
    # 2 leaves of 4 nodes, U = 2 top switches; a message to node d climbs to top switch d mod 2
    assert up_port([4, 5, 6, 7], 2).tolist() == [0, 1, 0, 1]
    one = np.ones(2)
    # 0 -> 4 and 1 -> 6: both on leaf 0's up-port 0 and on top switch 0's down-link to leaf 1
    loads = link_bytes([0, 1], [4, 6], one, 4, 2)
    assert loads["leaf_up"].tolist() == [2, 0, 0, 0] and loads["top_down"].tolist() == [0, 2, 0, 0]
    assert max_link_bytes([0, 1], [4, 6], one, 4, 2) == 2.0 and max_link_bytes([0, 1], [4, 5], one, 4, 2) == 1.0
    # 0 -> 4 and 5 -> 2 (opposite leaves): up-ports differ by leaf, no shared link
    assert max_link_bytes([0, 5], [4, 2], one, 4, 2) == 1.0
    # from two leaves to the same up-port of a third: separate up-links, shared down-link top 0 -> leaf 2
    loads = link_bytes([0, 4], [8, 10], one, 4, 2)
    assert loads["leaf_up"].max() == 1.0 and loads["top_down"].max() == 2.0
    # messages inside a node use no link; inside a leaf no up-port
    assert max_link_bytes([3, 1], [3, 2], one, 4, 2) == 1.0 and link_bytes([1], [2], [1.0], 4, 2)["leaf_up"].sum() == 0


def test_step_model_with_d_mod_k_by_hand() -> None:
    shape = NetworkShape(node_bandwidth=1e9, uplink_bandwidth=2e9, latency=1e-6, uplinks=2)
    # 4 ranks on nodes 0, 1 (leaf 0) and 4, 6 (leaf 1).  Ring step 1: 0->1, 1->4, 4->6, 6->0: one message per link;
    # step 2: 0->4 and 1->6 share leaf 0's up-port 0 (4 mod 2 = 6 mod 2 = 0); 4->0 and 6->1 take leaf 1's
    # ports 0 and 1 -> 2e6 B on the busiest link; step 3: 0->6, 1->0, 4->1, 6->4: 1e6 B
    sched = schedule("ring", np.array([0, 0, 1, 1]), 1e6)
    assert predict_seconds(sched, [0, 1, 4, 6], 4, shape) == pytest.approx(3e-6 + 1e-3 + 2e-3 + 1e-3)
    # nodes 0, 1, 4, 5: step 2's destinations 4 and 5 take different up-ports -> 3 steps of 1e6 B
    assert predict_seconds(sched, [0, 1, 4, 5], 4, shape) == pytest.approx(3e-6 + 3e-3)


def test_emit_schedule_ops() -> None:
    b = OpBuilder(n_ranks=3)
    emit_schedule(b, schedule("ring", np.zeros(3, np.int64), 8.0))
    ops = b.build()
    assert [ACTIONS[c] for c in ops.code[ops.rank == 0]] == ["irecv", "isend", "waitall"] * 2


def test_put_model_by_hand() -> None:
    kw = {"latency": 2e-6, "bandwidth": 1e9, "threshold": 1000.0, "header": 100.0}
    assert put_seconds(400, **kw) == pytest.approx(2e-6 + 500e-9)           # one active message
    assert put_seconds(1e6, **kw) == pytest.approx(2e-6 + 1e-3 + 2e-6 + 100e-9)  # RDMA + header
    assert put_seconds(1e6, reply=False, **kw) == pytest.approx(2e-6 + 1e-3)
    assert stream_seconds(1e6, 32, reply=False, **kw) == pytest.approx(2e-6 + 32e-3)
    # small messages: one latency of gap each (500 B at 1e9 B/s is shorter than the 2 us latency)
    assert stream_seconds(400, 32, **kw) == pytest.approx(2e-6 + 32 * 2e-6)
    assert stream_seconds(1e6, 2, **kw) == pytest.approx(2e-6 + 2 * 1e-3 + 2 * 2e-6)
    b = OpBuilder(n_ranks=2)
    emit_put(b, 0, 1, 1e6, threshold=1000.0)
    emit_put(b, 0, 1, 10, threshold=1000.0, reply=False)
    ops = b.build()
    assert [ACTIONS[c] for c in ops.code[ops.rank == 0]] == ["isend", "isend", "waitall", "isend", "waitall"]


def test_task_model_by_hand_and_calibration() -> None:
    m = TaskScheduling(processes=10, threads_per_process=5, tasks_per_thread=3, service=0.1)
    # burst 1 s, local 0.5 s: start 1.5 + end 1.5; a 0.25 s task exposes 0.75 s in each of the 2 later rounds
    assert overhead_seconds(m, 0.25) == pytest.approx(3.0 + 2 * 0.75)
    assert overhead_seconds(m, 5.0) == pytest.approx(3.0)
    fitted = calibrate(64.0, 3.88)
    assert overhead_seconds(fitted, 64.0) == pytest.approx(3.88, rel=1e-9)


def test_cli_knows_the_target() -> None:
    args = build_parser().parse_args(["reproduce", "he-sunway", "--ranks", "8", "--ranks-per-node", "1"])
    assert args.target == "he-sunway" and args.ranks == [8]


@pytest.mark.simgrid
def test_mvapich2_passive_put_is_four_messages() -> None:
    # SMPI 3.32's passive lock/unlock sends nothing of its own (one 4 B message, 2.74 us); the platform's
    # rma_protocol = "mvapich2" adds lock request, grant and done acknowledgement (docs/rma.md): 4 messages of
    # 4-8 B, 2.74 us each (He et al. table 2's Parallel C figure, the platform's [mpi] point)
    assert he_put.rma_protocol() == "mvapich2"
    assert he_put.mpi_put_seconds("latency-passive", 4, iters=3) == pytest.approx(4 * 2.74e-6, rel=0.02)


@pytest.mark.simgrid
def test_reproduce_tiny(tmp_path: Path) -> None:
    res = he_sunway.reproduce(ranks=8, ranks_per_node=1, labels=("1 supernode", "2 supernodes"), iters=2)
    out = he_sunway.write(res, tmp_path / "he")
    assert {p.name for p in out.iterdir()} == {"README.md", "table2.csv", "table3.csv", "alltoall.csv",
                                               "table4.csv"}
    assert len(res.table2) == 12 and len(res.table3) == 16 and len(res.alltoall) == 2
    assert (res.alltoall["ring_s"] > 0).all() and res.alltoall["supernodes"].tolist() == [1, 2]
    # 4 MB puts are bandwidth-bound: the simulated MPI latency is near 4 MB / 5.78 GB/s = 725 us
    big = res.table2[(res.table2["size"] == 4194304) & (res.table2["column"] == "MPI passive")]
    assert float(big["simulated_us"].iloc[0]) == pytest.approx(4194304 / 5.78363e9 * 1e6, rel=0.05)
    assert "Table 4" in (out / "README.md").read_text()
