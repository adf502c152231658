"""The measurement layer's records of a real MPI program, read and turned into operations.

* :func:`read_records` reads the layer's per-rank files (global region-name and communicator ids);
* :func:`records_to_ops` makes an :class:`~waitlab.models.ops.OpTable` plus enter/exit times, so
  :func:`waitlab.simulator.timeline.build_events` gives the standard event table.  Compute between two recorded
  calls becomes a ``compute`` row; outside user regions it is wrapped in a call-site region named
  ``@file.c:L1-L2`` (the source lines of the two calls, from the program's debug information).  Delays the
  program injected with ``WAITLAB_INJECT`` become compute rows whose whole value is a cause of the ledger.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable
from waitlab.models.vocabulary import V_ACTIONS, codes_of
from waitlab.simulator.native_tables import ptr as _ptr
from waitlab.simulator.native_tables import tables_library
from waitlab.simulator.rma_records import check_rma_records
from waitlab.simulator.ti_vectors import VectorStore, occurrence

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


def _names_text(path: Path, rank: int, program: str) -> str:
    """A rank's ``r<rank>.names`` (``id<TAB>name`` lines), UTF-8: a region named in another encoding (a Latin-1
    string in the source) is one :class:`InputError` naming the program, not a name with U+FFFD in it."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[raw.rfind(b"\n", 0, exc.start) + 1:].split(b"\n", 1)[0].partition(b"\t")[2]
        raise InputError(program, "(region name)", f"rank {rank} named a region that is not UTF-8 text "
                         f"({line[:80]!r})", "write region names in UTF-8 (save the source file as UTF-8)") from None


def read_records(out_dir: Path, n_ranks: int, *, parts: int | None = None, program: str = "(program)") -> Records:
    """Read and merge the per-rank files the layer wrote (global name ids, row-indexed vectors).

    The small text files (names, vectors, communicators) are read first; then the binary files are read straight
    into the merged arrays and their region names and communicators renumbered from each rank's ids to global ones
    (``wl_records_renumber`` of ``native/waitlab_records.c``), by ``parts`` threads (default: :func:`fill_parts`),
    each on a contiguous range of ranks."""
    sizes = []
    for r in range(n_ranks):
        n_log = (out_dir / f"r{r}.log").stat().st_size // LOG_DTYPE.itemsize
        n_arg = (out_dir / f"r{r}.arg").stat().st_size // ARG_DTYPE.itemsize
        if n_log != n_arg or n_log < 2:
            raise SimulationError(f"the measurement layer's files of rank {r} are truncated ({out_dir})")
        sizes.append(n_log)
    ends = np.zeros(n_ranks + 1, np.int64)
    np.cumsum(sizes, out=ends[1:])
    log = np.empty(int(ends[-1]), LOG_DTYPE)
    arg = np.empty(log.size, ARG_DTYPE)
    names: dict[str, int] = {}
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    comms: dict[tuple[tuple[int, ...], int], int] = {}  # (members, ordinal among the communicators of them) -> id
    luts: tuple[list[npt.NDArray[np.int32]], list[npt.NDArray[np.int32]]] = ([], [])  # names, communicators
    for r in range(n_ranks):
        local: dict[int, int] = {}
        for line in _names_text(out_dir / f"r{r}.names", r, program).splitlines():
            sid, _, nm = line.partition("\t")
            local[int(sid)] = names.setdefault(nm, len(names))
        lut = np.full(max(local, default=-1) + 2, -1, np.int32)  # local id -> global id; last entry: -1 for -1
        for li, g in local.items():
            lut[li] = g
        luts[0].append(lut)
        for line in (out_dir / f"r{r}.vec").read_text().splitlines():
            words = line.split()
            op, n = int(words[0]), int(words[1])
            nums = np.array(words[2:], np.int64)
            vectors[(r, op)] = (nums[:n], nums[n:2 * n])
        # the layer numbers communicators per rank: one global id per member list (MPI_COMM_WORLD's is 0) and
        # ordinal (" #k" ends the line of the k-th other communicator of a member list a rank's point-to-point used:
        # MPI matches messages per communicator, so a duplicate of MPI_COMM_WORLD is another one)
        comm_lut = {0: 0}
        for line in (out_dir / f"r{r}.comms").read_text().splitlines():
            words = line.split()
            ordinal = int(words.pop()[1:]) if words and words[-1].startswith("#") else 0
            ids = [int(x) for x in words]
            comm_lut[ids[0]] = comms.setdefault((tuple(ids[1:]), ordinal), len(comms) + 1)
        table = np.zeros(max(comm_lut) + 1, np.int32)
        for local_id, global_id in comm_lut.items():
            table[local_id] = global_id
        luts[1].append(table)
    tables = []  # per field: (the ranks' tables end to end, each rank's table offset, each rank's table size)
    for field in (0, 1):
        size = np.array([t.size for t in luts[field]], np.int64) - (field == 0)  # a name table's last entry: -1
        offset = np.r_[0, np.cumsum([t.size for t in luts[field]])[:-1]].astype(np.int64)
        tables.append((np.concatenate(luts[field]) if luts[field] else np.zeros(1, np.int32), offset, size))
    lib = tables_library()
    cut = split_ranks(np.asarray(sizes, np.int64), parts if parts is not None else fill_parts(log.size))
    truncated: list[int] = []  # ranks whose binary files are shorter than their size said
    bad = [[-1] * (len(cut) - 1), [-1] * (len(cut) - 1)]  # per field and part: first record with an unknown id

    def read(j: int) -> None:
        for r in range(cut[j], cut[j + 1]):
            a, b = int(ends[r]), int(ends[r + 1])
            for path, out in ((out_dir / f"r{r}.log", log[a:b]), (out_dir / f"r{r}.arg", arg[a:b])):
                with path.open("rb") as f:
                    if f.readinto(out.data.cast("B")) != out.nbytes:
                        truncated.append(r)
                        return
        first, k = int(ends[cut[j]]), slice(cut[j], cut[j + 1])
        part_ends = ends[cut[j] + 1:cut[j + 1] + 1] - first
        for field, (table, offset, size) in enumerate(tables):
            part_offset, part_size = offset[k].copy(), size[k].copy()  # kept alive during the call
            found = lib.wl_records_renumber(_ptr(arg) + first * ARG_DTYPE.itemsize, _ptr(part_ends),
                                            cut[j + 1] - cut[j], field, _ptr(table), _ptr(part_offset),
                                            _ptr(part_size))
            bad[field][j] = found + first if found >= 0 else -1

    in_threads(read, len(cut) - 1)
    if truncated:
        raise SimulationError(f"the measurement layer's files of rank {min(truncated)} are truncated ({out_dir})")
    for field, (col, what) in enumerate((("name", "names"), ("comm", "comms"))):
        first_bad = [i for i in bad[field] if i >= 0]
        if first_bad:
            r = int(np.searchsorted(ends, min(first_bad), side="right")) - 1
            raise SimulationError(f"the measurement layer's records of rank {r} use a {col} id that r{r}.{what} "
                                  f"does not list ({out_dir})")
    return Records(n_ranks, log, arg, tuple(sorted(names, key=names.__getitem__)), vectors,
                   tuple(members for members, _ in sorted(comms, key=comms.__getitem__)))


def in_threads(work: Callable[[int], None], parts: int) -> None:
    """``work(0)`` here and ``work(1)`` .. ``work(parts - 1)`` in threads at the same time (the native library
    releases Python's lock during a call); the first exception of a thread is raised here."""
    errors: list[BaseException] = []

    def guarded(j: int) -> None:
        try:
            work(j)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(j,)) for j in range(1, parts)]
    for t in threads:
        t.start()
    try:
        work(0)
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


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


_CALLSITE_MODES = {"never": 0, "always": 1, "auto": 2}
#: The operation table's columns as ``wl_records_fill`` writes them (its argument order).
_OP_COLUMNS: tuple[tuple[str, type[np.generic]], ...] = (
    ("rank", np.int32), ("seq", np.int32), ("code", np.int8), ("step", np.int32), ("name", np.int32),
    ("value", np.float64), ("value2", np.float64), ("peer", np.int32), ("tag", np.int32), ("cause", np.int64),
    ("excess", np.float64), ("comm", np.int32))
#: The columns ``wl_records_fill`` writes only where they are not zero (it is given zeroed ones).
_SPARSE_COLUMNS = ("value2", "excess", "comm")
_FRAMING = "the measurement layer's records are not framed by MPI_Init and MPI_Finalize"
#: Records from which the fill runs in two threads (when the process may use two cores): below, starting a thread
#: costs more than it saves.
THREAD_RECORDS = 1_000_000


def fill_parts(n_records: int) -> int:
    """Threads the fill of ``n_records`` records runs in: 2 from :data:`THREAD_RECORDS` records on a machine whose
    process may use two cores or more, else 1 (the table does not depend on it)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 2 if n_records >= THREAD_RECORDS and cores >= 2 else 1


def split_ranks(rank_records: npt.NDArray[np.int64], parts: int) -> list[int]:
    """Boundaries (in ranks, 0 first, the number of ranks last) of up to ``parts`` contiguous ranges of whole ranks
    with about equal numbers of records: each inner boundary is the rank end nearest to its share."""
    ends = np.cumsum(rank_records)
    total = int(ends[-1]) if ends.size else 0
    cut = [0]
    for j in range(1, parts if rank_records.size else 1):
        k = int(np.argmin(np.abs(ends - total * j / parts))) + 1  # ranks in the first j parts
        if cut[-1] < k < rank_records.size:
            cut.append(k)
    return [*cut, int(rank_records.size)]


def _pair_names(pair_a: npt.NDArray[np.uint64], pair_b: npt.NDArray[np.uint64], binary: Path | None,
                names: list[str]) -> npt.NDArray[np.int32]:
    """Region-name id of each (previous site, site) pair (names appended to ``names`` in the pairs' order)."""
    resolved = resolve_sites(binary, np.r_[pair_a, pair_b]) if binary is not None and pair_a.size else {}
    index: dict[str, int] = {}
    for i, nm in enumerate(names):
        index.setdefault(nm, i)
    out = np.empty(pair_a.size, np.int32)
    for j, (k0, k1) in enumerate(zip(pair_a.tolist(), pair_b.tolist(), strict=True)):
        a = resolved.get(k0, hex(k0)) if k0 else "start"
        b = resolved.get(k1, hex(k1)) if k1 else "end"
        nm = _site_name(a, b)
        if nm not in index:
            index[nm] = len(names)
            names.append(nm)
        out[j] = index[nm]
    return out


def records_to_ops(rec: Records, binary: Path | None, *, callsite_regions: str = "auto",
                   min_compute: float = 0.0, parts: int | None = None) -> ProgramRun:
    """Operations of a measured run: layer records plus the compute between them.

    The rows are made in one pass over the records by ``native/waitlab_records.c`` (its comment has the rules);
    call sites are named once per distinct (previous site, site) pair, in order of first appearance.

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
    parts : int, optional
        Threads filling the table, each on a contiguous range of ranks (default: :func:`fill_parts`); the table
        is the same whatever their number.
    """
    check_rma_records(rec.log, rec.arg, rec.comms, rec.n_ranks)  # one-sided calls: windows of MPI_COMM_WORLD only
    mode = _CALLSITE_MODES.get(callsite_regions)
    if mode is None:
        raise InputError("<scenario>", "application.callsite_regions", f"unknown value {callsite_regions!r}",
                         "auto, always or never")
    lib = tables_library()
    log, arg = np.ascontiguousarray(rec.log), np.ascontiguousarray(rec.arg)
    n, cap, n_pairs = log.size, 1024, ctypes.c_int64(0)
    per_rank = np.zeros((3, max(rec.n_ranks, 1)), np.int64)  # records, rows and cause rows of each rank
    while True:  # the distinct site pairs: called again with room for all of them if there are more than cap
        pair_a, pair_b = np.zeros(cap, np.uint64), np.zeros(cap, np.uint64)
        total = lib.wl_records_count(_ptr(log), _ptr(arg), n, rec.n_ranks, mode, min_compute, _ptr(pair_a),
                                     _ptr(pair_b), cap, ctypes.byref(n_pairs), *(_ptr(x) for x in per_rank))
        if total < 0 or n_pairs.value <= cap:
            break
        cap = n_pairs.value
    if total == -1:
        raise SimulationError(_FRAMING)
    if total < 0:
        raise SimulationError("out of memory converting the measurement layer's records")
    pair_a, pair_b = pair_a[:n_pairs.value], pair_b[:n_pairs.value]
    names = list(rec.names)
    pair_name = _pair_names(pair_a, pair_b, binary, names)
    # columns the fill writes only where they are not zero: zeroed (np.zeros: calloc), so one that stays zero
    # throughout is never faulted in
    cols: dict[str, npt.NDArray[Any]] = {c: (np.zeros if c in _SPARSE_COLUMNS else np.empty)(total, t)
                                         for c, t in _OP_COLUMNS}
    t_enter, t_exit = np.empty(total), np.empty(total)
    record, injected = np.empty(total, np.int64), np.zeros(total, np.bool_)
    # each part: a contiguous range of whole ranks, starting at the row and cause number the ranks before it end
    # at (so the parts write exactly what one pass writes); the first part runs here, the others in threads (the
    # library releases Python's lock during a call)
    cut = split_ranks(per_rank[0, :rec.n_ranks], parts if parts is not None else fill_parts(n))
    starts = np.zeros((3, rec.n_ranks + 1), np.int64)
    np.cumsum(per_rank[:, :rec.n_ranks], axis=1, out=starts[:, 1:])
    pointers = (_ptr(pair_a), _ptr(pair_b), _ptr(pair_name), pair_a.size,
                *(_ptr(cols[c]) for c, _ in _OP_COLUMNS), _ptr(t_enter), _ptr(t_exit), _ptr(record), _ptr(injected))
    found = [0] * (len(cut) - 1)

    def fill(j: int) -> None:
        lo, hi, row0, cause0 = (int(x) for x in (starts[0, cut[j]], starts[0, cut[j + 1]], starts[1, cut[j]],
                                                 starts[2, cut[j]]))
        found[j] = lib.wl_records_fill(_ptr(log), _ptr(arg), lo, hi, row0, cause0, mode, min_compute, *pointers)

    in_threads(fill, len(cut) - 1)
    if min(found) < 0:
        raise SimulationError("out of memory converting the measurement layer's records")
    causes = sum(found)
    # delays the program injected itself (WAITLAB_INJECT): compute rows whose whole value is a cause (imbalance)
    cause_rows = np.flatnonzero(cols["cause"] >= 0) if causes else np.zeros(0, np.int64)
    ledger = Ledger(rank=cols["rank"][cause_rows], region=cols["name"][cause_rows],
                    step=cols["step"][cause_rows], seconds=cols["value"][cause_rows],
                    kind=np.full(cause_rows.size, CAUSE_KINDS.index("imbalance"), np.int8))
    ops = OpTable(n_ranks=rec.n_ranks, names=tuple(names), ledger=ledger, comms=rec.comms, **cols)
    row_code, rank = cols["code"], log["rank"]
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

