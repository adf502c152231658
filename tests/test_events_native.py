"""The one-pass C event columns (``native/waitlab_events.c``, issue 25) are the numpy reference's columns
(:func:`~waitlab.simulator.timeline.event_columns_numpy`) row for row, on tables with nested regions, every byte rule
(sub-communicators, roots, halves that round to even), point-to-point messages and their completions; a table the C
pass does not take gets the numpy columns; and the values of a small case worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from region_cases import MALFORMED_REGIONS, malformed_region_ops

from waitlab.errors import SimulationError
from waitlab.models.columns import frame
from waitlab.models.ops import Ledger, OpTable
from waitlab.models.regions import region_structure
from waitlab.models.vocabulary import CODE
from waitlab.simulator import native_events, timeline
from waitlab.simulator.native_matching import Links, links
from waitlab.simulator.native_tables import Regions, regions
from waitlab.simulator.timeline import KINDS, OPS, build_events, collective_instances, event_columns_numpy

_EMPTY_LEDGER = Ledger.empty()
COLLECTIVES = ("barrier", "bcast", "reduce", "allreduce", "alltoall", "alltoallv", "gather", "scatter", "gatherv",
               "scatterv", "allgather", "allgatherv", "reducescatter", "scan", "exscan")
ROOTED = ("bcast", "reduce", "gather", "scatter", "gatherv", "scatterv")
Row = tuple[str, int, int, float, float, int, int]  # action, peer, tag, value, value2, comm, name


def _table(per_rank: list[list[Row]], comms: tuple[tuple[int, ...], ...], names: tuple[str, ...]) -> OpTable:
    rows = [(r, s, *row) for r, ops in enumerate(per_rank) for s, row in enumerate(ops)]
    n = len(rows)
    c = list(zip(*rows, strict=True))
    cause = np.full(n, -1, np.int64)
    cause[::7] = np.arange(cause[::7].size)
    return OpTable(n_ranks=len(per_rank), names=names, ledger=_EMPTY_LEDGER, rank=np.array(c[0], np.int32),
                   seq=np.array(c[1], np.int32), code=np.array([CODE[a] for a in c[2]], np.int8),
                   step=(np.arange(n) // 9).astype(np.int32), name=np.array(c[8], np.int32),
                   value=np.array(c[5], np.float64), value2=np.array(c[6], np.float64), peer=np.array(c[3], np.int32),
                   tag=np.array(c[4], np.int32), cause=cause, excess=np.where(cause >= 0, 0.25, 0.0),
                   comm=np.array(c[7], np.int32), comms=comms)


def _random_table(seed: int, n_ranks: int = 5, steps: int = 150,
                  comms: tuple[tuple[int, ...], ...] = ((0, 2, 4), (3, 1))) -> OpTable:
    """Messages (blocking and not, waited for), every collective with a byte rule on MPI_COMM_WORLD and the
    sub-communicators ``comms`` (rooted ones with a member root), compute, and nested regions on every rank."""
    rng = np.random.default_rng(seed)
    members = (tuple(range(n_ranks)), *comms)
    prog: list[list[Row]] = [[] for _ in range(n_ranks)]
    open_: list[list[int]] = [[] for _ in range(n_ranks)]

    def size() -> float:  # bytes: some halves (rounded to even), some large
        return float(rng.choice([0.5, 1.5, 2.5, 8.0, 100.25, 65537.0, rng.integers(0, 10**6) / 4]))

    for _ in range(steps):
        u = rng.uniform()
        if u < 0.35:
            src = int(rng.integers(0, n_ranks))
            dst = (src + int(rng.integers(1, n_ranks))) % n_ranks
            tag, b = int(rng.integers(0, 3)), size()
            send, recv = ("send", "isend", "ssend")[int(rng.integers(0, 3))], ("recv", "irecv")[int(rng.integers(0, 2))]
            prog[src].append((send, dst, tag, b, 0.0, 0, -1))
            prog[dst].append((recv, src, tag, b, 0.0, 0, -1))
            if send == "isend":
                prog[src].append(("wait", dst, tag, 0.0, 0.0, 0, -1))
            if recv == "irecv":
                prog[dst].append(("wait", src, tag, 0.0, 1.0, 0, -1))
        elif u < 0.7:
            c = int(rng.integers(0, len(members)))
            action = COLLECTIVES[int(rng.integers(0, len(COLLECTIVES)))]
            root = int(rng.choice(members[c])) if action in ROOTED else -1
            for r in members[c]:
                prog[r].append((action, root, 0, size(), size(), c, -1))
        elif u < 0.85:
            r = int(rng.integers(0, n_ranks))
            prog[r].append(("compute", -1, 0, float(rng.uniform(0, 1e-3)), 0.0, 0, -1))
        else:
            r = int(rng.integers(0, n_ranks))
            if open_[r] and rng.uniform() < 0.5:
                prog[r].append(("leave", -1, 0, 0.0, 0.0, 0, open_[r].pop()))
            else:
                name = int(rng.integers(-1, 3))  # -1: a region without a name
                open_[r].append(name)
                prog[r].append(("enter", -1, 0, 0.0, 0.0, 0, name))
    for r in range(n_ranks):
        while open_[r]:
            prog[r].append(("leave", -1, 0, 0.0, 0.0, 0, open_[r].pop()))
    return _table(prog, comms, ("solve", "halo", "io"))


def _inputs(ops: OpTable) -> tuple[OpTable, np.ndarray, np.ndarray, Regions, Links]:
    t_enter = np.cumsum(np.full(len(ops), 1e-3))
    return ops, t_enter, t_enter + 5e-4, regions(ops), links(ops, collective_instances)


def _native(ops: OpTable, t_enter: np.ndarray, t_exit: np.ndarray, reg: Regions, lk: Links) -> dict | None:
    """The C columns (``reg``: the numpy reference's region structure, whose call paths the C pass must name alike)."""
    got = native_events.event_columns(ops, t_enter, t_exit, lk, timeline._KIND_OF_CODE, timeline._HAS_PEER,
                                      KINDS.index("region"), timeline.REGION_OP)
    if got is None:
        return None
    assert got[1] == reg.path_names
    return got[0]


def _assert_same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for c in want:
        assert got[c].dtype == want[c].dtype, c
        np.testing.assert_array_equal(got[c], want[c], err_msg=c)


@pytest.mark.parametrize("seed", range(8))
def test_native_columns_are_the_numpy_columns(seed: int) -> None:
    ops, te, tx, reg, lk = _inputs(_random_table(seed))
    want = event_columns_numpy(ops, te, tx, reg, lk)
    got = _native(ops, te, tx, reg, lk)
    assert got is not None
    _assert_same(got, want)
    assert np.any(want["bytes"] % 2 == 0) and np.any(want["region"] == len(ops.names))  # the cases are there


def test_world_only_table_is_numpys() -> None:
    ops, te, tx, reg, lk = _inputs(_random_table(3, comms=()))
    want = event_columns_numpy(ops, te, tx, reg, lk)
    got = _native(ops, te, tx, reg, lk)  # overwrites the links (its working memory): after numpy's
    assert got is not None
    _assert_same(got, want)


def test_event_table_is_the_numpy_one(monkeypatch: pytest.MonkeyPatch) -> None:
    ops, te, tx, _, _ = _inputs(_random_table(5))
    got = frame(build_events(ops, te, tx))
    monkeypatch.setattr(timeline, "_native_columns", lambda *a: None)  # the numpy columns
    want = frame(build_events(ops, te, tx))
    assert list(got.columns) == list(want.columns)
    for c in want.columns:
        pd.testing.assert_series_equal(got[c], want[c], check_exact=True)


def test_other_column_types_take_numpy() -> None:
    ops, te, tx, reg, lk = _inputs(_random_table(1))
    wide = OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, rank=ops.rank.astype(np.int64),
                   seq=ops.seq, code=ops.code, step=ops.step, name=ops.name, value=ops.value, value2=ops.value2,
                   peer=ops.peer, tag=ops.tag, cause=ops.cause, excess=ops.excess, comm=ops.comm, comms=ops.comms)
    assert _native(wide, te, tx, reg, lk) is None
    bad = OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, rank=ops.rank, seq=ops.seq,
                  code=ops.code, step=ops.step, name=ops.name, value=ops.value, value2=ops.value2, peer=ops.peer,
                  tag=ops.tag, cause=ops.cause, excess=ops.excess, comm=np.full(len(ops), 7, np.int32),
                  comms=ops.comms)
    kept = [x.copy() for x in lk]
    assert _native(bad, te, tx, reg, lk) is None  # communicator 7 does not exist: numpy says what it says
    for a, b in zip(kept, lk, strict=True):
        np.testing.assert_array_equal(a, b)  # a refused table leaves the links as they were


def test_by_hand() -> None:
    """Two ranks: rank 0 enters region "r", sends 2.5 B to rank 1 (rounded to 2), both reduce 3 B to root 1 (rank 1
    receives 2 * 3 = 6 B); rank 1 receives in an irecv completed by a wait."""
    per_rank: list[list[Row]] = [
        [("enter", -1, 0, 0.0, 0.0, 0, 0), ("send", 1, 4, 2.5, 0.0, 0, -1), ("reduce", 1, 0, 3.0, 0.0, 0, -1),
         ("leave", -1, 0, 0.0, 0.0, 0, 0)],
        [("irecv", 0, 4, 2.5, 0.0, 0, -1), ("wait", 0, 4, 0.0, 1.0, 0, -1), ("reduce", 1, 0, 3.0, 0.0, 0, -1)]]
    ops, te, tx, reg, lk = _inputs(_table(per_rank, (), ("r",)))
    got = _native(ops, te, tx, reg, lk)
    assert got is not None
    assert got["rank"].tolist() == [0, 0, 0, 1, 1, 1]
    assert [OPS[k] for k in got["op"]] == ["region", "send", "reduce", "irecv", "wait", "reduce"]
    assert [KINDS[k] for k in got["kind"]] == ["region", "mpi", "mpi", "mpi", "mpi", "mpi"]
    assert got["bytes"].tolist() == [0, 2, 3, 0, 0, 3]
    assert got["recv_bytes"].tolist() == [0, 0, 0, 2, 0, 6]
    assert got["parent"].tolist() == [-1, 0, 0, -1, -1, -1]
    assert got["region"].tolist() == [0, 0, 0, 1, 1, 1]  # 1: no region (the empty category)
    assert got["depth"].tolist() == [0, 1, 1, 0, 0, 0]
    assert got["done"].tolist() == [-1, 1, -1, 4, -1, -1]  # a blocking send itself; the irecv: its wait (row 4)
    assert got["match"][[1, 3]].tolist() == [0, 0] and got["match"][2] == got["match"][5]
    assert got["exit"][0] == tx[3]  # the region ends at its leave
    assert got["peer"].tolist() == [-1, 1, 1, 0, 0, 1]


@pytest.mark.parametrize("filler", ["compute", "barrier"])  # barrier: unmatched collectives besides (links refuse)
@pytest.mark.parametrize("case", MALFORMED_REGIONS)
def test_malformed_regions_get_the_numpy_message(case: str, filler: str) -> None:
    _assert_numpy_message(malformed_region_ops(case, filler))


def _assert_numpy_message(ops: OpTable) -> None:
    """The event table of ``ops`` is refused with the message of numpy's region structure."""
    n = len(ops)
    with pytest.raises(SimulationError) as want:
        region_structure(ops)
    with pytest.raises(SimulationError) as got:
        build_events(ops, np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64) + 0.5)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("comms", [(), ((0, 2, 4), (3, 1))])
def test_a_large_table_is_the_numpy_one(comms: tuple[tuple[int, ...], ...]) -> None:
    """Tens of thousands of rows (the pair table of call paths grows, the rank stacks deepen)."""
    ops, te, tx, reg, lk = _inputs(_random_table(11, n_ranks=6, steps=30_000, comms=comms))
    assert len(ops) > 65536
    want = event_columns_numpy(ops, te, tx, reg, lk)
    got = _native(ops, te, tx, reg, lk)
    assert got is not None
    _assert_same(got, want)


@pytest.mark.parametrize("case", MALFORMED_REGIONS)
def test_a_large_malformed_table_gets_the_numpy_message(case: str) -> None:
    """A region structure's error after tens of thousands of good rows: numpy's message."""
    small = malformed_region_ops(case, "compute")
    pad = 70_000  # compute rows before rank 0's own
    cols = {c: getattr(small, c) for c in OpTable.COLUMNS}
    head = {c: np.zeros(pad, v.dtype) for c, v in cols.items()}
    head["code"][:], head["name"][:], head["peer"][:], head["cause"][:] = CODE["compute"], -1, -1, -1
    head["seq"][:] = np.arange(pad)
    first = cols["rank"] == 0
    cols["seq"] = np.where(first, cols["seq"] + pad, cols["seq"]).astype(np.int32)
    _assert_numpy_message(OpTable(n_ranks=2, names=small.names, ledger=small.ledger, comms=small.comms,
                                  **{c: np.concatenate([head[c], cols[c]]) for c in OpTable.COLUMNS}))
