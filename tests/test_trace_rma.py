"""waitlab's one-sided TI lines (issue 25): written from an operation table and read back to the same rows; the
capture check refuses what the replay extension cannot run, naming the record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.vocabulary import CODE
from waitlab.simulator.replayable import check_replayable, replayable_ops
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.trace import write_trace
from waitlab.simulator.trace_rma import parse_rma


def _pscw_and_fence() -> OpTable:
    """Rank 0 starts an access epoch on ranks 1 and 2 and puts to both; they post to rank 0 and wait; then all three
    fence twice (the first with MPI_MODE_NOPRECEDE = 4) with a get and a locked put between; then a passive epoch
    on every rank's window with an accumulate and flushes (-1: every rank)."""
    b = OpBuilder(3)
    b.add("win_create", [0, 1, 2], value=512, tag=0)
    b.add("win_start", 0, value=2, tag=0)
    b.add("win_group", 0, peer=1, tag=0)
    b.add("win_group", 0, peer=2, tag=0)
    for r in (1, 2):
        b.add("win_post", r, value=1, tag=0)
        b.add("win_group", r, peer=0, tag=0)
    b.add("put", 0, peer=1, value=64, tag=0)
    b.add("put", 0, peer=2, value=32, tag=0)
    b.add("win_complete", 0, tag=0)
    b.add("win_wait", [1, 2], tag=0)
    b.add("win_fence", [0, 1, 2], value2=4, tag=0)
    b.add("get", 1, peer=2, value=16, tag=0)
    b.add("win_fence", [0, 1, 2], tag=0)
    b.add("win_lock_shared", 2, peer=0, tag=0)
    b.add("put", 2, peer=0, value=8, tag=0)
    b.add("win_unlock", 2, peer=0, tag=0)
    b.add("win_lock_all", [0, 1], tag=0)
    b.add("accumulate", 0, peer=1, value=24, tag=0)
    b.add("win_flush", 0, peer=1, tag=0)
    b.add("win_flush_local", 1, peer=-1, tag=0)
    b.add("win_unlock_all", [0, 1], tag=0)
    b.add("win_free", [0, 1, 2], tag=0)
    return b.build()


def test_one_sided_lines_round_trip_through_the_ti_reader(tmp_path: Path) -> None:
    ops = replayable_ops(_pscw_and_fence())
    index = write_trace(ops, 1e9, tmp_path / "t", shared=True)
    text = (tmp_path / "t" / "trace.txt").read_text() if (tmp_path / "t" / "trace.txt").exists() else \
        "".join(p.read_text() for p in sorted((tmp_path / "t").glob("*.txt")))
    for line in ("0 win_start 0 1,2\n0 win_group 1 0\n0 win_group 2 0\n", "1 win_post 0 0\n", "0 put 2 0 32\n",
                 "0 win_fence 0 4\n", "1 get 2 0 16\n", "2 win_lock_shared 0 0\n", "0 win_create 0 512\n",
                 "0 win_lock_all 0\n0 accumulate 1 0 24\n0 win_flush 1 0\n", "1 win_flush_local -1 0\n"):
        assert line in text
    back = parse_ti_trace(index, flops_per_second=1e9, n_ranks=3).ops
    for col in ("rank", "code", "peer", "tag", "value", "value2"):
        np.testing.assert_array_equal(getattr(back, col), getattr(ops, col), err_msg=col)
    groups = {(int(r), back.comms[int(c) - 1]) for r, c, k in zip(back.rank, back.comm, back.code, strict=True)
              if k in (CODE["win_post"], CODE["win_start"])}
    assert groups == {(0, (1, 2)), (1, (0,)), (2, (0,))}


@pytest.mark.parametrize(("args", "problem"), [
    (["0"], r"win_post needs its group"),
    (["0", "1,x"], r"bad group '1,x'"),
    (["0", "1,1"], r"distinct world ranks 0\.\.2"),
    (["0", "3"], r"distinct world ranks 0\.\.2"),
])
def test_a_bad_group_is_one_line_naming_the_problem(args: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_rma("win_post", args, 3)


@pytest.mark.parametrize(("action", "problem"), [
    ("get_accumulate", r"rank 0 operation 1 is one-sided MPI \(get_accumulate\) and waitlab's replay runs only "
                       r"win_create"),
    ("rput", r"rank 0 operation 1 is one-sided MPI \(rput\)"),
    ("rget", r"rank 0 operation 1 is one-sided MPI \(rget\)"),
])
def test_capture_check_names_the_first_record_the_replay_cannot_run(action: str, problem: str) -> None:
    b = OpBuilder(2)
    b.add("win_create", [0, 1], value=64, tag=0)
    b.add(action, 0, peer=1, value=8, tag=0)
    with pytest.raises(InputError, match=problem):
        check_replayable(b.build(), "s.toml")
