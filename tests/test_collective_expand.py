"""Allreduce expanded into point-to-point schedules (issue 15): trees computed by hand, tables that pair up."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.collective_expand import REDUCE_TAG, expand_allreduce, schedule
from waitlab.models.ops import ACTIONS, CODE, OpBuilder


def _rows(s: dict, r: int) -> list[tuple[str, int, int]]:
    m = s["rank"] == r
    cols = zip(s["code"][m], s["peer"][m], s["tag"][m], strict=True)
    return [(ACTIONS[c], int(p), int(t) - REDUCE_TAG) for c, p, t in cols]


def test_binomial_tree_of_six_ranks_by_hand() -> None:
    # Reduce to 0: 1->0, 3->2, 5->4, then 2->0 and 4->0 (0 receives 1, 2, 4 in that order); broadcast the reverse.
    s = schedule(6, "binomial")
    assert _rows(s, 0) == [("recv", 1, 0), ("recv", 2, 0), ("recv", 4, 0), ("send", 4, 1), ("send", 2, 1),
                           ("send", 1, 1)]
    assert _rows(s, 2) == [("recv", 3, 0), ("send", 0, 0), ("recv", 0, 1), ("send", 3, 1)]
    assert _rows(s, 4) == [("recv", 5, 0), ("send", 0, 0), ("recv", 0, 1), ("send", 5, 1)]
    assert _rows(s, 5) == [("send", 4, 0), ("recv", 4, 1)]
    # 2 (P - 1) messages, each a send and a receive
    assert int((s["code"] == CODE["send"]).sum()) == int((s["code"] == CODE["recv"]).sum()) == 10


def test_recursive_doubling_of_four_ranks_by_hand() -> None:
    s = schedule(4, "rdb")
    assert _rows(s, 2) == [("irecv", 3, 0), ("isend", 3, 0), ("waitall", -1, 0),
                           ("irecv", 0, 1), ("isend", 0, 1), ("waitall", -1, 1)]
    with pytest.raises(ValueError, match="power-of-two"):
        schedule(6, "rdb")
    with pytest.raises(ValueError, match="unknown allreduce schedule"):
        schedule(4, "ring")


@pytest.mark.parametrize(("n", "algorithm"), [(1, "binomial"), (7, "binomial"), (13, "binomial"), (8, "rdb"),
                                              (16, "binomial")])
def test_expanded_steps_pair_up_and_keep_the_rest(n: int, algorithm: str) -> None:
    b = OpBuilder(n)
    everyone = np.arange(n)
    for step in range(3):
        b.add("compute", everyone, step=step, value=0.5 + everyone, region="work")
        b.add("allreduce", everyone, step=step, value=8.0, value2=2e6)
    ops = b.build()
    out = expand_allreduce(ops, algorithm, core_speed=1e9)
    assert first_mismatch(out) is None  # every send has its receive, no certain deadlock
    assert not out.mask(["allreduce"]).any()
    # the computes are untouched, and the reduction's 2e6 flops follow each schedule as 2 ms of compute
    comp = out.code == CODE["compute"]
    assert np.isclose(out.value[comp & (out.name >= 0)], ops.value[ops.code == CODE["compute"]]).all()
    flops = comp & (out.name < 0)
    assert flops.sum() == 3 * n and np.allclose(out.value[flops], 2e-3)
    # rank r's step-1 operations all carry step 1 and sit between its step-0 and step-2 ones
    for r in range(n):
        st = out.step[out.rank == r]
        assert (np.diff(st) >= 0).all()
    msgs = np.isin(out.code, [CODE["send"], CODE["isend"]])
    per_step = 2 * (n - 1) if algorithm == "binomial" else n * int(np.log2(n))
    assert msgs.sum() == 3 * per_step
    assert (out.value[msgs] == 8.0).all()


def test_table_without_world_allreduce_is_returned_as_is() -> None:
    b = OpBuilder(2)
    b.add("barrier", [0, 1])
    ops = b.build()
    assert expand_allreduce(ops, "binomial", 1e9) is ops
