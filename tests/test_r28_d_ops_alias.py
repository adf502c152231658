"""OpBuilder keeps no reference to its caller's arrays: changing an array after ``add()`` changes neither the operation
table nor the cause ledger that ``build()`` makes (session 28, helper d).  Expected values by hand."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.models.ops import CAUSE_KINDS, CODE, OpBuilder, seq_within_rank


@pytest.mark.parametrize("excess", [0.5, [0.5, 0.25, 1.0]])
def test_ranks_changed_after_add_change_nothing(excess: object) -> None:
    b = OpBuilder(4)
    r = np.array([0, 1, 2], np.int32)  # int32: the builder's own dtype (no conversion copy)
    b.add("compute", r, value=1.0, excess=excess, region="x")
    r[:] = 3
    ops = b.build()
    assert ops.rank.tolist() == [0, 1, 2]
    assert ops.ledger.rank.tolist() == [0, 1, 2]
    assert ops.cause.tolist() == [0, 1, 2]


def test_some_rows_with_excess() -> None:
    b = OpBuilder(4)
    r = np.array([3, 1, 2], np.int32)
    ex = np.array([0.0, 0.25, 0.5])
    step = np.array([7, 8, 9], np.int32)
    b.add("compute", r, value=1.0, step=step, excess=ex, region="x", cause_kind="noise")
    r[:], ex[:], step[:] = 0, 9.0, -5
    ops = b.build()
    assert ops.rank.tolist() == [1, 2, 3] and ops.seq.tolist() == [0, 0, 0]
    assert ops.step.tolist() == [8, 9, 7]
    assert ops.excess.tolist() == [0.25, 0.5, 0.0]
    assert ops.cause.tolist() == [0, 1, -1]
    assert ops.ledger.rank.tolist() == [1, 2] and ops.ledger.step.tolist() == [8, 9]
    assert ops.ledger.seconds.tolist() == [0.25, 0.5]
    assert ops.ledger.kind.tolist() == [CAUSE_KINDS.index("noise")] * 2


def test_every_argument_array_is_copied() -> None:
    b = OpBuilder(3)
    r = np.array([2, 0], np.int32)
    args = {"step": np.array([4, 5], np.int32), "value": np.array([8.0, 16.0]), "value2": np.array([1.0, 2.0]),
            "peer": np.array([0, 2], np.int32), "tag": np.array([6, 7], np.int32)}
    b.add("send", r, **args)
    r[:] = 1
    for a in args.values():
        a[:] = 0
    ops = b.build()
    assert ops.rank.tolist() == [0, 2] and ops.code.tolist() == [CODE["send"]] * 2
    assert ops.step.tolist() == [5, 4] and ops.value.tolist() == [16.0, 8.0] and ops.value2.tolist() == [2.0, 1.0]
    assert ops.peer.tolist() == [2, 0] and ops.tag.tolist() == [7, 6]


def test_seq_within_rank_with_and_without_counts() -> None:
    rank = np.array([0, 0, 2, 2, 2, 4], np.int32)  # ranks 1 and 3 without rows
    want = [0, 1, 0, 1, 2, 0]
    assert seq_within_rank(rank, 5).tolist() == want
    assert seq_within_rank(rank, 5, np.array([2, 0, 3, 0, 1])).tolist() == want
    assert seq_within_rank(rank.astype(np.int64), 5).tolist() == want
    assert seq_within_rank(rank, 5).dtype == np.int32
    assert seq_within_rank(np.zeros(0, np.int32), 3).tolist() == []
