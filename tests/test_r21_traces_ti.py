"""Time-independent trace reader and its checks (r21): an empty last rank file, collective counts that differ
between ranks, actions after ``finalize``, numbers with ``_``, an empty trace file.  Each refusal is one
:class:`InputError` naming the file, the line and a fix; expected lines and numbers are counted from the traces
below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping
from waitlab.models.vocabulary import CODE
from waitlab.simulator.ti_trace import ParsedTrace, parse_ti_trace

SPEED = 1e9


def _per_rank(folder: Path, *texts: str) -> Path:
    """An index over one file per rank (``r<k>.txt`` holding ``texts[k]``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, text in enumerate(texts):
        (folder / f"r{k}.txt").write_text(text)
    index = folder / "index.txt"
    index.write_text("".join(f"r{k}.txt\n" for k in range(len(texts))))
    return index


def _parse(path: Path, ranks: int | None = 2) -> ParsedTrace:
    return parse_ti_trace(path, flops_per_second=SPEED, n_ranks=ranks)


def _refused(path: Path, ranks: int | None = 2) -> InputError:
    with pytest.raises(InputError) as info:
        _parse(path, ranks)
    assert info.value.fix and "\n" not in str(info.value), str(info.value)
    return info.value


def _shared(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.txt"
    path.write_text(text)
    return path


# ---- 2. an empty last rank file -------------------------------------------------------------------------------

@pytest.mark.parametrize("last", ["", "# rank 1 made no MPI call\n", "\n\n"])
def test_an_index_of_two_lines_is_two_ranks_even_with_an_empty_last_file(tmp_path: Path, last: str) -> None:
    index = _per_rank(tmp_path, "0 compute 1e9\n", last)
    ops = _parse(index, 2).ops
    assert ops.n_ranks == 2
    assert ops.rank.tolist() == [0] and ops.value.tolist() == [1.0]
    err = _refused(index, 1)
    assert err.field == "(ranks)" and "has 2 ranks" in err.problem and "asks for 1" in err.problem


@pytest.mark.simgrid
def test_a_rank_without_calls_runs_idle(tmp_path: Path) -> None:
    index = _per_rank(tmp_path / "t", "0 compute 1e9\n", "# rank 1 made no MPI call\n")
    sc = from_mapping({"scenario": {"name": "b2", "ranks": 2}, "platform": {"name": "okita_myrinet"},
                       "application": {"kind": "trace", "trace": str(index)}}, str(tmp_path / "s.toml"))
    api.run(sc, tmp_path / "out", png=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ranks"] == 2
    # 1e9 flops at okita_myrinet's 1 Gflop/s: rank 0 computes 1 s, rank 1 idles the whole run
    assert summary["makespan"] == pytest.approx(1.0, rel=1e-6)
    assert summary["totals"]["idle"] == pytest.approx(1.0, rel=1e-6)


# ---- 3. fixed-count collectives whose counts differ between ranks ---------------------------------------------

@pytest.mark.parametrize(("r0", "r1", "bad_file", "words"), [
    ("0 allreduce 100 0 6\n", "1 allreduce 50 0 6\n", "r1.txt",
     ["rank 1's allreduce #1", "count of 50 bytes", "rank 0's (line 1 of r0.txt) has 100"]),
    ("0 gather 100 100 0 6 6\n", "1 gather 200 0 0 6 6\n", "r1.txt",
     ["rank 1's gather #1 sends 200 bytes", "the root, rank 0 (line 1 of r0.txt), receives 100"]),
    ("0 bcast 200 0 6\n", "1 bcast 100 0 6\n", "r1.txt", ["rank 1's bcast #1", "count of 100 bytes", "has 200"]),
    ("0 bcast 1 1 7\n", "1 bcast 16 1 6\n", "r0.txt", ["rank 0's bcast #1", "count of 8 bytes", "has 16"]),  # root 1
    ("0 alltoall 200 100 6 6\n", "1 alltoall 200 100 6 6\n", "r0.txt",
     ["rank 0's alltoall #1 sends 200 bytes to each rank but receives 100 from each"]),
    ("0 allgather 10 10 6 6\n", "1 allgather 20 20 6 6\n", "r1.txt", ["rank 1's allgather #1", "count of 20"]),
    ("0 scatter 100 100 0 6 6\n", "1 scatter 0 60 0 6 6\n", "r1.txt",
     ["rank 1's scatter #1 receives 60 bytes", "sends 100 to each rank"]),
    ("0 reduce 4 0 0 6\n", "1 reduce 8 0 0 6\n", "r1.txt", ["rank 1's reduce #1", "count of 8 bytes", "has 4"]),
    ("0 barrier\n0 scan 8 0 6\n", "1 barrier\n1 scan 16 0 6\n", "r1.txt", ["rank 1's scan #2", "count of 16"]),
])
def test_mismatched_collective_counts_are_refused_at_the_line(tmp_path: Path, r0: str, r1: str, bad_file: str,
                                                               words: list[str]) -> None:
    err = _refused(_per_rank(tmp_path, r0, r1))
    assert err.file == str(tmp_path / bad_file)
    assert err.field.startswith(f"line {2 if 'scan' in r0 else 1} (rank {bad_file[1]}")
    for w in words:
        assert w in err.problem, err.problem
    assert "MPI_ERR_TRUNCATE" in err.problem and "count x datatype size" in err.fix


def test_mismatched_counts_on_a_sub_communicator(tmp_path: Path) -> None:
    err = _refused(_per_rank(tmp_path, "0 allreduce 8 0 6 comm=2,0\n", "1 barrier\n",
                             "2 barrier\n2 allreduce 16 0 6 comm=2,0\n"), 3)
    # comm=2,0: rank 2 is the communicator's rank 0, the reference
    assert err.file == str(tmp_path / "r0.txt") and err.field.startswith("line 1 (rank 0")
    assert "rank 0's allreduce #1 on comm=2,0 has a count of 8 bytes where rank 2's (line 2 of r2.txt) has 16" \
        in err.problem


@pytest.mark.parametrize("r0,r1", [
    ("0 allreduce 1 0 7\n", "1 allreduce 8 0 6\n"),  # 1 x 8 bytes = 8 x 1 byte
    ("0 gather 100 100 0 6 6\n", "1 gather 100 0 0 6 6\n"),  # a non-root's receive count is not read
    ("0 gather 0 100 0 6 6\n", "1 gather 100 0 0 6 6\n"),  # the root's own block: MPI_IN_PLACE
    ("0 scatter 100 0 0 6 6\n", "1 scatter 0 100 0 6 6\n"),
    ("0 bcast 100 1 6\n", "1 bcast 100 1 6\n"),
    ("0 iallreduce 8 0 nbc=1\n0 allreduce 8 0 nbc=1\n", "1 iallreduce 8 0 nbc=1\n1 allreduce 8 0 nbc=1\n"),
])
def test_matching_counts_are_read(tmp_path: Path, r0: str, r1: str) -> None:
    assert _parse(_per_rank(tmp_path, r0, r1)).ops.n_ranks == 2


def test_a_collective_order_mismatch_is_left_to_the_collective_check(tmp_path: Path) -> None:
    """Rank 0 calls barrier then allreduce, rank 1 the reverse: not a count problem (the collective check, before
    SMPI, names it)."""
    ops = _parse(_per_rank(tmp_path, "0 barrier\n0 allreduce 8 0 6\n", "1 allreduce 16 0 6\n1 barrier\n")).ops
    assert ops.code.tolist() == [CODE["barrier"], CODE["allreduce"], CODE["allreduce"], CODE["barrier"]]


@pytest.mark.simgrid
def test_run_of_mismatched_allreduce_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _per_rank(tmp_path / "t", "0 allreduce 100 0 6\n", "1 allreduce 50 0 6\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[scenario]\nname = "b3"\nranks = 2\n[platform]\nname = "okita_myrinet"\n'
                        f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    assert main(["run", str(scenario), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "r1.txt: line 1" in err and "MPI_ERR_TRUNCATE" in err, err


# ---- 4. actions after finalize --------------------------------------------------------------------------------

def test_an_action_after_finalize_is_refused(tmp_path: Path) -> None:
    index = _per_rank(tmp_path, "0 init\n0 finalize\n0 compute 1e9\n0 barrier\n", "1 init\n1 barrier\n1 finalize\n")
    err = _refused(index)
    assert err.file == str(tmp_path / "r0.txt") and err.field == "line 3"
    assert "compute of rank 0 after its finalize (line 2)" in err.problem and "after finalize" in err.problem


def test_an_action_after_finalize_in_a_shared_file(tmp_path: Path) -> None:
    err = _refused(_shared(tmp_path, "0 init\n1 init\n0 finalize\n1 barrier\n0 barrier\n1 finalize\n"))
    assert err.field == "line 5" and "barrier of rank 0 after its finalize (line 3)" in err.problem


def test_comments_after_finalize_are_fine(tmp_path: Path) -> None:
    ops = _parse(_per_rank(tmp_path, "0 compute 1e9\n0 finalize\n# end\n\n", "1 finalize\n")).ops
    assert ops.code.tolist() == [CODE["compute"]]


# ---- 5. numbers as C reads them --------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "arg"), [("0 compute 1_000", "'1_000'"), ("0 send 1 0 1_0 6", "'1_0'"),
                                          ("0 compute \u0661\u0662", "'\u0661\u0662'")])
def test_numbers_with_underscores_or_other_digits_are_malformed(tmp_path: Path, line: str, arg: str) -> None:
    err = _refused(_shared(tmp_path, f"{line}\n1 recv 0 0 10 6\n"))
    assert err.field == "line 1" and f"is not a number: {arg}" in err.problem


def test_a_number_with_an_exponent_is_read(tmp_path: Path) -> None:
    assert _parse(_shared(tmp_path, "0 compute 1e3\n1 compute 1000\n")).ops.value.tolist() == [1e-6, 1e-6]


# ---- 6. an empty trace file ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_an_empty_trace_file_is_said_empty(tmp_path: Path, text: str) -> None:
    err = _refused(_shared(tmp_path, text), None)
    assert err.file == str(tmp_path / "trace.txt") and "is empty" in err.problem
    assert "lists no trace file" not in err.problem
