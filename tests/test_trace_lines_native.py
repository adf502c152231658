"""The TI trace's lines, filled in C++ from the operation table's columns (simulator/trace.py, native_text), against
the lines written one by one with Python's own formatting (the reference below: f-strings and ``repr``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.vocabulary import ACTION, ACTIONS, NBC_TWIN, NBC_TWINS, SECONDS_ACTIONS
from waitlab.simulator.native_text import IfRepr, Label, text_rows
from waitlab.simulator.trace import _ARGS, _NONE, _SHAPE, WRITABLE, format_lines, subcomm_arg, write_trace
from waitlab.simulator.trace_rma import RMA_TI_ACTIONS


def reference_line(ops: OpTable, i: int, core_speed: float) -> str:
    """One line as Python writes it, from the TI format's definition (SimGrid's smpi_replay.cpp argument order)."""
    action = ACTIONS[ops.code[i]]
    twin = NBC_TWIN.get(action, action)
    a = ACTION[twin]
    rank, peer, tag = int(ops.rank[i]), int(ops.peer[i]), int(ops.tag[i])
    v, v2 = float(ops.value[i]), float(ops.value2[i])
    count, count2 = round(v), round(v2)
    if a.kind in ("send", "recv"):
        args = f" {peer} {tag} {count}"
    elif twin == "wait":
        args = f" {peer} {rank} {tag}" if v2 else f" {rank} {peer} {tag}"
    elif twin == "compute":
        args = f" {v * core_speed!r}"
    elif twin in SECONDS_ACTIONS:
        args = f" {v!r}"
    elif twin == "bcast":
        args = f" {count} {peer} 6"
    elif twin == "reduce":
        args = f" {count} {v2!r} {peer} 6"
    elif twin in ("allreduce", "scan", "exscan", "flush"):
        args = f" {count} {v2!r}"
    elif twin in ("alltoall", "allgather"):
        args = f" {count} {count2}"
    elif twin in ("gather", "scatter"):
        args = f" {count} {count2} {peer}"
    elif twin == "test":  # a stock trace's test names its request as a wait does; a layer's poll (peer -1) none
        args = (f" {peer} {rank} {tag}" if v2 else f" {rank} {peer} {tag}") if peer >= 0 else " -1 -1 0"
    elif twin in ("enter", "leave"):
        args = f" {ops.names[ops.name[i]]}"
    else:
        args = ""
    name = twin if action in NBC_TWIN and tag <= 0 else action
    line = name + args
    if (action in NBC_TWIN or action in NBC_TWINS) and tag > 0:
        line += f" nbc={tag}"
    if a.kind == "collective" and action not in NBC_TWIN and ops.comm[i]:
        line += " " + subcomm_arg(ops.comms[ops.comm[i] - 1])
    return line


EDGE_FLOATS = [0.0, 5e-324, 2.2250738585072014e-308, 1e-5, 1e-4, 0.1, 0.5, 1.0, 1e15, 1e16, 9999999999999998.0,
               123456789.12345679, 1.7976931348623157e308, *[math.ldexp(1.0, k) for k in range(-1074, 1024, 7)]]


@given(st.lists(st.floats(width=64), min_size=1, max_size=200))
@settings(max_examples=200, deadline=None)
def test_a_float_is_written_as_pythons_repr(values: list[float]):
    x = np.array(values + EDGE_FLOATS + [-v for v in EDGE_FLOATS])
    assert text_rows([IfRepr("", x, np.ones(x.size, bool))], x.size, sep="\n").split("\n") == [repr(v) for v in
                                                                                                 x.tolist()]


#: (action, kind of its arguments) of the operations the random tables below draw from
DRAWN = ["compute", "send", "recv", "isend", "irecv", "ssend", "issend", "wait", "waitall", "barrier", "bcast",
         "reduce", "allreduce", "alltoall", "allgather", "gather", "scatter", "scan", "exscan", "sleep", "overhead",
         "flush", "test", "enter", "leave", "ibarrier", "ibcast", "ireduce", "iallreduce", "ialltoall", "igather"]


@st.composite
def tables(draw: st.DrawFn) -> OpTable:
    n_ranks = draw(st.integers(2, 6))
    b = OpBuilder(n_ranks)
    sub = b.comm_id((1, 0)) if draw(st.booleans()) else 0
    for _ in range(draw(st.integers(1, 40))):
        action = draw(st.sampled_from(DRAWN))
        rank = draw(st.integers(0, n_ranks - 1))
        value = draw(st.one_of(st.floats(0, 1e12, allow_nan=False), st.integers(0, 1 << 40).map(float)))
        value2 = draw(st.one_of(st.just(0.0), st.just(1.0), st.floats(0, 1e9, allow_nan=False)))
        peer = draw(st.integers(-1 if action == "test" else 0, n_ranks - 1))
        tag = draw(st.integers(-1, 5))
        comm = sub if ACTION[action].kind == "collective" and draw(st.booleans()) else 0
        region = draw(st.sampled_from(["Hydro", "a>b", "x_1"])) if action in ("enter", "leave", "compute") else None
        b.add(action, rank, value=value, value2=value2, peer=peer, tag=tag, region=region, comm=comm)
    return b.build()


@given(tables(), st.sampled_from([1e9, 7.6e9, 1.0, 2.5e8 / 3]))
@settings(max_examples=300, deadline=None)
def test_every_line_is_the_one_python_writes(ops: OpTable, core_speed: float):
    assert format_lines(ops, core_speed) == [reference_line(ops, i, core_speed) for i in range(len(ops))]


@given(tables())
@settings(max_examples=50, deadline=None)
def test_the_shared_file_holds_the_same_lines_as_the_per_rank_files(tmp_path_factory, ops: OpTable):
    tmp = Path(tmp_path_factory.mktemp("t"))
    write_trace(ops, 1e9, tmp / "shared", shared=True)
    write_trace(ops, 1e9, tmp / "ranks")
    lines = (tmp / "shared" / "trace.txt").read_text().splitlines()
    for r in range(ops.n_ranks):
        own = [ln for ln in lines if ln.split(" ", 1)[0] == str(r)]
        assert own == (tmp / "ranks" / f"rank{r}.txt").read_text().splitlines()
        assert own[0] == f"{r} init" and own[-1] == f"{r} finalize"


def test_a_rank_without_operations_still_has_its_init_and_finalize_in_the_shared_file(tmp_path: Path):
    b = OpBuilder(3)  # rank 2 has no operation: the superstep count of the ranks after the last row is still made
    b.add("compute", [0, 1], value=0.5)
    b.add("barrier", [0, 1])
    write_trace(b.build(), 1e9, tmp_path, shared=True)
    # ordered by superstep (collectives before the line on its rank), then rank: a barrier ends superstep 0
    assert (tmp_path / "trace.txt").read_text() == ("0 init\n1 init\n2 init\n0 compute 500000000.0\n0 barrier\n"
                                                    "1 compute 500000000.0\n1 barrier\n0 finalize\n1 finalize\n"
                                                    "2 finalize\n")


def test_a_trace_where_no_rank_has_an_operation_is_init_and_finalize(tmp_path: Path):
    write_trace(OpBuilder(2).build(), 1e9, tmp_path, shared=True)
    assert (tmp_path / "trace.txt").read_text() == "0 init\n1 init\n0 finalize\n1 finalize\n"


def test_every_writable_action_has_a_line_shape():
    # a writable action (one-sided ones aside: format_rma) whose arguments no template writes would lose them
    for code, action in enumerate(ACTIONS):
        if action in WRITABLE and action not in RMA_TI_ACTIONS:
            assert _SHAPE[code] == _NONE or _SHAPE[code] in _ARGS or action in ("enter", "leave"), action


def test_a_long_label_on_few_rows_needs_no_buffer_of_its_length_per_row():
    # a sub-communicator of 20,000 members is a 110 kB label: a bound of 2 M rows of it would be 220 GB
    members = " comm=" + ",".join(map(str, range(20_000)))
    codes = np.zeros(2_000_000, np.int64)
    codes[[5, 1_999_999]] = 1
    text = text_rows([Label(codes, ["", members])], codes.size, sep="\n")
    assert len(text) == 2 * len(members) + codes.size - 1 and text.split("\n")[5] == members
