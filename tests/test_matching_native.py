"""The one-pass C message matching (``native/waitlab_matching.c``, issue 25) gives the numpy results it replaced in the
event table (:func:`~waitlab.simulator.matching.match_messages`, :func:`~waitlab.simulator.matching.completions`,
:func:`~waitlab.simulator.timeline.collective_instances`) row for row, the values worked out by hand for a small
case, the same event table column by column, and the numpy versions' message on malformed tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from waitlab.errors import SimulationError
from waitlab.models.columns import frame
from waitlab.models.ops import Ledger, OpTable
from waitlab.models.vocabulary import CODE
from waitlab.simulator import native_matching, timeline
from waitlab.simulator.matching import completions, match_messages
from waitlab.simulator.timeline import build_events, collective_instances

Row = tuple[str, int, int, float, int]  # action, peer, tag, value2, comm

_EMPTY_LEDGER = Ledger.empty()


def _table(per_rank: list[list[Row]], comms: tuple[tuple[int, ...], ...] = ()) -> OpTable:
    """An operation table from each rank's rows, in (rank, seq) order."""
    rows = [(r, s, *row) for r, ops in enumerate(per_rank) for s, row in enumerate(ops)]
    n = len(rows)
    col = list(zip(*rows, strict=True)) if rows else [()] * 7
    return OpTable(n_ranks=len(per_rank), names=(), ledger=_EMPTY_LEDGER, rank=np.array(col[0], np.int32),
                   seq=np.array(col[1], np.int32), code=np.array([CODE[a] for a in col[2]], np.int8),
                   step=np.zeros(n, np.int32), name=np.full(n, -1, np.int32), value=np.full(n, 8.0),
                   value2=np.array(col[5], np.float64), peer=np.array(col[3], np.int32),
                   tag=np.array(col[4], np.int32), cause=np.full(n, -1, np.int64), excess=np.zeros(n),
                   comm=np.array(col[6], np.int32), comms=comms)


def _random_table(seed: int, n_ranks: int = 5, steps: int = 60) -> OpTable:
    """Point-to-point messages (blocking and not, repeated channels), waits in and out of request
    order, tests, waitalls, requests left open, and collectives on MPI_COMM_WORLD and two sub-communicators."""
    rng = np.random.default_rng(seed)
    comms = ((0, 2, 4), (3, 1))
    prog: list[list[Row]] = [[] for _ in range(n_ranks)]
    pending: list[list[Row]] = [[] for _ in range(n_ranks)]
    for _ in range(steps):
        u = rng.uniform()
        if u < 0.55:
            src = int(rng.integers(0, n_ranks))
            dst = (src + int(rng.integers(1, n_ranks))) % n_ranks  # self-messages: their own test
            tag = int(rng.integers(0, 3))
            send = "isend" if rng.uniform() < 0.5 else "send"
            recv = "irecv" if rng.uniform() < 0.5 else "recv"
            prog[src].append((send, dst, tag, 0.0, 0))
            prog[dst].append((recv, src, tag, 0.0, 0))
            if send == "isend":
                pending[src].append(("wait", dst, tag, 0.0, 0))
            if recv == "irecv":
                pending[dst].append(("wait", src, tag, 1.0, 0))
        elif u < 0.7:
            c = int(rng.integers(0, 3))
            action = ("barrier", "allreduce", "bcast")[int(rng.integers(0, 3))]
            for r in (range(n_ranks) if c == 0 else comms[c - 1]):
                prog[r].append((action, -1, 0, 0.0, c))
        elif u < 0.85:
            r = int(rng.integers(0, n_ranks))
            if pending[r]:  # a wait for a random pending request (not always the oldest of its group)
                prog[r].append(pending[r].pop(int(rng.integers(0, len(pending[r])))))
            prog[r].append(("test", -1, 0, 0.0, 0))
        elif u < 0.95:
            r = int(rng.integers(0, n_ranks))
            prog[r].append(("compute", -1, 0, 0.0, 0))
        else:
            r = int(rng.integers(0, n_ranks))
            if rng.uniform() < 0.7:
                prog[r].append(("waitall", -1, 0, 0.0, 0))
                pending[r].clear()
    for r in range(n_ranks):  # the rest: waited for, or left to a final waitall, or (rank 0) never completed
        if r % 3 == 1:
            prog[r].extend(pending[r])
        elif r % 3 == 2:
            prog[r].append(("waitall", -1, 0, 0.0, 0))
    return _table(prog, comms)


def _numpy_links(ops: OpTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    m = match_messages(ops)
    return m, completions(ops, m), collective_instances(ops)


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a fallback to the numpy versions fail the test (so the C pass is what is compared)."""
    def boom(ops: OpTable) -> npt.NDArray[np.int64]:
        raise AssertionError("the C pass fell back to numpy")
    monkeypatch.setattr(native_matching, "match_messages", boom)


@pytest.mark.parametrize("seed", range(12))
def test_native_links_are_the_numpy_links(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    ops = _random_table(seed)
    want = _numpy_links(ops)
    _no_fallback(monkeypatch)
    got = native_matching.links(ops, collective_instances)
    for g, w, what in zip(got, want, ("match", "done", "instance"), strict=True):
        assert g.dtype == w.dtype == np.int64, what
        np.testing.assert_array_equal(g, w, err_msg=what)


def test_by_hand() -> None:
    # rank 0: isend, isend, wait (the first isend), waitall (the second); rank 1: recv, irecv, wait, barrier;
    # rank 0 also: barrier.  Channel (0 -> 1, tag 7) carries messages 0 and 1.
    ops = _table([[("isend", 1, 7, 0.0, 0), ("isend", 1, 7, 0.0, 0), ("wait", 1, 7, 0.0, 0), ("waitall", -1, 0, 0, 0),
                   ("barrier", -1, 0, 0.0, 0)],
                  [("recv", 0, 7, 0.0, 0), ("irecv", 0, 7, 0.0, 0), ("wait", 0, 7, 1.0, 0), ("barrier", -1, 0, 0, 0)]])
    match, done, inst = native_matching.links(ops, collective_instances)
    assert match.tolist() == [0, 1, 0, -1, -1, 0, 1, 1, -1]
    assert done[[0, 1, 5, 6]].tolist() == [2, 3, 5, 7]  # wait, waitall; the blocking recv itself; its wait
    assert inst.tolist() == [-1, -1, -1, -1, 0, -1, -1, -1, 0]


def test_channels_numbered_in_channel_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages are numbered by (source, destination, tag), not by row: rank 0's send to rank 2 (channel (0, 2))
    # comes first in rows but after channel (0, 1); tag 5 before tag 9 on the same pair.
    ops = _table([[("send", 2, 0, 0.0, 0), ("send", 1, 9, 0.0, 0), ("send", 1, 5, 0.0, 0)],
                  [("recv", 0, 5, 0.0, 0), ("recv", 0, 9, 0.0, 0)], [("recv", 0, 0, 0.0, 0)]])
    _no_fallback(monkeypatch)
    match, done, _ = native_matching.links(ops, collective_instances)
    assert match.tolist() == [2, 1, 0, 0, 1, 2]
    assert done.tolist() == [0, 1, 2, 3, 4, 5]


def test_self_message_waits_take_numpy() -> None:
    # a rank waiting on both ends of a message to itself: numpy's choice between the two waits is kept
    ops = _table([[("isend", 0, 1, 0.0, 0), ("irecv", 0, 1, 0.0, 0), ("wait", 0, 1, 0.0, 0), ("wait", 0, 1, 1.0, 0)]])
    for g, w in zip(native_matching.links(ops, collective_instances), _numpy_links(ops), strict=True):
        np.testing.assert_array_equal(g, w)


def test_empty_and_p2p_free_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    for ops in (_table([[], []]), _table([[("compute", -1, 0, 0.0, 0), ("barrier", -1, 0, 0.0, 0)],
                                           [("barrier", -1, 0, 0.0, 0)]])):
        want = _numpy_links(ops)
        for g, w in zip(native_matching.links(ops, collective_instances), want, strict=True):
            np.testing.assert_array_equal(g, w)


_MALFORMED: dict[str, Callable[[], OpTable]] = {
    "unmatched send": lambda: _table([[("send", 1, 0, 0.0, 0), ("send", 1, 0, 0.0, 0)], [("recv", 0, 0, 0.0, 0)]]),
    "other tag": lambda: _table([[("send", 1, 0, 0.0, 0)], [("recv", 0, 1, 0.0, 0)]]),
    "wait without request": lambda: _table([[("isend", 1, 0, 0.0, 0), ("wait", 1, 3, 0.0, 0)],
                                            [("recv", 0, 0, 0.0, 0)]]),
    "two waits, one request": lambda: _table([[("isend", 1, 0, 0.0, 0), ("wait", 1, 0, 0.0, 0),
                                               ("wait", 1, 0, 0.0, 0)], [("recv", 0, 0, 0.0, 0)]]),
    "missing collective": lambda: _table([[("barrier", -1, 0, 0.0, 0), ("barrier", -1, 0, 0.0, 0)],
                                          [("barrier", -1, 0, 0.0, 0)]]),
    "mixed collectives": lambda: _table([[("barrier", -1, 0, 0.0, 0)], [("allreduce", -1, 0, 0.0, 0)]]),
    "non-member": lambda: _table([[("barrier", -1, 0, 0.0, 1)], [("barrier", -1, 0, 0.0, 1)],
                                  [("barrier", -1, 0, 0.0, 1)]], comms=((0, 1),)),
    "unknown communicator": lambda: _table([[("barrier", -1, 0, 0.0, 2)], [("barrier", -1, 0, 0.0, 2)]]),
}


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_malformed_table_gets_the_numpy_message(case: str) -> None:
    ops = _MALFORMED[case]()
    with pytest.raises(SimulationError) as want:
        _numpy_links(ops)
    with pytest.raises(SimulationError) as got:
        native_matching.links(ops, collective_instances)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("seed", [3, 7])
def test_event_table_is_the_numpy_one(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    ops = _random_table(seed, steps=120)
    t_enter = np.arange(len(ops), dtype=np.float64) * 1e-3
    t_exit = t_enter + 5e-4
    got = frame(build_events(ops, t_enter, t_exit))
    monkeypatch.setattr(timeline, "_links", lambda o, inst: _numpy_links(o))
    want = frame(build_events(ops, t_enter, t_exit))
    assert list(got.columns) == list(want.columns)
    for c in want.columns:
        assert got[c].dtype == want[c].dtype, c
        pd.testing.assert_series_equal(got[c], want[c], check_exact=True)


def test_a_sendrecvs_waitall_completes_only_its_own_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    # rank 0: an irecv (tag 5) left pending over an MPI_Sendrecv (isend, irecv, waitall: rows named after the call),
    # then the program's own waitall; rank 1: the matching sendrecv, then the send of tag 5.  MPI's sendrecv does not
    # complete the pending irecv: the program's waitall (row 4) does.
    ops = _table([[("irecv", 1, 5, 0.0, 0), ("isend", 1, 1, 0.0, 0), ("irecv", 1, 2, 0.0, 0), ("waitall", -1, 0, 0, 0),
                   ("waitall", -1, 0, 0.0, 0)],
                  [("isend", 0, 2, 0.0, 0), ("irecv", 0, 1, 0.0, 0), ("waitall", -1, 0, 0.0, 0), ("send", 0, 5, 0, 0)]])
    ops = replace(ops, names=("MPI_Sendrecv",), name=np.array([-1, 0, 0, 0, -1, 0, 0, 0, -1], np.int32))
    want = _numpy_links(ops)
    _no_fallback(monkeypatch)
    got = native_matching.links(ops, collective_instances)
    for g, w, what in zip(got, want, ("match", "done", "instance"), strict=True):
        np.testing.assert_array_equal(g, w, err_msg=what)
    assert got[1][[0, 1, 2, 5, 6]].tolist() == [4, 3, 3, 7, 7]
