"""Exports of the event table: Parquet/CSV with run metadata, Chrome/Perfetto trace JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: Largest event table exported as a Chrome trace (the JSON grows ~150 bytes per event).
CHROME_MAX_EVENTS = 1_000_000


def write_table(df: pd.DataFrame, path: Path, metadata: dict[str, Any], csv: bool = True) -> None:
    """Write ``df`` as Parquet (metadata under the key ``waitlab``) and, optionally, CSV beside it."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"waitlab"] = json.dumps(metadata, sort_keys=True).encode()
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")
    if csv:
        df.to_csv(path.with_suffix(".csv"), index=False, float_format="%.9f", lineterminator="\n")


def read_table(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a table written by :func:`write_table` and its waitlab metadata."""
    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(b"waitlab", b"{}"))
    return table.to_pandas(), meta


def chrome_trace(events: pd.DataFrame, waits: pd.DataFrame, metadata: dict[str, Any]) -> dict[str, Any]:
    """A Chrome/Perfetto trace: one track per rank, regions nested, messages as flows, waits as slices.

    Times are microseconds of simulated time.
    """
    ts = (events["enter"].to_numpy() * 1e6).tolist()
    dur = ((events["exit"].to_numpy() - events["enter"].to_numpy()) * 1e6).tolist()
    rank = events["rank"].tolist()
    kind = events["kind"].astype(str).tolist()
    op = events["op"].astype(str).tolist()
    region = events["region"].astype(str).tolist()
    step = events["step"].tolist()
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"waitlab: {metadata.get('scenario', '')}"}}
    ]
    for r in sorted(set(rank)):
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}})
    for i in range(len(ts)):
        name = region[i] if kind[i] == "region" else op[i]
        out.append({"name": name, "cat": kind[i], "ph": "X", "ts": ts[i], "dur": dur[i], "pid": 0, "tid": rank[i],
                    "args": {"step": step[i]}})
    w_ev = waits["event"].to_numpy()
    w_ts = (events["enter"].to_numpy()[w_ev] * 1e6).tolist()
    w_dur = (waits["wait"].to_numpy() * 1e6).tolist()
    for j, pat in enumerate(waits["pattern"].astype(str).tolist()):
        out.append({"name": f"wait: {pat}", "cat": "wait", "ph": "X", "ts": w_ts[j], "dur": w_dur[j], "pid": 0,
                    "tid": int(waits["rank"].iat[j]), "cname": "terrible",
                    "args": {"peer_rank": int(waits["peer_rank"].iat[j])}})
    # Messages as flow arrows from the send to the operation that completed the receive.
    is_send = np.isin(events["op"].astype(str).to_numpy(), ["send", "isend"])
    is_recv = np.isin(events["op"].astype(str).to_numpy(), ["recv", "irecv"])
    match = events["match"].to_numpy()
    done = events["done"].to_numpy()
    recv_rows = np.flatnonzero(is_recv)
    recv_of = dict(zip(match[recv_rows].tolist(), recv_rows.tolist(), strict=True))
    for s in np.flatnonzero(is_send).tolist():
        m = int(match[s])
        rr = recv_of.get(m)
        if rr is None:
            continue
        end = int(done[rr]) if done[rr] >= 0 else rr
        out.append({"name": "message", "cat": "message", "ph": "s", "id": m, "ts": ts[s], "pid": 0, "tid": rank[s]})
        out.append({"name": "message", "cat": "message", "ph": "f", "bp": "e", "id": m,
                    "ts": ts[end] + dur[end], "pid": 0, "tid": rank[end]})
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": metadata}


def write_chrome_trace(events: pd.DataFrame, waits: pd.DataFrame, metadata: dict[str, Any], path: Path) -> bool:
    """Write the Chrome trace unless the table is too large; return whether it was written."""
    if len(events) > CHROME_MAX_EVENTS:
        return False
    with path.open("w") as fh:
        json.dump(chrome_trace(events, waits, metadata), fh, separators=(",", ":"))
    return True
