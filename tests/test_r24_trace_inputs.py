"""Traces as users bring them (r24): an OTF2 archive whose ClockProperties give no usable timer resolution, a trace
index whose bare file name is missing beside it (never read from a folder above), TI rank files cut short (said to
look truncated, naming the rank's file and line), and Scalasca's runner given a relative archive path.

Expected values are counted by hand from the files written below.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from otf2_archives import score_p_ranks

from waitlab.cli import main
from waitlab.errors import InputError, SimulationError
from waitlab.models.otf2_records import clock_problem
from waitlab.simulator.scalasca import run_scout
from waitlab.simulator.ti_files import trace_files
from waitlab.simulator.ti_trace import parse_ti_trace

try:
    import otf2
    from otf2.enums import CollectiveOp, Paradigm, RegionRole

    from waitlab.simulator.otf2_import import read_otf2
    HAVE_OTF2 = shutil.which("otf2-print") is not None and shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
needs_otf2 = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / otf2-tools / a C compiler not installed")

SPEED = 1e9  # flops per second the TI traces are read at


# ---- F2: ClockProperties timer resolution ---------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 0.0, -1, -1e9, float("nan"), float("inf"), float("-inf")])
def test_clock_problem_refuses_resolutions_that_give_no_seconds(value: float) -> None:
    problem = clock_problem(value)
    assert problem is not None and "ticks per second" in problem


@pytest.mark.parametrize("value", [1, 10**6, 10**9, 2.4e9, 2**64 - 1])
def test_clock_problem_accepts_a_positive_resolution(value: float) -> None:
    assert clock_problem(value) is None


def _barrier_archive(folder: Path, resolution: int, start: int = 0) -> Path:
    """2 ranks, each MPI_Init [start, start+10], MPI_Barrier [start+100, start+200], MPI_Finalize [start+300,
    start+310] (ticks), at ``resolution`` ticks per second."""
    with otf2.writer.open(str(folder), timer_resolution=resolution) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, 2)
        reg = {n: d.region(n, region_role=RegionRole.FUNCTION, paradigm=Paradigm.MPI, source_file="MPI")
               for n in ("MPI_Init", "MPI_Barrier", "MPI_Finalize")}
        for w in (trace.event_writer_from_location(x) for x in locs):
            for name, t0, t1 in (("MPI_Init", 0, 10), ("MPI_Barrier", 100, 200), ("MPI_Finalize", 300, 310)):
                w.enter(start + t0, reg[name])
                if name == "MPI_Barrier":
                    w.mpi_collective_begin(start + t0 + 1)
                    w.mpi_collective_end(start + t1 - 1, CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0)
                w.leave(start + t1, reg[name])
    return folder / "traces.otf2"


@needs_otf2
def test_an_archive_at_a_usable_resolution_is_read(tmp_path: Path) -> None:
    rec = read_otf2(_barrier_archive(tmp_path / "a", 10**9))
    assert rec.resolution == 1e9 and rec.n_ranks == 2


@needs_otf2
def test_zero_timer_resolution_is_refused_naming_the_definitions(tmp_path: Path) -> None:
    anchor = _barrier_archive(tmp_path / "z", 0)
    with pytest.raises(InputError) as info:
        read_otf2(anchor)
    err = info.value
    assert err.file == str(tmp_path / "z" / "traces.def")
    assert err.field == "ClockProperties timer resolution"
    assert "0 ticks per second" in err.problem and "ticks per second" in err.fix and "\n" not in str(err)


@needs_otf2
def test_a_timestamp_past_int64_is_refused(tmp_path: Path) -> None:
    anchor = _barrier_archive(tmp_path / "late", 10**9, start=2**63)
    with pytest.raises(InputError) as info:
        read_otf2(anchor)
    assert info.value.file == str(tmp_path / "late" / "traces") and "2^63 - 1" in info.value.problem
    assert f"{2**63} ticks" in info.value.problem  # rank 0's MPI_Init enter, its first record


@needs_otf2
@pytest.mark.parametrize("command", ["import-otf2", "analyze", "run"])
def test_every_command_refuses_a_zero_resolution_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              command: str) -> None:
    anchor = _barrier_archive(tmp_path / "z", 0)
    out = tmp_path / "out"
    if command == "run":
        scenario = tmp_path / "z.toml"
        scenario.write_text('[scenario]\nname = "z"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                            f'[application]\nkind = "otf2"\ntrace = "{anchor}"\n')
        argv = ["run", str(scenario), "-o", str(out)]
    else:
        argv = [command, str(anchor), "-o", str(out)] + (["--no-png"] if command == "analyze" else [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's divide by zero would be one
        assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RuntimeWarning" not in err
    assert "traces.def" in err and "ClockProperties timer resolution" in err and "(fix: " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["z", "z.toml"] if command == "run" else ["z"])


# ---- F3: a bare file name missing beside the index -------------------------------------------------------------

def _stale_parent(tmp_path: Path) -> Path:
    """t/index.txt lists r0.txt and r1.txt; t/r1.txt is missing; ./r1.txt is another trace's rank 1."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "r0.txt").write_text("0 compute 1e8\n0 barrier\n")
    (tmp_path / "r1.txt").write_text("1 compute 1e9\n1 barrier\n")
    index = tmp_path / "t" / "index.txt"
    index.write_text("r0.txt\nr1.txt\n")
    return index


def test_a_bare_name_missing_beside_the_index_is_refused(tmp_path: Path) -> None:
    index = _stale_parent(tmp_path)
    for read in (lambda: trace_files(index), lambda: parse_ti_trace(index, flops_per_second=SPEED, n_ranks=2)):
        with pytest.raises(InputError) as info:
            read()
        err = info.value
        assert err.file == str(index) and err.field == "line 2"
        assert str(tmp_path / "t" / "r1.txt") in err.problem and "next to the index" in err.fix


def test_a_dot_slash_name_is_a_bare_name_too(tmp_path: Path) -> None:
    index = _stale_parent(tmp_path)
    index.write_text("./r0.txt\n./r1.txt\n")
    with pytest.raises(InputError, match="line 2"):
        trace_files(index)


def test_a_path_with_a_folder_is_still_found_where_smpirun_ran(tmp_path: Path) -> None:
    """SMPI writes ``tr/ls.txt_files/...`` relative to the folder smpirun ran in (here tmp_path), the index being
    tr/ls.txt: not found beside the index (tr/tr/...), it is found from the folder above."""
    files = tmp_path / "tr" / "ls.txt_files"
    files.mkdir(parents=True)
    for r in range(2):
        (files / f"0_rank-{r}.txt").write_text(f"{r} init\n{r} barrier\n{r} finalize\n")
    index = tmp_path / "tr" / "ls.txt"
    index.write_text("tr/ls.txt_files/0_rank-0.txt\ntr/ls.txt_files/0_rank-1.txt\n")
    assert [p.resolve() for p in trace_files(index)] == [files / "0_rank-0.txt", files / "0_rank-1.txt"]


# ---- F4: rank files cut short ----------------------------------------------------------------------------------

def _four_ranks(folder: Path, rank2: str) -> Path:
    """Ranks 0, 1, 3 init, compute r * 0.1 s, barrier, finalize; rank 2's file is ``rank2``."""
    texts = [f"{r} init\n{r} compute {r * 1e8:g}\n{r} barrier\n{r} finalize\n" for r in range(4)]
    texts[2] = rank2
    folder.mkdir()
    for r, text in enumerate(texts):
        (folder / f"rank-{r}.txt").write_text(text)
    index = folder / "index.txt"
    index.write_text("".join(f"rank-{r}.txt\n" for r in range(4)))
    return index


@pytest.mark.parametrize("last", ["2 final", "2 final\n", "2 fin\n"])
def test_a_last_action_cut_short_says_the_file_looks_truncated(tmp_path: Path, last: str) -> None:
    index = _four_ranks(tmp_path / "t", f"2 init\n2 compute 2e8\n2 barrier\n{last}")
    with pytest.raises(InputError) as info:
        parse_ti_trace(index, flops_per_second=SPEED, n_ranks=4)
    err = info.value
    assert err.file == str(tmp_path / "t" / "rank-2.txt") and err.field == "line 4"
    assert "looks truncated" in err.problem and "'finalize'" in err.problem
    assert "allgather" not in str(err)  # not the list of every action


def test_a_last_line_without_newline_that_cannot_be_read_looks_truncated(tmp_path: Path) -> None:
    index = _four_ranks(tmp_path / "t", "2 init\n2 compute 2e8\n2 barrier\n2 finalize\n")
    (tmp_path / "t" / "rank-3.txt").write_text("3 init\n3 compute 3e8\n3 barrier\n3 compute 1.1e+")
    with pytest.raises(InputError) as info:
        parse_ti_trace(index, flops_per_second=SPEED, n_ranks=4)
    err = info.value
    assert (err.file, err.field) == (str(tmp_path / "t" / "rank-3.txt"), "line 4")
    assert "looks truncated" in err.problem and "no newline" in err.problem


def test_an_unknown_action_inside_the_file_is_not_called_truncated(tmp_path: Path) -> None:
    index = _four_ranks(tmp_path / "t", "2 init\n2 final\n2 barrier\n2 finalize\n")
    with pytest.raises(InputError) as info:
        parse_ti_trace(index, flops_per_second=SPEED, n_ranks=4)
    assert info.value.field == "line 2" and "cannot be replayed by waitlab" in info.value.problem
    assert "truncated" not in str(info.value)


@pytest.mark.parametrize("rank2, line", [("2 init\n2 compute 2e8\n", 2), ("2 init\n2 compute 2e8\n2 barrier", 3)])
def test_a_rank_file_without_its_finalize_looks_truncated(tmp_path: Path, rank2: str, line: int) -> None:
    """Rank 2 started with init, lost its last lines (barrier and finalize, or finalize), while the other ranks end
    with finalize: its file and last line are named, not the index for a collective mismatch."""
    index = _four_ranks(tmp_path / "t", rank2)
    with pytest.raises(InputError) as info:
        parse_ti_trace(index, flops_per_second=SPEED, n_ranks=4)
    err = info.value
    assert (err.file, err.field) == (str(tmp_path / "t" / "rank-2.txt"), f"line {line}")
    assert "looks truncated" in err.problem and "finalize" in err.problem and "'2 finalize'" in err.fix


def test_a_shared_file_names_the_line_where_a_rank_stops(tmp_path: Path) -> None:
    """One file for both ranks: rank 1's last line is line 4 (its barrier), and it has no finalize."""
    trace = tmp_path / "shared.txt"
    trace.write_text("0 init\n1 init\n0 barrier\n1 barrier\n0 finalize\n")
    with pytest.raises(InputError) as info:
        parse_ti_trace(trace, flops_per_second=SPEED, n_ranks=2)
    assert (info.value.file, info.value.field) == (str(trace), "line 4")
    assert "rank 1's lines end here" in info.value.problem and "line 5)" in info.value.problem


def test_ranks_without_init_and_finalize_are_still_read(tmp_path: Path) -> None:
    """A converter may write init and finalize for some ranks only: a rank without an init line is not truncated."""
    (tmp_path / "r0.txt").write_text("0 compute 1e9\n0 send 1 0 8 6\n")
    (tmp_path / "r1.txt").write_text("1 recv 0 0 8 6\n")
    (tmp_path / "r2.txt").write_text("2 init\n2 finalize\n")
    (tmp_path / "index.txt").write_text("r0.txt\nr1.txt\nr2.txt\n")
    parsed = parse_ti_trace(tmp_path / "index.txt", flops_per_second=SPEED, n_ranks=3)
    assert parsed.ops.rank.tolist() == [0, 0, 1]


def test_the_cli_names_the_truncated_rank_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _four_ranks(tmp_path / "t", "2 init\n2 compute 2e8\n")
    scenario = tmp_path / "t.toml"
    scenario.write_text('[scenario]\nname = "t"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                        f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    assert main(["run", str(scenario), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"waitlab: error: {tmp_path / 't' / 'rank-2.txt'}: line 2")
    assert not (tmp_path / "out").exists()


# ---- F5: run_scout with a relative archive path ----------------------------------------------------------------

def _fake_scout(root: Path) -> Path:
    """A Scalasca prefix whose ``mpirun`` runs the program and whose ``scout.mpi`` writes scout.cubex in its
    working folder only if its last argument (the archive) is a file from there."""
    bin_ = root / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "mpirun").write_text('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do [ "$1" = -np ] && shift; shift; done\n'
                                 'exec "$@"\n')
    (bin_ / "scout.mpi").write_text('#!/bin/sh\nfor a; do last="$a"; done\n'
                                    '[ -f "$last" ] || { echo "ABORT: no archive $last" >&2; exit 1; }\n'
                                    'touch scout.cubex\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    return root


def test_run_scout_takes_a_relative_archive_path(tmp_path: Path, monkeypatch: Any) -> None:
    prefix = _fake_scout(tmp_path / "p")
    (tmp_path / "w" / "a").mkdir(parents=True)
    (tmp_path / "w" / "a" / "traces.otf2").write_bytes(b"")
    monkeypatch.chdir(tmp_path / "w")
    try:
        cubex = run_scout(Path("a") / "traces.otf2", 2, prefix=prefix, timeout=60)
    except SimulationError as exc:  # scout was handed a path relative to a folder it does not run in
        pytest.fail(str(exc))
    assert cubex.resolve() == tmp_path / "w" / "a" / "scout.cubex" and cubex.is_file()
