"""The replay log read a chunk at a time gives the same times as read whole (issue 15), without SMPI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import SimulationError
from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import from_mapping
from waitlab.models.ops import CODE, OpBuilder, OpTable
from waitlab.simulator.log_reader import stream_times
from waitlab.simulator.timeline import LOG_DTYPE, read_log


def _ops(n_ranks: int = 3, steps: int = 4) -> OpTable:
    b = OpBuilder(n_ranks)
    everyone = list(range(n_ranks))
    for s in range(steps):
        b.add("enter", everyone, region="step", step=s)
        b.add("compute", everyone, value=[1.0 + r + s for r in everyone], region="step", step=s)
        for r in everyone:  # a ring of messages
            b.add("send", r, peer=(r + 1) % n_ranks, tag=s, value=8, step=s)
            b.add("recv", (r + 1) % n_ranks, peer=r, tag=s, value=8, step=s)
        b.add("leave", everyone, region="step", step=s)
        b.add("allreduce", everyone, value=8, step=s)
    return b.build()


def _log(ops: OpTable, *, markers: bool, interleave: bool = False, seed: int = 0) -> tuple[np.ndarray, ...]:
    """A log as the replay extension writes it (rank after rank), and the times it holds per operation."""
    rng = np.random.default_rng(seed)
    te = np.round(rng.uniform(0, 100, len(ops)), 3)
    tx = te + np.round(rng.uniform(0, 1, len(ops)), 3)
    rows = []
    for r in range(ops.n_ranks):
        rows.append((r, CODE["init"], 0.0, 0.5 + r))
        for i in np.flatnonzero(ops.rank == r):
            if markers or ops.code[i] not in (CODE["enter"], CODE["leave"]):
                rows.append((r, int(ops.code[i]), float(te[i]), float(tx[i])))
        rows.append((r, CODE["finalize"], 1e3, 1e3))
    log = np.array(rows, dtype=LOG_DTYPE)
    return (_interleave(log, seed) if interleave else log), te, tx


def _interleave(log: np.ndarray, seed: int) -> np.ndarray:
    """The ranks' records merged in a random order that keeps each rank's own order (as a simulator logs)."""
    key = np.random.default_rng(seed).uniform(size=log.size)
    for r in np.unique(log["rank"]):
        sel = np.flatnonzero(log["rank"] == r)
        key[sel] = np.sort(key[sel])
    return log[np.argsort(key, kind="stable")]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("markers", [False, True])
def test_chunked_read_equals_whole_read(tmp_path: Path, chunk: int, markers: bool) -> None:
    ops = _ops()
    log, _, _ = _log(ops, markers=markers)
    log.tofile(tmp_path / "ordered")
    # The independent method: the same records in another order, which read_log reads whole and sorts.
    shuffled = _interleave(log, 1)
    assert not np.array_equal(shuffled["rank"], log["rank"])
    shuffled.tofile(tmp_path / "shuffled")
    whole = read_log(tmp_path / "shuffled", ops)
    chunked = read_log(tmp_path / "ordered", ops, chunk_records=chunk)
    np.testing.assert_array_equal(chunked[0], whole[0])
    np.testing.assert_array_equal(chunked[1], whole[1])


def test_chunks_hold_the_logged_times(tmp_path: Path) -> None:
    ops = _ops(n_ranks=4, steps=3)
    log, te, tx = _log(ops, markers=True)
    log.tofile(tmp_path / "log")
    got = stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, chunk_records=5)
    assert got is not None
    np.testing.assert_array_equal(got[0], te)
    np.testing.assert_array_equal(got[1], tx)
    # markers left out: each rank's first operation (its "enter") takes the rank's init exit
    log, _, _ = _log(ops, markers=False)
    log.tofile(tmp_path / "log")
    marker = np.isin(ops.code, [CODE["enter"], CODE["leave"]])
    got = stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, ~marker, chunk_records=5)
    assert got is not None
    first = np.searchsorted(ops.rank, np.arange(4))
    assert marker[first].all()
    np.testing.assert_array_equal(got[0][first], 0.5 + np.arange(4))
    np.testing.assert_array_equal(got[1][first], 0.5 + np.arange(4))
    np.testing.assert_array_equal(got[0][~marker], te[~marker])
    np.testing.assert_array_equal(got[1][~marker], tx[~marker])


def test_markers_take_the_previous_exit(tmp_path: Path) -> None:
    ops = _ops(n_ranks=2, steps=2)
    log, te, tx = _log(ops, markers=False)
    log.tofile(tmp_path / "log")
    t_enter, t_exit = read_log(tmp_path / "log", ops, chunk_records=3)
    real = ~np.isin(ops.code, [CODE["enter"], CODE["leave"]])
    np.testing.assert_array_equal(t_enter[real], te[real])
    for i in np.flatnonzero(~real):  # hand rule: the exit of the rank's previous action, or its init's exit
        prev = [j for j in range(i) if ops.rank[j] == ops.rank[i] and real[j]]
        want = tx[prev[-1]] if prev else 0.5 + ops.rank[i]
        assert t_enter[i] == t_exit[i] == want


def test_other_orders_are_left_to_the_whole_read(tmp_path: Path) -> None:
    ops = _ops()
    log, _, _ = _log(ops, markers=True, interleave=True)
    log.tofile(tmp_path / "log")
    assert stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, chunk_records=4) is None
    te, _ = read_log(tmp_path / "log", ops, chunk_records=4)
    assert te.size == len(ops)


def test_a_foreign_action_in_a_late_chunk_is_named(tmp_path: Path) -> None:
    ops = _ops()
    log, _, _ = _log(ops, markers=True)
    i = log.size - 3  # the last rank's last actions: found only in the last chunk
    log["code"][i] = CODE["barrier"]
    log.tofile(tmp_path / "log")
    with pytest.raises(SimulationError, match="replay log and trace disagree at rank 2"):
        read_log(tmp_path / "log", ops, chunk_records=4)


def test_a_truncated_log_is_named(tmp_path: Path) -> None:
    ops = _ops()
    log, _, _ = _log(ops, markers=False)
    log[:-1].tofile(tmp_path / "log")
    with pytest.raises(SimulationError, match="incomplete: rank 2"):
        read_log(tmp_path / "log", ops, chunk_records=4)


@pytest.mark.simgrid
def test_a_real_replay_log_read_in_small_chunks(tmp_path: Path) -> None:
    sc = from_mapping({"scenario": {"name": "chunks", "ranks": 8, "seed": 2}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "lared_s", "steps": 2}}, "test")
    res = simulate_ops(prepare(sc), keep_dir=tmp_path / "run")
    log = np.fromfile(tmp_path / "run" / "events.bin", dtype=LOG_DTYPE)
    mixed = _interleave(log, 5)
    assert not np.array_equal(mixed["rank"], log["rank"])  # the whole-file reader's order, not the chunked one's
    mixed.tofile(tmp_path / "interleaved")
    whole = read_log(tmp_path / "interleaved", res.ops)
    for chunk in (1, 7, 1 << 20):
        got = read_log(tmp_path / "run" / "events.bin", res.ops, chunk_records=chunk)
        np.testing.assert_array_equal(got[0], whole[0])
        np.testing.assert_array_equal(got[1], whole[1])
