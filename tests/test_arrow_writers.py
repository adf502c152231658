"""The results folder's writers take an Arrow table or a pandas DataFrame (issue 41: ``waitlab run`` without pandas).

``trace.json`` (:func:`~waitlab.simulator.chrome_trace.write_chrome_trace`), ``report.html``
(:func:`~waitlab.experiments.report.html.write_html_report`) and the tables (:func:`~waitlab.simulator.export
.write_table`) of real results folders -- a replayed application, a perturbed one, an all-to-all, programs (one with
a region and MPI_Sendrecv call names, one with one-sided epochs) -- are written from the folder's tables read back
as DataFrames and as Arrow tables.  Expected values are the code at commit 03592bc (before the writers took Arrow
tables) run on the DataFrames: the same bytes, and for Parquet the same table read back.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from before_arrow import BEFORE
from program_scenarios import HAVE_SMPI, PROGRAMS

import waitlab
from waitlab.experiments.report import html as report_html
from waitlab.experiments.results import ROW_REFERENCES
from waitlab.simulator import chrome_trace, export

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("events", "waits", "ranks", "ledger")
SENDRECV = ('[scenario]\nname = "sendrecv"\nranks = 8\n[platform]\nname = "dawning_5000a"\n'
            f'[application]\nkind = "program"\nsources = ["{PROGRAMS / "sendrecv.c"}"]\n')
#: name -> scenario file (relative to the checkout) or text; programs need SimGrid SMPI
SCENARIOS: dict[str, tuple[str, bool]] = {
    "stencil": ("examples/stencil_late_rank.toml", False),  # a replayed application, one late rank
    "perturbed": ("examples/perturbed_stencil.toml", False),  # noise, instrumentation, imbalance everywhere
    "fft": ("examples/lab_alltoall_imbalance.toml", False),  # all-to-all
    "sendrecv": (SENDRECV, True),  # a program: a region, MPI_Sendrecv (the call column)
    "rma": ("experiments/diagnosis/builtin_suite/rma-fence-16.toml", True),  # a program with one-sided epochs
}


def _head_source(path: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the code at commit 03592bc cannot be read")


def _module(name: str, source: str, file: str) -> ModuleType:
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    mod.__file__ = file
    sys.modules[name] = mod
    exec(compile(source, file, "exec"), mod.__dict__)
    return mod


@pytest.fixture(scope="module")
def head() -> dict[str, ModuleType]:
    """The writers at commit 03592bc (DataFrames only): the reference."""
    data = _module("r27b_head_html_data", _head_source("experiments/report/html_data.py"), "html_data.py")
    text = _module("r27b_head_html_text", _head_source("experiments/report/html_text.py"), "html_text.py")
    page = _head_source("experiments/report/html.py").replace(
        "from waitlab.experiments.report.html_data import", f"from {data.__name__} import").replace(
        "from waitlab.experiments.report.html_text import", f"from {text.__name__} import")
    return {"chrome": _module("r27b_head_chrome", _head_source("simulator/chrome_trace.py"), "chrome_trace.py"),
            "export": _module("r27b_head_export", _head_source("simulator/export.py"), "export.py"),
            "html": _module("r27b_head_html", page, report_html.__file__), "html_data": data}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One results folder per scenario, made once for the module (the programs' when SMPI is installed)."""
    base = tmp_path_factory.mktemp("r27b")
    out = {}
    for name, (scenario, program) in SCENARIOS.items():
        if program and not HAVE_SMPI:
            continue
        path = ROOT / scenario
        if scenario.startswith("[scenario]"):
            path = base / f"{name}.toml"
            path.write_text(scenario)
        waitlab.run(path, base / name, png=False, chrome=True)
        out[name] = base / name
    return out


def _arrow(table: pa.Table) -> pa.Table:
    """A table read back by pyarrow as a run holds it: no pandas schema, text as ``string`` (categorical text stays a
    dictionary column)."""
    table = table.replace_schema_metadata(None)
    return table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type)
                                 for f in table.schema]))


def _tables(folder: Path) -> tuple[dict[str, pd.DataFrame], dict[str, pa.Table]]:
    """The folder's tables as DataFrames (as :func:`waitlab.load_run` reads them: row references int32) and as Arrow
    tables (the same columns)."""
    frames, tables = {}, {}
    for name in TABLES:
        int32 = ROW_REFERENCES if name == "events" else ()
        frames[name], _ = export.read_table(folder / f"{name}.parquet", int32)
        t = _arrow(pq.read_table(folder / f"{name}.parquet"))
        for c in int32:
            if c in t.column_names:
                t = t.set_column(t.column_names.index(c), c, t.column(c).cast(pa.int32()))
        tables[name] = t
    return frames, tables


@pytest.fixture(params=list(SCENARIOS))
def folder(request: pytest.FixtureRequest, folders: dict[str, Path]) -> Path:
    if request.param not in folders:
        pytest.skip("SimGrid SMPI is not installed (a program's run)")
    return folders[request.param]


@pytest.mark.simgrid
def test_the_tables_read_both_ways_hold_the_same_columns(folder: Path) -> None:
    frames, tables = _tables(folder)
    for name in TABLES:
        back = tables[name].to_pandas()
        pd.testing.assert_frame_equal(back, frames[name], check_exact=True)
    assert any(pa.types.is_dictionary(f.type) for f in tables["events"].schema)  # categoricals: Arrow dictionaries


@pytest.mark.simgrid
def test_trace_json_is_the_same_bytes_from_a_dataframe_and_from_arrow(folder: Path, head: dict[str, ModuleType],
                                                                     tmp_path: Path) -> None:
    frames, tables = _tables(folder)
    meta = json.loads((folder / "run.json").read_text())
    n = len(frames["events"])
    for max_events in (None, n, n // 3, 25, 10):
        want = head["chrome"].chrome_trace_text(frames["events"], frames["waits"], meta, max_events)
        assert chrome_trace.chrome_trace_text(frames["events"], frames["waits"], meta, max_events) == want
        assert chrome_trace.chrome_trace_text(tables["events"], tables["waits"], meta, max_events) == want
    assert chrome_trace.write_chrome_trace(tables["events"], tables["waits"], meta, tmp_path / "a.json", 25)
    assert chrome_trace.write_chrome_trace(frames["events"], frames["waits"], meta, tmp_path / "d.json", 25)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "d.json").read_bytes()
    # the folder's own trace (written by `waitlab run`) has the same records (its otherData: the run's metadata,
    # not all of run.json)
    records = head["chrome"].chrome_trace_text(frames["events"], frames["waits"], meta,
                                               chrome_trace.CHROME_SUMMARY_EVENTS)
    assert (folder / "trace.json").read_text().split('"otherData":')[0] == records.split('"otherData":')[0]


@pytest.mark.simgrid
def test_report_html_is_the_same_bytes_from_a_dataframe_and_from_arrow(folder: Path, head: dict[str, ModuleType],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    frames, tables = _tables(folder)
    meta = json.loads((folder / "run.json").read_text())
    summary = json.loads((folder / "summary.json").read_text())
    for m in (meta, {**meta, "ranks": 300}):  # as run, and on the heatmap page (more than 64 ranks)
        want = head["html"].build_html(m, summary, *(frames[t] for t in TABLES))
        assert report_html.build_html(m, summary, *(frames[t] for t in TABLES)) == want
        assert report_html.build_html(m, summary, *(tables[t] for t in TABLES)) == want
    for kind, t in (("d", frames), ("a", tables)):
        (tmp_path / kind).mkdir()
        report_html.write_html_report(tmp_path / kind, meta, summary, *(t[n] for n in TABLES))
    assert (tmp_path / "a" / "report.html").read_bytes() == (tmp_path / "d" / "report.html").read_bytes()


def _write_both(frames: dict[str, pd.DataFrame], tables: dict[str, pa.Table], name: str, where: Path,
                row_group_rows: int, metadata: dict[str, Any]) -> tuple[Path, Path]:
    int64 = ROW_REFERENCES if name == "events" else ()
    (where / "d").mkdir(exist_ok=True)
    (where / "a").mkdir(exist_ok=True)
    d, a = where / "d" / f"{name}.parquet", where / "a" / f"{name}.parquet"
    export.write_table(frames[name], d, metadata, row_group_rows=row_group_rows, int64=int64)
    export.write_table(tables[name], a, metadata, row_group_rows=row_group_rows, int64=int64)
    return d, a


@pytest.mark.simgrid
@pytest.mark.parametrize("row_group_rows", [export.ROW_GROUP_ROWS, 100])
def test_parquet_and_csv_written_from_arrow_read_back_as_from_the_dataframe(
        folder: Path, head: dict[str, ModuleType], tmp_path: Path, row_group_rows: int) -> None:
    frames, tables = _tables(folder)
    metadata = {"scenario": folder.name, "seed": 1}
    for name in TABLES:
        int64 = ROW_REFERENCES if name == "events" else ()
        d, a = _write_both(frames, tables, name, tmp_path, row_group_rows, metadata)
        h = tmp_path / f"head-{name}.parquet"
        head["export"].write_table(frames[name], h, metadata, row_group_rows=row_group_rows, int64=int64)
        assert d.read_bytes() == h.read_bytes()  # a DataFrame: the same file as before
        assert d.with_suffix(".csv").read_bytes() == h.with_suffix(".csv").read_bytes()
        assert a.with_suffix(".csv").read_bytes() == d.with_suffix(".csv").read_bytes()
        ta, td = pq.read_table(a), pq.read_table(d)
        assert ta.equals(td, check_metadata=False), name
        assert b"pandas" not in (ta.schema.metadata or {})  # no pandas schema: none was used
        assert json.loads(ta.schema.metadata[b"waitlab"]) == metadata
        pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(d), check_exact=True)
        ra, rd = export.read_table(a, int64), export.read_table(d, int64)
        pd.testing.assert_frame_equal(ra[0], rd[0], check_exact=True)
        assert ra[1] == rd[1] == metadata
        fa, fd = pq.ParquetFile(a), pq.ParquetFile(d)
        assert fa.metadata.num_row_groups == fd.metadata.num_row_groups == max(1, -(-len(td) // row_group_rows))
        assert fa.schema_arrow.remove_metadata() == fd.schema_arrow.remove_metadata()  # nullability, int64 too
        assert [fa.metadata.row_group(0).column(i).encodings for i in range(fa.metadata.num_columns)] == \
            [fd.metadata.row_group(0).column(i).encodings for i in range(fd.metadata.num_columns)]


@pytest.mark.simgrid
def test_a_folder_with_tables_written_from_arrow_loads_as_the_run(folder: Path, tmp_path: Path) -> None:
    """``waitlab.load_run`` (experiments/results.py's readers: categoricals, int32 row references) reads the tables
    written from Arrow as those written from the DataFrames."""
    _, tables = _tables(folder)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    for name in TABLES:
        meta = json.loads(pq.read_schema(folder / f"{name}.parquet").metadata[b"waitlab"])
        export.write_table(tables[name], copy / f"{name}.parquet", meta,
                           int64=ROW_REFERENCES if name == "events" else ())
    want, got = waitlab.load_run(folder), waitlab.load_run(copy, trust_edited=True)  # its files changed: edited
    pd.testing.assert_frame_equal(got.events, want.events, check_exact=True)
    pd.testing.assert_frame_equal(got.waits, want.waits, check_exact=True)
    pd.testing.assert_frame_equal(got.ledger(), want.ledger(), check_exact=True)
    for name in ("events", "waits", "ranks", "ledger"):
        assert (copy / f"{name}.csv").read_bytes() == (folder / f"{name}.csv").read_bytes()


def test_a_missing_float_is_written_as_pandas_writes_it(tmp_path: Path) -> None:
    """NaN in an Arrow float column: a missing value in Parquet and an empty CSV field, as from a DataFrame (whose
    NaN pandas writes as missing); a column without one stays required."""
    df = pd.DataFrame({"rank": np.array([0, 1, 2], np.int32), "x": [1.5, np.nan, 2.0], "y": [0.0, 1.0, 2.0],
                       "op": pd.Categorical(["a", None, "b"]), "name": ["p", "q", "r"]})
    t = pa.table({"rank": pa.array([0, 1, 2], pa.int32()), "x": np.array([1.5, np.nan, 2.0]),
                  "y": np.array([0.0, 1.0, 2.0]),
                  "op": pa.DictionaryArray.from_arrays(pa.array([0, None, 1], pa.int8()), pa.array(["a", "b"])),
                  "name": pa.array(["p", "q", "r"], pa.string())})
    export.write_table(df, tmp_path / "d.parquet", {"k": 1}, int64=["rank"])
    export.write_table(t, tmp_path / "a.parquet", {"k": 1}, int64=["rank"])
    ta, td = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "d.parquet")
    assert ta.equals(td, check_metadata=False)
    assert ta.column("x").null_count == 1 and ta.schema.field("rank").type == pa.int64()
    assert [f.nullable for f in ta.schema] == [False, True, False, True, False]
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "d.csv").read_text() == (
        '"rank","x","y","op","name"\n0,1.5,0,"a","p"\n1,,1,,"q"\n2,2,2,"b","r"\n')


@pytest.mark.simgrid
def test_writing_a_folder_from_arrow_tables_imports_no_pandas(folders: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """trace.json, report.html and the tables written from Arrow tables (read from Arrow IPC files: pyarrow's Parquet
    reader itself imports pandas) leave pandas unimported; the page's skeleton is kept in the cache first (making one
    imports Bokeh)."""
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    runs = []
    for name, path in folders.items():
        frames, tables = _tables(path)
        meta = json.loads((path / "run.json").read_text())
        summary = json.loads((path / "summary.json").read_text())
        report_html.build_html(meta, summary, *(frames[t] for t in TABLES))  # the skeleton, into the cache
        for t in TABLES:
            with pa.ipc.new_file(tmp_path / f"{name}-{t}.arrow", tables[t].schema) as w:
                w.write_table(tables[t])
        (tmp_path / f"{name}-meta.json").write_text(json.dumps([meta, summary]))
        runs.append(name)
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        import pyarrow as pa
        from waitlab.experiments.report.html import write_html_report
        from waitlab.experiments.results import ROW_REFERENCES
        from waitlab.simulator.chrome_trace import write_chrome_trace
        from waitlab.simulator.export import write_table
        tmp = Path({str(tmp_path)!r})
        for name in {runs!r}:
            t = {{k: pa.ipc.open_file(tmp / f"{{name}}-{{k}}.arrow").read_all() for k in {list(TABLES)!r}}}
            meta, summary = json.loads((tmp / f"{{name}}-meta.json").read_text())
            out = tmp / f"out-{{name}}"
            out.mkdir()
            write_chrome_trace(t["events"], t["waits"], meta, out / "trace.json", max_events=50)
            write_html_report(out, meta, summary, t["events"], t["waits"], t["ranks"], t["ledger"])
            for k in {list(TABLES)!r}:
                write_table(t[k], out / f"{{k}}.parquet", meta, int64=ROW_REFERENCES if k == "events" else ())
        print(json.dumps(sorted(m for m in sys.modules if m == "pandas" or m.startswith("pandas."))))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in runs:
        assert (tmp_path / f"out-{name}" / "report.html").is_file()
        assert pq.read_table(tmp_path / f"out-{name}" / "events.parquet").num_rows == \
            pq.read_metadata(folders[name] / "events.parquet").num_rows
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []  # no pandas module was imported
