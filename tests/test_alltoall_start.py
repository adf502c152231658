"""How the ranks enter an alltoall point (``start``): the operations, and equal times where the start cannot matter."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from waitlab.experiments.reproduce.alltoall_points import alltoall_point, point_ops
from waitlab.models.ops import CODE

needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")


def test_together_start_has_no_barrier_and_the_hand_counted_messages() -> None:
    ops = point_ops("lam_simple", 16, 4096)
    assert not (ops.code == CODE["barrier"]).any()
    # LAM simple on p = 16 ranks: p (p - 1) = 240 isends and as many irecvs of 4096 B, one waitall per rank
    sends = ops.code == CODE["isend"]
    assert sends.sum() == 240 and (ops.code == CODE["irecv"]).sum() == 240
    assert ops.value[sends].sum() == 240 * 4096
    assert (ops.code == CODE["waitall"]).sum() == 16
    first = np.lexsort((ops.seq, ops.rank))[np.r_[0, np.cumsum(ops.per_rank_counts())[:-1]]]
    assert (ops.code[first] == CODE["irecv"]).all()  # every rank starts with the alltoall itself


def test_barrier_start_puts_one_barrier_first() -> None:
    ops = point_ops("basic_linear", 16, 512, start="barrier")
    order = np.lexsort((ops.seq, ops.rank))
    codes = ops.code[order].reshape(16, 2)
    assert (codes[:, 0] == CODE["barrier"]).all() and (codes[:, 1] == CODE["alltoall"]).all()
    with pytest.raises(ValueError, match="unknown start"):
        point_ops("ring", 16, 512, start="late")


@needs_simgrid
@pytest.mark.simgrid
def test_two_ranks_give_one_message_time_whatever_the_start_and_algorithm() -> None:
    # 2 ranks on 2 nodes: every algorithm sends one 4 KB message each way.  The ring pairs the two ranks
    # (sendrecv), so the barrier's exit skew cannot matter: its time is the same with either start, and MPICH's
    # native alltoall entered together sends the same two messages at the same dates.
    t = {(a, s): alltoall_point("dawning_5000a", a, 2, 4096, ranks_per_node=1, start=s, timeout=120).seconds
         for a in ("ring", "basic_linear") for s in ("together", "barrier")}
    assert t["ring", "together"] == pytest.approx(t["ring", "barrier"], rel=1e-12)
    assert t["basic_linear", "together"] == pytest.approx(t["ring", "together"], rel=1e-12)
    # after SMPI's barrier, one rank leaves first and its message overlaps the other's barrier exit: not equal
    assert t["basic_linear", "barrier"] != pytest.approx(t["basic_linear", "together"], rel=1e-6)
