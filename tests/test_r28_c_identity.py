"""The work after SimGrid ends (the replay log read into the event table, the wait states, the rank budget and the
summary) gives the same bytes as the code of commit 0ec86de, which the faster code replaced (session 28, helper c).

The reference is that commit's ``simulator`` and ``models`` trees, taken from git into a temporary folder and run in
a subprocess on the same replay log and operation table; nothing expected is stored here.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.waitstates import EPSILON, _add_max_per_blocker, _empty, _member
from waitlab.models.ops import CODE, OpBuilder, OpTable
from waitlab.platforms.smpi_factors import eager_threshold
from waitlab.simulator.log_reader import LOG_DTYPE, stream_times
from waitlab.simulator.timeline import _fill_markers, read_log

#: The code before this work (pinned: HEAD moves while others commit).
REFERENCE = "0ec86de08a291cf38a8ae6afaaea86877e429cb8"
REPO = Path(__file__).resolve().parent.parent

#: Loads ``waitlab.simulator`` and ``waitlab.models`` from the reference trees (argv[1]), then runs the old code on
#: each case of the pickle argv[2] and pickles what it made to argv[3].
_RUNNER = textwrap.dedent('''
    import importlib.abc, importlib.machinery, importlib.util, pickle, sys
    from pathlib import Path

    root = Path(sys.argv[1])
    trees = {"waitlab.simulator": root / "simulator", "waitlab.models": root / "models"}

    class Reference(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            for package, folder in trees.items():
                if name == package:
                    return importlib.util.spec_from_file_location(
                        name, folder / "__init__.py", submodule_search_locations=[str(folder)])
                if name.startswith(package + "."):
                    return importlib.machinery.PathFinder.find_spec(name, sys.modules[name.rpartition(".")[0]].__path__)
            return None

    sys.meta_path.insert(0, Reference())
    from waitlab.simulator import timeline
    from waitlab.models.analysis import summary, waitstates
    assert timeline.__file__.startswith(str(root)) and summary.__file__.startswith(str(root))

    cases = pickle.loads(Path(sys.argv[2]).read_bytes())
    out = {}
    for name, (log, ops, threshold) in cases.items():
        te, tx = timeline.read_log(Path(log), ops)
        events = timeline.build_events(ops, te, tx)
        waits = waitstates.wait_states(events, threshold)
        budget = summary.rank_budget(events, waits, ops.n_ranks)
        out[name] = (te, tx, events, waits, budget, summary.summarize(events, waits, budget))
    Path(sys.argv[3]).write_bytes(pickle.dumps(out))
''')


def _reference_tree(folder: Path) -> Path:
    """The reference's ``simulator`` and ``models`` trees, extracted into ``folder``."""
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", REFERENCE, "simulator", "models"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the reference commit is not at hand ({exc})")
    folder.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)
    return folder


def _reference_outputs(tmp: Path, cases: dict[str, tuple[Path, OpTable, int]]) -> dict[str, tuple[Any, ...]]:
    """What the reference code makes of each case (log, operations, eager threshold), in one subprocess."""
    tree = _reference_tree(tmp / "reference")
    (tmp / "cases.pkl").write_bytes(pickle.dumps({k: (str(log), ops, thr) for k, (log, ops, thr) in cases.items()}))
    (tmp / "runner.py").write_text(_RUNNER)
    proc = subprocess.run([sys.executable, str(tmp / "runner.py"), str(tree), str(tmp / "cases.pkl"),
                           str(tmp / "out.pkl")], capture_output=True, text=True, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, tuple[Any, ...]] = pickle.loads((tmp / "out.pkl").read_bytes())
    return out


def _same_array(a: pa.Array, b: pa.Array, what: str) -> None:
    assert a.type == b.type, what
    assert len(a) == len(b) and a.null_count == b.null_count, what
    if pa.types.is_dictionary(a.type):
        assert a.dictionary.to_pylist() == b.dictionary.to_pylist(), what
        _same_array(a.indices, b.indices, what)
        return
    assert [v is None for v in a.to_pylist()] == [v is None for v in b.to_pylist()], what  # the same nulls
    if pa.types.is_floating(a.type):  # the same bits (-0.0 is not 0.0; NaN is NaN)
        x, y = a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False)
        valid = ~np.isnan(x) | ~np.isnan(y)
        assert x.dtype == y.dtype and np.array_equal(x.view(np.uint8).reshape(-1, x.itemsize)[valid],
                                                     y.view(np.uint8).reshape(-1, y.itemsize)[valid]), what
    else:
        assert a.to_pylist() == b.to_pylist(), what


def _same_table(got: pa.Table, want: pa.Table, what: str) -> None:
    """Column by column: names, types, values and nulls."""
    assert isinstance(got, pa.Table) and isinstance(want, pa.Table)
    assert got.column_names == want.column_names, what
    assert got.num_rows == want.num_rows, what
    for name in want.column_names:
        _same_array(got.column(name).combine_chunks(), want.column(name).combine_chunks(), f"{what}: {name}")


def _scenario(name: str, ranks: int, seed: int, application: dict[str, Any]) -> dict[str, Any]:
    return {"scenario": {"name": name, "ranks": ranks, "seed": seed}, "platform": {"name": "dawning_5000a"},
            "application": application}


#: Every application kind, small, with waits (imbalance), nonblocking exchanges (halo, alltoall by isend/irecv),
#: collectives of every family on the world and on sub-communicators (rows of the grid), several seeds; and LARED-S
#: at 1,024 ranks.
SCENARIOS = {
    "lared_8": _scenario("lared_8", 8, 2, {"kind": "lared_s", "steps": 2}),
    "lared_1024": _scenario("lared_1024", 1024, 1, {"kind": "lared_s", "steps": 1}),
    "stencil_rows_allgather": _scenario("stencil_rows_allgather", 8, 3, {
        "kind": "stencil", "dims": 2, "grid": [2, 4], "steps": 3, "compute_seconds": 0.01, "collective": "allgather",
        "collective_comm": "row", "imbalance": [{"region": "Stencil", "ranks": [1, 6], "magnitude": 0.004}]}),
    "stencil_cols_barrier": _scenario("stencil_cols_barrier", 6, 4, {
        "kind": "stencil", "dims": 2, "grid": [2, 3], "steps": 2, "compute_seconds": 0.01, "collective": "barrier",
        "collective_comm": "column", "imbalance": [{"region": "Stencil", "ranks": {"random": 2}, "magnitude": 0.003,
                                                     "distribution": "uniform"}]}),
    "stencil_bcast": _scenario("stencil_bcast", 5, 5, {
        "kind": "stencil", "dims": 1, "steps": 3, "compute_seconds": 0.002, "halo_bytes": 65536, "collective": "bcast",
        "imbalance": [{"region": "Stencil", "ranks": [0], "magnitude": 0.001}]}),
    "stencil_reduce": _scenario("stencil_reduce", 4, 6, {
        "kind": "stencil", "dims": 1, "steps": 2, "compute_seconds": 0.002, "collective": "reduce", "root": 1,
        "imbalance": [{"region": "Stencil", "ranks": [3], "magnitude": 0.001}]}),
    "stencil_gather": _scenario("stencil_gather", 4, 7, {
        "kind": "stencil", "dims": 1, "steps": 2, "compute_seconds": 0.002, "collective": "gather",
        "imbalance": [{"region": "Stencil", "ranks": [2], "magnitude": 0.001}]}),
    "fft_lam": _scenario("fft_lam", 4, 1, {"kind": "fft", "steps": 2, "alltoall_algorithm": "lam_simple"}),
    "fft": _scenario("fft", 4, 2, {"kind": "fft", "steps": 1}),
    "pingpong": _scenario("pingpong", 4, 1, {  # q late: p's rendezvous send waits for its receive
        "kind": "pingpong", "steps": 3, "message_bytes": 131072, "compute_seconds": 0.001,
        "imbalance": [{"region": "Work", "ranks": [1, 3], "magnitude": 0.002}]}),
    "wavefront": _scenario("wavefront", 6, 1, {"kind": "wavefront", "steps": 2, "blocks": 2, "compute_seconds": 0.01}),
    "matmul": _scenario("matmul", 4, 1, {"kind": "matmul", "matrix_size": 64, "block_columns": 16}),
}


@pytest.mark.simgrid
def test_real_replays_give_the_reference_bytes(tmp_path: Path) -> None:
    new: dict[str, Any] = {}
    cases: dict[str, tuple[Path, OpTable, int]] = {}
    for name, mapping in SCENARIOS.items():
        res = simulate_ops(prepare(from_mapping(mapping, f"{name}.toml")), keep_dir=tmp_path / name)
        threshold = eager_threshold(res.metadata["smpi_config"])
        cases[name] = (tmp_path / name / "events.bin", res.ops, threshold)
        new[name] = res
    old = _reference_outputs(tmp_path, cases)
    patterns: set[str] = set()
    for name, res in new.items():
        te, tx, events, waits, budget, summary = old[name]
        log, ops, _ = cases[name]
        for chunk in (7, 1 << 20):  # the log read a few records at a time and whole
            got_te, got_tx = read_log(log, ops, chunk_records=chunk)
            assert got_te.dtype == te.dtype and np.array_equal(got_te.view(np.uint64), te.view(np.uint64)), name
            assert got_tx.dtype == tx.dtype and np.array_equal(got_tx.view(np.uint64), tx.view(np.uint64)), name
        _same_table(res.event_table, events, f"{name} events")
        _same_table(res.wait_table, waits, f"{name} waits")
        _same_table(res.budget_table, budget, f"{name} budget")
        assert res.summary == summary, name
        patterns |= set(summary["wait_by_pattern"])
    # the cases are there: waits of both point-to-point patterns and of every collective family
    assert {"late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast", "early_reduce"
            } <= patterns, patterns


# -- the pieces, without SMPI: each against the way the reference did it -------------------------------------------


def _ops(n_ranks: int, seed: int) -> OpTable:
    """A random table: regions with markers, messages, a collective (some ranks without operations)."""
    rng = np.random.default_rng(seed)
    b = OpBuilder(n_ranks)
    everyone = list(range(n_ranks))
    for s in range(int(rng.integers(1, 4))):
        busy = [r for r in everyone if rng.random() < 0.8]
        if busy:
            b.add("enter", busy, region="step", step=s)
            b.add("compute", busy, value=1.0, region="step", step=s)
            if rng.random() < 0.5:
                b.add("enter", busy, region="inner", step=s)
                b.add("leave", busy, region="inner", step=s)
            b.add("leave", busy, region="step", step=s)
        b.add("allreduce", everyone, value=8, step=s)
    return b.build()


def _log(ops: OpTable, markers: bool, seed: int) -> np.ndarray:
    """The records the replay extension writes for ``ops`` (rank after rank), random times."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(ops.n_ranks):
        rows.append((r, CODE["init"], 0.0, float(rng.uniform(0, 1))))
        for i in np.flatnonzero(ops.rank == r):
            if markers or ops.code[i] not in (CODE["enter"], CODE["leave"]):
                t = float(rng.uniform(0, 100))
                rows.append((r, int(ops.code[i]), t, t + float(rng.uniform(0, 1))))
        rows.append((r, CODE["finalize"], 1e3, 1e3))
    return np.array(rows, dtype=LOG_DTYPE)


@pytest.fixture(scope="module")
def old_stream(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The reference's chunked reader of the logged operations (``stream_rank_ordered``, since deleted), loaded from
    the reference commit's ``simulator/log_reader.py``."""
    try:
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{REFERENCE}:simulator/log_reader.py"],
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the reference commit is not at hand ({exc})")
    path = tmp_path_factory.mktemp("reference") / "log_reader.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("r28_reference_log_reader", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.stream_rank_ordered


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [1, 2, 5, 64, 1 << 20])
def test_streamed_times_are_the_old_reads(tmp_path: Path, seed: int, chunk: int, old_stream: Any) -> None:
    ops = _ops(3 + seed, seed)
    marker = (ops.code == CODE["enter"]) | (ops.code == CODE["leave"])
    for markers in (False, True):
        _log(ops, markers, seed).tofile(tmp_path / "log")
        if markers:  # every operation logged: the old stream of all of them
            want = old_stream(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, chunk)
            assert want is not None
            got = stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, None, chunk)
            assert stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, ~marker, chunk) is None
        else:  # markers left out: the old stream of the others, markers filled in after
            keep = np.flatnonzero(~marker)
            kept = old_stream(tmp_path / "log", ops.code[keep], ops.rank[keep], ops.n_ranks, chunk)
            assert kept is not None
            want = _fill_markers(kept, keep, ops, marker)
            got = stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, ~marker, chunk)
        assert got is not None
        for g, w in zip(got, want[:2], strict=True):
            assert g.dtype == w.dtype and np.array_equal(g.view(np.uint64), w.view(np.uint64))


def test_streamed_times_refuse_what_the_old_read_refused(tmp_path: Path) -> None:
    ops = _ops(4, 1)
    marker = (ops.code == CODE["enter"]) | (ops.code == CODE["leave"])
    log = _log(ops, False, 1)
    for i, field, value in ((0, "code", CODE["compute"]), (5, "code", CODE["barrier"]), (len(log) - 1, "code", 0),
                            (3, "rank", 2), (len(log) // 2, "rank", 0)):
        bad = log.copy()
        bad[field][i] = value
        bad.tofile(tmp_path / "log")
        for chunk in (1, 3, 1 << 20):
            assert stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, ~marker, chunk) is None, (i, field)
    log[:-1].tofile(tmp_path / "log")  # one record short
    assert stream_times(tmp_path / "log", ops.code, ops.rank, ops.n_ranks, ~marker) is None


def _old_add_max_per_blocker(blocker: np.ndarray, wait: np.ndarray, partner: np.ndarray) -> tuple[np.ndarray, ...]:
    """The reference's way: the waits above EPSILON sorted by (blocker, longest first), the first of each blocker."""
    positive = wait > EPSILON
    blocker, wait, partner = blocker[positive], wait[positive], partner[positive]
    order = np.lexsort((-wait, blocker))
    b, w, p = blocker[order], wait[order], partner[order]
    first = np.ones(b.size, bool)
    first[1:] = b[1:] != b[:-1]
    return b[first], w[first], p[first]


@pytest.mark.parametrize("seed", range(20))
def test_one_wait_per_blocker_is_the_sorted_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    blocker = rng.integers(0, max(n // int(rng.integers(1, 6)), 1), n).astype(np.int32)
    if seed % 2:
        blocker.sort()  # usually in row order
    wait = np.round(rng.normal(0, 1, n), 1)  # ties, zeros, negatives
    if seed % 3 == 0 and n:
        wait[rng.integers(0, n, 5)] = np.nan
    partner = rng.integers(0, 10**6, n)
    acc = _empty()
    got = _add_max_per_blocker(acc, "late_sender", blocker, wait, partner)
    b, w, p = _old_add_max_per_blocker(blocker, wait, partner)
    assert got.dtype == b.dtype and np.array_equal(got, b)
    if b.size:
        assert np.array_equal(acc["event"][0], b) and acc["event"][0].dtype == b.dtype
        assert np.array_equal(acc["wait"][0], w) and np.array_equal(acc["peer_event"][0], p)
        assert acc["peer_event"][0].dtype == p.dtype


@pytest.mark.parametrize("seed", range(10))
def test_member_is_the_lookup(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_cats = int(rng.integers(1, 80))
    codes = rng.integers(-1 if seed % 3 == 0 else 0, n_cats, 10_000).astype([np.int8, np.int16, np.int64][seed % 3])
    wanted = sorted(set(rng.integers(0, n_cats, int(rng.integers(0, 12))).tolist()))
    table = np.zeros(n_cats, bool)
    table[wanted] = True
    got = _member(codes, wanted, n_cats)
    assert got.dtype == bool and np.array_equal(got, table[codes])
