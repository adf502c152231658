"""Chrome/Perfetto trace: integer nanoseconds that no reader turns into overlapping slices (issue 14)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chrome_check import dropped_slices, legacy_ns, load_slices, modern_ns
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.simulator.chrome_trace import chrome_trace_text, to_ns, us_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_us_text_reads_back_exactly_both_ways():
    ns = np.array([0, 1, 999, 1000, 1001, 123456789, 477709413245, 10**15 - 1])
    for n, text in zip(ns.tolist(), us_text(ns), strict=True):
        assert modern_ns(text) == n and legacy_ns(text) == n
        assert round(float(text) * 1000) == n  # a reader that rounds gets the same integer


def test_three_decimal_text_is_what_breaks():
    """The reason for the extra digit: exact 3-decimal microseconds truncate 1 ns low in Perfetto's reader."""
    assert (1.0 + 1 / 1000.0) * 1000.0 < 1001  # the product of the doubles falls short
    assert modern_ns("1.001") == 1000
    assert modern_ns(us_text(np.array([1001]))[0]) == 1001


def _table(rows: list[tuple[int, str, str, float, float, int]]) -> pd.DataFrame:
    rank, kind, name, enter, exit_, parent = zip(*rows, strict=True)
    is_region = np.array(kind) == "region"
    return pd.DataFrame({
        "rank": np.asarray(rank, np.int32), "kind": pd.Categorical(kind),
        "op": pd.Categorical(np.where(is_region, "region", name)),
        "region": pd.Categorical(np.where(is_region, name, "")), "step": np.zeros(len(rank), np.int32),
        "enter": np.asarray(enter), "exit": np.asarray(exit_),
        "match": np.full(len(rank), -1, np.int64), "done": np.full(len(rank), -1, np.int64),
        "parent": np.asarray(parent, np.int64),
    })  # fmt: skip


durations = st.lists(st.one_of(st.just(0.0), st.floats(1e-9, 2e-3), st.floats(1e-9, 1e-6)), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(base=st.floats(0, 1e4), ranks=st.integers(1, 3),
       steps=st.lists(st.tuples(durations, st.floats(0, 1e-3), st.floats(0, 1)), min_size=1, max_size=6))
def test_synthetic_tables_never_overlap_after_rounding(base, ranks, steps):
    """Back-to-back regions with children that end exactly at their parent's end, then an MPI op with a wait."""
    rows: list[tuple[int, str, str, float, float, int]] = []
    waits = []
    for r in range(ranks):
        t = base + r * 1e-7
        for children, op_dur, frac in steps:
            reg = len(rows)
            rows.append((r, "region", "Solve", t, 0.0, -1))
            for d in children:
                rows.append((r, "compute", "compute", t, t + d, reg))
                t = t + d
            rows[reg] = (r, "region", "Solve", rows[reg][3], t, -1)
            rows.append((r, "mpi", "allreduce", t, t + op_dur, -1))
            waits.append((len(rows) - 1, r, frac * op_dur))
            t = t + op_dur
    events = _table(rows)
    w = pd.DataFrame({"event": [x[0] for x in waits], "rank": [x[1] for x in waits],
                      "pattern": pd.Categorical(["wait_at_nxn"] * len(waits)),
                      "wait": [x[2] for x in waits], "peer_rank": 0})
    text = chrome_trace_text(events, w, {"scenario": "synthetic"})
    n, drops = dropped_slices(text)
    assert n == len(events) + len(w) and drops == []
    # children nest in their parents, and every slice is the rounded event
    tracks = load_slices(text)
    enter, exit_ = to_ns(events["enter"].to_numpy()), to_ns(events["exit"].to_numpy())
    child = events["parent"].to_numpy() >= 0
    par = events["parent"].to_numpy()[child]
    assert np.all(enter[child] >= enter[par]) and np.all(exit_[child] <= exit_[par])
    got = sorted((s[0], s[1]) for r in range(ranks) for s in tracks[("0", str(r))] if s[3] != "wait: wait_at_nxn")
    assert got == sorted(zip(enter.tolist(), (exit_ - enter).tolist(), strict=True))


def _small(example: Path, folder: Path) -> Path:
    """The example with at most 8 ranks and 2 steps, written into ``folder`` (with the files it names)."""
    data = tomllib.loads(example.read_text())
    data["scenario"]["ranks"] = min(int(data["scenario"]["ranks"]), 8)
    data["application"]["steps"] = min(int(data["application"].get("steps", 2)), 2)
    for extra in example.parent.glob("*.txt"):
        shutil.copy(extra, folder / extra.name)
    out = folder / example.name
    out.write_text(_toml(data))
    return out


def _toml(data: dict, prefix: str = "") -> str:
    """A tiny TOML writer for the examples' plain tables (strings, numbers, booleans, lists, arrays of tables)."""
    scalars, tables, arrays = [], [], []
    for k, v in data.items():
        key = f'"{k}"' if "." in k else k
        if isinstance(v, dict):
            tables.append((key, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            arrays.append((key, v))
        else:
            scalars.append(f"{key} = {json.dumps(v)}")
    text = "\n".join(scalars) + "\n"
    for key, v in tables:
        text += f"[{prefix}{key}]\n" + _toml(v, f"{prefix}{key}.")
    for key, items in arrays:
        for item in items:
            text += f"[[{prefix}{key}]]\n" + _toml(item, f"{prefix}{key}.")
    return text


SCENARIOS = sorted(p.name for p in EXAMPLES.glob("*.toml") if "scenario" in tomllib.loads(p.read_text()))


@pytest.mark.simgrid
@pytest.mark.parametrize("name", SCENARIOS)
def test_example_traces_drop_no_slice(name, tmp_path):
    """Every example scenario, shrunk, through `waitlab run` and real SMPI: no slice of its trace.json overlaps."""
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")
    scenario = _small(EXAMPLES / name, tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "waitlab.cli", "run", str(scenario), "-o", str(out), "--no-png",
                           "--chrome"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    traces = sorted(out.rglob("trace.json"))
    assert traces, f"no trace.json under {out}"
    for trace in traces:
        n, drops = dropped_slices(trace.read_text())
        assert n > 0 and drops == [], drops[:5]
