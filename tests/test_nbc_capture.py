"""Nonblocking collectives in captures (issue 25): the post goes back into the trace, so compute overlapped with the
collective replays as overlap, and the replay gives the live run's end time and waits (within 0.1%)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from program_scenarios import program_scenario, trace_scenario

from waitlab.errors import InputError
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate
from waitlab.models.ops import ACTIONS, CODE, OpBuilder
from waitlab.simulator.nbc_capture import POST_DTYPE, with_nbc_posts
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.trace import format_lines, write_trace

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None


def _posts(*rows: tuple[int, int, float, float]) -> np.ndarray:
    out = np.zeros(len(rows), POST_DTYPE)
    for i, r in enumerate(rows):
        out[i] = r
    return out


def _table() -> tuple:
    """Two ranks: compute over [0, 1], then the alltoall of request 1 completed over [1, 1.5]."""
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=1.0)
    b.add("alltoall", [0, 1], value=8, value2=8, tag=1)
    ops = b.build()
    t0 = np.array([0.0, 1.0, 0.0, 1.0])
    t1 = np.array([1.0, 1.5, 1.0, 1.5])
    return ops, t0, t1


def test_a_post_splits_the_compute_it_fell_in() -> None:
    ops, t0, t1 = _table()
    # rank 0 posted at [0.25, 0.26]; rank 1 at [0.0, 0.0] (right after the previous call: no compute before it)
    out = with_nbc_posts(ops, t0, t1, _posts((0, 1, 0.25, 0.26), (1, 1, 0.0, 0.0)))
    r0 = out.rank == 0
    assert [ACTIONS[c] for c in out.code[r0]] == ["compute", "ialltoall", "compute", "alltoall"]
    np.testing.assert_allclose(out.value[r0], [0.25, 8, 1.0 - 0.26, 8])  # hand: 0.25 before, 0.74 after
    assert out.tag[r0].tolist() == [0, 1, 0, 1] and out.value2[r0][1] == 8
    r1 = out.rank == 1
    assert [ACTIONS[c] for c in out.code[r1]] == ["compute", "ialltoall", "compute", "alltoall"]
    np.testing.assert_allclose(out.value[r1], [0.0, 8, 1.0, 8])
    lines = format_lines(out.take(np.flatnonzero(r0)), core_speed=1.0)
    assert lines == ["compute 0.25", "ialltoall 8 8 nbc=1", "compute 0.74", "alltoall 8 8 nbc=1"]


def test_completions_without_a_post_replay_blocking() -> None:
    ops, t0, t1 = _table()
    out = with_nbc_posts(ops, t0, t1, _posts((0, 1, 0.5, 0.5)))  # rank 1's post is unknown
    assert (out.code == CODE["ialltoall"]).sum() == 1
    assert out.tag[(out.rank == 1) & (out.code == CODE["alltoall"])].tolist() == [0]
    assert format_lines(out.take(np.flatnonzero(out.rank == 1)), 1.0)[-1] == "alltoall 8 8"


def test_posts_round_trip_through_the_trace_reader(tmp_path: Path) -> None:
    ops, t0, t1 = _table()
    out = with_nbc_posts(ops, t0, t1, _posts((0, 1, 0.25, 0.26), (1, 1, 0.5, 0.5)))
    index = write_trace(out, 1e9, tmp_path / "t")
    back = parse_ti_trace(index, flops_per_second=1e9, n_ranks=2).ops
    assert back.code.tolist() == out.code.tolist() and back.tag.tolist() == out.tag.tolist()
    np.testing.assert_allclose(back.value, out.value)


@pytest.mark.parametrize(("lines", "needle"), [
    ("0 alltoall 8 8 nbc=1\n", "completes no ialltoall nbc=1"),
    ("0 ialltoall 8 8\n", "as SimGrid's tracer (smpirun -trace-ti) records it, which cannot be replayed"),
    ("0 ialltoall 8 8 nbc=1\n0 ialltoall 8 8 nbc=1\n", "posted twice"),
    ("0 ialltoall 8 8 nbc=1\n0 allreduce 8 0 nbc=1\n", "completes no iallreduce"),
    ("0 send 1 0 8 nbc=1\n", "cannot end with nbc=1"),
    ("0 ibcast 8 0 nbc=x\n", "bad request serial"),
])
def test_malformed_nonblocking_lines_are_one_line_errors(tmp_path: Path, lines: str, needle: str) -> None:
    (tmp_path / "t.txt").write_text(lines)
    with pytest.raises(InputError, match=re.escape(needle)) as exc:
        parse_ti_trace(tmp_path / "t.txt", flops_per_second=1e9, n_ranks=2)
    assert "line" in str(exc.value) and "\n" not in str(exc.value)


def _blocking_copy(folder: Path, out: Path) -> Path:
    """The captured trace as it was written before (completions only, no posts): the collective blocks."""
    out.mkdir()
    for f in folder.iterdir():
        if f.suffix == ".txt":
            text = [ln for ln in f.read_text().splitlines() if not re.match(r"^\d+ i[a-z]+ .*nbc=", ln)]
            (out / f.name).write_text("\n".join(re.sub(r" nbc=\d+$", "", ln) for ln in text) + "\n")
    return out / "index.txt"


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
@pytest.mark.parametrize(("mode", "sim"), [
    ("exact", None), ("mixed", None), ("probe", {"config": {"smpi/test": "0"}}),
    # SMPI sleeps in every MPI_Test (smpi/test, 1e-4 s times the failed tests so far); a completing MPI_Test is
    # replayed as a wait, without that sleep (docs/real_programs.md, Limitations)
    pytest.param("probe", None, marks=pytest.mark.xfail(strict=True, reason="MPI_Test's sleep is not replayed")),
    ("wtime", {"config": {"smpi/wtime": "1e-7"}})])
def test_capture_replays_the_overlap_of_the_live_run(tmp_path: Path, mode: str, sim: dict | None) -> None:

    app = {"args": [mode, "4", "65536", "2e-3"]}
    if sim:
        app["simulation"] = sim
    sc = program_scenario(tmp_path, "nbc_overlap.c", ranks=4, **app)
    index = capture(sc, tmp_path / "cap")  # raises unless makespan and every pattern's wait agree within 0.1%
    check = json.loads((tmp_path / "cap" / "capture.json").read_text())["replay_check"]
    live, rep = check["live"]["makespan"], check["replay"]["makespan"]
    assert rep == pytest.approx(live, rel=1e-3)
    text = "".join(f.read_text() for f in (tmp_path / "cap").glob("*.txt"))
    assert text.count(" ialltoall ") == 4 * 4  # one post per rank and iteration
    # without the posts (what a capture wrote before) the collective waits for the compute: clearly slower
    blocking = simulate(trace_scenario(_blocking_copy(tmp_path / "cap", tmp_path / "blk"), 4))
    assert float(blocking.events["exit"].max()) > live * 1.01
    assert index.is_file()
