"""Checks of hand-written TI traces before SMPI runs them (issue of the tester's traces): sizes past a C int, times
past a year, waits without their request, v-collective counts that disagree between ranks, unbalanced regions, and
collectives on sub-communicators.  Each refusal is one :class:`InputError` naming the file, the line and a fix;
the expected lines and numbers are counted by hand from the traces below."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from waitlab.cli import main
from waitlab.errors import InputError, SimulationError
from waitlab.models.analysis.trace_check import collective_mismatch, first_mismatch
from waitlab.models.ops import OpBuilder
from waitlab.models.regions import region_structure
from waitlab.simulator.ti_trace import ParsedTrace, parse_ti_trace

SPEED = 1e9  # flop/s: compute F takes F / 1e9 s


def _parse(tmp_path: Path, text: str, ranks: int = 2) -> ParsedTrace:
    path = tmp_path / "trace.txt"
    path.write_text(text)
    return parse_ti_trace(path, flops_per_second=SPEED, n_ranks=ranks)


def _refused(tmp_path: Path, text: str, ranks: int = 2) -> InputError:
    with pytest.raises(InputError) as info:
        _parse(tmp_path, text, ranks)
    err = info.value
    assert err.file == str(tmp_path / "trace.txt") and err.fix, str(err)
    assert "\n" not in str(err)
    return err


# ---- 1. sizes SimGrid's replay reads as a C int ----------------------------------------------------------------

def test_a_message_of_2_to_the_31_bytes_is_refused_at_its_line(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 send 1 0 2147483648 6\n1 recv 0 0 2147483648 6\n")
    assert err.field == "line 1 (rank 0, operation 0)"
    assert "send of 2147483648 bytes" in err.problem and "at most 2147483647 bytes" in err.problem
    assert "split it into several sends" in err.fix


def test_one_byte_less_is_read(tmp_path: Path) -> None:
    ops = _parse(tmp_path, "0 send 1 0 2147483647 6\n1 recv 0 0 2147483647 6\n").ops
    assert ops.value.tolist() == [2147483647.0, 2147483647.0]


def test_the_bound_is_on_bytes_count_times_datatype_size(tmp_path: Path) -> None:
    # 268435456 doubles (datatype 0: 8 bytes) = 2^31 bytes; the receive on line 2 is as large, the send comes first
    err = _refused(tmp_path, "0 send 1 0 268435456 0\n1 recv 0 0 268435456 0\n")
    assert err.field.startswith("line 1 ") and "send of 2147483648 bytes" in err.problem


def test_a_v_collective_whose_total_passes_a_c_int_is_refused(tmp_path: Path) -> None:
    # each count fits an int (1.5e9) but the buffer of two of them (3e9 bytes) does not
    line = "alltoallv 3000000000 1500000000 1500000000 3000000000 1500000000 1500000000\n"
    err = _refused(tmp_path, f"0 {line}1 {line}")
    assert err.field.startswith("line 1 ") and "alltoallv of 3000000000 bytes" in err.problem


# ---- 2. times past a year ---------------------------------------------------------------------------------------

def test_a_compute_of_1e30_flops_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 compute 1e30\n1 init\n")
    assert err.field == "line 1 (rank 0, operation 0)"
    assert "compute takes 1e+21 s at 1e+09 flop/s" in err.problem and "3.2e+07" in err.problem


def test_a_sleep_of_1e12_seconds_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 sleep 1e12\n1 init\n")
    assert err.field.startswith("line 1 ") and "sleep takes 1e+12 s" in err.problem


def test_a_compute_of_one_year_is_read(tmp_path: Path) -> None:
    ops = _parse(tmp_path, "0 compute 3.2e16\n1 init\n").ops  # 3.2e16 flops / 1e9 flop/s = 3.2e7 s
    assert ops.value.tolist() == [3.2e7]


def test_a_rank_adding_up_past_a_century_is_refused_where_it_passes_it(tmp_path: Path) -> None:
    # 100 sleeps of 3.2e7 s are 3.2e9 s (allowed); the 101st passes it
    err = _refused(tmp_path, "0 sleep 3.2e7\n" * 101 + "1 init\n")
    assert err.field == "line 101 (rank 0, operation 100)" and "add up to 3.23e+09 s" in err.problem


def test_a_reduction_of_1e30_flops_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 allreduce 8 1e30\n1 allreduce 8 1e30\n")
    assert err.field.startswith("line 1 ") and "allreduce takes 1e+21 s" in err.problem


# ---- 3a/3b. waits --------------------------------------------------------------------------------------------

def test_a_wait_with_nothing_pending_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 wait 0 1 0\n1 init\n")
    assert err.field == "line 1 (rank 0, operation 0)"
    assert err.problem.startswith("wait 0 1 0 completes no pending request: rank 0 posted no isend to rank 1 "
                                  "with tag 0")
    assert "post the request before the wait" in err.fix


def test_a_wait_with_another_tag_than_its_isend_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 isend 1 0 10\n0 wait 0 1 5\n1 recv 0 0 10\n")
    assert err.field == "line 2 (rank 0, operation 1)"
    assert "wait 0 1 5 completes no pending request" in err.problem and "tag 5" in err.problem


def test_a_wait_before_its_request_and_one_after_a_waitall_are_refused(tmp_path: Path) -> None:
    early = _refused(tmp_path, "0 wait 0 1 0\n0 isend 1 0 10\n1 recv 0 0 10\n")
    assert early.field.startswith("line 1 ") and "the isend of line 2, which is posted after it" in early.problem
    done = _refused(tmp_path, "0 isend 1 0 10\n0 waitall\n0 wait 0 1 0\n1 recv 0 0 10\n")
    assert done.field.startswith("line 3 ")
    assert "completes the isend of line 1, which the waitall of line 2 already completed" in done.problem
    # an isend posted after the waitall is the wait's (SimGrid's replay: the oldest request still pending)
    assert len(_parse(tmp_path, "0 isend 1 0 10\n0 waitall\n0 isend 1 0 10\n0 wait 0 1 0\n"
                                "1 recv 0 0 10\n1 recv 0 0 10\n").ops) == 4 + 2


def test_waits_of_receives_and_sends_in_any_order_are_read(tmp_path: Path) -> None:
    text = ("0 isend 1 0 10\n0 irecv 1 0 10\n0 wait 1 0 0\n0 wait 0 1 0\n"
            "1 irecv 0 0 10\n1 isend 0 0 10\n1 waitall\n")
    assert len(_parse(tmp_path, text).ops) == 7


# ---- 3c. v-collective counts -----------------------------------------------------------------------------------

def test_alltoallv_counts_that_disagree_name_both_lines(tmp_path: Path) -> None:
    # rank 0 sends 20 to rank 1 (its second send count), rank 1 expects 10 from rank 0 (its first receive count)
    err = _refused(tmp_path, "0 alltoallv 30 10 20 30 10 20\n1 alltoallv 30 10 20 30 10 20\n")
    assert err.field == "line 1 (rank 0, operation 0)"
    assert err.problem.startswith("rank 0's alltoallv #1 sends 20 bytes to rank 1, but rank 1's (line 2) expects "
                                  "10 bytes from rank 0")
    assert "MPI_ERR_TRUNCATE" in err.problem


def test_alltoallv_counts_that_agree_are_read(tmp_path: Path) -> None:
    # rank 0 sends 10, 20 and receives 10, 20; rank 1 sends 20, 10 and receives 20, 10
    ops = _parse(tmp_path, "0 alltoallv 30 10 20 30 10 20\n1 alltoallv 30 20 10 30 20 10\n").ops
    assert ops.value.tolist() == [30.0, 30.0]


def test_gatherv_send_count_against_the_roots_receive_count(tmp_path: Path) -> None:
    # root 0 expects 10 from itself and 5 from rank 1, which sends 20
    err = _refused(tmp_path, "0 gatherv 10 10 5 0\n1 gatherv 20 10 5 0\n")
    assert err.field.startswith("line 2 ")
    assert err.problem.startswith("rank 1's gatherv #1 sends 20 bytes to rank 0, but rank 0's (line 1) expects 5")
    # a non-root's receive counts are not read (MPI reads them at the root only)
    assert len(_parse(tmp_path, "0 gatherv 10 10 5 0\n1 gatherv 5 0 0 0\n").ops) == 2


def test_allgatherv_scatterv_and_reducescatter(tmp_path: Path) -> None:
    all_ = _refused(tmp_path, "0 allgatherv 10 10 5\n1 allgatherv 20 10 5\n")
    assert all_.field.startswith("line 2 ") and "rank 1's allgatherv #1 sends 20 bytes to rank 0" in all_.problem
    # root 0 sends 5 to rank 1, which expects 6
    scat = _refused(tmp_path, "0 scatterv 10 5 10 0\n1 scatterv 10 5 6 0\n")
    assert scat.field.startswith("line 1 ") and "sends 5 bytes to rank 1, but rank 1's (line 2) expects 6" \
        in scat.problem
    red = _refused(tmp_path, "0 reducescatter 10 5 0\n1 reducescatter 10 6 0\n")
    assert red.field.startswith("line 2 ") and "gives rank 1 a receive count of 6 bytes where rank 0's (line 1) " \
        "gives 5" in red.problem
    assert len(_parse(tmp_path, "0 allgatherv 10 10 20\n1 allgatherv 20 10 20\n").ops) == 2


def test_the_second_call_is_named_and_a_per_rank_file_too(tmp_path: Path) -> None:
    ok, bad = "alltoallv 2 1 1 2 1 1", "alltoallv 3 1 2 2 1 1"  # rank 1 sends 2 to itself, expects 1
    (tmp_path / "rank0.txt").write_text(f"0 init\n0 {ok}\n0 {ok}\n")
    (tmp_path / "rank1.txt").write_text(f"1 init\n1 {ok}\n1 {bad}\n")
    (tmp_path / "index.txt").write_text("rank0.txt\nrank1.txt\n")
    with pytest.raises(InputError) as info:
        parse_ti_trace(tmp_path / "index.txt", flops_per_second=SPEED, n_ranks=2)
    err = info.value
    assert err.file == str(tmp_path / "rank1.txt") and err.field == "line 3 (rank 1, operation 1)"
    assert "rank 1's alltoallv #2 sends 2 bytes to rank 1, but rank 1's (line 3 of rank1.txt) expects 1" \
        in err.problem


# ---- 3d. regions -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "field", "problem", "fix"), [
    ("0 enter a\n1 init\n", "line 1 (rank 0, operation 0)",
     "region a is entered and never left: rank 0 ends with 1 region(s) still open", "add 'leave a'"),
    ("0 leave a\n1 init\n", "line 1 (rank 0, operation 0)",
     "leave a without a matching enter: no region is open on rank 0", "add 'enter a' before it"),
    ("0 enter a\n0 enter b\n0 leave a\n0 leave b\n1 init\n", "line 3 (rank 0, operation 2)",
     "leave a closes region b (entered at line 2): regions must nest", "leave b before a"),
    ("0 enter a\n0 leave a\n0 enter b\n1 init\n", "line 3 (rank 0, operation 2)",
     "region b is entered and never left", "add 'leave b'"),
])
def test_unbalanced_regions_name_their_line(tmp_path: Path, text: str, field: str, problem: str, fix: str) -> None:
    err = _refused(tmp_path, text)
    assert err.field == field and err.problem.startswith(problem) and fix in err.fix


def test_an_operation_table_keeps_naming_the_operation() -> None:
    b = OpBuilder(1)
    for action, region in (("enter", "a"), ("enter", "b"), ("leave", "a"), ("leave", "b")):
        b.add(action, 0, region=region)
    with pytest.raises(SimulationError, match=r"^rank 0 operation 2: leave a closes region b \(entered at "
                                              r"operation 1 of rank 0\).*\(fix: leave b before a"):
        region_structure(b.build())


# ---- 4. collectives on sub-communicators -----------------------------------------------------------------------

def test_a_barrier_of_ranks_0_and_2_leaves_rank_1_out(tmp_path: Path) -> None:
    ops = _parse(tmp_path, "0 barrier comm=0,2\n2 barrier comm=0,2\n1 init\n", ranks=3).ops
    assert first_mismatch(ops) is None


def test_two_sub_communicators_with_their_own_roots(tmp_path: Path) -> None:
    text = "0 bcast 8 0 comm=0,1\n1 bcast 8 0 comm=0,1\n2 bcast 8 2 comm=2,3\n3 bcast 8 2 comm=2,3\n"
    ops = _parse(tmp_path, text, ranks=4).ops
    assert first_mismatch(ops) is None
    assert ops.peer.tolist() == [0, 0, 2, 2] and ops.comm.tolist() == [1, 1, 2, 2]


def test_mismatches_inside_a_sub_communicator_are_named_with_it(tmp_path: Path) -> None:
    roots = _parse(tmp_path, "2 bcast 8 2 comm=2,3\n3 bcast 8 3 comm=2,3\n0 init\n1 init\n", ranks=4).ops
    assert collective_mismatch(roots) == "rank 3 calls bcast #1 on comm=2,3 with root 3, rank 2 with root 2"
    missing = _parse(tmp_path, "0 barrier comm=0,2\n0 barrier\n1 barrier\n2 barrier\n", ranks=3).ops
    assert collective_mismatch(missing) == ("rank 2 makes 0 collective calls on comm=0,2, rank 0 makes 1: rank 2 "
                                            "never calls barrier (rank 0's collective #1 on comm=0,2)")
    # the communicator's rank 0 is its first member (world rank 2 here), not world rank 0
    order = _parse(tmp_path, "2 barrier comm=2,0\n0 allreduce 8 0 comm=2,0\n1 init\n", ranks=3).ops
    assert collective_mismatch(order) == ("rank 0 calls allreduce as its collective #1 on comm=2,0 where rank 2 "
                                          "calls barrier")


def test_a_sub_communicators_root_is_one_of_its_members(tmp_path: Path) -> None:
    err = _refused(tmp_path, "0 bcast 8 1 comm=0,2\n2 bcast 8 1 comm=0,2\n1 init\n", ranks=3)
    assert err.field == "line 1" and err.problem == "root 1 is not a member of comm=0,2"
    # without a root, the communicator's rank 0 (world rank 2), as the replay extension takes it
    ops = _parse(tmp_path, "0 bcast 8 comm=2,0\n2 bcast 8 comm=2,0\n1 init\n", ranks=3).ops
    assert ops.peer.tolist() == [2, 2]


# ---- end to end -------------------------------------------------------------------------------------------------

def _scenario(d: Path, trace: str, ranks: int) -> list[str]:
    (d / "trace.txt").write_text(trace)
    (d / "s.toml").write_text(f'[scenario]\nname = "t"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                              '[application]\nkind = "trace"\ntrace = "trace.txt"\n')
    return ["run", str(d / "s.toml"), "-o", str(d / "out"), "--no-png"]


@pytest.mark.simgrid
def test_run_refuses_a_wait_without_request_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_scenario(tmp_path, "0 wait 0 1 0\n1 init\n", 2))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"waitlab: error: {tmp_path / 'trace.txt'}: line 1 (rank 0, operation 0): wait 0 1 0 "
                               "completes no pending request")
    assert "(fix: " in lines[0] and not (tmp_path / "out").exists()


@pytest.mark.simgrid
def test_run_replays_bcasts_on_two_sub_communicators(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:

    text = "0 bcast 8 0 comm=0,1\n1 bcast 8 0 comm=0,1\n2 bcast 8 2 comm=2,3\n3 bcast 8 2 comm=2,3\n"
    code = main(_scenario(tmp_path, text, 4))
    assert code == 0, capsys.readouterr().err
    ev = pd.read_parquet(tmp_path / "out" / "events.parquet").sort_values("rank")
    assert ev["op"].tolist() == ["bcast"] * 4
    assert ev["peer"].tolist() == [0, 0, 2, 2] and ev["comm"].tolist() == [1, 1, 2, 2]
    assert (ev["exit"] > 0).all() and (ev["exit"] < 1e-3).all()  # 8 bytes: microseconds, not 1e10 s
