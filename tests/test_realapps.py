"""Real MPI programs (issue 5), the parts without SimGrid: the layer's action codes, the TI trace parser and
writer, the injection schedule, the program keys of a scenario.

The programs run with SMPI in ``tests/test_realapps_programs.py``, and NAS and SimGrid's own test programs in
``tests/test_realapps_nas.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from program_scenarios import (
    NATIVE,
    PROGRAMS,
)

from waitlab.errors import InputError
from waitlab.experiments.programs import injection_schedule
from waitlab.experiments.scenario import from_mapping
from waitlab.models.ops import ACTIONS, CODE, OpBuilder, OpTable
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import format_ti_lines, write_trace

# ---------------------------------------------------------------------------------------------------------------
# Pure parts: action codes, TI parser and writer, scenario keys
# ---------------------------------------------------------------------------------------------------------------

def test_layer_action_codes_match_the_op_table() -> None:
    assert '#include "waitlab_actions.h"' in (NATIVE / "waitlab_pmpi.c").read_text()
    text = (NATIVE / "waitlab_actions.h").read_text()
    codes = dict(re.findall(r"WL_([A-Z_]+) = (\d+)", text))
    assert len(codes) == len(ACTIONS)
    by_upper = {a.upper(): a for a in ACTIONS}
    for name, value in codes.items():
        assert CODE[by_upper[name]] == int(value), name


def _sample_ops() -> tuple[OpTable, VectorStore]:
    b = OpBuilder(n_ranks=3)
    b.add("enter", [0, 1, 2], region="solve")
    b.add("compute", [0, 1, 2], value=[0.5, 0.25, 0.125])
    b.add("leave", [0, 1, 2], region="solve")
    b.add("isend", 0, peer=1, tag=3, value=800)
    b.add("irecv", 1, peer=0, tag=3, value=800)
    b.add("wait", 0, peer=1, tag=3)
    b.add("wait", 1, peer=0, tag=3, value2=1)
    b.add("alltoallv", [0, 1, 2], value=[6, 9, 12], value2=[6, 9, 12])
    b.add("bcast", [0, 1, 2], value=16, peer=2)
    b.add("overhead", 2, value=1e-6)
    ops = b.build()
    vec = VectorStore()
    # what rank i sends to j is what j receives from i (the reader refuses counts that disagree, as SMPI would)
    for r, (s, rv) in enumerate((([1, 2, 3], [1, 4, 1]), ([4, 2, 3], [2, 2, 5]), ([1, 5, 6], [3, 3, 6]))):
        vec.put(r, CODE["alltoallv"], 0, s, rv)
    return ops, vec


def test_ti_round_trip_keeps_operations_and_per_peer_counts(tmp_path: Path) -> None:
    ops, vec = _sample_ops()
    index = write_trace(ops, 2e9, tmp_path / "t", vectors=vec, header="test trace", relative=True)
    assert index.read_text().split() == ["rank0.txt", "rank1.txt", "rank2.txt"]
    text = (tmp_path / "t" / "rank1.txt").read_text()
    assert text.startswith("# test trace\n1 init\n1 enter solve\n1 compute 500000000.0\n")
    assert "1 alltoallv 9 4 2 3 9 2 2 5 6 6\n" in text and text.endswith("1 finalize\n")
    parsed = parse_ti_trace(index, flops_per_second=2e9, n_ranks=3)
    back = parsed.ops
    assert back.names == ops.names
    for col in ("rank", "seq", "code", "name", "peer", "tag"):
        assert np.array_equal(getattr(back, col), getattr(ops, col)), col
    assert np.allclose(back.value, ops.value) and np.allclose(back.value2, ops.value2)
    assert parsed.vectors.data.keys() == vec.data.keys()
    for k, (s, r) in vec.data.items():
        assert np.array_equal(parsed.vectors.data[k][0], s) and np.array_equal(parsed.vectors.data[k][1], r)


def test_ti_lines_spread_v_counts_evenly_without_vectors() -> None:
    ops, _ = _sample_ops()
    lines = format_ti_lines(ops, 1e9)
    a2av = [ln for ln in lines if ln.startswith("alltoallv")]
    assert a2av[2] == "alltoallv 12 4 4 4 12 4 4 4 6 6"
    assert "bcast 16 2 6" in lines  # bytes, datatype MPI_BYTE


def test_ti_parser_reads_smpi_datatypes_and_shared_files(tmp_path: Path) -> None:
    f = tmp_path / "shared.txt"
    f.write_text("# comment\n0 init 1\n1 init\n0 send 1 5 10\n1 recv 0 5 10 6\n0 compute 3e9\n"
                 "1 allreduce 4 100 1\n0 allreduce 4 100 1\n0 sendRecv 2 1 3 1\n1 sendRecv 3 0 2 0\n"
                 "0 finalize\n1 finalize\n")
    index = tmp_path / "index"
    index.write_text("shared.txt\n")
    ops = parse_ti_trace(index, flops_per_second=1e9).ops
    assert ops.n_ranks == 2
    r0 = [ACTIONS[c] for c in ops.code[ops.rank == 0]]
    assert r0 == ["send", "compute", "allreduce", "isend", "irecv", "waitall"]
    # rank 0's init has an argument: default datatype MPI_DOUBLE (8 bytes); rank 1's: MPI_BYTE
    assert ops.value[(ops.rank == 0) & (ops.code == CODE["send"])][0] == 80
    assert ops.value[(ops.rank == 1) & (ops.code == CODE["recv"])][0] == 10
    assert ops.value[ops.code == CODE["compute"]][0] == pytest.approx(3.0)
    assert ops.value[(ops.rank == 1) & (ops.code == CODE["allreduce"])][0] == 16  # datatype 1: int


@pytest.mark.parametrize(("line", "message"), [
    ("0 bogus 1 2", "action 'bogus' cannot be replayed"),
    ("0 send 1 x 10", "argument 2 (tag) is not a number"),
    ("0 send 1 2", "missing argument 3 (count)"),
    ("0 send 7 2 10", "partner rank 7 is outside 0..1"),
    ("0 recv -333 2 10", "from any source"),
    ("0 send 1 2 10 99", "unknown datatype id '99'"),
    ("0 compute -5", "must be a finite number >= 0"),
    ("0 gatherv 0 0 0 1e30", "argument 4 (root) is too large"),  # found by test_bad_inputs_fuzz (3 ranks: a count)
    ("0 gatherv 0 0 1e30", "argument 3 (receive counts) is too large"),
    ("0 send 1 2 1e19", "argument 3 (count) is too large"),
    ("5 barrier", "rank 5 is outside 0..1"),
    ("zero barrier", "expected '<rank> <action> <arguments>'"),
    ("0 alltoallv 10 5 5 10", "needs 2 receive counts"),
    ("0 enter two words", "enter takes one region name"),
])
def test_ti_parser_names_file_and_line_of_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "r0.txt").write_text(f"0 init\n0 barrier\n{line}\n")
    (tmp_path / "r1.txt").write_text("1 init\n1 barrier\n")
    index = tmp_path / "index.txt"
    index.write_text("r0.txt\nr1.txt\n")
    with pytest.raises(InputError) as err:
        parse_ti_trace(index, flops_per_second=1e9, n_ranks=2)
    text = str(err.value)
    assert message in text
    assert "r0.txt: line 3:" in text


def test_ti_parser_rejects_missing_files_and_rank_mixups(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="trace index does not exist"):
        parse_ti_trace(tmp_path / "nope", flops_per_second=1e9)
    (tmp_path / "index.txt").write_text("a.txt\nb.txt\n")
    with pytest.raises(InputError, match=r"index.txt: line 1: trace file a.txt does not exist"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9)
    (tmp_path / "a.txt").write_text("0 init\n")
    (tmp_path / "b.txt").write_text("0 barrier\n")
    with pytest.raises(InputError, match="line of rank 0 in the file of rank 1"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9)
    (tmp_path / "b.txt").write_text("1 barrier\n")
    with pytest.raises(InputError, match=r"has 2 ranks \(one file each in the index\) but the scenario asks for 4"):
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=1e9, n_ranks=4)


def test_injection_schedule_places_operations_around_the_programs_computation() -> None:

    b = OpBuilder(n_ranks=1)
    b.add("overhead", 0, value=1e-6)            # before the interval's computation -> after the previous call
    b.add("enter", 0, region="@a.c:1-2")
    b.add("compute", 0, value=0.5)
    b.add("leave", 0, region="@a.c:1-2")
    b.add("noise", 0, value=2e-6)               # after it -> just before the next call
    b.add("barrier", 0)
    b.add("enter", 0, region="solve")           # a user region marker is an anchor
    b.add("flush", 0, value=100, value2=1e4)
    s = injection_schedule(b.build())
    assert [ACTIONS[c] for c in s.code] == ["overhead", "noise", "flush"]
    assert s.anchor.tolist() == [0, 0, 2] and s.phase.tolist() == [1, 0, 0]
    assert s.value.tolist() == [1e-6, 2e-6, 100] and s.value2[2] == 1e4


@pytest.mark.parametrize(("app", "message"), [
    ({"kind": "program"}, "give exactly one of sources or binary"),
    ({"kind": "program", "sources": ["missing.c"]}, "missing.c does not exist"),
    ({"kind": "program", "sources": "late_sender.c"}, "must be a list"),
    ({"kind": "program", "sources": ["late_sender.c"], "computation": "fast"},
     "allowed: 'none', 'measured' or 'counted'"),
    ({"kind": "program", "sources": ["late_sender.c"], "exit_codes": [-1]}, "statuses 0..255"),
    ({"kind": "program", "sources": ["late_sender.c"], "colour": 1}, "unknown key"),
    ({"kind": "program", "sources": ["late_sender.c"], "language": "cobol"}, "allowed: 'c', 'c++' or 'fortran'"),
    ({"kind": "trace"}, "application.trace: is required"),
    ({"kind": "trace", "trace": "none/index.txt"}, "does not exist"),
    ({"kind": "trace", "trace": "."}, "programs is a folder"),
    ({"kind": "trace", "trace": "/dev/null"}, "/dev/null is not a regular file (a device, pipe or socket)"),
    ({"kind": "program", "sources": ["."]}, "programs is a folder"),
    ({"kind": "program", "sources": ["late_sender.c"], "args": ["8", "a b"]},
     "application.args: args[1] would not reach the program: smpirun splits arguments at blanks"),
    ({"kind": "program", "sources": ["late_sender.c"], "args": [""]},
     "args[0] would not reach the program: smpirun splits"),
    ({"kind": "program", "sources": ["late_sender.c"], "args": ["--cfg=x:1"]},
     "args[0] would not reach the program: smpirun takes --cfg= and --log="),
    ({"kind": "program", "sources": ["late_sender.c"], "args": ["8", "*.txt"]},  # smpirun: the matching file names
     "args[1] would not reach the program: smpirun expands its arguments unquoted"),
])
def test_real_application_keys_are_validated(app: dict[str, Any], message: str) -> None:
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"}, "application": app}
    with pytest.raises(InputError, match=re.escape(message)):
        from_mapping(data, str(PROGRAMS / "scenario.toml"))


def test_program_scenario_hash_follows_the_source(tmp_path: Path) -> None:
    src = tmp_path / "p.c"
    src.write_text("int main(void) { return 0; }\n")
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "program", "sources": ["p.c"], "args": ["{ranks}"]}}
    h1 = from_mapping(data, str(tmp_path / "s.toml")).hash()
    src.write_text("int main(void) { return 1; }\n")
    assert from_mapping(data, str(tmp_path / "s.toml")).hash() != h1


def test_program_scenario_hash_follows_a_header_of_an_include_folder(tmp_path: Path) -> None:
    # a header found through -I is part of the program: a sweep must not keep a point built with its old text
    (tmp_path / "inc").mkdir()
    (tmp_path / "p.c").write_text('#include "w.h"\nint main(void) { return W; }\n')
    (tmp_path / "inc" / "w.h").write_text("#define W 0\n")
    data = {"scenario": {"ranks": 2}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "program", "sources": ["p.c"], "compile_flags": ["-Iinc"]}}
    h1 = from_mapping(data, str(tmp_path / "s.toml")).hash()
    (tmp_path / "inc" / "w.h").write_text("#define W 1\n")
    assert from_mapping(data, str(tmp_path / "s.toml")).hash() != h1
