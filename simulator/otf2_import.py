"""Read an OTF2 archive (e.g. recorded by Score-P) into :class:`waitlab.models.otf2_ops.TraceRecords`.

Definitions (locations, regions, communicators, clock) are read with Debian's ``python3-otf2``; the events
with a small C reader (``native/waitlab_otf2_reader.c``, built once with the system C compiler against the
``libotf2`` the bindings ship) that writes one fixed-size record per event, mapped here with numpy: the
bindings' per-event Python callbacks read about 0.3 M events/s, the C reader several million.

Locations are ranks through the MPI location group (``COMM_LOCATIONS`` of paradigm MPI: Score-P lists the
master thread of every MPI rank there, in rank order).  A process with several threads that recorded
events is refused (threads cannot be replayed; read as recorded, ``threads=True``, only the master threads are read),
so is an archive without MPI locations, or with events of a process the MPI location group does not list.
``CallingContextEnter``/``Leave`` records (Score-P with ``SCOREP_ENABLE_UNWINDING=true``) are read as the enter and
leave of their calling context's region.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import stat
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from waitlab.errors import InputError
from waitlab.models.otf2_records import (
    FINALIZE,
    INIT,
    MAX_TICKS,
    MPI,
    OTF2_RECORD,
    RECORD_KINDS,
    TRANSPARENT,
    UNSUPPORTED,
    USER,
    K,
    TraceRecords,
    clock_problem,
    region_label,
)
from waitlab.readers import not_a_file
from waitlab.simulator.build import NATIVE_DIR, build_native
from waitlab.simulator.otf2_export import _import_otf2
from waitlab.simulator.ti_files import ti_replay_hint

READER_SOURCE = NATIVE_DIR / "waitlab_otf2_reader.c"
#: One record of the C reader (``Rec`` in ``native/waitlab_otf2_reader.c``).
RECORD_DTYPE = np.dtype([("loc", "<u8"), ("time", "<u8"), ("d", "<u8"), ("e", "<u8"), ("kind", "<u4"),
                         ("a", "<u4"), ("b", "<u4"), ("c", "<u4")])
INIT_REGIONS = frozenset({"MPI_Init", "MPI_Init_thread"})
FINALIZE_REGIONS = frozenset({"MPI_Finalize"})
FIX = "the archive is truncated or damaged: record the run again (let it reach MPI_Finalize)"
#: How every OTF2 file (anchor aside) begins: a chunk header record (3), then the byte order ('B' or 'L').
CHUNK_STARTS = (b"\x03B", b"\x03L")


def check_archive_files(anchor: Path) -> None:
    """Refuse an archive whose definition or event files are not OTF2 files before OTF2 opens them: a missing global
    definition file (``traces.def`` beside an OTF2 anchor), a pipe or device (opening it would block, or never end)
    or a file that does not begin as every OTF2 file does (a random per-location ``.def`` was read silently)."""
    folder = anchor.with_suffix("")
    files = [anchor.with_suffix(".def")]
    if not files[0].exists() and _head(anchor) in CHUNK_STARTS:  # OTF2 says "no valid global definition reader"
        raise InputError(str(files[0]), "(file)", f"is missing: it holds the global definitions of the archive "
                         f"{anchor.name} (regions, ranks, communicators), without which it cannot be read",
                         f"copy the whole archive: {anchor.name}, {files[0].name} and the folder {folder.name}/ "
                         "side by side, as Score-P wrote them")
    if folder.is_dir():
        files += sorted(p for p in folder.iterdir() if p.suffix in (".def", ".evt"))
    for p in files:
        try:
            st = p.stat()
        except OSError as exc:
            if not p.is_symlink():
                continue  # a missing file is OTF2's to report (and read_otf2's: _missing_event_files)
            raise InputError(str(p), "(file)", f"is a symbolic link that cannot be followed ({exc.strerror})",
                             "put the file itself in its place (copy the whole archive again)") from None
        if stat.S_ISDIR(st.st_mode):
            holds = "the archive's definitions" if p.suffix == ".def" else "a rank's events"
            raise InputError(str(p), "(file)", f"is a folder, where the file holding {holds} should be",
                             "put the file Score-P wrote in its place (copy the whole archive again), or record the "
                             "run again")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(str(p), "(file)", "is not a regular file (a pipe, device or socket): reading it "
                             "would block", "remove it from the archive, or record the run again")
        try:
            with open(p, "rb") as fh:
                head = fh.read(2)
        except OSError as exc:
            raise InputError(str(p), "(file)", f"cannot be read: {exc.strerror}", "check the file") from None
        if head not in CHUNK_STARTS:
            raise InputError(str(p), "(file)", "is not an OTF2 file (it does not begin with OTF2's chunk "
                             "header)", FIX)


def _head(path: Path) -> bytes:
    """The first two bytes of ``path`` (b"" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2)
    except OSError:
        return b""


def _libotf2() -> Path:
    import _otf2  # the low-level module of python3-otf2: its folder holds libotf2 (``_otf2.so``)

    return Path(_otf2.__file__).parent / "_otf2.so"


@lru_cache(maxsize=1)
def reader_library() -> ctypes.CDLL:
    """The C event reader, built (and cached) on first use."""
    lib = _libotf2()
    path = build_native(READER_SOURCE, "waitlab-otf2-reader.so", compiler="cc",
                        flags=("-O2", "-shared", "-fPIC", "-Wl,--no-as-needed", f"-L{lib.parent}", f"-l:{lib.name}",
                               f"-Wl,-rpath,{lib.parent}"))
    dll = ctypes.CDLL(str(path))
    dll.wl_otf2_read.restype = ctypes.c_int64
    dll.wl_otf2_read.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p,
                                 ctypes.c_char_p, ctypes.c_size_t]
    dll.wl_otf2_unsupported_name.restype = ctypes.c_char_p
    dll.wl_otf2_unsupported_name.argtypes = [ctypes.c_int]
    dll.wl_otf2_last_error.restype = ctypes.c_char_p
    dll.wl_otf2_quiet()
    return dll


def _unsupported_names(dll: ctypes.CDLL) -> tuple[str, ...]:
    names: list[str] = []
    while (name := dll.wl_otf2_unsupported_name(len(names))) is not None:
        names.append(name.decode())
    return tuple(names)


def _definitions(otf2: Any, anchor: Path, threads: bool = False) -> tuple[Any, list[Any], int, int]:
    """The archive's definition registry, its MPI locations in rank order, how many other threads' locations hold
    events (refused unless ``threads``: a hybrid MPI+OpenMP rank's MPI calls are on its MPI location, Score-P's master
    thread, which is what a reading without a replay needs) and how many accelerator-stream (GPU) locations do (not
    MPI: left out, and said)."""
    enums = otf2.enums
    said = io.StringIO()  # the bindings print a callback's traceback to stderr: kept, and said in one line
    try:
        with contextlib.redirect_stderr(said), otf2.reader.open(str(anchor)) as reader:
            defs = reader.definitions
    except Exception as exc:  # the bindings raise their own error types, or TraceReaderError
        cause = [ln for ln in said.getvalue().splitlines() if ln.startswith("UnicodeDecodeError")]
        if cause:
            raise InputError(str(anchor.with_suffix(".def")), "(definitions)", "a name (of a region, rank, file or "
                             f"attribute) is not UTF-8 text ({cause[-1]})", "record the run again with names in "
                             "UTF-8 (OTF2 stores UTF-8 strings)") from None
        hint = ti_replay_hint(anchor)
        if hint is not None:  # not an OTF2 archive, but a trace waitlab replays
            raise InputError(str(anchor), "(archive)", f"is not an OTF2 archive: it looks like {hint[0]}, which "
                             "holds no timestamps to analyze as recorded, but replays on a platform", hint[1]) from None
        msg = reader_library().wl_otf2_last_error().decode(errors="replace") or str(exc)
        raise InputError(str(anchor), "(archive)", f"cannot be read as OTF2 ({type(exc).__name__}: {msg})",
                         FIX) from None
    finally:
        if said.getvalue() and sys.exc_info()[0] is None:
            sys.stderr.write(said.getvalue())
    mpi_groups = [g for g in defs.groups if g.group_type == enums.GroupType.COMM_LOCATIONS
                  and g.paradigm == enums.Paradigm.MPI]
    if not mpi_groups or not mpi_groups[0].members:
        raise InputError(str(anchor), "(locations)", "has no MPI locations: it is not the trace of an MPI run",
                         "record the MPI program with Score-P (scorep mpicc ...)")
    ranks = list(mpi_groups[0].members)
    mpi_refs = {loc._ref for loc in ranks}
    processes = {getattr(loc.group, "_ref", None) for loc in ranks}
    streams = sum(1 for loc in defs.locations if loc.type == enums.LocationType.ACCELERATOR_STREAM
                  and loc.number_of_events)
    workers = 0
    for loc in defs.locations:
        if loc._ref not in mpi_refs and loc.type == enums.LocationType.CPU_THREAD and loc.number_of_events:
            group = getattr(loc, "group", None)
            if getattr(group, "_ref", None) not in processes:  # a process, not a thread of an MPI rank's
                raise InputError(str(anchor), f"location {loc._ref} ({loc.name!r} of {getattr(group, 'name', '')!r})",
                                 f"holds events, but its process is none of the {len(ranks)} MPI ranks the archive's "
                                 "MPI location group lists: the definitions are inconsistent",
                                 "record the run again (or give the archive Score-P wrote, unedited)")
            workers += 1
            if threads:
                continue
            raise InputError(str(anchor), f"location {loc._ref} ({loc.name!r} of {loc.group.name!r})",
                             "is a second thread of an MPI process: threads (OpenMP, Pthreads) cannot be replayed",
                             "record the run with one thread per rank (OMP_NUM_THREADS=1, no OpenMP instrumentation)")
    return defs, ranks, workers, streams


def _regions(otf2: Any, defs: Any) -> tuple[tuple[str, ...], np.ndarray]:
    enums = otf2.enums
    regions = {r._ref: r for r in defs.regions}
    size = max(regions, default=-1) + 1
    names = ["unnamed"] * size
    cls = np.full(size, TRANSPARENT, np.int8)
    for ref, r in regions.items():
        names[ref] = region_label(r.name or "", r.canonical_name or "")
        if r.paradigm == enums.Paradigm.MPI:
            cls[ref] = INIT if r.name in INIT_REGIONS else FINALIZE if r.name in FINALIZE_REGIONS else MPI
        elif r.region_role != enums.RegionRole.ARTIFICIAL:
            cls[ref] = USER
    return tuple(names), cls


def _comms(otf2: Any, defs: Any, rank_of: dict[int, int]) -> dict[int, tuple[int, ...] | None]:
    enums = otf2.enums
    out: dict[int, tuple[int, ...] | None] = {}
    for c in defs.comms:
        group = getattr(c, "group", None)
        if group is None or group.paradigm != enums.Paradigm.MPI:
            continue
        if group.group_type == enums.GroupType.COMM_SELF:
            out[c._ref] = None
        elif group.group_type == enums.GroupType.COMM_GROUP:
            members = [rank_of.get(m._ref, -1) if hasattr(m, "_ref") else int(m) for m in group.members]
            if all(m >= 0 for m in members):
                out[c._ref] = tuple(members)
    return out


def read_otf2(anchor: str | Path, *, threads: bool = False) -> TraceRecords:
    """Every MPI rank's records of the OTF2 archive ``anchor`` (its ``traces.otf2`` file).

    Raises :class:`InputError` (one line, naming the archive) for a file that is not a readable OTF2 archive,
    a truncated one, a trace without MPI locations, or with threads, a location whose events go back in time.
    With ``threads`` (a reading as recorded, nothing replayed) a hybrid MPI+OpenMP trace is read: each rank's MPI
    location (Score-P's master thread), without the other threads' locations and without its thread records (OmpFork,
    ThreadFork, ThreadTeamBegin, ...: not MPI; the master's time in a parallel region is its own work), counted in
    :attr:`TraceRecords.worker_threads` and :attr:`TraceRecords.thread_records`.
    """
    anchor = Path(anchor)
    if not anchor.is_file():
        inside = anchor / "traces.otf2"
        raise InputError(str(anchor), "(file)", not_a_file(anchor), f"give {inside}, the archive's anchor file"
                         if inside.is_file() else "give the anchor file of the archive (traces.otf2 in Score-P's "
                         "experiment folder)")
    check_archive_files(anchor)
    otf2 = _import_otf2()
    dll = reader_library()
    defs, ranks, workers, streams = _definitions(otf2, anchor, threads)
    rank_of = {loc._ref: i for i, loc in enumerate(ranks)}
    names, cls = _regions(otf2, defs)
    resolution = _timer_resolution(anchor, defs.clock_properties)
    refs = (ctypes.c_uint64 * len(ranks))(*[loc._ref for loc in ranks])
    err = ctypes.create_string_buffer(1024)
    coll = otf2.enums.CollectiveOp
    collective_names = {getattr(coll, n).value: n for n in dir(coll) if n.isupper()}
    lut = np.zeros(max(rank_of) + 1, np.int32)
    lut[list(rank_of)] = list(rank_of.values())
    with tempfile.TemporaryDirectory(prefix="waitlab-otf2-") as tmp:
        out = Path(tmp) / "records.bin"
        count = dll.wl_otf2_read(str(anchor).encode(), len(ranks), refs, str(out).encode(), err, len(err))
        if count < 0:
            _missing_event_files(anchor, ranks)
            raise InputError(str(anchor), "(events)", f"cannot be read: {err.value.decode(errors='replace')}", FIX)
        # mapped, not read: each column is copied out of the file once (no whole-record copy beside them)
        raw = np.memmap(out, RECORD_DTYPE, mode="r") if count else np.zeros(0, RECORD_DTYPE)
        # the reader reads the locations in rank order, so the records are sorted by rank already
        cols = {c: np.array(raw[c]) for c in ("kind", "a", "b", "c", "d", "e")}
        time_ = raw["time"].astype(np.int64)
        late = np.flatnonzero(time_ < 0)  # past 2^63 - 1 ticks: negative as int64, before every other record
        if late.size:
            raise InputError(str(anchor.with_suffix("")), "(events)", f"rank {int(lut[raw['loc'][late[0]]])} has a "
                             f"record at {int(raw['time'][late[0]])} ticks, past the largest timestamp waitlab reads "
                             f"(2^63 - 1 = {MAX_TICKS} ticks): the timestamps are damaged", FIX)
        rank = lut[raw["loc"]]
        del raw
    unsupported = _unsupported_names(dll)
    _check_time_order(anchor, [loc._ref for loc in ranks], time_, rank, cols, names, unsupported, resolution)
    thread_rows = 0
    if threads:
        lut_thread = np.array([n.startswith(("Thread", "Omp")) for n in unsupported] + [False])
        drop = (cols["kind"] == UNSUPPORTED) & lut_thread[np.minimum(cols["a"], len(unsupported))]
        thread_rows = int(drop.sum())
        if thread_rows:
            keep = ~drop
            cols = {c: v[keep] for c, v in cols.items()}
            time_, rank = time_[keep], rank[keep]
    el = cols["kind"] <= 1  # enter / leave
    _calling_contexts_to_regions(anchor, defs, cols, el)
    if (cols["a"][el] >= len(names)).any():
        raise InputError(str(anchor), "(definitions)", "events name a region the definitions do not define", FIX)
    return TraceRecords(
        n_ranks=len(ranks), rank=rank, time=time_, resolution=resolution, region_names=names,
        region_class=cls, comm_members=_comms(otf2, defs, rank_of), collective_names=collective_names,
        unsupported=unsupported, host_of_rank=_hosts(ranks), worker_threads=workers if threads else 0,
        thread_records=thread_rows, accelerator_streams=streams, **cols)


def _check_time_order(anchor: Path, locations: list[int], time_: np.ndarray, rank: np.ndarray,
                      cols: dict[str, np.ndarray], names: tuple[str, ...], unsupported: tuple[str, ...],
                      resolution: float) -> None:
    """Raise :class:`InputError` naming the event file, the rank and the first record whose time is earlier than the
    record before it on its location (``locations``: each rank's; records sorted by rank): OTF2 requires each
    location's events in time order (its writer refuses others), and a clock that runs backwards gives negative
    durations, a wrong makespan and waits from bad data."""
    back = np.flatnonzero((time_[1:] < time_[:-1]) & (rank[1:] == rank[:-1])) + 1
    if not back.size:
        return
    i, t0 = int(back[0]), int(time_.min())

    def record(j: int) -> str:
        kind, ref = int(cols["kind"][j]), int(cols["a"][j])
        if kind >= UNSUPPORTED:
            what = unsupported[ref] if ref < len(unsupported) else "a record"
        elif kind <= K["leave"]:  # Enter / Leave of a region, or (b = 1) of a calling context
            what = OTF2_RECORD[RECORD_KINDS[kind]]
            what = (f"CallingContext{what} of calling context {ref}" if cols["b"][j] == 1 else
                    f"{what} of {names[ref] if ref < len(names) else f'region {ref}'}")
        else:
            what = OTF2_RECORD[RECORD_KINDS[kind]]
        return f"{what} at {(int(time_[j]) - t0) / resolution:.9f} s"

    loc = locations[int(rank[i])]
    more = f" ({back.size - 1} more records go back in time)" if back.size > 1 else ""
    raise InputError(str(anchor.with_suffix("") / f"{loc}.evt"), f"rank {int(rank[i])} (location {loc})",
                     f"record {record(i)} comes before the record preceding it ({record(i - 1)}): "
                     f"time goes backwards{more}, where OTF2 requires each location's events in time order",
                     "record the run again (a tool that writes or rewrites an archive must keep each location's "
                     "events in time order)")


def _timer_resolution(anchor: Path, clock: Any) -> float:
    """The archive's timer resolution (ticks per second), or an :class:`InputError` naming its definitions file and
    the field when it is 0, negative or not finite (:func:`~waitlab.models.otf2_records.clock_problem`): every time
    would be infinite or meaningless."""
    value: Any = getattr(clock, "timer_resolution", None)
    problem = clock_problem(value) if value is not None else "is missing: the archive has no ClockProperties"
    if problem is not None:
        raise InputError(str(anchor.with_suffix(".def")), "ClockProperties timer resolution", problem,
                         "record the run again, or have the tool that wrote the archive give its timer's ticks per "
                         "second there (e.g. 1000000000 for a nanosecond timer)")
    return float(value)


def _calling_contexts_to_regions(anchor: Path, defs: Any, cols: dict[str, np.ndarray], el: np.ndarray) -> None:
    """Enter/leave records of a calling context (``b`` = 1: Score-P's ``CallingContextEnter``/``Leave``, written
    with ``SCOREP_ENABLE_UNWINDING=true``) made enter/leave records of its region (the definition's), in place."""
    ctx = el & (cols["b"] == 1)
    if not ctx.any():
        return
    contexts = {c._ref: c for c in defs.calling_contexts}
    region_of = np.full(max(contexts, default=-1) + 2, -1, np.int64)  # the last entry: an undefined context
    for ref, c in contexts.items():
        region = getattr(c, "region", None)
        region_of[ref] = -1 if region is None else region._ref
    refs = np.minimum(cols["a"][ctx].astype(np.int64), region_of.size - 1)
    regions = region_of[refs]
    if (regions < 0).any():
        bad = int(cols["a"][ctx][np.flatnonzero(regions < 0)[0]])
        raise InputError(str(anchor), "(definitions)", f"a CallingContextEnter/Leave record names calling context "
                         f"{bad}, which the definitions do not define (or define without its region)", FIX)
    cols["a"][ctx] = regions.astype(np.uint32)
    cols["b"][ctx] = 0


def _missing_event_files(anchor: Path, ranks: list[Any]) -> None:
    """Raise :class:`InputError` naming what is missing when OTF2 could not read the events because the archive's
    folder (``traces/``) or a rank's event file (``traces/<location>.evt``, Score-P's layout) is not there."""
    folder = anchor.with_suffix("")
    fix = (f"copy the whole archive: {anchor.name}, {anchor.with_suffix('.def').name} and the folder "
           f"{folder.name}/ side by side, as Score-P wrote them")
    if not folder.is_dir():
        raise InputError(str(folder), "(folder)", f"is missing: it holds the events of every rank of the archive "
                         f"{anchor.name}", fix)
    for rank, loc in enumerate(ranks):
        evt = folder / f"{loc._ref}.evt"
        if not evt.exists() and not any(folder.glob(f"{loc._ref}.evt*")):
            raise InputError(str(evt), "(file)", f"is missing: it holds the events of rank {rank} (location "
                             f"{loc._ref})", fix)


def _hosts(ranks: list[Any]) -> tuple[str, ...]:
    """The system tree node (Score-P: the host) of each rank's process, or ``()`` when one is not named."""
    hosts = []
    for loc in ranks:
        node = getattr(getattr(loc, "group", None), "system_tree_parent", None)
        name = getattr(node, "name", None)
        if not name:
            return ()
        hosts.append(str(name))
    return tuple(hosts)


def otf2_version() -> str:
    """The version of the OTF2 bindings (Debian's ``python3-otf2``) archives are read with."""
    return str(getattr(_import_otf2(), "__version__", "unknown"))
