"""The run path's analyses of an Arrow table (issue 41: ``waitlab run`` without pandas).

``wait_states``, ``rank_budget``, ``summarize``, ``impossible_collectives``, ``wait_metrics`` and the RMA helpers
take a pandas DataFrame or a pyarrow Table and give their tables back in that kind; ``ledger_frame`` and
``placement_table`` make an Arrow table with ``arrow=True``.  Expected values: the code at commit 03592bc (before the
change, pandas only) on the DataFrame of the same table, loaded from ``git show 03592bc:<file>``; the Arrow path must
give what the DataFrame path gives.  Event tables: hand-made ones (``make_events``) and those of real runs (example
scenarios and programs under SMPI), each also with a skewed clock (impossible timelines).  A fresh process runs the
whole path on an Arrow table and says whether pandas was loaded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from before_arrow import BEFORE
from program_scenarios import HAVE_SMPI, PROGRAMS

from waitlab.models import columns
from waitlab.models.analysis import metrics, rma_epochs, summary, timeline_check, waitstates
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.ops import Ledger
from waitlab.platforms import placement_table

ROOT = Path(__file__).resolve().parents[1]

#: The modules changed, by their module name: their file in the repository.
MODULES = {
    "waitlab.models.analysis.rma_epochs": "models/analysis/rma_epochs.py",
    "waitlab.models.analysis.rma_waits": "models/analysis/rma_waits.py",
    "waitlab.models.analysis.waitstates": "models/analysis/waitstates.py",
    "waitlab.models.analysis.timeline_check": "models/analysis/timeline_check.py",
    "waitlab.models.analysis.summary": "models/analysis/summary.py",
    "waitlab.models.analysis.metrics": "models/analysis/metrics.py",
    "waitlab.platforms.placement_table": "platforms/placement_table.py",
}


def head_modules() -> dict[str, types.ModuleType]:
    """The modules of :data:`MODULES` as they are at commit 03592bc (by their short name), importing each other's HEAD
    versions; ``sys.modules`` is left as it was."""
    saved = {name: sys.modules.get(name) for name in MODULES}
    out: dict[str, types.ModuleType] = {}
    try:
        for name, path in MODULES.items():  # in dependency order
            src = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout
            mod = types.ModuleType(name)
            mod.__file__ = f"{BEFORE}:{path}"
            sys.modules[name] = mod  # the next modules' imports of it take this one
            exec(compile(src, mod.__file__, "exec"), mod.__dict__)  # the repository's own code, at 03592bc
            out[name.rsplit(".", 1)[1]] = mod
    finally:
        for name, was in saved.items():
            if was is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = was
    return out


@pytest.fixture(scope="module")
def head() -> dict[str, types.ModuleType]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no code of 03592bc to compare with")
    return head_modules()


def arrow_of(df: pd.DataFrame) -> pa.Table:
    """The Arrow table of a DataFrame (categoricals as dictionaries, same categories in the same order)."""
    return pa.Table.from_pandas(df, preserve_index=False)


def assert_same_table(arrow: pa.Table, df: pd.DataFrame) -> None:
    """``arrow`` is an Arrow table that is ``df`` (an empty categorical's categories: objects in Arrow's pandas
    view, which has no type for no strings; the rest alike)."""
    assert isinstance(arrow, pa.Table) and isinstance(df, pd.DataFrame)
    back = arrow.to_pandas()
    if not len(df):
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype) and not len(df[c].cat.categories):
                assert isinstance(back[c].dtype, pd.CategoricalDtype) and not len(back[c].cat.categories)
                back[c] = df[c]
    pd.testing.assert_frame_equal(back, df)


def assert_same_dict(got: Any, want: Any, path: str = "") -> None:
    """Equal dicts, lists and values, in the same order; floats bit for bit (the sums per group are pandas' own:
    waitlab.models.analysis.grouped)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), (path, list(got), list(want))
        for k in want:
            assert_same_dict(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_dict(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, float) and (got == want or (got != got and want != want)), (path, got, want)
    else:
        assert type(got) is type(want) and got == want, (path, got, want)


def skewed(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every rank's clock 1 ms later than the previous rank's: collectives and messages become
    impossible (a rank leaves before another entered), waits move."""
    out = df.copy()
    shift = out["rank"].to_numpy() * 1e-3
    out["enter"] = out["enter"].to_numpy() + shift
    out["exit"] = out["exit"].to_numpy() + shift
    return out


def compare_all(head: dict[str, types.ModuleType], df: pd.DataFrame, arrow: pa.Table) -> None:
    """Every changed function on ``df`` and ``arrow`` (the same table): the DataFrame path gives what 03592bc gives,
    the Arrow path what the DataFrame path gives."""
    h_ws, h_sum, h_tc, h_m, h_rma = (head[k] for k in ("waitstates", "summary", "timeline_check", "metrics",
                                                         "rma_epochs"))
    ref = h_ws.wait_states(df.copy())
    ws = waitstates.wait_states(df)
    pd.testing.assert_frame_equal(ws, ref)
    ws_a = waitstates.wait_states(arrow)
    assert_same_table(ws_a, ws)
    assert [a.tolist() for a in waitstates.payload(arrow)] == [a.tolist() for a in h_ws.payload(df)]
    # the budget: the same sums (one bincount), bit for bit; also with detours (a tenth of every row)
    n = int(df["rank"].max()) + 2 if len(df) else 1  # one rank without events
    detour = (df["exit"].to_numpy() - df["enter"].to_numpy()) * 0.1
    for kw in ({}, {"n_ranks": n, "detour": detour}):
        b_ref = h_sum.rank_budget(df, ref, **kw)
        b = summary.rank_budget(df, ws, **kw)
        pd.testing.assert_frame_equal(b, b_ref)
        assert_same_table(summary.rank_budget(arrow, ws_a, **kw), b)
    b_ref, b, b_a = h_sum.rank_budget(df, ref), summary.rank_budget(df, ws), summary.rank_budget(arrow, ws_a)
    s = summary.summarize(df, ws, b)
    assert_same_dict(s, h_sum.summarize(df, ref, b_ref))  # pandas' sums and order (ties included)
    for k in ("wait_by_pattern", "wait_by_op", "wait_by_path"):
        assert list(s[k].values()) == sorted(s[k].values(), reverse=True)
    assert summary.summarize(arrow, ws_a, b_a) == s == summary.summarize(arrow, ws_a)  # one code path: exactly
    assert summary.summarize(df, ws, b_a) == s  # a budget of either kind
    for f in ("impossible_collectives", "impossible_messages"):
        want = getattr(h_tc, f)(df)
        assert getattr(timeline_check, f)(df) == want == getattr(timeline_check, f)(arrow)
    m = metrics.wait_metrics(df, ws)
    assert_same_dict(m, h_m.wait_metrics(df, ref))
    assert metrics.wait_metrics(arrow, ws_a) == m
    assert rma_epochs.has_rma(df) == h_rma.has_rma(df) == rma_epochs.has_rma(arrow)
    if h_rma.has_rma(df):
        ep = rma_epochs.rma_epochs(df)
        pd.testing.assert_frame_equal(ep, h_rma.rma_epochs(df))
        assert_same_table(rma_epochs.rma_epochs(arrow), ep)
        pd.testing.assert_frame_equal(rma_epochs.gats_pairs(ep), h_rma.gats_pairs(ep))
        assert_same_table(rma_epochs.gats_pairs(rma_epochs.rma_epochs(arrow)), rma_epochs.gats_pairs(ep))
        # the RMA rows' match and done cleared, then annotated again
        rows = np.flatnonzero(np.isin(df["op"].astype(str), rma_epochs.RMA_ACTIONS))
        bare = df.copy()
        for c in ("match", "done"):
            col = bare[c].to_numpy().copy()
            col[rows] = -1
            bare[c] = col
        bare_a = arrow_of(bare)
        want = h_rma.annotate_rma(bare.copy())
        pd.testing.assert_frame_equal(rma_epochs.annotate_rma(bare.copy()), want)
        got = rma_epochs.annotate_rma(bare_a)
        assert got.schema == bare_a.schema
        assert_same_table(got, want)
    if "call" in df:
        rows = np.arange(len(df))
        want = h_ws.call_ops(df, rows)
        pd.testing.assert_series_equal(pd.Series(waitstates.call_ops(df, rows)), pd.Series(want))
        assert waitstates.call_ops(arrow, rows).to_pylist() == want.tolist()


# ---------------------------------------------------------------------------------------------------------------
# Hand-made tables
# ---------------------------------------------------------------------------------------------------------------

def rma_events() -> pd.DataFrame:
    """Two fence epochs on window 0 of 3 ranks (rank 1 puts to rank 2, late into the second fence), and a lock
    epoch of rank 0 on rank 2 while rank 1 holds it."""
    rows = [(0, "win_fence", 0.0, 1.0, -1), (0, "win_lock", 1.0, 2.5, 2), (0, "put", 2.5, 2.6, 2),
            (0, "win_unlock", 2.6, 2.7, 2), (0, "win_fence", 2.7, 3.0, -1),
            (1, "win_fence", 0.5, 1.0, -1), (1, "win_lock", 1.0, 1.1, 2), (1, "put", 1.1, 1.2, 2),
            (1, "win_unlock", 2.0, 2.5, 2), (1, "compute", 2.5, 2.9, -1), (1, "win_fence", 2.9, 3.0, -1),
            (2, "win_fence", 1.0, 1.0, -1), (2, "win_fence", 1.5, 3.0, -1)]
    n, ops = len(rows), [r[1] for r in rows]
    return pd.DataFrame({
        "rank": np.array([r[0] for r in rows], np.int32), "kind": pd.Categorical(
            ["compute" if o == "compute" else "mpi" for o in ops]),
        "op": pd.Categorical(ops), "enter": np.array([r[2] for r in rows]), "exit": np.array([r[3] for r in rows]),
        "peer": np.array([r[4] for r in rows], np.int32), "tag": np.zeros(n, np.int32),
        "bytes": np.zeros(n, np.int64), "match": np.full(n, -1, np.int64), "done": np.full(n, -1, np.int64),
        "region": pd.Categorical([""] * n), "path": pd.Categorical([""] * n), "step": np.zeros(n, np.int32),
    })  # fmt: skip


def hand_tables() -> dict[str, pd.DataFrame]:
    """Event tables of every pattern family, by hand."""
    barrier = make_events(rank=[0, 1, 2, 3], op=["barrier"] * 4, enter=[0.0, 0.5, 1.0, 1.5],
                          exit=[1.5, 0.5, 1.0, 1.5], match=[0] * 4)
    p2p = make_events(rank=[0, 0, 0, 1, 1, 1, 2, 2, 3, 3], enter=[0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0],
                      op=["isend", "irecv", "waitall", "isend", "irecv", "waitall", "send", "compute", "compute",
                          "recv"],
                      exit=[0.0, 0.0, 1.5, 1.0, 1.0, 1.2, 3.0, 0.1, 2.5, 3.2], match=[0, 1, -1, 1, 0, -1, 2, -1, -1, 2],
                      done=[2, 2, -1, 5, 5, -1, 6, -1, -1, 9], peer=[1, 1, -1, 0, 0, -1, 3, -1, -1, 2],
                      nbytes=[1 << 20, 0, 0, 8, 0, 0, 1 << 20, 0, 0, 0])
    n = 4
    coll = make_events(
        rank=list(range(n)) * 6, op=[o for o in ("bcast", "reduce", "allreduce", "scan", "alltoall", "alltoallv")
                                     for _ in range(n)],
        enter=[1.0, 0.0, 0.5, 0.2, 1.0, 2.0, 1.5, 1.8, 3.0, 2.5, 3.5, 2.8, 5.0, 4.0, 4.5, 4.2, 6.0, 6.5, 6.2, 6.1,
               8.0, 7.0, 7.5, 7.2],
        exit=[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.5, 3.5, 3.5, 3.5, 5.5, 5.5, 5.5, 5.5, 7.0, 7.0, 7.0, 7.0,
              8.0, 8.0, 8.0, 8.0],
        match=[0] * n + [1] * n + [2] * n + [3] * n + [4] * n + [5] * n,
        peer=[0] * (2 * n) + [-1] * (4 * n))
    calls = make_events(rank=[0, 0, 0, 1, 1, 1], op=["isend", "irecv", "waitall"] * 2, match=[0, 1, -1, 1, 0, -1],
                        enter=[0.0, 0.0, 0.0, 2.0, 2.0, 2.0], exit=[0.0, 0.0, 2.5, 2.0, 2.0, 2.5],
                        done=[2, 2, -1, 5, 5, -1], peer=[1, 1, -1, 0, 0, -1])
    calls["call"] = pd.Categorical(["MPI_Sendrecv"] * 3 + ["MPI_Isend", "MPI_Irecv", "MPI_Testall"])
    no_wait = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[1.0, 1.0], exit=[1.0, 1.0], match=[0, 0])
    no_wait["call"] = pd.Categorical(["MPI_Barrier"] * 2)
    empty = make_events(rank=[], op=[], enter=[], exit=[])
    message = make_events(rank=[0, 1], op=["send", "recv"], enter=[0.5, 0.1], exit=[0.51, 0.3], match=[0, 0],
                          done=[0, 1], peer=[1, 0])  # received before it was sent
    return {"barrier": barrier, "p2p": p2p, "collectives": coll, "calls": calls, "no_wait": no_wait,
            "empty": empty, "message": message, "rma": rma_events()}


@pytest.mark.parametrize("name", list(hand_tables()))
@pytest.mark.parametrize("skew", [False, True], ids=["clock", "skewed"])
def test_hand_tables_give_the_same_on_arrow_as_head_on_pandas(head: dict[str, types.ModuleType], name: str,
                                                              skew: bool) -> None:
    df = hand_tables()[name]
    df = skewed(df) if skew else df
    compare_all(head, df, arrow_of(df))


def test_hand_tables_hold_waits_and_impossible_timelines() -> None:
    # the cases compare something: waits of several patterns, and impossible instances once skewed
    patterns = set()
    for name, df in hand_tables().items():
        patterns |= set(waitstates.wait_states(arrow_of(df)).column("pattern").to_pylist())
        if name in ("barrier", "collectives"):
            assert timeline_check.impossible_collectives(arrow_of(skewed(df))), name
    assert timeline_check.impossible_messages(arrow_of(hand_tables()["message"]))[0]["worst_gap"] == pytest.approx(0.2)
    assert {"late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast", "early_reduce",
            "early_scan", "rma_wait_at_fence", "rma_lock_contention"} <= patterns
    assert timeline_check.impossible_collectives(arrow_of(hand_tables()["barrier"]))[0]["worst_gap"] == 1.0


def test_annotate_rma_of_arrow_replaces_only_match_and_done() -> None:
    df = rma_events()
    t = arrow_of(df)
    got = rma_epochs.annotate_rma(t)
    assert got.schema == t.schema and got is not t
    assert t.column("match").to_pylist() == [-1] * len(df)  # the input table is left as it was
    for c in t.column_names:
        if c not in ("match", "done"):
            assert got.column(c).equals(t.column(c)), c
    want = rma_epochs.annotate_rma(df.copy())
    assert got.column("match").to_pylist() == want["match"].tolist()
    assert got.column("done").to_pylist() == want["done"].tolist()
    plain = arrow_of(make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 1.0], exit=[1.0, 1.0], match=[0, 0]))
    assert rma_epochs.annotate_rma(plain) is plain  # no RMA row: the table itself


def test_breakdown_order_is_by_value_then_category() -> None:
    # equal waits: category order (late_sender before wait_at_barrier); larger first; zero waits left out
    w = pd.DataFrame({"rank": np.array([0, 1, 0], np.int32), "wait": [1.0, 2.0, 1.0],
                      "pattern": pd.Categorical(["wait_at_barrier", "wait_at_nxn", "late_sender"],
                                                categories=list(waitstates.PATTERNS)),
                      "op": pd.Categorical(["barrier", "allreduce", "recv"]),
                      "path": pd.Categorical(["", "A", "B"], categories=["B", "", "A", "C"])})
    ev = make_events(rank=[0, 1], op=["compute"] * 2, enter=[0.0, 0.0], exit=[3.0, 3.0])
    for e, ws in ((ev, w), (arrow_of(ev), arrow_of(w))):
        s = summary.summarize(e, ws)
        assert list(s["wait_by_pattern"].items()) == [("wait_at_nxn", 2.0), ("late_sender", 1.0),
                                                      ("wait_at_barrier", 1.0)]
        assert list(s["wait_by_path"].items()) == [("A", 2.0), ("B", 1.0), ("(top level)", 1.0)]
        assert list(s["wait_by_op"]) == ["allreduce", "barrier", "recv"]


def ledger() -> tuple[Ledger, tuple[str, ...]]:
    return Ledger(rank=np.array([0, 1, 1, 3], np.int32), region=np.array([1, -1, 0, 1], np.int32),
                  step=np.array([0, 2, 2, -1], np.int32), seconds=np.array([0.5, 0.25, 1e-9, 3.0]),
                  kind=np.array([0, 1, 2, 0], np.int8)), ("Stencil", "Halo")


def test_ledger_table_of_arrow_is_the_pandas_one(head: dict[str, types.ModuleType]) -> None:
    led, names = ledger()
    want = head["metrics"].ledger_table(led, names)
    pd.testing.assert_frame_equal(metrics.ledger_table(led, names), want)
    got = columns.text_columns(metrics.ledger_table(led, names, arrow=True))  # region, kind: categorical
    assert got.schema == pa.schema([("rank", pa.int64()), ("region", pa.string()), ("step", pa.int64()),
                                    ("seconds", pa.float64()), ("kind", pa.string())])
    assert got.to_pylist() == want.to_dict("records")
    ops = types.SimpleNamespace(ledger=led, names=names)
    assert columns.text_columns(metrics.ledger_frame(ops, arrow=True)).equals(got)  # an operation table's
    pd.testing.assert_frame_equal(metrics.ledger_frame(ops), want)
    empty = Ledger.empty()
    pd.testing.assert_frame_equal(metrics.ledger_table(empty, names), head["metrics"].ledger_table(empty, names))
    e = columns.text_columns(metrics.ledger_table(empty, names, arrow=True))
    assert e.num_rows == 0 and e.schema == got.schema


def test_placement_table_of_arrow_is_the_pandas_one(head: dict[str, types.ModuleType]) -> None:
    for args in (((0, 0, 300), ("node-0", "node-0", "node-300"), 256), (np.array([3, 1]), ("a", "é"), 2),
                 ((), (), 4)):
        want = head["placement_table"].placement_table(*args)
        pd.testing.assert_frame_equal(placement_table.placement_table(*args), want)
        got = placement_table.placement_table(*args, arrow=True)
        assert got.schema == pa.schema([("rank", pa.int64()), ("node", pa.int64()), ("supernode", pa.int64()),
                                        ("host", pa.string())])
        assert got.to_pylist() == want.to_dict("records")


# ---------------------------------------------------------------------------------------------------------------
# Without pandas
# ---------------------------------------------------------------------------------------------------------------

#: Runs the run path's analyses of an Arrow table (an events.parquet, else a hand-made one) in a fresh process;
#: prints whether pandas was imported by the imports, whether it is loaded at the end, and where it was imported.
NO_PANDAS = r'''
import json, sys, traceback, types
first = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and not first:
            first.append([f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()[:-1]])
        return None
sys.meta_path.insert(0, Watch())
import numpy as np
import pyarrow.parquet as pq
from waitlab.models.analysis import metrics, rma_epochs, summary, timeline_check, waitstates
from waitlab.models.columns import Coded, table
from waitlab.models.ops import Ledger
from waitlab.platforms import placement_table
imported = "pandas" in sys.modules
if len(sys.argv) > 1:  # pq.read_table imports pyarrow.dataset, which imports pandas: ParquetFile does not
    ev = pq.ParquetFile(sys.argv[1]).read()
else:  # a barrier, a late sender in a waitall, an allreduce
    ops = ["barrier", "barrier", "isend", "waitall", "irecv", "waitall", "allreduce", "allreduce"]
    cats = sorted(set(ops))
    ev = table({"rank": np.array([0, 1, 0, 0, 1, 1, 0, 1], np.int32),
                "kind": Coded(np.zeros(8, np.int8), ["mpi"]),
                "op": Coded(np.array([cats.index(o) for o in ops]), cats),
                "enter": np.array([0.0, 1.0, 1.2, 1.2, 1.0, 1.0, 2.0, 3.0]),
                "exit": np.array([1.0, 1.0, 1.2, 1.5, 1.0, 1.5, 3.0, 3.0]),
                "peer": np.array([-1, -1, 1, -1, 0, -1, -1, -1], np.int32),
                "bytes": np.array([0, 0, 8, 0, 0, 0, 8, 8]), "recv_bytes": np.array([0, 0, 0, 0, 8, 0, 8, 8]),
                "match": np.array([0, 0, 1, -1, 1, -1, 2, 2]), "done": np.array([-1, -1, 3, -1, 5, -1, -1, -1]),
                "region": Coded(np.zeros(8, np.int8), [""]), "path": Coded(np.zeros(8, np.int8), [""]),
                "step": np.zeros(8, np.int32)})
ev = rma_epochs.annotate_rma(ev)
ws = waitstates.wait_states(ev)
budget = summary.rank_budget(ev, ws)
s = summary.summarize(ev, ws, budget)
found = timeline_check.impossible_collectives(ev)
m = metrics.wait_metrics(ev, ws)
led = Ledger(rank=np.array([0], np.int32), region=np.array([-1], np.int32), step=np.array([0], np.int32),
             seconds=np.array([0.5]), kind=np.array([0], np.int8))
ledger = metrics.ledger_frame(types.SimpleNamespace(ledger=led, names=("A",)), arrow=True)
place = placement_table.placement_table((0, 0), ("n0", "n0"), 4, arrow=True)
kinds = {type(t).__module__.split(".")[0] for t in (ws, budget, ledger, place)}
print(json.dumps({"imported": imported, "loaded": "pandas" in sys.modules, "where": first[0] if first else [],
                  "kinds": sorted(kinds), "waits": ws.num_rows, "wait": s["totals"]["wait"]}))
'''


def run_without_pandas(*args: str) -> dict[str, Any]:
    """:data:`NO_PANDAS` in a fresh process; its answer.  Fails when pandas was loaded, naming where."""
    proc = subprocess.run([sys.executable, "-c", NO_PANDAS, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["imported"], out["where"]  # importing the modules loads no pandas
    assert out["kinds"] == ["pyarrow"]
    if out["loaded"]:
        ours = [f for f in out["where"] if f.startswith(str(ROOT))]  # the waitlab frames, outermost first
        pytest.fail(f"pandas is loaded from {ours[-1] if ours else '?'}: {out['where']}")
    return out


def test_the_run_path_of_a_hand_made_arrow_table_loads_no_pandas() -> None:
    out = run_without_pandas()
    assert out["waits"] == 3 and out["wait"] == pytest.approx(1.0 + 0.2 + 1.0)  # barrier, late sender, allreduce


# ---------------------------------------------------------------------------------------------------------------
# Real runs
# ---------------------------------------------------------------------------------------------------------------

#: Results folders made for the tests: example scenarios (nonblocking point-to-point and an allreduce, blocking
#: point-to-point, all-to-all collectives, a perturbed run with its unperturbed one) and programs (MPI_Sendrecv's
#: call column, nonblocking collectives, RMA fence, lock and GATS epochs).
EXAMPLES = ("stencil_late_rank", "wavefront_propagation", "fft_two_switch", "perturbed_stencil")
PROGRAM_RUNS = {"sendrecv": ("sendrecv.c", 4, []), "nbc_waitall": ("nbc_waitall.c", 4, []),
                "rma_fence": ("rma_patterns.c", 3, ["fence", "0.1", "0.25"]),
                "rma_lock": ("rma_patterns.c", 3, ["lock", "0.2", "0.05"]),
                "rma_late_post": ("rma_patterns.c", 2, ["late_post", "0.2", "0.0"])}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Name -> events.parquet of every run (a perturbed run also gives its unperturbed one)."""
    from waitlab.cli import main

    base = tmp_path_factory.mktemp("r27a")
    out: dict[str, Path] = {}
    scenarios = {name: ROOT / "examples" / f"{name}.toml" for name in EXAMPLES}
    for name, (source, ranks, args) in PROGRAM_RUNS.items():
        toml = base / f"{name}.toml"
        toml.write_text(f'[scenario]\nname = "{name}"\nranks = {ranks}\n\n[platform]\nname = "dawning_5000a"\n\n'
                        f'[application]\nkind = "program"\nsources = ["{PROGRAMS / source}"]\n'
                        f"args = {json.dumps(args)}\n")
        scenarios[name] = toml
    for name, toml in scenarios.items():
        folder = base / name
        assert main(["run", str(toml), "-o", str(folder), "--no-png", "-q"]) == 0, name
        out[name] = folder / "events.parquet"
        if (folder / "unperturbed" / "events.parquet").is_file():
            out[f"{name}/unperturbed"] = folder / "unperturbed" / "events.parquet"
    return out


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")
def test_real_runs_give_the_same_on_arrow_as_head_on_pandas(head: dict[str, types.ModuleType],
                                                             runs: dict[str, Path]) -> None:
    assert "perturbed_stencil/unperturbed" in runs
    seen: set[str] = set()
    for path in runs.values():
        arrow = pq.ParquetFile(path).read()
        df = arrow.to_pandas()
        seen |= set(df["op"].astype(str))
        compare_all(head, df, arrow)
        sk = skewed(df)
        compare_all(head, sk, arrow_of(sk))
    # the runs hold what they are here for
    assert {"isend", "irecv", "waitall", "send", "recv", "allreduce", "alltoall", "win_fence", "win_lock",
            "win_start", "win_post", "put"} <= seen, seen


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")
def test_the_run_path_of_a_real_events_table_loads_no_pandas(runs: dict[str, Path]) -> None:
    for name in ("stencil_late_rank", "rma_fence"):
        out = run_without_pandas(str(runs[name]))
        assert out["waits"] > 0, name
