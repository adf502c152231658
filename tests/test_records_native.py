"""The one-pass C conversion of the measurement layer's records (``native/waitlab_records.c``, issue 25) gives the
rows of the numpy implementation it replaced (``tests/records_reference.py``), the rows worked out by hand for a
small case, and the region structure of :func:`waitlab.models.regions.region_structure`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from records_reference import reference_paths, reference_records_to_ops
from region_cases import MALFORMED_REGIONS, malformed_region_ops

from waitlab.errors import SimulationError
from waitlab.models.columns import frame
from waitlab.models.ops import OpTable
from waitlab.models.regions import region_structure as numpy_regions
from waitlab.models.vocabulary import CODE
from waitlab.simulator import native_tables
from waitlab.simulator import program_records as prog
from waitlab.simulator.program_records import ARG_DTYPE, FLAG_CAUSE, FLAG_INJECTED, LOG_DTYPE, Records
from waitlab.simulator.timeline import build_events

BODY = ("send", "recv", "barrier", "allreduce", "compute", "wait", "isend")


def _records(seed: int, n_ranks: int = 3, per_rank: int = 400, body: tuple[str, ...] = BODY) -> Records:
    """Random records: nested user regions, gaps (some zero, some tiny), call sites (some 0), flags."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, int, float, float, int, int, int, float, int]] = []
    for r in range(n_ranks):
        t = float(rng.uniform(0, 1e-3))
        rows.append((r, CODE["init"], 0.0, t, -1, 0, 0, 0.0, int(rng.integers(0, 4)) * 16))
        open_: list[int] = []
        for _ in range(per_rank):
            u = rng.uniform()
            if u < 0.15 and len(open_) < 3:
                code, name = CODE["enter"], int(rng.integers(0, 3))
                open_.append(name)
            elif u < 0.3 and open_:
                code, name = CODE["leave"], open_.pop()
            else:
                code, name = CODE[body[int(rng.integers(0, len(body)))]], -1
            gap = float(rng.choice([0.0, 1e-9, rng.uniform(0, 1e-3)]))
            dur = 0.0 if code in (CODE["enter"], CODE["leave"]) else float(rng.uniform(0, 1e-4))
            flags = int(rng.choice([0, 0, 0, FLAG_INJECTED, FLAG_CAUSE])) if code == CODE["compute"] else 0
            rows.append((r, code, t + gap, t + gap + dur, name, flags, int(rng.integers(-1, n_ranks)),
                         float(rng.uniform(0, 1e4)), int(rng.integers(0, 6)) * 16))
            t += gap + dur
        while open_:
            rows.append((r, CODE["leave"], t, t, open_.pop(), 0, -1, 0.0, 32))
        rows.append((r, CODE["finalize"], t + 1e-6, t + 2e-6, -1, 0, -1, 0.0, 48))
    log = np.zeros(len(rows), LOG_DTYPE)
    arg = np.zeros(len(rows), ARG_DTYPE)
    a = list(zip(*rows, strict=True))
    log["rank"], log["code"], log["t_enter"], log["t_exit"] = a[0], a[1], a[2], a[3]
    arg["name"], arg["flags"], arg["peer"], arg["value"], arg["site"] = a[4], a[5], a[6], a[7], a[8]
    arg["value2"] = arg["value"] / 2
    arg["tag"] = np.arange(len(rows)) % 7
    arg["step"] = np.arange(len(rows)) // 50
    return Records(n_ranks, log, arg, ("solve", "halo", "io"), {}, ())


def _resolved(offsets: npt.NDArray[np.uint64]) -> dict[int, str]:
    """Stand-in for addr2line: offset 16k is line k of a.c, except 80 (another file)."""
    return {int(o): ("b.c:9" if o == 80 else f"a.c:{int(o) // 16}") for o in np.unique(offsets) if o}


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
@pytest.mark.parametrize("min_compute", [0.0, 1e-6])
@pytest.mark.parametrize("seed", [1, 2])
def test_native_rows_are_the_numpy_rows(monkeypatch: pytest.MonkeyPatch, mode: str, min_compute: float,
                                        seed: int) -> None:
    rec = _records(seed)
    monkeypatch.setattr(prog, "resolve_sites", lambda binary, offsets: _resolved(offsets))
    got = prog.records_to_ops(rec, Path("program"), callsite_regions=mode, min_compute=min_compute)
    ops, t_enter, t_exit, record, injected = reference_records_to_ops(
        rec, _resolved(rec.arg["site"]), callsite_regions=mode, min_compute=min_compute)
    assert got.ops.names == ops.names
    for c in OpTable.COLUMNS:
        want = getattr(ops, c)
        assert getattr(got.ops, c).dtype == want.dtype, c
        np.testing.assert_array_equal(getattr(got.ops, c), want, err_msg=c)
    for a, b in ((got.t_enter, t_enter), (got.t_exit, t_exit), (got.record, record), (got.injected, injected)):
        np.testing.assert_array_equal(a, b)
    for f in ("rank", "region", "step", "seconds", "kind"):
        np.testing.assert_array_equal(getattr(got.ops.ledger, f), getattr(ops.ledger, f), err_msg=f)
    if mode != "never":  # the random records do wrap gaps in call-site regions
        assert any(n.startswith("@") for n in got.ops.names)


def test_rows_worked_out_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rank: init [0, 1], send [3, 4] from line 7 after init's line 5, a delay of the program's own [4, 6],
    finalize.  Rows: the gap 1..3 as compute inside the call-site region @a.c:5-7, the send, the delay (no gap)."""
    log = np.array([(0, CODE["init"], 0.0, 1.0), (0, CODE["send"], 3.0, 4.0), (0, CODE["compute"], 4.0, 6.0),
                    (0, CODE["finalize"], 6.0, 6.5)], LOG_DTYPE)
    arg = np.zeros(4, ARG_DTYPE)
    arg["site"] = [80, 112, 112, 0]
    arg["name"] = -1
    arg["peer"], arg["tag"], arg["value"] = [-1, 1, -1, -1], [0, 9, 0, 0], [0.0, 800.0, 2.0, 0.0]
    arg["flags"][2] = FLAG_CAUSE
    monkeypatch.setattr(prog, "resolve_sites", lambda binary, offsets: {80: "a.c:5", 112: "a.c:7"})
    run = prog.records_to_ops(Records(1, log, arg, (), {}, ()), Path("program"))
    ops = run.ops
    assert ops.names == ("@a.c:5-7",)
    assert ops.code.tolist() == [CODE["enter"], CODE["compute"], CODE["leave"], CODE["send"], CODE["compute"]]
    assert ops.name.tolist() == [0, -1, 0, -1, -1]
    assert ops.seq.tolist() == [0, 1, 2, 3, 4]
    assert ops.value.tolist() == [0.0, 2.0, 0.0, 800.0, 2.0]
    assert ops.peer.tolist() == [-1, -1, -1, 1, -1] and ops.tag.tolist() == [0, 0, 0, 9, 0]
    assert run.t_enter.tolist() == [1.0, 1.0, 3.0, 3.0, 4.0] and run.t_exit.tolist() == [1.0, 3.0, 3.0, 4.0, 6.0]
    assert run.record.tolist() == [-1, -1, -1, 1, 2]
    assert ops.cause.tolist() == [-1, -1, -1, -1, 0] and ops.excess.tolist() == [0, 0, 0, 0, 2.0]
    assert ops.ledger.seconds.tolist() == [2.0]


def test_unframed_records_are_refused() -> None:
    rec = _records(3, n_ranks=2)
    keep = rec.log["code"] != CODE["finalize"]
    keep[-1] = True  # rank 1 keeps its finalize, rank 0 has none
    with pytest.raises(SimulationError, match="not framed by MPI_Init and MPI_Finalize"):
        prog.records_to_ops(Records(2, rec.log[keep], rec.arg[keep], rec.names, {}, ()), None)


def _write_rank(folder: Path, r: int, names: str, comms: str, name_ids: list[int], comm_ids: list[int]) -> None:
    n = len(name_ids)
    log = np.zeros(n, LOG_DTYPE)
    log["rank"] = r
    log["code"] = [CODE["init"], *[CODE["barrier"]] * (n - 2), CODE["finalize"]]
    arg = np.zeros(n, ARG_DTYPE)
    arg["name"], arg["comm"] = name_ids, comm_ids
    log.tofile(folder / f"r{r}.log")
    arg.tofile(folder / f"r{r}.arg")
    (folder / f"r{r}.names").write_text(names)
    (folder / f"r{r}.comms").write_text(comms)
    (folder / f"r{r}.vec").write_text("")


def test_read_records_renumbers_names_and_communicators(tmp_path: Path) -> None:
    """Each rank numbers names and communicators itself: rank 0 calls "solve" 0 and "halo" 1, rank 1 the other way
    round; rank 0's communicator 2 and rank 1's communicator 1 are the same members (global 1)."""
    _write_rank(tmp_path, 0, "0\tsolve\n1\thalo\n", "2 0 1\n", [-1, 0, 1, -1], [0, 2, 0, 0])
    _write_rank(tmp_path, 1, "0\thalo\n1\tsolve\n", "1 0 1\n3 1\n", [-1, 0, 1, 1, -1], [0, 1, 3, 0, 0])
    rec = prog.read_records(tmp_path, 2)
    assert rec.names == ("solve", "halo") and rec.comms == ((0, 1), (1,))
    assert rec.arg["name"].tolist() == [-1, 0, 1, -1, -1, 1, 0, 0, -1]
    assert rec.arg["comm"].tolist() == [0, 1, 0, 0, 0, 1, 2, 0, 0]


@pytest.mark.parametrize(("col", "ids"), [("name", [-1, 0, 2, -1]), ("name", [-1, -2, 0, -1]),
                                          ("comm", [0, 5, 0, 0])])
def test_read_records_refuses_unknown_ids(tmp_path: Path, col: str, ids: list[int]) -> None:
    _write_rank(tmp_path, 0, "0\tsolve\n", "", [-1, 0, 0, -1], [0, 0, 0, 0])
    _write_rank(tmp_path, 1, "0\tsolve\n1\thalo\n", "", *((ids, [0] * 4) if col == "name" else ([-1] * 4, ids)))
    what = "names" if col == "name" else "comms"
    with pytest.raises(SimulationError, match=f"records of rank 1 use a {col} id that r1.{what} does not list"):
        prog.read_records(tmp_path, 2)


def _write_ranks(folder: Path, seed: int, n_ranks: int = 5) -> None:
    """Ranks of 2 .. 60 records naming regions and communicators in their own orders (some ids of -1: no name)."""
    rng = np.random.default_rng(seed)
    for r in range(n_ranks):
        order = rng.permutation(["solve", "halo", "io", f"own{r}"])
        n = int(rng.integers(2, 60))
        names = "".join(f"{i}\t{nm}\n" for i, nm in enumerate(order))
        comms = "".join(f"{c} {' '.join(map(str, rng.choice(n_ranks, 2, replace=False)))}\n" for c in (1, 2))
        _write_rank(folder, r, names, comms, rng.integers(-1, 4, n).tolist(), rng.integers(0, 3, n).tolist())
        (folder / f"r{r}.vec").write_text(f"{r} 2 1 2 3 4\n")


@pytest.mark.parametrize("seed", [1, 2])
def test_read_records_in_parts_is_one_read(tmp_path: Path, seed: int) -> None:
    """Reading and renumbering by 2, 3 or 9 threads gives the bytes of one thread."""
    _write_ranks(tmp_path, seed)
    one = prog.read_records(tmp_path, 5, parts=1)
    assert len(one.names) == 3 + 5 and one.vectors[(4, 4)][1].tolist() == [3, 4]
    for parts in (2, 3, 9):
        got = prog.read_records(tmp_path, 5, parts=parts)
        assert got.log.tobytes() == one.log.tobytes() and got.arg.tobytes() == one.arg.tobytes()
        assert (got.names, got.comms, got.n_ranks) == (one.names, one.comms, one.n_ranks)
        assert {k: [x.tolist() for x in v] for k, v in got.vectors.items()} == {
            k: [x.tolist() for x in v] for k, v in one.vectors.items()}


@pytest.mark.parametrize("parts", [1, 2, 4])
@pytest.mark.parametrize(("bad_names", "bad_comms", "message"), [
    ((3,), (), "rank 3 use a name id"), ((1, 3), (), "rank 1 use a name id"),
    ((3,), (0, 1), "rank 3 use a name id"), ((), (2, 3), "rank 2 use a comm id")])
def test_read_records_in_parts_names_the_first_bad_rank(tmp_path: Path, parts: int, bad_names: tuple[int, ...],
                                                        bad_comms: tuple[int, ...], message: str) -> None:
    """As one pass does: the lowest rank with an unknown name id, else the lowest one with an unknown
    communicator id, whichever thread met them."""
    for r in range(4):
        _write_rank(tmp_path, r, "0\tsolve\n", "", [-1, 7 if r in bad_names else 0, -1],
                    [0, 5 if r in bad_comms else 0, 0])
    with pytest.raises(SimulationError, match=message):
        prog.read_records(tmp_path, 4, parts=parts)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_region_structure_is_numpys(seed: int) -> None:
    ops = prog.records_to_ops(_records(seed), None, callsite_regions="always").ops
    for a, b in zip(native_tables.region_structure(ops), numpy_regions(ops), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", MALFORMED_REGIONS)
def test_native_region_structure_names_problems_as_numpy_does(case: str) -> None:
    ops = malformed_region_ops(case)
    with pytest.raises(SimulationError) as want:
        numpy_regions(ops)
    with pytest.raises(SimulationError) as got:
        native_tables.region_structure(ops)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_call_paths_and_depths_are_numpys(seed: int) -> None:
    """The event table's ``path`` and ``depth`` (one C pass) against the level-by-level numpy version; region names
    that contain ">" make two call paths spell the same string ("a>b" at top level, "b" inside "a")."""
    rec = _records(seed, body=("compute",))  # no messages or collectives: any order is a valid program
    rec = Records(rec.n_ranks, rec.log, rec.arg, ("a>b", "a", "b"), {}, ())
    run = prog.records_to_ops(rec, None, callsite_regions="always")
    ev = frame(build_events(run.ops, run.t_enter, run.t_exit))
    src = run.ops.code != CODE["leave"]
    depth = np.zeros(len(ev), np.int16)
    path, names = reference_paths(len(ev), ev["parent"].to_numpy(), (ev["kind"] == "region").to_numpy(),
                                  run.ops.name[src], run.ops.names, depth)
    assert list(ev["path"].cat.categories) == names
    np.testing.assert_array_equal(ev["path"].cat.codes.to_numpy(), path)
    np.testing.assert_array_equal(ev["depth"].to_numpy(), depth)
    assert "a>b" in names and depth.max() >= 3


def _uneven_records(seed: int) -> Records:
    """Five ranks of 400, 400, 400, 900 and 900 records (cause rows, call sites, nested regions on each)."""
    a, b = _records(seed, n_ranks=3, per_rank=400), _records(seed + 10, n_ranks=2, per_rank=900)
    log, arg = np.concatenate([a.log, b.log]), np.concatenate([a.arg, b.arg])
    log["rank"][a.log.size:] += 3
    return Records(5, log, arg, a.names, {}, ())


def _same_run(got: prog.ProgramRun, want: prog.ProgramRun) -> None:
    assert got.ops.names == want.ops.names
    for c in OpTable.COLUMNS:
        assert getattr(got.ops, c).dtype == getattr(want.ops, c).dtype, c
        assert getattr(got.ops, c).tobytes() == getattr(want.ops, c).tobytes(), c
    for x, y in ((got.t_enter, want.t_enter), (got.t_exit, want.t_exit), (got.record, want.record),
                 (got.injected, want.injected)):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    for f in ("rank", "region", "step", "seconds", "kind"):
        assert getattr(got.ops.ledger, f).tobytes() == getattr(want.ops.ledger, f).tobytes(), f


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
@pytest.mark.parametrize("seed", [1, 2])
def test_fill_in_parts_is_the_one_pass_fill(monkeypatch: pytest.MonkeyPatch, mode: str, seed: int) -> None:
    """Filling by 2, 3 or 7 threads (more than ranks) writes the bytes of one pass, column by column."""
    rec = _uneven_records(seed)
    monkeypatch.setattr(prog, "resolve_sites", lambda binary, offsets: _resolved(offsets))
    one = prog.records_to_ops(rec, Path("program"), callsite_regions=mode, parts=1)
    causes = one.ops.cause[one.ops.cause >= 0]
    assert causes.tolist() == list(range(causes.size))
    assert np.unique(one.ops.rank[one.ops.cause >= 0]).size == 5  # every rank has cause rows
    for parts in (2, 3, 7):
        _same_run(prog.records_to_ops(rec, Path("program"), callsite_regions=mode, parts=parts), one)


def test_fill_in_two_parts_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ranks, each: init [0, 1], send [3, 4] (line 7, after init's line 5), a delay of its own [4, 6], finalize.
    Filled in two parts (a rank each): each rank's five rows (call-site enter, compute, leave, send, delay) with
    seq 0 .. 4, rank 1's from row 5, and the delays numbered 0 (rank 0) and 1 (rank 1)."""
    one = [(CODE["init"], 0.0, 1.0), (CODE["send"], 3.0, 4.0), (CODE["compute"], 4.0, 6.0),
           (CODE["finalize"], 6.0, 6.5)]
    log = np.array([(r, c, a, b) for r in (0, 1) for c, a, b in one], LOG_DTYPE)
    arg = np.zeros(8, ARG_DTYPE)
    arg["site"] = [80, 112, 112, 0] * 2
    arg["name"] = -1
    arg["peer"], arg["value"] = [-1, 1, -1, -1, -1, 0, -1, -1], [0.0, 800.0, 2.0, 0.0, 0.0, 800.0, 3.0, 0.0]
    arg["flags"][[2, 6]] = FLAG_CAUSE
    monkeypatch.setattr(prog, "resolve_sites", lambda binary, offsets: {80: "a.c:5", 112: "a.c:7"})
    rec = Records(2, log, arg, (), {}, ())
    assert prog.split_ranks(np.array([4, 4], np.int64), 2) == [0, 1, 2]
    run = prog.records_to_ops(rec, Path("program"), parts=2)
    ops = run.ops
    assert ops.rank.tolist() == [0] * 5 + [1] * 5 and ops.seq.tolist() == [0, 1, 2, 3, 4] * 2
    assert ops.code.tolist() == [CODE["enter"], CODE["compute"], CODE["leave"], CODE["send"], CODE["compute"]] * 2
    assert ops.peer.tolist() == [-1, -1, -1, 1, -1, -1, -1, -1, 0, -1]
    assert run.record.tolist() == [-1, -1, -1, 1, 2, -1, -1, -1, 5, 6]
    assert ops.cause.tolist() == [-1, -1, -1, -1, 0, -1, -1, -1, -1, 1]
    assert ops.excess.tolist() == [0, 0, 0, 0, 2.0, 0, 0, 0, 0, 3.0]
    assert ops.ledger.rank.tolist() == [0, 1] and ops.ledger.seconds.tolist() == [2.0, 3.0]


@pytest.mark.parametrize(("records", "parts", "cut"), [
    ([10, 10, 10, 10], 2, [0, 2, 4]), ([100, 1, 1, 1], 2, [0, 1, 4]), ([1, 1, 1, 100], 2, [0, 3, 4]),
    ([5], 2, [0, 1]), ([10] * 6, 3, [0, 2, 4, 6]), ([10, 10, 10, 10], 1, [0, 4]), ([3, 3], 7, [0, 1, 2]),
    ([], 2, [0, 0])])
def test_split_ranks(records: list[int], parts: int, cut: list[int]) -> None:
    """Each inner boundary is the rank end nearest to its share of the records (worked out by hand)."""
    assert prog.split_ranks(np.array(records, np.int64), parts) == cut


def test_fill_runs_in_one_thread_below_a_million_records() -> None:
    assert prog.fill_parts(prog.THREAD_RECORDS - 1) == 1
    assert prog.fill_parts(prog.THREAD_RECORDS) == min(2, len(os.sched_getaffinity(0)))
