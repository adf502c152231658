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
    """Read and merge the per-rank files the layer wrote (global name ids, row-indexed vectors).

    The binary files are read straight into the merged arrays; region names and communicators are renumbered
    from each rank's ids to global ones in one lookup per column."""
    sizes = []
    for r in range(n_ranks):
        n_log = (out_dir / f"r{r}.log").stat().st_size // LOG_DTYPE.itemsize
        n_arg = (out_dir / f"r{r}.arg").stat().st_size // ARG_DTYPE.itemsize
        if n_log != n_arg or n_log < 2:
            raise SimulationError(f"the measurement layer's files of rank {r} are truncated ({out_dir})")
        sizes.append(n_log)
    ends = np.cumsum(sizes, dtype=np.int64)
    log = np.empty(int(ends[-1]) if n_ranks else 0, LOG_DTYPE)
    arg = np.empty(log.size, ARG_DTYPE)
    names: dict[str, int] = {}
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    comms: dict[tuple[int, ...], int] = {}
    name_luts: list[npt.NDArray[np.int32]] = []
    comm_luts: list[npt.NDArray[np.int32]] = []
    for r in range(n_ranks):
        a, b = int(ends[r]) - sizes[r], int(ends[r])
        for path, out in ((out_dir / f"r{r}.log", log[a:b]), (out_dir / f"r{r}.arg", arg[a:b])):
            with path.open("rb") as f:
                if f.readinto(out.data.cast("B")) != out.nbytes:
                    raise SimulationError(f"the measurement layer's files of rank {r} are truncated ({out_dir})")
        local: dict[int, int] = {}
        for line in (out_dir / f"r{r}.names").read_text().splitlines():
            sid, _, nm = line.partition("\t")
            local[int(sid)] = names.setdefault(nm, len(names))
        lut = np.full(max(local, default=-1) + 2, -1, np.int32)  # local id -> global id; last entry: -1 for -1
        for li, g in local.items():
            lut[li] = g
        name_luts.append(lut)
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
        table = np.zeros(max(comm_lut) + 1, np.int32)
        for local_id, global_id in comm_lut.items():
            table[local_id] = global_id
        comm_luts.append(table)
    rank_of = np.repeat(np.arange(n_ranks), sizes)
    for col, luts, what in (("name", name_luts, "names"), ("comm", comm_luts, "comms")):
        size = np.array([t.size for t in luts], np.int64)
        given = arg[col].astype(np.int64)
        if col == "name":  # -1 (no name) reads each rank's last entry, which is -1
            size -= 1
            bad = np.flatnonzero((given < -1) | (given >= size[rank_of]))
            given = np.where(given == -1, size[rank_of], given)
        else:
            bad = np.flatnonzero((given < 0) | (given >= size[rank_of]))
        if bad.size:
            r = int(rank_of[bad[0]])
            raise SimulationError(f"the measurement layer's records of rank {r} use a {col} id that r{r}.{what} "
                                  f"does not list ({out_dir})")
        if len(names if col == "name" else comms):
            offsets = np.r_[0, np.cumsum([t.size for t in luts])[:-1]]
            arg[col] = np.concatenate(luts)[offsets[rank_of] + given]
    return Records(n_ranks, log, arg, tuple(sorted(names, key=names.__getitem__)), vectors,
                   tuple(sorted(comms, key=comms.__getitem__)))


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
    uniq = np.unique(offsets[offsets != 0]).tolist()
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
        resolved = resolve_sites(binary, site) if binary is not None else {}
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
    is_rec = record >= 0
    # v-collective counts: keyed by (rank, code, occurrence)
    vectors = VectorStore()
    vrows = np.flatnonzero(is_rec & np.isin(row_code, codes_of(V_ACTIONS)))
    if vrows.size:
        occ = occurrence(ops)
        rec_start = np.r_[0, np.cumsum(np.bincount(rank, minlength=rec.n_ranks))[:-1]]
        for i in vrows.tolist():
            r = int(cols["rank"][i])
            local = int(record[i] - rec_start[r])
            vec = rec.vectors.get((r, local))
            if vec is not None:
                vectors.put(r, int(row_code[i]), int(occ[i]), *vec)
    return ProgramRun(ops, t_enter, t_exit, vectors, record, injected)


def _scatter(total: int, rows: npt.NDArray[np.int64], values: npt.NDArray[Any], default: float,
             dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A column of ``total`` rows: ``values`` at ``rows``, ``default`` elsewhere."""
    out = np.full(total, default, dtype)
    out[rows] = values
    return out
