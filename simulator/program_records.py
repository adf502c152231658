"""The measurement layer's records of a real MPI program, read and turned into operations.

* :func:`read_records` reads the layer's per-rank files (global region-name and communicator ids);
* :func:`records_to_ops` makes an :class:`~waitlab.models.ops.OpTable` plus enter/exit times, so
  :func:`waitlab.simulator.timeline.build_events` gives the standard event table.  Compute between two recorded
  calls becomes a ``compute`` row; outside user regions it is wrapped in a call-site region named
  ``@file.c:L1-L2`` (the source lines of the two calls, from the program's debug information).  Delays the
  program injected with ``WAITLAB_INJECT`` become compute rows whose whole value is a cause of the ledger.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable, seq_within_rank
from waitlab.models.vocabulary import CODE, V_ACTIONS, codes_of
from waitlab.simulator.rma_records import check_rma_records
from waitlab.simulator.trace import VectorStore, occurrence

LOG_DTYPE = np.dtype([("rank", "<i4"), ("code", "<i4"), ("t_enter", "<f8"), ("t_exit", "<f8")])
ARG_DTYPE = np.dtype([("peer", "<i4"), ("tag", "<i4"), ("name", "<i4"), ("comm", "<i4"), ("step", "<i4"),
                      ("flags", "<i4"), ("value", "<f8"), ("value2", "<f8"), ("site", "<u8")])
#: Flags of a record: executed from the injection schedule; a delay the program injected itself (WAITLAB_INJECT).
FLAG_INJECTED = 1
FLAG_CAUSE = 2

#: Prefix of call-site region names (user region names never start with it).
SITE_PREFIX = "@"


@dataclass(frozen=True)
class Records:
    """The layer's records of all ranks, sorted by (rank, record index), init/finalize included."""

    n_ranks: int
    log: npt.NDArray[np.void]
    arg: npt.NDArray[np.void]
    names: tuple[str, ...]
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
    #: members (world ranks, in communicator-rank order) of communicators 1, 2, ... (``arg["comm"]`` is global)
    comms: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return int(self.log.size)


def read_records(out_dir: Path, n_ranks: int) -> Records:
    """Read and merge the per-rank files the layer wrote (global name ids, row-indexed vectors)."""
    logs, args = [], []
    names: dict[str, int] = {}
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    comms: dict[tuple[int, ...], int] = {}
    for r in range(n_ranks):
        log = np.fromfile(out_dir / f"r{r}.log", LOG_DTYPE)
        arg = np.fromfile(out_dir / f"r{r}.arg", ARG_DTYPE)
        if log.size != arg.size or log.size < 2:
            raise SimulationError(f"the measurement layer's files of rank {r} are truncated ({out_dir})")
        local: dict[int, int] = {}
        for line in (out_dir / f"r{r}.names").read_text().splitlines():
            sid, _, nm = line.partition("\t")
            local[int(sid)] = names.setdefault(nm, len(names))
        if local:
            lut = np.full(max(local) + 2, -1, np.int32)
            for li, g in local.items():
                lut[li] = g
            arg["name"] = np.where(arg["name"] >= 0, lut[np.maximum(arg["name"], 0)], -1)
        for line in (out_dir / f"r{r}.vec").read_text().splitlines():
            words = line.split()
            op, n = int(words[0]), int(words[1])
            nums = np.array(words[2:], np.int64)
            vectors[(r, op)] = (nums[:n], nums[n:2 * n])
        # the layer numbers communicators per rank: one global id per member list (MPI_COMM_WORLD's is 0)
        comm_lut = {0: 0}
        for line in (out_dir / f"r{r}.comms").read_text().splitlines():
            ids = [int(x) for x in line.split()]
            comm_lut[ids[0]] = comms.setdefault(tuple(ids[1:]), len(comms) + 1)
        if len(comm_lut) > 1:
            table = np.zeros(max(comm_lut) + 1, np.int32)
            for local_id, global_id in comm_lut.items():
                table[local_id] = global_id
            arg["comm"] = table[arg["comm"]]
        logs.append(log)
        args.append(arg)
    return Records(n_ranks, np.concatenate(logs), np.concatenate(args),
                   tuple(sorted(names, key=names.__getitem__)), vectors, tuple(sorted(comms, key=comms.__getitem__)))


#: smpif90/smpicc compile a rewritten copy named ``<source>_XXXXXXXXXX<suffix>`` (mktemp in the wrapper script)
_TEMP_COPY = re.compile(r"^(?P<orig>.+\.[A-Za-z0-9]+)_[A-Za-z0-9]{10}\.[A-Za-z0-9]+$")


def original_name(base: str) -> str:
    """The user's source file name behind SMPI's temporary copy (``jac.f90_nQzo6dgxMW.f90`` -> ``jac.f90``).

    >>> original_name("jac.f90_nQzo6dgxMW.f90"), original_name("main.c")
    ('jac.f90', 'main.c')
    """
    m = _TEMP_COPY.match(base)
    return m.group("orig") if m else base


def resolve_sites(binary: Path, offsets: npt.NDArray[np.uint64]) -> dict[int, str]:
    """``file:line`` (or ``function+0xoff`` without debug information) of call-site offsets."""
    uniq = sorted({int(x) for x in offsets.tolist() if x})
    out: dict[int, str] = {}
    tool = shutil.which("addr2line")
    if uniq and tool is not None:
        proc = subprocess.run([tool, "-f", "-e", str(binary), *(hex(x - 1) for x in uniq)], capture_output=True,
                              text=True)
        lines = proc.stdout.splitlines() if proc.returncode == 0 else []
        if len(lines) == 2 * len(uniq):
            for i, off in enumerate(uniq):
                func, loc = lines[2 * i].strip(), lines[2 * i + 1].strip()
                file, _, line = loc.partition(":")
                line = line.split()[0] if line else "0"
                if file not in ("??", "") and line not in ("0", "?"):
                    out[off] = f"{original_name(os.path.basename(file))}:{line}"
                elif func not in ("??", ""):
                    out[off] = f"{func}+{hex(off)}"
    for off in uniq:
        out.setdefault(off, hex(off))
    return out


def _site_name(a: str, b: str) -> str:
    fa, _, _la = a.rpartition(":")
    fb, _, lb = b.rpartition(":")
    if fa and fa == fb:
        return f"{SITE_PREFIX}{a}-{lb}"
    return f"{SITE_PREFIX}{a}-{b}"


@dataclass(frozen=True)
class ProgramRun:
    """A measured run as operations and times, ready for :func:`~waitlab.simulator.timeline.build_events`."""

    ops: OpTable
    t_enter: npt.NDArray[np.float64]
    t_exit: npt.NDArray[np.float64]
    vectors: VectorStore
    #: per OpTable row: index of the layer record it came from (-1 for derived compute/call-site rows)
    record: npt.NDArray[np.int64]
    #: per OpTable row: True for rows the layer injected (schedule items)
    injected: npt.NDArray[np.bool_]


def records_to_ops(rec: Records, binary: Path | None, *, callsite_regions: str = "auto",
                   min_compute: float = 0.0) -> ProgramRun:
    """Operations of a measured run: layer records plus the compute between them.

    Parameters
    ----------
    rec : Records
    binary : Path, optional
        The program, to name call sites from its debug information.
    callsite_regions : {"auto", "always", "never"}
        Wrap a compute row in a region named after its two call sites: outside user
        regions only (auto), always, or never.
    min_compute : float
        Gaps between records up to this many seconds are not compute rows.
    """
    check_rma_records(rec.log, rec.arg, rec.comms, rec.n_ranks)  # one-sided calls: windows of MPI_COMM_WORLD only
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
    # Rows per record: [enter site] [compute] [leave site] [record itself unless init/finalize]
    n_rows = has_gap.astype(np.int64) + 2 * wrap.astype(np.int64) + body.astype(np.int64)
    total = int(n_rows.sum())
    first = np.r_[0, np.cumsum(n_rows)[:-1]]
    owner = np.repeat(np.arange(n), n_rows)
    pos = np.arange(total) - first[owner]
    # role of each row: 0 enter-site, 1 compute, 2 leave-site, 3 record
    w, g = wrap[owner], has_gap[owner]
    role = np.where(w, np.minimum(pos, 3), np.where(g & (pos == 0), 1, 3))
    # call-site names
    site = arg["site"]
    names = list(rec.names)
    name_col = np.full(total, -1, np.int32)
    if wrap.any():
        resolved = resolve_sites(binary, site) if binary is not None else {}
        prev_site = np.r_[0, site[:-1]]
        keys: dict[tuple[int, int], int] = {}
        wi = np.flatnonzero(wrap)
        ids = np.empty(wi.size, np.int32)
        for j, i in enumerate(wi.tolist()):
            k = (int(prev_site[i]), int(site[i]))
            if k not in keys:
                a = resolved.get(k[0], hex(k[0])) if k[0] else "start"
                b = resolved.get(k[1], hex(k[1])) if k[1] else "end"
                nm = _site_name(a, b)
                if nm in names:
                    keys[k] = names.index(nm)
                else:
                    names.append(nm)
                    keys[k] = len(names) - 1
            ids[j] = keys[k]
        site_id = np.full(n, -1, np.int32)
        site_id[wi] = ids
        name_col = np.where(role == 3, arg["name"][owner], np.where((role == 0) | (role == 2), site_id[owner], -1))
    else:
        name_col = np.where(role == 3, arg["name"][owner], -1).astype(np.int32)
    row_code = np.select([role == 0, role == 1, role == 2], [CODE["enter"], CODE["compute"], CODE["leave"]],
                         code[owner]).astype(np.int8)
    t_gap0 = prev_exit[owner]
    t_rec0, t_rec1 = log["t_enter"][owner], log["t_exit"][owner]
    t_enter = np.select([role == 0, role == 1, role == 2], [t_gap0, t_gap0, t_rec0], t_rec0)
    t_exit = np.select([role == 0, role == 1, role == 2], [t_gap0, t_rec0, t_rec0], t_rec1)
    is_rec = role == 3
    value = np.where(role == 1, t_rec0 - t_gap0, np.where(is_rec, arg["value"][owner], 0.0))
    cols: dict[str, npt.NDArray[Any]] = {
        "rank": rank[owner].astype(np.int32),
        "code": row_code,
        "step": arg["step"][owner].astype(np.int32),
        "name": name_col.astype(np.int32),
        "value": value.astype(np.float64),
        "value2": np.where(is_rec, arg["value2"][owner], 0.0),
        "peer": np.where(is_rec, arg["peer"][owner], -1).astype(np.int32),
        "tag": np.where(is_rec, arg["tag"][owner], 0).astype(np.int32),
        "cause": np.full(total, -1, np.int64),
        "excess": np.zeros(total, np.float64),
    }
    cols["seq"] = seq_within_rank(cols["rank"], rec.n_ranks)
    cols["comm"] = np.where(is_rec, arg["comm"][owner], 0).astype(np.int32)
    # delays the program injected itself (WAITLAB_INJECT): compute rows whose whole value is a cause (imbalance)
    cause_rows = np.flatnonzero(is_rec & ((arg["flags"][owner] & FLAG_CAUSE) != 0))
    cols["cause"][cause_rows] = np.arange(cause_rows.size)
    cols["excess"][cause_rows] = cols["value"][cause_rows]
    ledger = Ledger(rank=cols["rank"][cause_rows].copy(), region=cols["name"][cause_rows].copy(),
                    step=cols["step"][cause_rows].copy(), seconds=cols["value"][cause_rows].copy(),
                    kind=np.full(cause_rows.size, CAUSE_KINDS.index("imbalance"), np.int8))
    ops = OpTable(n_ranks=rec.n_ranks, names=tuple(names), ledger=ledger, comms=rec.comms, **cols)
    record = np.where(is_rec, owner, -1).astype(np.int64)
    injected = is_rec & ((arg["flags"][owner] & FLAG_INJECTED) != 0)
    # v-collective counts: keyed by (rank, code, occurrence)
    vectors = VectorStore()
    vrows = np.flatnonzero(is_rec & np.isin(row_code, codes_of(V_ACTIONS)))
    if vrows.size:
        occ = occurrence(ops)
        rec_start = np.r_[0, np.cumsum(np.bincount(rank, minlength=rec.n_ranks))[:-1]]
        for i in vrows.tolist():
            r = int(cols["rank"][i])
            local = int(owner[i] - rec_start[r])
            vec = rec.vectors.get((r, local))
            if vec is not None:
                vectors.put(r, int(row_code[i]), int(occ[i]), *vec)
    return ProgramRun(ops, t_enter.astype(np.float64), t_exit.astype(np.float64), vectors, record, injected)
