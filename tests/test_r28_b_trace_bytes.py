"""The time-independent trace files of :func:`waitlab.simulator.trace.write_trace` are byte for byte those of the
writer of commit 0ec86de (before session 28 made it cheaper): the reference is that commit's ``simulator/`` tree,
taken from git, run in a subprocess on the same operation tables (pickled), never bytes stored here.

Cases: LARED-S at 1,024 ranks as ``waitlab run`` writes it (the region markers left out, one shared file) and with
every row and per-rank files; every application kind at small rank counts and two seeds; random tables of every
writable action (nonblocking collectives with and without serials, tests and polls, waits, regions, a
sub-communicator), v-collectives with exact vectors, one-sided actions; chunks of 7 rows (so chunks without an init
or finalize, and with only them, are written); and the errors of tables a trace cannot hold.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_trace_rma import _pscw_and_fence

from waitlab.errors import InputError
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.stage import prepare
from waitlab.models.apps.registry import APPLICATIONS, generate, params_from_mapping
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.vocabulary import ACTION, ACTIONS, CODE, COLLECTIVE_ACTIONS
from waitlab.simulator import trace
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import write_trace
from waitlab.simulator.trace_rma import with_rma_groups

REFERENCE = "0ec86de08a291cf38a8ae6afaaea86877e429cb8"
REPO = Path(__file__).resolve().parents[1]

#: Run in a subprocess: the pinned commit's simulator package in place of this checkout's, writing every case.
_OLD_WRITER = """
import pickle, sys
from pathlib import Path
import waitlab.simulator
waitlab.simulator.__path__[:] = [sys.argv[1]]
from waitlab.errors import InputError
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.stage import prepare
from waitlab.simulator import trace
assert trace.__file__.startswith(sys.argv[1]), trace.__file__
for case in pickle.loads(Path(sys.argv[2]).read_bytes()):
    trace.TRACE_CHUNK_ROWS = case["chunk"]
    out = Path(sys.argv[3]) / case["name"]
    try:
        trace.write_trace(case["ops"], case["core_speed"], out, rows=case["rows"], vectors=case["vectors"],
                          header=case["header"], relative=case["relative"], shared=case["shared"])
    except InputError as e:
        out.mkdir(parents=True, exist_ok=True)
        (out / "error").write_text(str(e))
"""


def _reference_tree(tmp: Path) -> Path:
    """The pinned commit's ``simulator/`` folder, extracted from git under ``tmp``."""
    got = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", REFERENCE, "simulator"],
                         capture_output=True)
    if got.returncode != 0:
        pytest.skip(f"commit {REFERENCE} is not in this checkout's git history: {got.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(got.stdout)) as tar:
        tar.extractall(tmp)  # a git archive of this repository
    return tmp / "simulator"


def _write_new(case: dict[str, Any], out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "TRACE_CHUNK_ROWS", case["chunk"])
    try:
        write_trace(case["ops"], case["core_speed"], out, rows=case["rows"], vectors=case["vectors"],
                    header=case["header"], relative=case["relative"], shared=case["shared"])
    except InputError as e:
        out.mkdir(parents=True, exist_ok=True)
        (out / "error").write_text(str(e))


def _case(name: str, ops: OpTable, *, rows: np.ndarray | None = None, core_speed: float = 1e9,
          vectors: VectorStore | None = None, shared: bool = True, relative: bool = True, header: str = "",
          chunk: int = trace.TRACE_CHUNK_ROWS) -> dict[str, Any]:
    return {"name": name, "ops": ops, "rows": rows, "core_speed": core_speed, "vectors": vectors, "shared": shared,
            "relative": relative, "header": header, "chunk": chunk}


def _unmarked(ops: OpTable) -> np.ndarray:
    """The rows ``waitlab run`` writes (simulator/replay.py ``_written_rows``): all but the region markers."""
    return np.flatnonzero(~np.isin(ops.code, [CODE["enter"], CODE["leave"]]))


def _both_ways(name: str, ops: OpTable, **kw: Any) -> list[dict[str, Any]]:
    """Shared and per-rank files, with every row and without the markers."""
    return [_case(f"{name}-{'shared' if shared else 'ranks'}-{'unmarked' if unmarked else 'all'}", ops,
                  rows=_unmarked(ops) if unmarked else None, shared=shared, **kw)
            for shared in (True, False) for unmarked in (True, False)]


#: Actions the random tables draw (tests/test_trace_lines_native.py's, and v-collectives)
DRAWN = ["compute", "send", "recv", "isend", "irecv", "ssend", "issend", "wait", "waitall", "barrier", "bcast",
         "reduce", "allreduce", "alltoall", "allgather", "gather", "scatter", "scan", "exscan", "sleep", "overhead",
         "flush", "test", "enter", "leave", "ibarrier", "ibcast", "ireduce", "iallreduce", "ialltoall", "igather",
         "alltoallv", "gatherv", "allgatherv", "scatterv", "reducescatter"]


def _random_table(seed: int) -> tuple[OpTable, VectorStore]:
    """A table of random writable operations, and exact vectors for some of its v-collectives."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    b = OpBuilder(n)
    sub = b.comm_id(tuple(int(r) for r in rng.permutation(n)[:max(2, n - 1)]))
    drawn = [a for a in DRAWN if a in ACTION]
    count: dict[int, dict[str, int]] = {r: {} for r in range(n)}
    vectors = VectorStore()
    for _ in range(int(rng.integers(20, 120))):
        action = drawn[int(rng.integers(len(drawn)))]
        rank = int(rng.integers(n))
        value = float(rng.choice([rng.uniform(0, 1e12), float(rng.integers(0, 1 << 40)), 0.1, 1e-5, 5e-324]))
        value2 = float(rng.choice([0.0, 1.0, rng.uniform(0, 1e9)]))
        peer = int(rng.integers(-1 if action == "test" else 0, n))
        tag = int(rng.integers(-1, 6))
        comm = sub if ACTION[action].kind == "collective" and not ACTION[action].vector and rng.random() < 0.5 else 0
        region = str(rng.choice(["Hydro", "a>b", "x_1"])) if action in ("enter", "leave", "compute") else None
        b.add(action, rank, value=value, value2=value2, peer=peer, tag=tag, region=region, comm=comm)
        if ACTION[action].vector:
            k = count[rank].get(action, 0)
            count[rank][action] = k + 1
            if rng.random() < 0.7:
                vectors.put(rank, CODE[action], k, rng.integers(0, 100, n), rng.integers(0, 100, n))
    return b.build(), vectors


def _refused() -> list[dict[str, Any]]:
    """Tables a trace cannot hold: the same error, first row named alike."""
    cases = []
    b = OpBuilder(3)
    b.add("compute", [0, 1, 2], value=1.0)
    b.add("bcast", [0, 1, 2], value=8, peer=[0, -1, -1])
    cases.append(_case("rootless-bcast", b.build(), chunk=4))
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=[1.0, -1.0])
    cases.append(_case("negative", b.build()))
    b = OpBuilder(2)
    b.add("win_create", [0, 1], value=8, tag=0)
    b.add("get_accumulate", 0, peer=1, value=8, tag=0)
    cases.append(_case("rma", b.build()))
    return cases


@pytest.fixture(scope="module")
def lared_1024(tmp_path_factory: pytest.TempPathFactory) -> tuple[OpTable, float]:
    """The operations and core speed of the 1,024-rank x 20-step LARED-S scenario, as ``waitlab run`` makes them."""
    tmp = tmp_path_factory.mktemp("lared")
    toml = tmp / "lared.toml"
    toml.write_text('[scenario]\nname = "shell-lared-1024"\nranks = 1024\nseed = 1\n[platform]\n'
                    'name = "dawning_5000a"\n[application]\nkind = "lared_s"\nsteps = 20\n[simulation]\n'
                    'contention = "none"\n')
    prep = prepare(load_scenario(toml))
    work = tmp / "work"
    work.mkdir()
    return prep.source.operations(prep.platform, prep.smpi_config(), work), prep.platform.core_speed


def _cases(lared: tuple[OpTable, float]) -> list[dict[str, Any]]:
    ops, speed = lared
    cases = [*_both_ways("lared1024", ops, core_speed=speed)]
    cases.append(_case("lared1024-absolute", ops, rows=_unmarked(ops), core_speed=speed, relative=False))
    for kind in sorted(APPLICATIONS):
        for n_ranks, seed in ((2, 0), (4, 1), (6, 2), (8, 3)):
            small = generate(params_from_mapping(kind, {"kind": kind, "steps": 2}, "r28b.toml"), n_ranks, seed)
            cases += _both_ways(f"{kind}-{n_ranks}-{seed}", small, core_speed=7.6e9, header="a\nb c")
            cases.append(_case(f"{kind}-{n_ranks}-{seed}-chunked", small, rows=_unmarked(small), chunk=7))
    for seed in range(12):
        table, vectors = _random_table(seed)
        for shared in (True, False):
            for chunk in (7, trace.TRACE_CHUNK_ROWS):
                for vec in (vectors, None):
                    cases.append(_case(f"random{seed}-{shared}-{chunk}-{vec is not None}", table, vectors=vec,
                                       shared=shared, chunk=chunk, core_speed=2.5e8 / 3,
                                       rows=_unmarked(table) if seed % 2 else None))
    rma = with_rma_groups(_pscw_and_fence())  # RMA lines: text parts among the plain ones
    cases += [_case(f"rma-{shared}-{chunk}", rma, shared=shared, chunk=chunk) for shared in (True, False)
              for chunk in (3, 1000)]
    cases.append(_case("no-operation", OpBuilder(3).build()))
    return [*cases, *_refused()]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_trace_files_are_the_reference_commits_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     lared_1024: tuple[OpTable, float]) -> None:
    cases = _cases(lared_1024)
    old_tree = _reference_tree(tmp_path / "ref")
    (tmp_path / "cases.pkl").write_bytes(pickle.dumps(cases))
    done = subprocess.run([sys.executable, "-c", _OLD_WRITER, str(old_tree), str(tmp_path / "cases.pkl"),
                           str(tmp_path / "old")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    for case in cases:
        _write_new(case, tmp_path / "new" / case["name"], monkeypatch)
    errors = 0
    for case in cases:
        old, new = _files(tmp_path / "old" / case["name"]), _files(tmp_path / "new" / case["name"])
        if not case["relative"] and "index.txt" in old:  # absolute paths: the folders differ
            old["index.txt"] = old["index.txt"].replace(str((tmp_path / "old").resolve()).encode(), b"")
            new["index.txt"] = new["index.txt"].replace(str((tmp_path / "new").resolve()).encode(), b"")
        assert old.keys() == new.keys(), case["name"]
        for name, data in old.items():
            assert new[name] == data, f"{case['name']}/{name}"
        errors += "error" in old
    assert errors == 3, [c["name"] for c in cases if (tmp_path / "old" / c["name"] / "error").exists()]
    assert b"0 put 2 0 32" in _files(tmp_path / "new" / "rma-True-3")["trace.txt"]
    assert len(_files(tmp_path / "new" / "lared1024-shared-unmarked")["trace.txt"]) > 7_000_000


def test_the_shared_order_is_a_sort_by_superstep_then_rank() -> None:
    """:func:`trace._shared_order` against numpy's lexsort of (superstep, rank) over (inits, rows, finalizes)."""
    rng = np.random.default_rng(5)
    collective = [CODE["barrier"], CODE["allreduce"], CODE["ibcast"]]
    local = [CODE["compute"], CODE["send"], CODE["wait"]]
    for n in (1, 2, 3, 7, 40):
        counts = rng.integers(0, 9, n)
        counts[rng.integers(n)] = 0  # a rank without rows
        rank = np.repeat(np.arange(n, dtype=np.int32), counts)
        code = np.where(rng.random(rank.size) < 0.3, rng.choice(collective, rank.size),
                        rng.choice(local, rank.size)).astype(np.int8)
        is_coll = [ACTIONS[c] in COLLECTIVE_ACTIONS for c in code.tolist()]  # a post (ibcast) is not one
        epoch = np.zeros(rank.size, np.int64)  # collectives of the rank before each row, by a loop
        last = np.zeros(n, np.int64)
        seen = dict.fromkeys(range(n), 0)
        for i, r in enumerate(rank.tolist()):
            epoch[i] = seen[r]
            last[r] = seen[r]
            seen[r] += is_coll[i]
        key_epoch = np.concatenate((np.full(n, -1), epoch, last + 1))
        key_rank = np.concatenate((np.arange(n), rank, np.arange(n)))
        expected = np.lexsort((key_rank, key_epoch))
        order, rank_of = trace._shared_order(rank, code, n)
        assert np.array_equal(order, expected) and order.dtype == np.int64
        assert np.array_equal(rank_of, key_rank[expected])
