"""Which request a ``wait`` completes (the s23 tester's report, problems 1 and 2): the oldest one of its rank still
pending with its (source, destination, tag), as SimGrid 3.32's replay keeps them (``RequestStorage`` of
``smpi_replay.cpp``), not "the k-th request of its key".  A request an ``MPI_Waitall``, a completing test, the
``MPI_Sendrecv`` it belongs to or ``MPI_Request_free`` completed is no longer pending; a rank's isend to itself and
irecv from itself share their key.  Hand-worked tables for the numpy matcher (:func:`~waitlab.simulator.matching.
request_pairs`, ``match_messages``, ``completions``), the C pass (``native/waitlab_matching.c``) and the trace check
(:func:`~waitlab.models.analysis.trace_check.wait_problem`); random programs against a brute-force model of the rule;
and the tester's programs (``programs/wait_*.c``) run, captured and replayed."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from program_scenarios import program_scenario, trace_scenario

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.capture import _said_of_capture, capture
from waitlab.experiments.pipeline import simulate
from waitlab.models.analysis.trace_check import wait_problem
from waitlab.models.ops import Ledger, OpTable
from waitlab.models.vocabulary import CODE
from waitlab.simulator import native_matching
from waitlab.simulator.matching import completions, match_messages, request_pairs
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.timeline import collective_instances

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
needs_smpi = pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")

#: action, peer, tag, value2 (1: a wait or test of a receive), call name ("" none)
Row = tuple[str, int, int, float, str]
Links = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _table(per_rank: list[list[Row]]) -> OpTable:
    """An operation table from each rank's rows, in (rank, seq) order; rows named after a call carry its name."""
    rows = [(r, s, *row) for r, ops in enumerate(per_rank) for s, row in enumerate(ops)]
    n = len(rows)
    names = tuple(sorted({row[6] for row in rows if row[6]}))
    col = list(zip(*rows, strict=True)) if rows else [()] * 7
    return OpTable(n_ranks=len(per_rank), names=names, ledger=Ledger.empty(), rank=np.array(col[0], np.int32),
                   seq=np.array(col[1], np.int32), code=np.array([CODE[a] for a in col[2]], np.int8),
                   step=np.zeros(n, np.int32),
                   name=np.array([names.index(c) if c else -1 for c in col[6]], np.int32), value=np.full(n, 8.0),
                   value2=np.array(col[5], np.float64), peer=np.array(col[3], np.int32),
                   tag=np.array(col[4], np.int32), cause=np.full(n, -1, np.int64), excess=np.zeros(n),
                   comm=np.zeros(n, np.int32))


def _numpy(ops: OpTable) -> Links:
    m = match_messages(ops)
    return m, completions(ops, m)


def _both(ops: OpTable, monkeypatch: pytest.MonkeyPatch | None = None) -> Links:
    """The numpy links, after checking the C pass gives the same (without falling back when ``monkeypatch`` is
    given)."""
    want = _numpy(ops)
    if monkeypatch is not None:
        def boom(_: OpTable) -> npt.NDArray[np.int64]:
            raise AssertionError("the C pass fell back to numpy")
        monkeypatch.setattr(native_matching, "match_messages", boom)
    match, done, _ = native_matching.links(ops, collective_instances)
    np.testing.assert_array_equal(match, want[0], err_msg="match")
    np.testing.assert_array_equal(done, want[1], err_msg="done")
    if monkeypatch is not None:
        monkeypatch.undo()
    return want


def _p(action: str, peer: int, tag: int = 0, value2: float = 0.0, call: str = "") -> Row:
    return (action, peer, tag, value2, call)


WAITALL = _p("waitall", -1)


# ---- 1. hand-worked tables --------------------------------------------------------------------------------------

def test_a_wait_after_a_waitall_of_the_same_tag_takes_the_new_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # the tester's t29: each rank irecv + isend with the other (tag 0), waitall; again irecv + isend, wait(recv),
    # wait(send).  Rows 0-6 rank 0, 7-13 rank 1.  Messages by channel (src, dst, tag): (0,1): rows 1->7 (id 0),
    # 4->10 (id 1); (1,0): rows 8->0 (id 2), 11->3 (id 3).  The waits of rows 5, 6, 12, 13 complete the second
    # exchange's requests 3, 4, 10, 11 (before the fix: the first exchange's 0, 1, 7, 8, which the waitall completed).
    ex = [_p("irecv", 1), _p("isend", 1), WAITALL, _p("irecv", 1), _p("isend", 1), _p("wait", 1, 0, 1.0),
          _p("wait", 1)]
    ops = _table([ex, [(a, 0 if p == 1 else p, t, v, c) for a, p, t, v, c in ex]])
    match, done = _both(ops, monkeypatch)
    assert match.tolist() == [2, 0, -1, 3, 1, 3, 1, 0, 2, -1, 1, 3, 1, 3]
    assert done.tolist() == [2, 2, -1, 5, 6, -1, -1, 9, 9, -1, 12, 13, -1, -1]


def test_a_wait_after_a_sendrecv_of_the_same_peer_and_tag_takes_its_own_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the tester's t31: MPI_Sendrecv (its isend, irecv, waitall named after the call), then irecv + isend + wait,
    # wait, all tag 0.  Channel (0,1): rows 0->8 (id 0), 4->10 (id 1); (1,0): rows 7->1 (id 2), 11->3 (id 3).
    # Row 5 waits for the irecv of row 3 (before the fix: for the sendrecv's irecv, row 1).
    sr = "MPI_Sendrecv"
    rank0 = [_p("isend", 1, 0, 0, sr), _p("irecv", 1, 0, 0, sr), _p("waitall", -1, 0, 0, sr), _p("irecv", 1),
             _p("isend", 1), _p("wait", 1, 0, 1.0), _p("wait", 1)]
    ops = _table([rank0, [(a, 0 if p == 1 else p, t, v, c) for a, p, t, v, c in rank0]])
    match, done = _both(ops, monkeypatch)
    assert match.tolist() == [0, 2, -1, 3, 1, 3, 1, 2, 0, -1, 1, 3, 1, 3]
    assert done.tolist() == [2, 2, -1, 5, 6, -1, -1, 9, 9, -1, 12, 13, -1, -1]


def test_a_wait_after_a_request_a_test_completed_takes_the_next_one() -> None:
    # a stock trace (SMPI's -trace-ti of an MPI_Test loop): rank 0 irecv (row 0), test, test (the last completes
    # it: the next line of its key is a request, not a wait), irecv (row 3), wait (row 4); rank 1 sends twice.
    # Channel (1,0): rows 5->0 (id 0), 6->3 (id 1).  The wait completes row 3 (before the fix: row 0).
    ops = _table([[_p("irecv", 1), _p("test", 1, 0, 1.0), _p("test", 1, 0, 1.0), _p("irecv", 1),
                   _p("wait", 1, 0, 1.0)], [_p("send", 0), _p("send", 0)]])
    match, done = _both(ops)  # (tests naming a request: the numpy version only)
    assert match.tolist() == [0, -1, -1, 1, 1, 0, 1]
    assert done.tolist() == [2, -1, -1, 4, -1, 5, 6]


def test_a_self_message_wait_is_either_end_of_its_key() -> None:
    # the tester's t20 as its trace reads back: isend to itself, recv from itself, "wait 0 0 11" (which the reader
    # takes as a receive's, value2 1): SMPI's replay keeps both ends under (0, 0, 11), so it completes the isend
    # (before the fix: "completes no pending request").  Rank 1 likewise.  Channels (0,0) id 0, (1,1) id 1.
    ops = _table([[_p("isend", 0, 11), _p("recv", 0, 11), _p("wait", 0, 11, 1.0)],
                  [_p("isend", 1, 11), _p("recv", 1, 11), _p("wait", 1, 11, 1.0)]])
    match, done = _both(ops)
    assert match.tolist() == [0, 0, 0, 1, 1, 1]
    assert done.tolist() == [2, 1, -1, 5, 4, -1]


def test_self_message_waits_take_the_oldest_end_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # irecv from itself (row 0), isend to itself (row 1), a wait written as the send's, one as the receive's: the
    # first pops the oldest of key (0, 0, 3), the irecv; the second the isend (before the fix: both requests were
    # given the same wait, one message id for both ends).
    ops = _table([[_p("irecv", 0, 3), _p("isend", 0, 3), _p("wait", 0, 3, 0.0), _p("wait", 0, 3, 1.0)]])
    match, done = _both(ops, monkeypatch)
    assert match.tolist() == [0, 0, 0, 0]
    assert done.tolist() == [2, 3, -1, -1]


def test_a_freed_request_is_not_the_next_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # the tester's t37 as the layer records it now: isend 8 B (row 0), MPI_Request_free (a wait of it, no time,
    # named after the call), isend 512 KiB (row 2), wait (row 3).  Channel (0,1): rows 0->4 (id 0), 2->5 (id 1).
    ops = _table([[_p("isend", 1, 6), _p("wait", 1, 6, 0.0, "MPI_Request_free"), _p("isend", 1, 6),
                   _p("wait", 1, 6)], [_p("recv", 0, 6), _p("recv", 0, 6)]])
    match, done = _both(ops, monkeypatch)  # the call's name is no request's: the C pass takes it
    assert match.tolist() == [0, 0, 1, 1, 0, 1]
    assert done.tolist() == [1, -1, 3, -1, 4, 5]


def test_a_partial_waitall_leaves_the_requests_later_waits_need(monkeypatch: pytest.MonkeyPatch) -> None:
    # (as before the fix) rank 0: irecv A (row 0, tag 5), isend C (row 1, tag 6), waitall (C only), isend D (row 3,
    # tag 7), waitall (D only), wait for A (row 5): A stays pending over both waitalls.  Channels (0,1,6) id 0,
    # (0,1,7) id 1, (1,0,5) id 2.  And two irecvs of one key over a waitall that completed one: the later wait
    # takes the older (row 6), the waitall the newer (row 7).
    ops = _table([[_p("irecv", 1, 5), _p("isend", 1, 6), WAITALL, _p("isend", 1, 7), WAITALL, _p("wait", 1, 5, 1.0),
                   _p("irecv", 1, 8), _p("irecv", 1, 8), WAITALL, _p("wait", 1, 8, 1.0)],
                  [_p("recv", 0, 6), _p("recv", 0, 7), _p("send", 0, 5), _p("send", 0, 8), _p("send", 0, 8)]])
    match, done = _both(ops, monkeypatch)
    assert match.tolist() == [2, 0, -1, 1, -1, 2, 3, 4, -1, 3, 0, 1, 2, 3, 4]
    assert done[[0, 1, 3, 6, 7]].tolist() == [5, 2, 4, 9, 8]


def test_a_wait_before_its_request_is_refused_by_both_paths() -> None:
    ops = _table([[_p("wait", 1, 4), _p("isend", 1, 4)], [_p("recv", 0, 4)]])
    with pytest.raises(SimulationError, match="wait of rank 0 operation 0 completes no pending request") as want:
        _numpy(ops)
    with pytest.raises(SimulationError) as got:
        native_matching.links(ops, collective_instances)
    assert str(got.value) == str(want.value)


# ---- 2. random programs against a brute-force model of the rule ------------------------------------------------

def _model(ops: OpTable) -> dict[int, int]:
    """Request row -> the row completing it (-1: none), by simulating each rank's keys: a wait pops the oldest
    pending request of its (source, destination, tag); the program's own waitall completes the pending requests
    but the fewest oldest ones that leave every later wait a request (tried one by one); a request named after a
    call goes to the next waitall."""
    done: dict[int, int] = {}
    for r in range(ops.n_ranks):
        rows = np.flatnonzero(ops.rank == r).tolist()
        seqs: dict[tuple[int, int, int], list[tuple[int, str]]] = {}
        walls = [i for i in rows if ops.code[i] == CODE["waitall"] and ops.name[i] < 0]
        for i in rows:
            code, peer = int(ops.code[i]), int(ops.peer[i])
            if code in (CODE["isend"], CODE["irecv"]) and ops.name[i] >= 0:
                done[i] = next((j for j in rows if j > i and ops.code[j] == CODE["waitall"]), -1)
                continue
            if code == CODE["isend"] or (code == CODE["wait"] and ops.value2[i] == 0):
                key = (r, peer, int(ops.tag[i]))
            elif code in (CODE["irecv"], CODE["wait"]):
                key = (peer, r, int(ops.tag[i]))
            else:
                continue
            seqs.setdefault(key, []).append((i, "W" if code == CODE["wait"] else "R"))
        for seq in seqs.values():
            seq = sorted(seq + [(w, "|") for w in walls])
            assert _run(seq, 0, [], done)
    return done


def _run(seq: list[tuple[int, str]], at: int, pending: list[int], done: dict[int, int]) -> bool:
    for k in range(at, len(seq)):
        row, kind = seq[k]
        if kind == "R":
            pending.append(row)
        elif kind == "W":
            if not pending:
                return False
            done[pending.pop(0)] = row
        else:
            for keep in range(len(pending) + 1):
                trial: dict[int, int] = {}
                if _run(seq, k + 1, pending[:keep], trial):
                    done.update({q: row for q in pending[keep:]})
                    done.update(trial)
                    return True
            return False
    done.update({q: -1 for q in pending})
    return True


def _random_program(seed: int, n_ranks: int = 4, steps: int = 70, partial: bool = True) -> OpTable:
    """Messages (blocking or not, few tags, self-messages), MPI_Sendrecvs, waits for random pending requests,
    waitalls of all pending requests and (``partial``) of some of them."""
    rng = np.random.default_rng(seed)
    prog: list[list[Row]] = [[] for _ in range(n_ranks)]
    pending: list[list[Row]] = [[] for _ in range(n_ranks)]
    for _ in range(steps):
        u = rng.uniform()
        src, tag = int(rng.integers(0, n_ranks)), int(rng.integers(0, 2))
        dst = src if rng.uniform() < 0.15 else (src + int(rng.integers(1, n_ranks))) % n_ranks
        if u < 0.45:
            if src == dst:  # a self-message: both ends nonblocking (a blocking send to itself could hang)
                prog[src] += [_p("irecv", src, tag), _p("isend", src, tag)]
                pending[src] += [_p("wait", src, tag, 1.0), _p("wait", src, tag)]
                continue
            send = "isend" if rng.uniform() < 0.6 else "send"
            recv = "irecv" if rng.uniform() < 0.6 else "recv"
            prog[src].append(_p(send, dst, tag))
            prog[dst].append(_p(recv, src, tag))
            if send == "isend":
                pending[src].append(_p("wait", dst, tag))
            if recv == "irecv":
                pending[dst].append(_p("wait", src, tag, 1.0))
        elif u < 0.55 and src != dst:
            sr = "MPI_Sendrecv"
            prog[src] += [_p("isend", dst, tag, 0, sr), _p("irecv", dst, tag, 0, sr), _p("waitall", -1, 0, 0, sr)]
            prog[dst] += [_p("isend", src, tag, 0, sr), _p("irecv", src, tag, 0, sr), _p("waitall", -1, 0, 0, sr)]
        elif u < 0.8:
            if pending[src]:
                prog[src].append(pending[src].pop(int(rng.integers(0, len(pending[src])))))
        elif u < 0.95 and partial:
            if pending[src]:  # a waitall of some of the pending requests: the others are waited for later
                keep = rng.uniform(size=len(pending[src])) < 0.5
                pending[src] = [w for w, k in zip(pending[src], keep, strict=True) if k]
                prog[src].append(WAITALL)
        elif pending[src]:
            pending[src].clear()
            prog[src].append(WAITALL)
    for r in range(n_ranks):
        prog[r].extend(pending[r])
    return _table(prog)


@pytest.mark.parametrize("seed", range(25))
def test_random_programs_follow_the_model_on_both_paths(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    ops = _random_program(seed)
    _, done = _both(ops, monkeypatch)
    model = _model(ops)
    nb = np.flatnonzero(np.isin(ops.code, [CODE["isend"], CODE["irecv"]]))
    assert {int(i): int(done[i]) for i in nb} == model


@pytest.mark.parametrize("seed", range(10))
def test_what_the_replay_runs_as_written_is_what_the_matcher_pairs(seed: int) -> None:
    # only full waitalls: SimGrid's replay and the matcher agree (the model pairs alike), and the trace check finds
    # nothing to refuse
    ops = _random_program(seed, partial=False)
    assert wait_problem(ops) is None
    cons, reqs = request_pairs(ops)
    model = _model(ops)
    assert all(model[int(q)] == int(c) for c, q in zip(cons, reqs, strict=True))


def test_the_trace_check_refuses_a_wait_whose_request_the_waitall_completed() -> None:
    # irecv A, irecv B (tag 5), waitall, wait: the matcher pairs the wait with A; SimGrid's waitall completed both
    ops = _table([[_p("irecv", 1, 5), _p("irecv", 1, 5), WAITALL, _p("wait", 1, 5, 1.0)],
                  [_p("send", 0, 5), _p("send", 0, 5)]])
    assert request_pairs(ops)[1].tolist() == [0]
    found = wait_problem(ops)
    assert found is not None and found[0] == 3
    assert found[1] == ("wait 1 0 5 completes the irecv of operation 1 of rank 0, which the waitall of operation 2 "
                        "of rank 0 already completed")


# ---- 3. traces SimGrid replays are read -------------------------------------------------------------------------

#: SMPI's own -trace-ti trace of the tester's t29 (/tmp/s23/t1/ti29): stock smpireplaymain replays it to 0.300001 s
TI29 = ("0 init\n0 irecv 1 0 8 0\n0 isend 1 0 8 0\n0 waitall 2\n0 compute 1.52e+09\n0 irecv 1 0 8 0\n0 isend 1 0 8 0\n"
        "0 wait 1 0 0\n0 wait 0 1 0\n0 finalize\n"
        "1 init\n1 compute 7.6e+08\n1 irecv 0 0 8 0\n1 isend 0 0 8 0\n1 waitall 2\n1 irecv 0 0 8 0\n1 isend 0 0 8 0\n"
        "1 wait 0 1 0\n1 wait 1 0 0\n1 finalize\n")
SELF = "0 isend 0 11 4 0\n0 recv 0 11 4 0\n0 wait 0 0 11\n0 barrier\n1 barrier\n"


def test_smpis_trace_of_t29_and_a_self_message_trace_are_read(tmp_path: Path) -> None:
    # ti29's rows (init, finalize dropped): rank 0 irecv 0, isend 1, waitall 2, compute 3, irecv 4, isend 5,
    # wait 6 ("wait 1 0 0": the irecv), wait 7; rank 1 compute 8, irecv 9, isend 10, waitall 11, irecv 12,
    # isend 13, wait 14 ("wait 0 1 0": the irecv), wait 15.  Refused before the fix ("... which the waitall of line 4
    # ... already completed").  The self trace: isend 0, recv 1, "wait 0 0 11" 2 (the isend), barrier 3; barrier 4.
    want = {"ti29": [2, 2, -1, -1, 6, 7, -1, -1, -1, 11, 11, -1, 14, 15, -1, -1], "self": [2, 1, -1, -1, -1]}
    for name, text in (("ti29", TI29), ("self", SELF)):
        (tmp_path / name).write_text(text)
        ops = parse_ti_trace(tmp_path / name, flops_per_second=7.6e9, n_ranks=2).ops
        assert completions(ops, match_messages(ops)).tolist() == want[name]


def test_a_capture_error_names_the_users_folder_not_the_hidden_one(tmp_path: Path) -> None:
    sc = program_scenario(tmp_path, "wait_selfmsg.c")
    partial = tmp_path / ".cap.partial-123"
    fix = 'run it (kind = "program")'  # what capture says of a trace it wrote itself
    with pytest.raises(InputError) as info, _said_of_capture(sc, partial, tmp_path / "cap", fix):
        raise InputError(str(partial / "rank0.txt"), "line 5 (rank 0, operation 2)", "wait 0 0 11 completes ...",
                         "post the request before the wait")
    err = info.value
    assert err.file == sc.source and ".partial" not in str(err)
    assert f"was not kept (for {tmp_path / 'cap'}): its trace's rank0.txt, line 5 (rank 0, operation 2): wait 0 0 11" \
        in err.problem and 'kind = "program"' in err.fix


# ---- 4. the tester's programs ------------------------------------------------------------------------------------

def _capture_and_replay(sc: Any, tmp: Path) -> Any:
    index = capture(sc, tmp / "cap")  # raises unless the replay's makespan and waits agree with the run's
    check = json.loads((tmp / "cap" / "capture.json").read_text())["replay_check"]
    assert check["live"] == pytest.approx(check["replay"], rel=1e-3, abs=1e-9)
    return simulate(trace_scenario(index, sc.ranks))


def _waits(res: Any) -> dict[tuple[str, int], float]:
    w = res.waits.groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return {(str(p), int(r)): float(x) for (p, r), x in w.items() if x > 1e-6}


@pytest.mark.simgrid
@needs_smpi
def test_t29_late_senders_of_both_exchanges_and_their_capture(tmp_path: Path) -> None:
    # exchange 1 (waitall): rank 1 enters 0.1 s late, rank 0 waits 0.1 s; exchange 2 (tag 0 again, wait per request):
    # rank 0 enters 0.2 s late, rank 1's wait of its irecv waits 0.2 s.  0.3 s in all (waitlab said 0 before).
    sc = program_scenario(tmp_path, "wait_sametag.c")
    res = simulate(sc)
    got = _waits(res)
    assert got == pytest.approx({("late_sender", 0): 0.1, ("late_sender", 1): 0.2}, abs=1e-4)
    ev = res.events
    wait1 = ev[(ev["rank"] == 1) & (ev["op"] == "wait")].iloc[0]
    assert res.waits[res.waits["event"] == wait1.name]["wait"].sum() == pytest.approx(0.2, abs=1e-4)
    replayed = _capture_and_replay(sc, tmp_path)
    assert _waits(replayed) == pytest.approx(got, abs=1e-6)


@pytest.mark.simgrid
@needs_smpi
def test_t37_a_freed_isend_leaves_the_next_wait_its_late_receiver(tmp_path: Path) -> None:
    # rank 0 frees an 8 B isend, then waits for a 512 KiB (rendezvous) isend that rank 1 receives 0.2 s later:
    # Late Receiver 0.2 s at rank 0's wait (waitlab said 0: the wait was paired with the freed isend)
    sc = program_scenario(tmp_path, "wait_reqfree.c")
    res = simulate(sc)
    got = _waits(res)
    assert list(got) == [("late_receiver", 0)] and got[("late_receiver", 0)] == pytest.approx(0.2, abs=1e-3)
    ev = res.events
    free = ev[(ev["rank"] == 0) & (ev["call"] == "MPI_Request_free")]
    assert len(free) == 1 and free["op"].tolist() == ["wait"] and float(free["exit"].iloc[0]) == pytest.approx(
        float(free["enter"].iloc[0]))
    assert _waits(_capture_and_replay(sc, tmp_path)) == pytest.approx(got, abs=1e-6)


@pytest.mark.simgrid
@needs_smpi
def test_t20_a_self_message_program_is_captured(tmp_path: Path) -> None:
    # isend to itself, recv from itself, wait; rank 1 0.1 s late at the barrier: wait at barrier 0.1 s at rank 0
    # (the capture was refused: "wait 0 0 11 completes no pending request")
    sc = program_scenario(tmp_path, "wait_selfmsg.c")
    replayed = _capture_and_replay(sc, tmp_path)
    assert _waits(replayed) == pytest.approx({("wait_at_barrier", 0): 0.1}, abs=1e-4)


def test_named_waits_of_a_call_with_requests_go_to_numpy() -> None:
    # replayable_ops writes a sendrecv's waitall as waits named after the call: they complete its own requests
    sr = "MPI_Sendrecv"
    ops = _table([[_p("isend", 1, 0, 0, sr), _p("irecv", 1, 0, 0, sr), _p("wait", 1, 0, 0, sr),
                   _p("wait", 1, 0, 1.0, sr)], [_p("recv", 0), _p("send", 0)]])
    match, done = _both(ops)
    assert done.tolist()[:2] == [2, 3] and match.tolist()[2:4] == match.tolist()[:2]
    ops = replace(ops, name=np.where(ops.code == CODE["wait"], -1, ops.name).astype(np.int32))
    with pytest.raises(SimulationError, match="completes no pending request"):
        _numpy(ops)  # unnamed, they are no waits of the call's requests
