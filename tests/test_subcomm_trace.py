"""The TI trace form of collectives on sub-communicators (issue 25): the writer ends their lines with
``comm=<members>``, the reader gives them back their communicator; bad ``comm=`` arguments are one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.models.ops import CODE, OpBuilder
from waitlab.simulator.replayable import check_replayable
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.trace import write_trace


def test_sub_communicator_collectives_survive_a_write_and_read(tmp_path: Path) -> None:
    b = OpBuilder(4)
    b.add("compute", [0, 1, 2, 3], value=0.5)
    b.add("barrier", [0, 1, 2, 3])
    ops = b.build()
    # ranks {1, 0} and {3, 2} (communicator-rank order) on communicators 1 and 2
    comm = np.where(ops.code == CODE["barrier"], np.where(ops.rank < 2, 1, 2), 0).astype(np.int32)
    ops = type(ops)(n_ranks=4, names=ops.names, ledger=ops.ledger, comms=((1, 0), (3, 2)),
                    **{**ops.columns(), "comm": comm})
    index = write_trace(ops, 1e9, tmp_path / "t")
    text = (tmp_path / "t" / "rank3.txt").read_text()
    assert "3 barrier comm=3,2\n" in text
    back = parse_ti_trace(index, flops_per_second=1e9, n_ranks=4).ops
    assert back.comms == ((1, 0), (3, 2))
    rows = back.code == CODE["barrier"]
    assert back.rank[rows].tolist() == [0, 1, 2, 3] and back.comm[rows].tolist() == [1, 1, 2, 2]
    assert (back.comm[~rows] == 0).all()


@pytest.mark.parametrize(("line", "problem"), [
    ("0 alltoallv 8 4 4 8 4 4 comm=0,1", "alltoallv cannot run on a sub-communicator"),
    ("0 barrier comm=0,x", "bad communicator 'comm=0,x'"),
    ("0 barrier comm=1,2", "including rank 0"),
    ("0 barrier comm=0,0", "distinct world ranks"),
    ("0 barrier comm=0,7", "distinct world ranks 0..1"),
])
def test_bad_communicator_arguments_name_the_line(tmp_path: Path, line: str, problem: str) -> None:
    (tmp_path / "rank0.txt").write_text(f"0 init\n{line}\n0 finalize\n")
    (tmp_path / "rank1.txt").write_text("1 init\n1 barrier\n1 finalize\n")
    (tmp_path / "index.txt").write_text("rank0.txt\nrank1.txt\n")
    with pytest.raises(InputError, match="line 2") as exc:
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9, n_ranks=2)
    assert problem in str(exc.value)


def test_capture_refuses_a_v_collective_on_a_sub_communicator() -> None:
    b = OpBuilder(2)
    b.add("alltoallv", [0, 1], value=8, value2=8)
    ops = b.build()
    ops = type(ops)(n_ranks=2, names=ops.names, ledger=ops.ledger, comms=((1, 0),),
                    **{**ops.columns(), "comm": np.ones(len(ops), np.int32)})
    with pytest.raises(InputError, match=r"rank 0 calls alltoallv on a sub-communicator \(world ranks 1, 0\)"):
        check_replayable(ops, "s.toml")
    check_replayable(ops.take(np.zeros(0, np.int64)), "s.toml")  # nothing to refuse
