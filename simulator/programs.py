"""Real MPI programs under SMPI: build with SimGrid's compiler wrappers, run with waitlab's layer, read the records.

* :func:`build_program` compiles C, C++ and Fortran sources with ``smpicc``,
  ``smpicxx`` or ``smpif90`` (one object per source, so a compiler error names
  its file), links waitlab's measurement layer (``native/waitlab_pmpi.c``,
  compiled once into an object) and caches the program by the hash of its
  sources, flags, layer and SimGrid version.
* :func:`run_program` runs it with ``smpirun`` (privatization on: real programs
  have global variables) and turns every failure (crash, ``MPI_Abort``, a
  deadlock SMPI detected, a time-out, a rank that never reached
  ``MPI_Finalize``) into one :class:`~waitlab.errors.SimulationError` quoting
  SimGrid and the last lines of the program's output.
* :func:`read_records` reads the layer's per-rank files; :func:`records_to_ops`
  makes an :class:`~waitlab.models.ops.OpTable` plus enter/exit times, so
  :func:`waitlab.simulator.timeline.build_events` gives the standard event table.
  Compute between two recorded calls becomes a ``compute`` row; outside user
  regions it is wrapped in a call-site region named ``@file.c:L1-L2`` (the
  source lines of the two calls, from the program's debug information).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import OpTable, seq_within_rank
from waitlab.models.vocabulary import ACTIONS, CODE, COLLECTIVE_ACTIONS, LOCAL_ACTIONS, V_ACTIONS, codes_of
from waitlab.simulator.build import NATIVE_DIR, cache_dir, checked_actions_header, require_tool, simgrid_version
from waitlab.simulator.smpi import SmpiResult, run_smpirun
from waitlab.simulator.ti_trace import empty_ledger
from waitlab.simulator.trace import VectorStore, occurrence

LAYER_SOURCE = NATIVE_DIR / "waitlab_pmpi.c"
HEADER = NATIVE_DIR / "waitlab.h"
ACTIONS_HEADER = NATIVE_DIR / "waitlab_actions.h"

#: Compiler wrapper of each language.
COMPILERS: dict[str, str] = {"c": "smpicc", "c++": "smpicxx", "fortran": "smpif90"}
#: Language of a source file, by suffix.
SUFFIXES: dict[str, str] = {
    ".c": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".C": "c++", ".c++": "c++",
    ".f": "fortran", ".F": "fortran", ".f77": "fortran", ".f90": "fortran", ".F90": "fortran", ".f95": "fortran",
    ".f03": "fortran", ".F03": "fortran", ".f08": "fortran",
}  # fmt: skip
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".fh", ".mod")

LOG_DTYPE = np.dtype([("rank", "<i4"), ("code", "<i4"), ("t_enter", "<f8"), ("t_exit", "<f8")])
ARG_DTYPE = np.dtype([("peer", "<i4"), ("tag", "<i4"), ("name", "<i4"), ("comm", "<i4"), ("step", "<i4"),
                      ("flags", "<i4"), ("value", "<f8"), ("value2", "<f8"), ("site", "<u8")])
ITEM_DTYPE = np.dtype([("anchor", "<i8"), ("code", "<i4"), ("phase", "<i4"), ("value", "<f8"), ("value2", "<f8")])
FLAG_INJECTED = 1

#: Actions the layer can inject (``WAITLAB_SCHEDULE``).
INJECTABLE = tuple(sorted(a for a in ACTIONS if a in LOCAL_ACTIONS))
#: Prefix of call-site region names (user region names never start with it).
SITE_PREFIX = "@"

#: SimGrid settings of a deterministic real run: computation between MPI calls is not benchmarked (only
#: explicit ``smpi_execute*`` and injected delays take simulated time) and ``MPI_Wtime`` costs nothing.
DETERMINISTIC_CONFIG: dict[str, str] = {"smpi/simulate-computation": "no", "smpi/wtime": "0"}


def language_of(path: Path) -> str:
    """Language of one source file from its suffix."""
    lang = SUFFIXES.get(path.suffix) or SUFFIXES.get(path.suffix.lower())
    if lang is None:
        raise InputError(str(path), "(suffix)", f"cannot tell the language of {path.name}",
                         f"use one of {', '.join(sorted(SUFFIXES))} or set application.language")
    return lang


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:16]


def sources_digest(sources: Sequence[Path]) -> str:
    """Hash of the sources and of the headers next to them (what a rebuild depends on)."""
    parts: list[bytes] = []
    dirs: set[Path] = set()
    for s in sources:
        parts += [s.name.encode(), s.read_bytes()]
        dirs.add(s.parent)
    for d in sorted(dirs):
        for h in sorted(d.iterdir()):
            if h.suffix in _HEADER_SUFFIXES and h.is_file():
                parts += [h.name.encode(), h.read_bytes()]
    return _digest(*parts)


def _run(cmd: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd)


def layer_object() -> Path:
    """The measurement layer compiled by ``smpicc`` into an object (cached by source hash)."""
    cc = require_tool("smpicc")
    key = _digest(LAYER_SOURCE.read_bytes(), HEADER.read_bytes(), checked_actions_header().encode(),
                  simgrid_version().encode())
    target = cache_dir() / f"waitlab-pmpi-{key}.o"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.stem}.tmp{os.getpid()}.o")
    proc = _run([cc, "-O2", "-g", "-c", str(LAYER_SOURCE), "-o", str(tmp)], target.parent)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"smpicc failed to build waitlab's measurement layer {LAYER_SOURCE}:\n"
                              f"{proc.stdout}{proc.stderr}".rstrip())
    os.replace(tmp, target)
    return target


_DIAG = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?:\s*(?:fatal )?[Ee]rror")


def _first_error(output: str, context: int = 6) -> str:
    """The compiler's first error and the source lines it shows, on one line (`` | `` between lines)."""
    lines = output.splitlines()
    start = next((i for i, ln in enumerate(lines) if "error" in ln), 0)
    return " | ".join(" ".join(ln.split()) for ln in lines[start:start + context] if ln.strip()) or "no message"


def _failing_file(output: str, default: Path) -> str:
    for line in output.splitlines():
        m = _DIAG.match(line.strip())
        if m:
            return m.group("file")
    return str(default)


def build_program(sources: Sequence[Path], *, language: str | None = None, compile_flags: Sequence[str] = (),
                  link_flags: Sequence[str] = (), name: str = "program", origin: str = "<scenario>") -> Path:
    """Compile and link a real MPI program with waitlab's layer; return the cached executable.

    Parameters
    ----------
    sources : sequence of Path
        Source files (C, C++, Fortran; mixed is fine).
    language : str, optional
        Force one language for every source (``c``, ``c++``, ``fortran``).
    compile_flags, link_flags : sequence of str
        Extra compiler and linker arguments (``-DCLASS=S``, ``-lm``).
    name : str
        Stem of the cached executable's name.
    origin : str
        Scenario file, for error messages.

    Raises
    ------
    InputError
        A source is missing, or the compiler rejected the program: the message names
        the file and quotes the compiler verbatim.
    """
    srcs = [Path(s).resolve() for s in sources]
    if not srcs:
        raise InputError(origin, "application.sources", "lists no source file", 'sources = ["main.c"]')
    for s in srcs:
        if not s.is_file():
            raise InputError(origin, "application.sources", f"{s} does not exist",
                             "paths are relative to the scenario file")
    langs = [language or language_of(s) for s in srcs]
    for lang in langs:
        if lang not in COMPILERS:
            raise InputError(origin, "application.language", f"unknown language {lang!r}",
                             f"one of {', '.join(COMPILERS)}")
    linker_lang = "fortran" if "fortran" in langs else "c++" if "c++" in langs else "c"
    tools = {lang: require_tool(COMPILERS[lang]) for lang in {*langs, linker_lang}}
    layer = layer_object()
    key = _digest(sources_digest(srcs).encode(), layer.name.encode(), simgrid_version().encode(),
                  "\0".join(langs).encode(), "\0".join(compile_flags).encode(), "\0".join(link_flags).encode())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "program"
    target = cache_dir() / "programs" / f"{safe}-{key}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="waitlab-build-", dir=target.parent) as tmp:
        work = Path(tmp)
        objects: list[str] = []
        for i, (src, lang) in enumerate(zip(srcs, langs, strict=True)):
            obj = work / f"{i}_{src.stem}.o"
            cmd = [tools[lang], "-g", "-O2", f"-I{NATIVE_DIR}", f"-I{src.parent}", *compile_flags, "-c", str(src),
                   "-o", str(obj)]
            proc = _run(cmd, work)
            if proc.returncode != 0:
                out = f"{proc.stdout}{proc.stderr}".rstrip()
                raise InputError(_failing_file(out, src), "(compile)",
                                 f"{COMPILERS[lang]} could not compile {src.name}: {_first_error(out)}",
                                 f"fix the program (all messages: {COMPILERS[lang]} -c {src})")
            objects.append(str(obj))
        exe = work / "program"
        proc = _run([tools[linker_lang], "-g", *objects, str(layer), "-o", str(exe), *link_flags, "-lm"], work)
        if proc.returncode != 0:
            out = f"{proc.stdout}{proc.stderr}".rstrip()
            raise InputError(str(srcs[0]), "(link)", f"{COMPILERS[linker_lang]} could not link the program:\n{out}",
                             "add the missing objects or libraries (application.link_flags)")
        os.replace(exe, target)
    return target


def check_binary(binary: Path, origin: str = "<scenario>") -> Path:
    """An existing program: it must have been linked with waitlab's layer to be measured."""
    p = Path(binary).resolve()
    if not p.is_file():
        raise InputError(origin, "application.binary", f"{p} does not exist", "build it with smpicc first")
    nm = shutil.which("nm")
    if nm is not None:
        proc = subprocess.run([nm, "-D", "--defined-only", str(p)], capture_output=True, text=True)
        if proc.returncode == 0 and "waitlab_region_begin" not in proc.stdout:
            raise InputError(origin, "application.binary", f"{p.name} was not linked with waitlab's measurement "
                             "layer", f"link {layer_object()} into it (smpicc ... {layer_object()}), or give "
                             "application.sources and let waitlab build it")
    return p


# ---------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------

_KNOWN_FAILURES = (
    ("MPI_Abort was called", "the program called MPI_Abort"),
    ("Segmentation fault", "the program crashed (segmentation fault)"),
    ("did not return 0", "a rank ended with a non-zero exit status"),
    ("Deadlock detected", "the program deadlocked: SMPI found ranks waiting for communications that will never "
                          "complete"),
    ("Stalling SMPI instance", "not every rank reached MPI_Finalize"),
)


def _tail(text: str, n: int = 30) -> str:
    lines = [ln for ln in text.splitlines() if "Configuration change" not in ln and "You did not set the power"
             not in ln]
    return "\n".join(lines[-n:])


def _diagnose(output: str) -> str:
    for needle, meaning in _KNOWN_FAILURES:
        if needle in output:
            return meaning
    return "the program stopped early"


def write_schedule(folder: Path, n_ranks: int, anchor: npt.NDArray[np.int64], rank: npt.NDArray[np.int32],
                   code: npt.NDArray[np.int8], value: npt.NDArray[np.float64], value2: npt.NDArray[np.float64],
                   phase: npt.NDArray[np.int32]) -> None:
    """Write the layer's injection schedule, one file per rank (``s<rank>.bin``), in the given order.

    ``phase`` 0 runs an item just before anchor ``anchor`` (the anchor-th MPI call
    or region marker of its rank), 1 right after anchor ``anchor - 1`` returns.
    Items must be in execution order within each rank.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        sel = np.flatnonzero(rank == r)
        items = np.zeros(sel.size, ITEM_DTYPE)
        items["anchor"], items["code"], items["phase"] = anchor[sel], code[sel], phase[sel]
        items["value"], items["value2"] = value[sel], value2[sel]
        items.tofile(folder / f"s{r}.bin")


def run_program(binary: Path, n_ranks: int, platform_xml: Path, hostfile: Path, out_dir: Path, *,
                args: Sequence[str] = (), config: Mapping[str, str] | None = None,
                schedule_dir: Path | None = None, extra_flags: Sequence[str] = (), timeout: float | None = None,
                exit_codes: Sequence[int] = (0,), cwd: Path | None = None, what: str = "program") -> SmpiResult:
    """Run a program built by :func:`build_program` under SMPI with the layer recording into ``out_dir``.

    Raises
    ------
    SimulationError
        The program crashed, aborted, deadlocked, exceeded ``timeout``, returned an
        exit status not in ``exit_codes``, or some rank never reached ``MPI_Finalize``.
        The message quotes SimGrid and the last lines of the program's output.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("r*.*"):
        stale.unlink()
    env = {"WAITLAB_OUT": str(out_dir.resolve())}
    if schedule_dir is not None:
        env["WAITLAB_SCHEDULE"] = str(schedule_dir.resolve())
    cfg = dict(DETERMINISTIC_CONFIG)
    cfg.update(config or {})
    try:
        res = run_smpirun(binary, n_ranks, platform_xml, hostfile, args=[*args, "--log=ker_engine.thres:info"],
                          config=cfg, extra_flags=extra_flags, env=env, cwd=cwd, timeout=timeout, what=what,
                          privatize=True, accept_returncodes=tuple(exit_codes))
    except SimulationError as exc:
        text = str(exc)
        if "exceeded the time limit" in text:
            raise
        raise SimulationError(f"{what} failed: {_diagnose(text)}{_missing(out_dir, n_ranks)}. {text}") from None
    missing = _missing(out_dir, n_ranks)
    if missing:
        raise SimulationError(f"{what} failed: {_diagnose(res.output)}{missing}; no results were kept. "
                              f"Last output of SimGrid and the program:\n{_tail(res.output)}")
    return res


def _missing(out_dir: Path, n_ranks: int) -> str:
    missing = [r for r in range(n_ranks) if not (out_dir / f"r{r}.done").exists()]
    if not missing:
        return ""
    shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    return f" (rank{'s' if len(missing) > 1 else ''} {shown} did not reach MPI_Finalize)"


# ---------------------------------------------------------------------------------------------------------------
# Reading the layer's records
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Records:
    """The layer's records of all ranks, sorted by (rank, record index), init/finalize included."""

    n_ranks: int
    log: npt.NDArray[np.void]
    arg: npt.NDArray[np.void]
    names: tuple[str, ...]
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
    comms: dict[tuple[int, int], tuple[int, ...]]

    def __len__(self) -> int:
        return int(self.log.size)


def read_records(out_dir: Path, n_ranks: int) -> Records:
    """Read and merge the per-rank files the layer wrote (global name ids, row-indexed vectors)."""
    logs, args = [], []
    names: dict[str, int] = {}
    vectors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    comms: dict[tuple[int, int], tuple[int, ...]] = {}
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
        for line in (out_dir / f"r{r}.comms").read_text().splitlines():
            ids = [int(x) for x in line.split()]
            comms[(r, ids[0])] = tuple(ids[1:])
        logs.append(log)
        args.append(arg)
    return Records(n_ranks, np.concatenate(logs), np.concatenate(args),
                   tuple(sorted(names, key=names.__getitem__)), vectors, comms)


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
                    out[off] = f"{os.path.basename(file)}:{line}"
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
    comm = arg["comm"][owner]
    coll = np.isin(row_code, codes_of(COLLECTIVE_ACTIONS))
    bad = np.flatnonzero(is_rec & coll & (comm != 0))
    if bad.size:
        i = int(bad[0])
        members = rec.comms.get((int(cols["rank"][i]), int(comm[i])), ())
        raise SimulationError(
            f"rank {cols['rank'][i]} calls {ACTIONS[row_code[i]]} on a sub-communicator (world ranks "
            f"{', '.join(map(str, members[:16]))}{' ...' if len(members) > 16 else ''}); waitlab's event table "
            "supports collectives on MPI_COMM_WORLD (or a duplicate of it) only")
    ops = OpTable(n_ranks=rec.n_ranks, names=tuple(names), ledger=empty_ledger(), **cols)
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
