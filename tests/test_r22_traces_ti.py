"""Traces recorded by stock SimGrid 3.32 (``smpirun -trace-ti``), r22: receives of ``MPI_ANY_TAG`` (-444), an index
whose lines are relative to the folder smpirun ran in, ``test`` lines replayed as SimGrid's TestAction, a trace's own
``sleep`` in the rank budget, and the messages for a TI trace given where a scenario, an OTF2 archive or an index
is expected.  Expected values are counted by hand from the traces below (the replay times were also replayed with
stock ``smpirun -replay ... smpireplaymain``, which gives the same)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping, load_scenario
from waitlab.models.analysis.summary import rank_budget
from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.ops import OpBuilder
from waitlab.models.vocabulary import CODE
from waitlab.simulator.matching import completions, match_messages
from waitlab.simulator.otf2_import import read_otf2
from waitlab.simulator.ti_trace import ParsedTrace, parse_ti_trace
from waitlab.simulator.trace import format_lines

SPEED = 1e9
#: A crossbar of 1 Gflop/s single-core nodes, 1e-5 s and 1e8 B/s between nodes (the tester's platform).
PLATFORM = """name = "r22"
description = "test crossbar"
[machine]
max_nodes = { value = 64, assumed = true, reason = "t" }
[node]
cores = { value = 1, assumed = true, reason = "t" }
core_speed = { value = 1.0e9, assumed = true, reason = "t" }
memory = { value = 2147483648, assumed = true, reason = "t" }
[intra_node]
bandwidth = { value = 1.0e9, assumed = true, reason = "t" }
latency = { value = 1.0e-6, assumed = true, reason = "t" }
[inter_node]
bandwidth = { value = 1.0e8, assumed = true, reason = "t" }
latency = { value = 1.0e-5, assumed = true, reason = "t" }
[topology]
kind = "crossbar"
[disk]
bandwidth = { value = 5.0e8, assumed = true, reason = "t" }
latency = { value = 1.0e-3, assumed = true, reason = "t" }
[trace]
buffer_memory = { value = 1073741824, assumed = true, reason = "t" }
"""


def _per_rank(folder: Path, *texts: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k, text in enumerate(texts):
        (folder / f"r{k}.txt").write_text(text)
    index = folder / "index.txt"
    index.write_text("".join(f"r{k}.txt\n" for k in range(len(texts))))
    return index


def _parse(path: Path, ranks: int | None = 2) -> ParsedTrace:
    return parse_ti_trace(path, flops_per_second=SPEED, n_ranks=ranks)


def _run(tmp_path: Path, index: Path, ranks: int) -> pd.DataFrame:
    (tmp_path / "r22.toml").write_text(PLATFORM)
    sc = from_mapping({"scenario": {"name": "r22", "ranks": ranks}, "platform": {"name": str(tmp_path / "r22.toml")},
                       "application": {"kind": "trace", "trace": str(index)}}, str(tmp_path / "s.toml"))
    api.run(sc, tmp_path / "out", png=False)
    return pd.read_csv(tmp_path / "out" / "events.csv")


# ---- 1. receives of MPI_ANY_TAG ---------------------------------------------------------------------------------

def test_any_tag_receives_take_the_tag_of_the_message_they_match(tmp_path: Path) -> None:
    # rank 0 sends tags 5, 7, 5, 9.  Rank 1: recv(7) takes the tag-7 message; irecv A(any) the first left (5);
    # recv(any) the next (5); irecv B(any) the last (9).  test(any) tests the oldest wildcard request, A (5), and
    # puts it back last, as SimGrid's TestAction does: the next wait(any) completes B (9), the last A (5).
    index = _per_rank(tmp_path, "0 send 1 5 8\n0 send 1 7 8\n0 send 1 5 8\n0 isend 1 9 8\n0 wait 0 1 9\n",
                      "1 recv 0 7 8\n1 irecv 0 -444 8\n1 recv 0 -444 8\n1 irecv 0 -444 8\n1 test 0 1 -444\n"
                      "1 wait 0 1 -444\n1 wait 0 1 -444\n")
    ops = _parse(index).ops
    assert ops.tag[ops.rank == 1].tolist() == [7, 5, 5, 9, 5, 9, 5]
    match = match_messages(ops)
    r0, r1 = np.flatnonzero(ops.rank == 0), np.flatnonzero(ops.rank == 1)
    # the receives meet sends 2, 1, 3, 4 of rank 0
    assert match[r1[:4]].tolist() == match[r0[[1, 0, 2, 3]]].tolist()
    done = completions(ops, match)
    assert done[r1[1]] == r1[6] and done[r1[3]] == r1[5]  # A by the last wait, B by the first


def test_any_tag_is_only_a_receive_wildcard(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"argument 2 \(tag\) must be a finite number >= 0, got '-444'"):
        _parse(_per_rank(tmp_path / "a", "0 send 1 -444 8\n", "1 recv 0 -444 8\n"))
    # two wildcard receives, one message: the second keeps MPI_ANY_TAG and the trace check names it
    ops = _parse(_per_rank(tmp_path / "b", "0 send 1 3 8\n", "1 recv 0 -444 8\n1 recv 0 -444 8\n")).ops
    assert ops.tag.tolist() == [3, 3, -444]
    assert first_mismatch(ops) == ("messages", "rank 1's recv (operation 1 of rank 1) from rank 0 with tag -444 has "
                                   "no matching send on rank 0")


@pytest.mark.simgrid
def test_a_receive_of_any_tag_replays_as_simgrid_replays_it(tmp_path: Path) -> None:
    # the tester's trace (stock SMPI: MPI_INT is datatype 1, 4 bytes); rank 1 sleeps first (its own time)
    index = _per_rank(tmp_path / "t", "0 init\n0 compute 1e+08\n0 send 1 7 1 1\n0 finalize\n",
                      "1 init\n1 sleep 0.05\n1 recv 0 -444 1 1\n1 finalize\n")
    ev = _run(tmp_path, index, 2)
    recv = ev[ev["op"] == "recv"].iloc[0]
    send = ev[ev["op"] == "send"].iloc[0]
    # 1e8 flops at 1 Gflop/s, then one 4-byte message: its 1e-5 s latency (stock smpireplaymain: 0.100010 s)
    assert recv["exit"] == pytest.approx(0.1 + 1e-5, abs=1e-6)
    assert recv["tag"] == 7 and recv["match"] == send["match"]
    # 4. the trace's own sleep is rank 1's time, not perturbation (nothing was injected)
    ranks = pd.read_csv(tmp_path / "out" / "ranks.csv")
    assert ranks["perturbation"].tolist() == [0.0, 0.0]
    assert ranks["compute"].tolist() == pytest.approx([0.1, 0.05])


# ---- 2. an index relative to the folder smpirun ran in ----------------------------------------------------------

def test_index_lines_relative_to_the_folder_smpirun_ran_in(tmp_path: Path) -> None:
    # smpirun -trace-ti --cfg=tracing/filename:deep/dir/p2p.txt, run in tmp_path
    files = tmp_path / "deep" / "dir" / "p2p.txt_files"
    files.mkdir(parents=True)
    (files / "1_rank-1.txt").write_text("0 init\n0 compute 1e9\n0 finalize\n")
    (files / "1_rank-2.txt").write_text("1 init\n1 compute 2e9\n1 finalize\n")
    index = tmp_path / "deep" / "dir" / "p2p.txt"
    index.write_text("deep/dir/p2p.txt_files/1_rank-1.txt\ndeep/dir/p2p.txt_files/1_rank-2.txt\n")
    parsed = _parse(index)
    assert parsed.files == (files / "1_rank-1.txt", files / "1_rank-2.txt")
    assert parsed.ops.value.tolist() == [1.0, 2.0]
    # a file that is in neither place: both named
    index.write_text("deep/dir/p2p.txt_files/1_rank-1.txt\ndeep/dir/p2p.txt_files/gone.txt\n")
    with pytest.raises(InputError) as info:
        _parse(index)
    err = info.value
    assert err.field == "line 2" and str(tmp_path / "deep" / "dir" / "deep" / "dir" / "p2p.txt_files" / "gone.txt") \
        in err.problem and "no folder above it holds" in err.problem and "smpirun ran in" in err.fix


# ---- 3. test lines ---------------------------------------------------------------------------------------------

#: Rank 0 polls its irecv between 0.01 s computations; rank 1 sends at 0.025 s.  SMPI's MPI_Test sleeps 1e-4 s
#: times the tests so far (smpi/test): the tests end at 0.0101, 0.0203 and 0.0306 s; the third finds the message.
POLLS = ("0 init\n0 irecv 1 0 8 6\n0 compute 1e7\n0 test 1 0 0\n0 compute 1e7\n0 test 1 0 0\n0 compute 1e7\n"
         "0 test 1 0 0\n0 compute 1e7\n0 finalize\n", "1 init\n1 compute 2.5e7\n1 send 0 0 8 6\n1 finalize\n")


def test_a_stock_test_line_is_written_back_as_it_was(tmp_path: Path) -> None:
    ops = _parse(_per_rank(tmp_path, *POLLS)).ops
    assert format_lines(ops, SPEED)[:3] == ["irecv 1 0 8", "compute 10000000.0", "test 1 0 0"]
    b = OpBuilder(1)  # a poll of waitlab's layer names no request
    b.add("test", 0)
    assert format_lines(b.build(), SPEED) == ["test -1 -1 0"]


def test_a_request_no_wait_completes_is_completed_by_its_last_test(tmp_path: Path) -> None:
    ops = _parse(_per_rank(tmp_path, *POLLS)).ops
    done = completions(ops, match_messages(ops))
    tests = np.flatnonzero(ops.code == CODE["test"])
    assert done[0] == tests[-1] == 6  # rank 0's rows: irecv, compute, test, compute, test, compute, test, compute
    # a wait of the request completes it, whatever tests came before; a waitall after the tests does not
    with_wait = _parse(_per_rank(tmp_path / "w", POLLS[0].replace("0 compute 1e7\n0 finalize", "0 wait 1 0 0\n"
                                                                  "0 finalize"), POLLS[1])).ops
    assert completions(with_wait, match_messages(with_wait))[0] == 7
    with_all = _parse(_per_rank(tmp_path / "a", POLLS[0].replace("0 compute 1e7\n0 finalize", "0 waitall\n"
                                                                 "0 finalize"), POLLS[1])).ops
    assert completions(with_all, match_messages(with_all))[0] == 6


@pytest.mark.simgrid
def test_test_lines_replay_as_simgrid_test_action(tmp_path: Path) -> None:
    ev = _run(tmp_path, _per_rank(tmp_path / "t", *POLLS), 2)
    r0 = ev[ev["rank"] == 0].reset_index(drop=True)
    tests = r0[r0["op"] == "test"]
    # each test sleeps 1e-4 s x (tests so far): 0.0101, 0.0203, 0.0306; stock smpireplaymain ends rank 0 at 0.0406
    assert tests["exit"].tolist() == pytest.approx([0.0101, 0.0203, 0.0306], abs=1e-9)
    assert r0["exit"].max() == pytest.approx(0.0406, abs=1e-9)
    assert r0.loc[0, "op"] == "irecv" and r0.loc[0, "done"] == tests.index[-1]


# ---- 4. a trace's sleep in the rank budget ---------------------------------------------------------------------

def test_only_injected_rows_are_perturbation() -> None:
    # rank 0: the trace's sleep (no cause) 1 s, an injected noise (cause 0) 0.5 s, a trace's own delay line 0.25 s
    ev = pd.DataFrame({"rank": [0, 0, 0], "kind": pd.Categorical(["sleep", "noise", "delay"]),
                       "op": pd.Categorical(["sleep", "noise", "delay"]), "enter": [0.0, 1.0, 1.5],
                       "exit": [1.0, 1.5, 1.75], "cause": [-1, 0, -1]})
    waits = pd.DataFrame({"rank": np.zeros(0, np.int32), "wait": np.zeros(0)})
    row = rank_budget(ev, waits).to_dict("records")[0]
    assert row["compute"] == pytest.approx(1.25) and row["perturbation"] == pytest.approx(0.5)
    assert row["idle"] == pytest.approx(0.0)


# ---- 5. messages for a TI trace given elsewhere ----------------------------------------------------------------

def _smpi_index(folder: Path) -> Path:
    files = folder / "p2p.txt_files"
    files.mkdir(parents=True)
    (files / "1_rank-1.txt").write_text("0 init\n0 send 1 0 8 6\n0 finalize\n")
    (files / "1_rank-2.txt").write_text("1 init\n1 recv 0 0 8 6\n1 finalize\n")
    index = folder / "p2p.txt"
    index.write_text("p2p.txt_files/1_rank-1.txt\np2p.txt_files/1_rank-2.txt\n")
    return index


def test_a_trace_given_as_scenario_is_said_to_be_one(tmp_path: Path) -> None:
    index = _smpi_index(tmp_path)
    with pytest.raises(InputError) as info:
        load_scenario(index)
    err = info.value
    assert "time-independent trace index" in err.problem and "\n" not in str(err)
    assert 'ranks = 2' in err.fix and 'kind = "trace"' in err.fix and f'trace = "{index}"' in err.fix
    with pytest.raises(InputError) as info:  # one rank's file: its index is the one to give
        load_scenario(tmp_path / "p2p.txt_files" / "1_rank-2.txt")
    assert f"indexed by {index}" in info.value.problem and f'trace = "{index}"' in info.value.fix
    (tmp_path / "bad.toml").write_text("[scenario\n")  # a broken TOML file is still one
    with pytest.raises(InputError, match="fix the TOML syntax"):
        load_scenario(tmp_path / "bad.toml")


def test_a_trace_given_as_otf2_archive_is_said_to_be_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _smpi_index(tmp_path)
    with pytest.raises(InputError) as info:
        read_otf2(index)
    assert "is not an OTF2 archive" in info.value.problem and "time-independent trace index" in info.value.problem
    assert main(["analyze", str(index), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "truncated or damaged" not in err and 'kind = "trace"' in err and not (tmp_path / "out").exists()


def test_a_trace_folder_asks_for_its_index(tmp_path: Path) -> None:
    _smpi_index(tmp_path / "t")
    with pytest.raises(InputError) as info:
        from_mapping({"scenario": {"name": "f", "ranks": 2}, "platform": {"name": "okita_myrinet"},
                      "application": {"kind": "trace", "trace": str(tmp_path / "t")}}, str(tmp_path / "s.toml"))
    err = info.value
    assert "is a folder" in err.problem and "give the index file in it (p2p.txt)" == err.fix
    assert "capture" not in err.fix


def test_a_stock_nonblocking_collective_is_said_not_replayable(tmp_path: Path) -> None:
    index = _per_rank(tmp_path, "0 init\n0 ibarrier\n0 compute 0\n0 wait -333 -333 -779\n0 finalize\n",
                      "1 init\n1 ibarrier\n1 wait -333 -333 -779\n1 finalize\n")
    with pytest.raises(InputError) as info:
        _parse(index)
    err = info.value
    assert err.field == "line 2" and "smpirun -trace-ti" in err.problem and "cannot be replayed" in err.problem
    assert "nbc=" not in err.fix and "waitlab capture" in err.fix


@pytest.mark.parametrize(("line", "call"), [("waitAny 1", "MPI_Waitany"), ("testall", "MPI_Testall")])
def test_a_stock_completion_without_its_requests_is_named(tmp_path: Path, line: str, call: str) -> None:
    # what stock `smpirun -trace-ti` wrote for MPI_Waitany / MPI_Testall (SimGrid 3.32): stock smpireplaymain aborts
    # on it too ("action waitAny is unknown"); the fix points to the recording that names the completed request
    index = _per_rank(tmp_path, f"0 init\n0 irecv 1 0 8 0\n0 {line}\n0 finalize\n",
                      "1 init\n1 send 0 0 8 0\n1 finalize\n")
    with pytest.raises(InputError) as info:
        _parse(index)
    err = info.value
    assert err.field == "line 3" and err.problem.startswith(f"action {line.split()[0]!r} is {call} as stock SMPI's")
    assert "waitlab capture" in err.fix


def test_one_rank_is_said_in_the_singular(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("0 init\n0 compute 1e9\n0 finalize\n")
    with pytest.raises(InputError, match="the trace has 1 rank but the scenario asks for 2"):
        _parse(tmp_path / "t.txt")
