"""The numpy implementations of ``records_to_ops`` and of the event table's call paths that the one-pass C helper
(``native/waitlab_records.c``, issue 25) replaced, kept as the independent method its tests compare with."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable, seq_within_rank
from waitlab.models.vocabulary import CODE
from waitlab.simulator.program_records import FLAG_CAUSE, FLAG_INJECTED, Records, _site_name


def reference_records_to_ops(rec: Records, resolved: dict[int, str], *, callsite_regions: str = "auto",
                             min_compute: float = 0.0) -> tuple[OpTable, Any, Any, Any, Any]:
    """Operations of a measured run: layer records plus the compute between them.

    Parameters
    ----------
    rec : Records
    resolved : dict
        ``file:line`` of call-site offsets (``resolve_sites``).
    callsite_regions : {"auto", "always", "never"}
        Wrap a compute row in a region named after its two call sites: outside user
        regions only (auto), always, or never.
    min_compute : float
        Gaps between records up to this many seconds are not compute rows.
    """
    log, arg = rec.log, rec.arg
    rank = log["rank"].astype(np.int64)
    code = log["code"].astype(np.int64)
    n = rank.size
    is_init, is_fin = code == CODE["init"], code == CODE["finalize"]
    if not (np.array_equal(np.flatnonzero(is_init), np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]]))
            and is_fin.sum() == rec.n_ranks):
        raise SimulationError("the measurement layer's records are not framed by MPI_Init and MPI_Finalize")
    # Gap before each record (from the previous record's exit on the same rank).
    prev_exit = np.r_[0.0, log["t_exit"][:-1]]
    gap = np.where(is_init, 0.0, log["t_enter"] - prev_exit)
    gap = np.where(gap > min_compute, gap, 0.0)
    body = ~is_init & ~is_fin  # records that become OpTable rows
    has_gap = gap > 0
    # user-region depth before each record
    enter, leave = code == CODE["enter"], code == CODE["leave"]
    delta = enter.astype(np.int64) - leave.astype(np.int64)
    csum = np.cumsum(delta)
    start = np.flatnonzero(is_init)
    base = np.repeat(np.r_[0, csum][start], np.diff(np.r_[start, n]))
    depth_before = csum - delta - base
    if callsite_regions == "never":
        wrap = np.zeros(n, bool)
    elif callsite_regions == "always":
        wrap = has_gap.copy()
    elif callsite_regions == "auto":
        wrap = has_gap & (depth_before == 0)
    else:
        raise InputError("<scenario>", "application.callsite_regions", f"unknown value {callsite_regions!r}",
                         "auto, always or never")
    # Rows per record: [enter site] [compute] [leave site] [record itself unless init/finalize]; each column is
    # filled by scattering per-record values to the rows of one role (no per-row role tests)
    n_rows = has_gap.astype(np.int64) + 2 * wrap.astype(np.int64) + body.astype(np.int64)
    ends = np.cumsum(n_rows)
    total = int(ends[-1]) if n else 0
    first = ends - n_rows
    rec_rows = (ends - 1)[body]  # role 3: the record itself
    gap_rows = (first + wrap)[has_gap]  # role 1: the compute before it
    enter_rows, leave_rows = first[wrap], first[wrap] + 2  # roles 0 and 2: the call-site region around the compute
    t_rec0, t_rec1 = log["t_enter"], log["t_exit"]
    flags = arg["flags"][body]
    # call-site names
    site = arg["site"]
    names = list(rec.names)
    name_col = np.full(total, -1, np.int32)
    name_col[rec_rows] = arg["name"][body]
    if wrap.any():
        wi = np.flatnonzero(wrap)
        pairs = np.stack([np.r_[0, site[:-1]][wi], site[wi]], axis=1)
        uniq, first_at, inv = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        pair_id = np.empty(len(uniq), np.int32)
        for j in np.argsort(first_at).tolist():  # distinct (previous site, site) pairs, named in order of appearance
            k0, k1 = int(uniq[j, 0]), int(uniq[j, 1])
            a = resolved.get(k0, hex(k0)) if k0 else "start"
            b = resolved.get(k1, hex(k1)) if k1 else "end"
            nm = _site_name(a, b)
            if nm not in names:
                names.append(nm)
            pair_id[j] = names.index(nm)
        ids = pair_id[inv.ravel()]
        name_col[enter_rows] = ids
        name_col[leave_rows] = ids
    row_code = np.full(total, CODE["compute"], np.int8)
    row_code[rec_rows] = code[body]
    row_code[enter_rows] = CODE["enter"]
    row_code[leave_rows] = CODE["leave"]
    t_enter = np.empty(total)
    t_exit = np.empty(total)
    t_enter[rec_rows], t_exit[rec_rows] = t_rec0[body], t_rec1[body]
    t_enter[gap_rows], t_exit[gap_rows] = prev_exit[has_gap], t_rec0[has_gap]
    t_enter[enter_rows] = t_exit[enter_rows] = prev_exit[wrap]
    t_enter[leave_rows] = t_exit[leave_rows] = t_rec0[wrap]
    value = np.zeros(total)
    value[gap_rows] = t_rec0[has_gap] - prev_exit[has_gap]
    value[rec_rows] = arg["value"][body]
    cols: dict[str, npt.NDArray[Any]] = {
        "rank": np.repeat(log["rank"], n_rows).astype(np.int32),
        "code": row_code,
        "step": np.repeat(arg["step"], n_rows).astype(np.int32),
        "name": name_col,
        "value": value,
        "value2": _scatter(total, rec_rows, arg["value2"][body], 0.0, np.float64),
        "peer": _scatter(total, rec_rows, arg["peer"][body], -1, np.int32),
        "tag": _scatter(total, rec_rows, arg["tag"][body], 0, np.int32),
        "cause": np.full(total, -1, np.int64),
        "excess": np.zeros(total, np.float64),
    }
    cols["seq"] = seq_within_rank(cols["rank"], rec.n_ranks)
    cols["comm"] = _scatter(total, rec_rows, arg["comm"][body], 0, np.int32)
    # delays the program injected itself (WAITLAB_INJECT): compute rows whose whole value is a cause (imbalance)
    cause_rows = rec_rows[(flags & FLAG_CAUSE) != 0]
    cols["cause"][cause_rows] = np.arange(cause_rows.size)
    cols["excess"][cause_rows] = cols["value"][cause_rows]
    ledger = Ledger(rank=cols["rank"][cause_rows].copy(), region=cols["name"][cause_rows].copy(),
                    step=cols["step"][cause_rows].copy(), seconds=cols["value"][cause_rows].copy(),
                    kind=np.full(cause_rows.size, CAUSE_KINDS.index("imbalance"), np.int8))
    ops = OpTable(n_ranks=rec.n_ranks, names=tuple(names), ledger=ledger, comms=rec.comms, **cols)
    record = np.full(total, -1, np.int64)
    record[rec_rows] = np.flatnonzero(body)
    injected = np.zeros(total, bool)
    injected[rec_rows] = (flags & FLAG_INJECTED) != 0
    return ops, t_enter, t_exit, record, injected

def _scatter(total: int, rows: npt.NDArray[np.int64], values: npt.NDArray[Any], default: float,
             dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A column of ``total`` rows: ``values`` at ``rows``, ``default`` elsewhere."""
    out = np.full(total, default, dtype)
    out[rows] = values
    return out


def reference_paths(n: int, parent: npt.NDArray[np.signedinteger[Any]], is_region: npt.NDArray[np.bool_],
           name: npt.NDArray[np.int32], names: tuple[str, ...], depth_out: npt.NDArray[np.int16]
           ) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Call-path ids (categorical codes) and depth per output row, level by level (``simulator/timeline.py``'s
    numpy version before issue 25)."""
    path_names: list[str] = [""]
    path_of_row = np.zeros(n, np.int64)  # 0 = "" (top level)
    region_rows = np.flatnonzero(is_region)
    # Region depth (1 = top-level region) by walking parents level by level.
    level = np.zeros(n, np.int64)
    todo = region_rows
    lvl = 1
    assigned = np.zeros(n, bool)
    while todo.size:
        par = parent[todo]
        ready = (par < 0) | assigned[np.maximum(par, 0)]
        rows = todo[ready]
        par_path = np.where(parent[rows] >= 0, path_of_row[np.maximum(parent[rows], 0)], 0)
        key = par_path * (len(names) + 1) + name[rows]
        uniq, inv = np.unique(key, return_inverse=True)
        base = len(path_names)
        for u in uniq.tolist():
            pp, nm = divmod(u, len(names) + 1)
            prefix = path_names[pp]
            path_names.append(f"{prefix}>{names[nm]}" if prefix else names[nm])
        path_of_row[rows] = base + inv
        level[rows] = lvl
        assigned[rows] = True
        todo = todo[~ready]
        lvl += 1
    leaf = ~is_region
    path_of_row[leaf] = np.where(parent[leaf] >= 0, path_of_row[np.maximum(parent[leaf], 0)], 0)
    depth_out[:] = np.where(is_region, level - 1, np.where(parent >= 0, level[np.maximum(parent, 0)], 0))
    # Names may contain '>' themselves (e.g. LARED-S's "EOS_Match>If_970"), so two call paths can spell
    # the same string: make the categories unique.
    uniq_names, canon = np.unique(np.array(path_names, dtype=object), return_inverse=True)
    return canon[path_of_row].astype(np.int64), [str(x) for x in uniq_names]
