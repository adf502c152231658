"""trace.json is built column-wise (a template filled in C, issue 25: waitlab's own cost around a program run); its
text is checked against records written one by one with Python's own formatting (the independent method)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from waitlab.errors import SimulationError
from waitlab.simulator.chrome_trace import chrome_trace_text, to_ns, us_text
from waitlab.simulator.native_text import Label, Us, text_rows
from waitlab.simulator.program_records import ARG_DTYPE, LOG_DTYPE, read_records


def test_native_us_is_us_text() -> None:
    rng = np.random.default_rng(7)
    ns = np.r_[0, 1, 999, 1000, 1001, 10**15 - 1, -1, -1000, -1001, 2**63 - 1, -2**63, rng.integers(0, 10**13, 500)]
    assert text_rows([Us(ns)], ns.size).split(",\n") == us_text(ns)


def _python_record(ev: pd.Series, e_ns: int, x_ns: int) -> str:
    """One slice as the trace writer wrote it before (one f-string per event)."""
    name = ev["region"] if ev["kind"] == "region" else ev["op"]
    args = f'{{"step":{ev["step"]}'
    if ev["peer"] >= 0:
        args += f',"peer":{ev["peer"]}'
    if ev["bytes"] > 0:
        args += f',"bytes":{ev["bytes"]}'
    if ev["kind"] == "mpi" and ev["tag"] >= 0:
        args += f',"tag":{ev["tag"]}'
    if ev["excess"] > 0:
        args += f',"injected_excess_s":{float(ev["excess"])!r}'
    ts, dur = us_text(np.array([e_ns, x_ns - e_ns]))
    return (f'{{"name":{json.dumps(str(name))},"cat":{json.dumps(str(ev["kind"]))},"ph":"X","ts":{ts},"dur":{dur},'
            f'"pid":0,"tid":{ev["rank"]},"args":{args}}}}}')


def test_slices_match_records_written_one_by_one() -> None:
    kinds = ["region", "compute", "mpi", "mpi", "mpi"]
    ev = pd.DataFrame({
        "rank": np.array([0, 0, 0, 1, 1], np.int32), "kind": pd.Categorical(kinds),
        "op": pd.Categorical(["region", "compute", "isend", "irecv", "allreduce"]),
        "region": pd.Categorical(["sol\"ve", "", "", "", "\u00e9t\u00e9"]),
        "step": np.array([0, 0, 1, -1, 2], np.int32),
        "enter": [0.0, 1e-9, 0.5, 0.25, 1.0], "exit": [1.0, 0.5, 0.5000001, 0.75, 1.5],
        "peer": np.array([-1, -1, 1, 0, 0], np.int32), "tag": np.array([0, 0, 7, -1, 3], np.int32),
        "bytes": np.array([0, 0, 800, 0, 8], np.int64), "excess": [0.0, 0.1 + 0.2, 0.0, 0.0, 1e-17],
        "match": np.array([-1, -1, 5, 5, 0], np.int64), "done": np.full(5, -1, np.int64),
    })  # fmt: skip
    text = chrome_trace_text(ev, pd.DataFrame({"event": [3], "rank": [1], "pattern": pd.Categorical(["late_sender"]),
                                               "wait": [0.125], "peer_rank": [0]}), {"scenario": "t"})
    lines = text.split(",\n")
    e_ns, x_ns = to_ns(ev["enter"].to_numpy()), np.maximum(to_ns(ev["exit"].to_numpy()), to_ns(ev["enter"].to_numpy()))
    for i in range(len(ev)):
        assert _python_record(ev.iloc[i], int(e_ns[i]), int(x_ns[i])) in lines
    assert '{"name":"wait: late_sender","cat":"wait","ph":"X","ts":250000.0002,"dur":125000.0002,"pid":0,"tid":1,' \
           '"cname":"terrible","args":{"peer_rank":0}}' in lines
    assert '{"name":"message","cat":"message","ph":"s","id":5,"ts":500000.0002,"pid":0,"tid":0}' in lines
    json.loads(text)


def _rank_files(folder, r: int, names: str, name_ids: list[int]) -> None:
    log = np.zeros(len(name_ids), LOG_DTYPE)
    log["rank"] = r
    arg = np.zeros(len(name_ids), ARG_DTYPE)
    arg["name"] = name_ids
    log.tofile(folder / f"r{r}.log")
    arg.tofile(folder / f"r{r}.arg")
    (folder / f"r{r}.names").write_text(names)
    (folder / f"r{r}.vec").write_text("")
    (folder / f"r{r}.comms").write_text("")


def test_records_name_ids_become_global(tmp_path) -> None:
    _rank_files(tmp_path, 0, "0\tsolve\n1\thalo\n", [-1, 0, 1, -1])
    _rank_files(tmp_path, 1, "0\thalo\n", [-1, 0, 0, -1])
    rec = read_records(tmp_path, 2)
    assert rec.names == ("solve", "halo")
    assert rec.arg["name"].tolist() == [-1, 0, 1, -1, -1, 1, 1, -1]


def test_a_name_id_the_rank_does_not_list_is_one_error(tmp_path) -> None:
    _rank_files(tmp_path, 0, "0\tsolve\n", [-1, 0, -1])
    _rank_files(tmp_path, 1, "0\thalo\n", [-1, 1, -1])  # id 1 is not in r1.names
    with pytest.raises(SimulationError, match=r"rank 1 use a name id that r1\.names does not list"):
        read_records(tmp_path, 2)


def test_random_slices_match_records_written_one_by_one() -> None:
    """Every slice of a random table (missing and non-ASCII labels, extreme integers, excess) as Python writes it."""
    rng = np.random.default_rng(25)
    n = 400
    kinds = rng.choice(["region", "compute", "mpi"], n)
    big = np.iinfo(np.int64)
    ev = pd.DataFrame({
        "rank": rng.integers(0, 9, n).astype(np.int32), "kind": pd.Categorical(kinds),
        "op": pd.Categorical(rng.choice(["region", "compute", "send", "recv", "allreduce"], n)),
        "region": pd.Categorical(rng.choice(["a\"b", "\u00e9t\u00e9", "x\\y", None], n)),
        "step": rng.integers(-1, 40, n).astype(np.int32),
        "enter": rng.random(n) * 100, "peer": rng.integers(-2, 9, n).astype(np.int32),
        "tag": rng.integers(-1, 2**31 - 1, n).astype(np.int32),
        "bytes": rng.choice([0, 1, big.max, big.min, 10**12], n).astype(np.int64),
        "excess": np.where(rng.random(n) < 0.2, rng.random(n), 0.0),
        "match": np.full(n, -1, np.int64), "done": np.full(n, -1, np.int64),
    })  # fmt: skip
    ev["exit"] = ev["enter"] + rng.random(n)
    lines = set(chrome_trace_text(ev, pd.DataFrame({"event": np.zeros(0, np.int64), "rank": np.zeros(0, np.int32),
                                                    "pattern": pd.Categorical([]), "wait": np.zeros(0),
                                                    "peer_rank": np.zeros(0, np.int32)}), {"scenario": "r"})
                .rsplit("\n],", 1)[0].split(",\n"))  # the records, without the trailer
    e_ns, x_ns = to_ns(ev["enter"].to_numpy()), np.maximum(to_ns(ev["exit"].to_numpy()), to_ns(ev["enter"].to_numpy()))
    for i in range(n):
        row = ev.iloc[i].copy()
        if pd.isna(row["region"]):  # a missing label is the last category (numpy's index -1), as before
            row["region"] = ev["region"].cat.categories[-1]
        assert _python_record(row, int(e_ns[i]), int(x_ns[i])) in lines


def test_a_label_code_outside_its_labels_is_an_error() -> None:
    with pytest.raises(SimulationError, match="outside its labels"):
        text_rows([Label(np.array([0, 2]), ["a", "b"])], 2)
