"""The action vocabulary: one declaration, C header generated from it, roots and bytes of every collective."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.models.analysis.waitstates import BARRIER_OPS, N_TO_ONE_OPS, NXN_OPS, ONE_TO_N_OPS, SCAN_OPS
from waitlab.models.byte_accounting import bytes_moved
from waitlab.models.columns import frame
from waitlab.models.ops import OpBuilder
from waitlab.models.vocabulary import (
    ACTION,
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    MPI_ACTIONS,
    V_ACTIONS,
    VOCABULARY,
    c_header,
)
from waitlab.simulator.build import ACTIONS_HEADER, checked_actions_header
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.timeline import build_events
from waitlab.simulator.trace import format_ti_lines

NATIVE = Path(__file__).resolve().parents[1] / "simulator" / "native"


def test_codes_are_the_replay_log_contract() -> None:
    # The replay extension's logs of earlier versions use these codes: they must not move.
    assert ACTIONS[:40] == (
        "init", "finalize", "comm_size", "comm_split", "comm_dup", "send", "isend", "recv", "irecv", "test",
        "sendRecv", "wait", "waitall", "barrier", "bcast", "reduce", "allreduce", "alltoall", "alltoallv", "gather",
        "scatter", "gatherv", "scatterv", "allgather", "allgatherv", "reducescatter", "scan", "exscan", "compute",
        "sleep", "location", "enter", "leave", "overhead", "noise", "delay", "flush", "swap", "ssend",
        "issend")  # fmt: skip
    assert all(CODE[a.name] == a.code == i for i, a in enumerate(VOCABULARY))
    assert MPI_ACTIONS == frozenset(ACTIONS[5:28]) | {"ssend", "issend"} | frozenset(ACTIONS[40:])
    assert COLLECTIVE_ACTIONS == frozenset(ACTIONS[13:28])
    # One-sided (RMA) actions follow waitlab's own, booked as MPI, without a TI form (issue 12).
    assert ACTIONS[40:43] == ("win_create", "win_free", "win_fence") and all(not ACTION[a].stock and
                                                                             ACTION[a].event_kind == "mpi"
                                                                             for a in ACTIONS[40:])


def test_every_collective_has_exactly_one_wait_pattern() -> None:
    groups = [BARRIER_OPS, NXN_OPS, ONE_TO_N_OPS, N_TO_ONE_OPS, SCAN_OPS]
    flat = [a for g in groups for a in g]
    assert sorted(flat) == sorted(COLLECTIVE_ACTIONS) and len(flat) == len(set(flat))
    assert set(ONE_TO_N_OPS) == {"bcast", "scatter", "scatterv"}
    assert set(N_TO_ONE_OPS) == {"reduce", "gather", "gatherv"}
    assert {a for a in COLLECTIVE_ACTIONS if ACTION[a].is_rooted} == set(ONE_TO_N_OPS) | set(N_TO_ONE_OPS)


def test_checked_in_header_is_the_generated_one() -> None:
    assert ACTIONS_HEADER.read_text() == c_header()
    assert checked_actions_header() == c_header()
    for src in ("waitlab_pmpi.c", "waitlab_replay.hpp"):  # the replay extension's parts include it through its header
        assert '#include "waitlab_actions.h"' in (NATIVE / src).read_text(), src


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_sees_the_same_codes_and_names(tmp_path: Path) -> None:
    # Compile the header into a program that prints every (code, name) the C side sees.
    enums = "\n".join(f'  printf("%d %s\\n", WL_{a.name.upper()}, WL_ACTION_NAMES[WL_{a.name.upper()}]);'
                      for a in VOCABULARY)
    src = tmp_path / "codes.c"
    src.write_text(f'#include <stdio.h>\n#include "waitlab_actions.h"\nint main(void) {{\n{enums}\n'
                   '  printf("%d %d\\n", WL_NUM_ACTIONS, WL_NUM_STOCK);\n  return 0;\n}\n')
    exe = tmp_path / "codes"
    subprocess.run(["cc", f"-I{NATIVE}", str(src), "-o", str(exe)], check=True, timeout=60)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout.split("\n")
    assert out[:-2] == [f"{a.code} {a.name}" for a in VOCABULARY]
    assert out[-2] == f"{len(VOCABULARY)} {sum(a.stock for a in VOCABULARY)}"


def test_bytes_of_every_collective_by_hand() -> None:
    # N = 4 ranks, root 2, value v = 10, value2 v2 = 3 (Score-P's accounting, see waitlab.models.vocabulary)
    n, root, v, v2 = 4, 2, 10.0, 3.0
    expected = {  # action: (sent per rank 0..3, received per rank 0..3)
        "barrier": ([0] * 4, [0] * 4),
        "bcast": ([0, 0, 40, 0], [10] * 4),
        "reduce": ([10] * 4, [0, 0, 40, 0]),
        "allreduce": ([40] * 4, [40] * 4),
        "alltoall": ([40] * 4, [12] * 4),
        "allgather": ([40] * 4, [12] * 4),
        "gather": ([10] * 4, [0, 0, 12, 0]),
        "scatter": ([0, 0, 40, 0], [3] * 4),
        "alltoallv": ([10] * 4, [3] * 4),
        "allgatherv": ([40] * 4, [3] * 4),
        "gatherv": ([10] * 4, [0, 0, 3, 0]),
        "scatterv": ([0, 0, 10, 0], [3] * 4),
        "reducescatter": ([10] * 4, [10] * 4),
        "scan": ([40, 30, 20, 10], [10, 20, 30, 40]),
        "exscan": ([30, 20, 10, 0], [0, 10, 20, 30]),
    }
    assert set(expected) == COLLECTIVE_ACTIONS
    for action, (sent, recv) in expected.items():
        s, r = bytes_moved(np.full(n, CODE[action]), np.full(n, v), np.full(n, v2), np.arange(n), np.full(n, root), n)
        assert (s.tolist(), r.tolist()) == (sent, recv), action
    s, r = bytes_moved(np.array([CODE["send"], CODE["recv"]]), np.array([5.0, 5.0]), np.zeros(2), np.zeros(2),
                       np.ones(2), 2)
    assert (s.tolist(), r.tolist()) == ([5, 0], [0, 5])


def _rooted_ops(root: int):  # type: ignore[no-untyped-def]
    b = OpBuilder(n_ranks=4)
    everyone = np.arange(4)
    for action in ("bcast", "reduce", "gather", "scatter"):
        b.add(action, everyone, value=8, value2=8, peer=root)
    # v-collectives: the root's total is its 4 peers' 8 bytes (the writer spreads it evenly; counts must agree)
    b.add("gatherv", everyone, value=8, value2=32, peer=root)
    b.add("scatterv", everyone, value=32, value2=8, peer=root)
    b.add("allreduce", everyone, value=8, value2=1)
    return b.build()


def test_event_table_keeps_the_root_of_every_rooted_collective() -> None:
    ops = _rooted_ops(root=2)
    t = np.arange(len(ops), dtype=float)
    ev = frame(build_events(ops, t, t + 0.5))
    for action in ("bcast", "reduce", "gather", "scatter", "gatherv", "scatterv"):
        assert ev.loc[ev["op"] == action, "peer"].tolist() == [2] * 4, action
    assert ev.loc[ev["op"] == "allreduce", "peer"].tolist() == [-1] * 4


def test_rooted_collective_without_root_is_refused_by_the_writer() -> None:
    with pytest.raises(InputError, match="root"):
        format_ti_lines(_rooted_ops(root=-1), core_speed=1e9)


def test_every_written_line_fits_simgrid_arity_and_reads_back(tmp_path: Path) -> None:
    ops = _rooted_ops(root=2)
    lines = format_ti_lines(ops, core_speed=1e9)
    for code, line in zip(ops.code.tolist(), lines, strict=True):
        name, *args = line.split()
        lo, hi = ACTION[name].arity(ops.n_ranks)
        assert ACTIONS[code] == name and lo <= len(args) <= hi, line
    trace = tmp_path / "t.txt"
    trace.write_text("".join(f"{r} {ln}\n" for r, ln in zip(ops.rank.tolist(), lines, strict=True)))
    back = parse_ti_trace(trace, flops_per_second=1e9).ops
    assert back.code.tolist() == ops.code.tolist() and back.peer.tolist() == ops.peer.tolist()


def test_v_collective_positions_follow_simgrid_332() -> None:
    # smpi_replay.cpp of v3.32: gatherv root at 3 + comm_size, scatterv rcount at 2 + comm_size, root at 3 + comm_size
    # (action[0] is the rank and action[1] the name, so subtract 2 for positions after the name).
    n = 4
    assert ACTION["gatherv"].arg_position("root", n) == 3 + n - 2
    assert ACTION["scatterv"].arg_position("rcount", n) == 2 + n - 2
    assert ACTION["scatterv"].arg_position("root", n) == 3 + n - 2
    assert ACTION["reducescatter"].arg_position("flops", n) == 2 + n - 2
    assert ACTION["alltoallv"].arg_position("rbufsize", n) == 3 + n - 2
    assert set(V_ACTIONS) == {"alltoallv", "gatherv", "scatterv", "allgatherv", "reducescatter"}


def test_parser_refuses_a_root_outside_the_world(tmp_path: Path) -> None:
    trace = tmp_path / "t.txt"
    trace.write_text("".join(f"{r} gatherv 1 1 1 7\n" for r in range(2)))
    with pytest.raises(InputError, match="root 7"):
        parse_ti_trace(trace, flops_per_second=1e9)
