"""Timeline parsing without SMPI: logs fabricated from hand-computed times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import SimulationError
from waitlab.models.columns import frame
from waitlab.models.ops import CODE, OpBuilder, OpTable
from waitlab.simulator.timeline import LOG_DTYPE, build_events, read_log


def _fake_log(path: Path, ops: OpTable, t_enter: np.ndarray, t_exit: np.ndarray, drop_last: bool = False) -> None:
    rows = []
    for r in range(ops.n_ranks):
        sel = np.flatnonzero(ops.rank == r)
        rows.append((r, CODE["init"], 0.0, 0.0))
        rows += [(r, int(ops.code[i]), float(t_enter[i]), float(t_exit[i])) for i in sel]
        rows.append((r, CODE["finalize"], 1e9, 1e9))
    if drop_last:
        rows = rows[:-1]
    # interleave ranks as a simulator would: the parser must not rely on file order across ranks
    rows.sort(key=lambda x: (x[2], x[0]))
    np.array(rows, dtype=LOG_DTYPE).tofile(path)


def _two_rank_ops() -> OpTable:
    b = OpBuilder(2)
    b.add("enter", [0, 1], region="r")
    b.add("compute", [0, 1], value=[2.0, 1.0], region="r")
    b.add("leave", [0, 1], region="r")
    b.add("isend", 0, peer=1, tag=5, value=100)
    b.add("irecv", 1, peer=0, tag=5, value=100)
    b.add("wait", 0, peer=1, tag=5, value2=0)
    b.add("wait", 1, peer=0, tag=5, value2=1)
    b.add("barrier", [0, 1])
    return b.build()


def test_read_log_orders_by_rank_and_checks_codes(tmp_path):
    ops = _two_rank_ops()
    te = np.arange(len(ops), dtype=float)
    tx = te + 0.5
    _fake_log(tmp_path / "log", ops, te, tx)
    e, x = read_log(tmp_path / "log", ops)
    np.testing.assert_array_equal(e, te)
    np.testing.assert_array_equal(x, tx)


def test_truncated_log_is_an_error(tmp_path):
    ops = _two_rank_ops()
    te = np.zeros(len(ops))
    _fake_log(tmp_path / "log", ops, te, te, drop_last=True)
    with pytest.raises(SimulationError, match="incomplete: rank 1 logged 7 of 8"):
        read_log(tmp_path / "log", ops)


def test_missing_log_is_an_error(tmp_path):
    with pytest.raises(SimulationError, match="wrote no event log"):
        read_log(tmp_path / "nothing", _two_rank_ops())


def test_matching_and_completion():
    ops = _two_rank_ops()
    t = np.arange(len(ops), dtype=float)
    ev = frame(build_events(ops, t, t + 0.25))
    isend = ev[(ev["op"] == "isend")].iloc[0]
    irecv = ev[(ev["op"] == "irecv")].iloc[0]
    assert isend["match"] == irecv["match"] >= 0
    waits = ev[ev["op"] == "wait"]
    assert (waits["match"] == isend["match"]).all()
    # each request is completed by its own rank's wait
    assert ev.iloc[int(isend["done"])]["rank"] == 0 and ev.iloc[int(isend["done"])]["op"] == "wait"
    assert ev.iloc[int(irecv["done"])]["rank"] == 1
    barrier = ev[ev["op"] == "barrier"]
    assert barrier["match"].tolist() == [0, 0]


def test_kth_send_matches_kth_receive_per_tag():
    b = OpBuilder(2)
    for tag in (1, 2, 1):
        b.add("send", 0, peer=1, tag=tag, value=8)
    for tag in (2, 1, 1):  # receiver takes them in another order across tags
        b.add("recv", 1, peer=0, tag=tag, value=8)
    ops = b.build()
    t = np.arange(len(ops), dtype=float)
    ev = frame(build_events(ops, t, t))
    sends = ev[ev["rank"] == 0]
    recvs = ev[ev["rank"] == 1]
    pair = {int(s.match): int(s.seq) for s in sends.itertuples()}
    got = {int(r.seq): pair[int(r.match)] for r in recvs.itertuples()}
    assert got == {0: 1, 1: 0, 2: 2}  # recv tag2 <- send #1; first recv tag1 <- send #0; second <- send #2


def test_waitall_completes_all_pending_requests():
    b = OpBuilder(3)
    b.add("irecv", 0, peer=1, value=8)
    b.add("irecv", 0, peer=2, value=8)
    b.add("isend", [1, 2], peer=0, value=8)
    b.add("waitall", [0, 1, 2])
    ops = b.build()
    t = np.arange(len(ops), dtype=float)
    ev = frame(build_events(ops, t, t))
    waitall0 = ev.index[(ev["rank"] == 0) & (ev["op"] == "waitall")][0]
    assert (ev.loc[(ev["rank"] == 0) & (ev["op"] == "irecv"), "done"] == waitall0).all()


def test_unmatched_message_is_an_error():
    b = OpBuilder(2)
    b.add("send", 0, peer=1, tag=3, value=8)
    b.add("recv", 1, peer=0, tag=4, value=8)
    ops = b.build()
    with pytest.raises(SimulationError, match="has no partner"):
        build_events(ops, np.zeros(len(ops)), np.zeros(len(ops)))


def test_unbalanced_regions_are_an_error():
    b = OpBuilder(1)
    b.add("enter", 0, region="a")
    b.add("compute", 0, value=1.0)
    ops = b.build()
    with pytest.raises(SimulationError, match="still open"):
        build_events(ops, np.zeros(len(ops)), np.zeros(len(ops)))


def test_mismatched_collectives_are_an_error():
    b = OpBuilder(2)
    b.add("barrier", 0)
    b.add("allreduce", 1, value=8)
    ops = b.build()
    with pytest.raises(SimulationError, match="collective #0: rank 1 calls allreduce but rank 0 calls barrier"):
        build_events(ops, np.zeros(len(ops)), np.zeros(len(ops)))


def test_region_names_containing_path_separator_stay_distinct():
    b = OpBuilder(1)
    b.add("enter", 0, region="EOS_Match")
    b.add("enter", 0, region="If_970")
    b.add("leave", 0, region="If_970")
    b.add("leave", 0, region="EOS_Match")
    b.add("enter", 0, region="EOS_Match>If_970")
    b.add("leave", 0, region="EOS_Match>If_970")
    ops = b.build()
    ev = frame(build_events(ops, np.zeros(len(ops)), np.zeros(len(ops))))
    assert ev["path"].tolist() == ["EOS_Match", "EOS_Match>If_970", "EOS_Match>If_970"]
    assert ev["region"].tolist() == ["EOS_Match", "If_970", "EOS_Match>If_970"]
