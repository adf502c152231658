"""Trace pre-checks: collectives agree, messages pair up, certain deadlocks are named (hand-built tables)."""

from __future__ import annotations

from waitlab.models.analysis.trace_check import certain_deadlock, collective_mismatch, first_mismatch, message_mismatch
from waitlab.models.ops import OpBuilder, OpTable


def table(n: int, rows: list[tuple[str, int, dict[str, float]]]) -> OpTable:
    b = OpBuilder(n)
    for action, rank, kw in rows:
        b.add(action, ranks=rank, **kw)  # type: ignore[arg-type]
    return b.build()


def test_a_consistent_exchange_passes_every_check():
    ops = table(2, [("isend", 0, {"peer": 1, "value": 8}), ("irecv", 0, {"peer": 1, "value": 8}),
                    ("waitall", 0, {}), ("recv", 1, {"peer": 0, "value": 8}), ("send", 1, {"peer": 0, "value": 8}),
                    ("barrier", 0, {}), ("barrier", 1, {}), ("bcast", 0, {"peer": 1}), ("bcast", 1, {"peer": 1})])
    assert first_mismatch(ops) is None


def test_collectives_in_another_order_name_rank_and_position():
    ops = table(3, [("barrier", r, {}) for r in range(3)] + [("allreduce", 0, {}), ("bcast", 0, {}),
                                                              ("allreduce", 1, {}), ("bcast", 1, {}),
                                                              ("bcast", 2, {}), ("allreduce", 2, {})])
    assert collective_mismatch(ops) == "rank 2 calls bcast as its collective #2 where rank 0 calls allreduce"


def test_a_missing_collective_and_an_extra_one():
    missing = table(2, [("barrier", 0, {}), ("allreduce", 0, {}), ("barrier", 1, {})])
    assert collective_mismatch(missing) == ("rank 1 makes 1 collective calls, rank 0 makes 2: rank 1 never calls "
                                            "allreduce (rank 0's collective #2)")
    extra = table(2, [("barrier", 0, {}), ("barrier", 1, {}), ("gather", 1, {})])
    assert collective_mismatch(extra) == ("rank 0 makes 1 collective calls, rank 1 makes 2: rank 0 never calls "
                                          "gather (rank 1's collective #2)")


def test_roots_must_agree():
    ops = table(2, [("bcast", 0, {"peer": 0}), ("bcast", 1, {"peer": 1})])
    assert collective_mismatch(ops) == "rank 1 calls bcast #1 with root 1, rank 0 with root 0"


def test_unmatched_send_receive_and_truncation():
    lost = table(2, [("send", 0, {"peer": 1, "tag": 3, "value": 8})])
    assert "rank 0's send (operation 0 of rank 0) to rank 1 with tag 3 has no matching receive" in \
        message_mismatch(lost)
    orphan = table(2, [("irecv", 1, {"peer": 0, "value": 8}), ("waitall", 1, {})])
    assert "rank 1's irecv (operation 0 of rank 1) from rank 0 with tag 0 has no matching send" in \
        message_mismatch(orphan)
    wrong_tag = table(2, [("send", 0, {"peer": 1, "tag": 1}), ("recv", 1, {"peer": 0, "tag": 2})])
    assert "tag 1 has no matching receive" in message_mismatch(wrong_tag)
    trunc = table(2, [("send", 0, {"peer": 1, "value": 100}), ("recv", 1, {"peer": 0, "value": 50})])
    assert "sends 100 bytes to rank 1 (tag 0) but the matching receive takes only 50" in message_mismatch(trunc)
    larger = table(2, [("send", 0, {"peer": 1, "value": 50}), ("recv", 1, {"peer": 0, "value": 100})])
    assert message_mismatch(larger) is None  # a larger receive buffer is fine in MPI


def test_receives_first_on_both_sides_deadlock_and_name_both_ranks():
    ops = table(2, [("recv", 0, {"peer": 1}), ("send", 0, {"peer": 1}),
                    ("recv", 1, {"peer": 0}), ("send", 1, {"peer": 0})])
    assert message_mismatch(ops) is None
    assert certain_deadlock(ops) == ("deadlock even with buffered sends: rank 0 in recv (operation 0, from rank 1, "
                                     "tag 0); rank 1 in recv (operation 0, from rank 0, tag 0)")
    assert first_mismatch(ops)[0] == "deadlock"


def test_a_ring_of_waits_on_irecvs_deadlocks_but_send_first_does_not():
    ring = table(3, [x for r in range(3) for x in (
        ("irecv", r, {"peer": (r - 1) % 3}), ("waitall", r, {}), ("send", r, {"peer": (r + 1) % 3}))])
    problem = certain_deadlock(ring)
    assert problem is not None and "rank 0 in waitall" in problem and "rank 2 in waitall" in problem
    ok = table(3, [x for r in range(3) for x in (
        ("irecv", r, {"peer": (r - 1) % 3}), ("send", r, {"peer": (r + 1) % 3}), ("waitall", r, {}))])
    assert first_mismatch(ok) is None
