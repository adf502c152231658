"""Real MPI programs under SMPI: build with SimGrid's compiler wrappers (running: :mod:`.program_run`, records:
:mod:`.program_records`, both re-exported here).

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
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from waitlab.errors import InputError, SimulationError
from waitlab.simulator.build import NATIVE_DIR, cache_dir, checked_actions_header, require_tool, simgrid_version
from waitlab.simulator.program_records import (
    ARG_DTYPE,
    FLAG_CAUSE,
    FLAG_INJECTED,
    LOG_DTYPE,
    SITE_PREFIX,
    ProgramRun,
    Records,
    read_records,
    records_to_ops,
    resolve_sites,
)
from waitlab.simulator.program_run import (
    INJECTABLE,
    ITEM_DTYPE,
    layer_env,
    rerun_files,
    run_program,
    write_schedule,
)

__all__ = [
    "ARG_DTYPE", "COMPILERS", "FLAG_CAUSE", "FLAG_INJECTED", "INJECTABLE", "ITEM_DTYPE",
    "LOG_DTYPE", "SITE_PREFIX", "SUFFIXES", "ProgramRun", "Records", "build_program", "check_binary",
    "language_of", "layer_env", "layer_object", "read_records", "records_to_ops", "rerun_files", "resolve_sites",
    "run_program", "sources_digest", "write_schedule",
]  # fmt: skip

LAYER_SOURCE = NATIVE_DIR / "waitlab_pmpi.c"
#: The parts #included by LAYER_SOURCE (one translation unit): communicators and requests, point-to-point,
#: collectives and Fortran, one-sided (RMA) C and Fortran; all are part of the layer's cache key.
LAYER_PARTS = tuple(sorted(NATIVE_DIR.glob("waitlab_pmpi_*.c")))
HEADER = NATIVE_DIR / "waitlab.h"
ACTIONS_HEADER = NATIVE_DIR / "waitlab_actions.h"
#: The generated wrappers (:mod:`waitlab.simulator.layer_wrappers`), included by the layer.
WRAPPERS_INC = NATIVE_DIR / "waitlab_wrappers.inc"

#: Compiler wrapper of each language.
COMPILERS: dict[str, str] = {"c": "smpicc", "c++": "smpicxx", "fortran": "smpif90"}
#: Language of a source file, by suffix.
SUFFIXES: dict[str, str] = {
    ".c": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".C": "c++", ".c++": "c++",
    ".f": "fortran", ".F": "fortran", ".f77": "fortran", ".f90": "fortran", ".F90": "fortran", ".f95": "fortran",
    ".f03": "fortran", ".F03": "fortran", ".f08": "fortran",
}  # fmt: skip
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".fh", ".mod")

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


def sources_digest(sources: Sequence[Path], compile_flags: Sequence[str] = ()) -> str:
    """Hash of the sources and of the headers next to them and in the ``-I`` folders of ``compile_flags`` (what a
    rebuild depends on; a folder under ``/usr`` is the system's, not the user's, and is left out)."""
    parts: list[bytes] = []
    dirs: set[Path] = set()
    for s in sources:
        parts += [s.name.encode(), s.read_bytes()]
        dirs.add(s.parent)
    for d in sorted(dirs):
        for h in sorted(d.iterdir()):
            if h.suffix in _HEADER_SUFFIXES and h.is_file():
                parts += [h.name.encode(), h.read_bytes()]
    for name in sorted(_include_dir_files(compile_flags)):
        h = Path(name)
        if not h.resolve().is_relative_to("/usr") and h.parent.resolve() not in {d.resolve() for d in dirs}:
            parts += [name.encode(), h.read_bytes()]
    return _digest(*parts)


def _run(cmd: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, errors="replace", cwd=cwd)


def layer_object() -> Path:
    """The measurement layer compiled by ``smpicc`` into an object (cached by source hash)."""
    cc = require_tool("smpicc")
    key = _digest(LAYER_SOURCE.read_bytes(), HEADER.read_bytes(), checked_actions_header().encode(),
                  WRAPPERS_INC.read_bytes(), *(f.read_bytes() for f in LAYER_PARTS), simgrid_version().encode())
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
#: Any diagnostic line (an error, a warning or a note): it ends the chain of includes before it.
_ANY_DIAG = re.compile(r"^[^\s:][^:]*:\d+(?::\d+)?:\s*(?:fatal error|error|warning|note)\b")
#: A compiler driver refusing one of its flags (GCC, gfortran: "unrecognized command-line option"; Clang).
_FLAG_ERROR = re.compile(r"(?m)^\S+: error: (?:unrecognized command[- ]line option|unrecognized argument|"
                         r"unknown argument)")
#: A line of the chain of includes GCC and Clang print before a diagnostic in an included file
#: (``In file included from a.h:3,`` / ``                 from m.c:2:``).
_INCLUDED = re.compile(r"^(?:In file included from|from)\s+(?P<file>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?[,:]?$")


def _first_error(output: str, context: int = 6) -> str:
    """The compiler's first error and the source lines it shows, on one line (`` | `` between lines)."""
    lines = output.splitlines()
    start = next((i for i, ln in enumerate(lines) if "error" in ln and not _INCLUDED.match(ln.strip())), 0)
    return " | ".join(" ".join(ln.split()) for ln in lines[start:start + context] if ln.strip()) or "no message"


def _user_folders(source: Path, compile_flags: Sequence[str]) -> list[Path]:
    """Folders of the user's own files: the source's and those of the path flags (``-I``, ``-iquote``, ...)."""
    folders = [source.parent]
    flags = list(compile_flags)
    for i, flag in enumerate(flags):
        for prefix in ("-I", "-iquote", "-isystem", "-idirafter", "-include"):
            if flag.startswith(prefix):
                value = flag[len(prefix):] or (flags[i + 1] if i + 1 < len(flags) else "")
                if value:
                    path = Path(value)
                    folders.append(path.parent if prefix == "-include" else path)
                break
    return [f.resolve() for f in folders]


def _failing_file(output: str, default: Path, compile_flags: Sequence[str] = ()) -> tuple[str, str]:
    """The user's file the compiler's error points at, and a hint when the compiler points at no file of the user's.

    The file is that of the first error in one of the user's files (``default``, the files in its folder and in the
    folders of the path flags, waitlab's ``waitlab.h`` excluded), else the innermost of the user's files in the
    chain of includes of the first error: an error in a system header (e.g. after an unfinished declaration in a
    header included before it) names the user's file whose ``#include`` led there, with a hint naming that line;
    else ``default``."""
    folders = _user_folders(default, compile_flags)

    def users(name: str) -> bool:
        resolved = (default.parent / name).resolve()  # an absolute name stays itself
        return resolved == default.resolve() or (not resolved.is_relative_to(NATIVE_DIR)
                                                 and any(resolved.is_relative_to(f) for f in folders))

    chain: list[tuple[str, str]] = []
    first: tuple[str, list[tuple[str, str]]] | None = None
    for raw in output.splitlines():
        line = raw.strip()
        if (m := _INCLUDED.match(line)) and (line.startswith("In file") or raw[:1].isspace()):
            chain = [] if line.startswith("In file") else chain
            chain.append((m.group("file"), m.group("line")))
            continue
        if (m := _DIAG.match(line)) and not raw[:1].isspace():
            if users(m.group("file")):
                return m.group("file"), ""
            if first is None:
                first = (m.group("file"), chain)
        if _ANY_DIAG.match(line) and not raw[:1].isspace():
            chain = []
    if first is not None:
        for name, at in first[1]:
            if users(name):
                return name, (f" (the first error is in {first[0]}, reached from the #include on line {at} of "
                              f"{Path(name).name}: look at the code before that line, e.g. an unfinished declaration "
                              "in a header included earlier)")
    return str(default), ""


#: A Fortran module's definition (``module NAME`` alone on its line: not ``module procedure``/``module function``).
_F_MODULE = re.compile(r"^[ \t]*module[ \t]+(\w+)[ \t]*(?:!.*)?$", re.I | re.M)
#: A Fortran ``use`` of a module (group 1: ``, intrinsic`` if given), or a submodule's parent (group 3).
_F_USE = re.compile(r"^[ \t]*(?:use\b[ \t]*(,[ \t]*(?:non_)?intrinsic[ \t]*)?(?:::)?[ \t]*(\w+)|"
                    r"submodule[ \t]*\([ \t]*(\w+))", re.I | re.M)


def fortran_modules(text: str) -> tuple[set[str], set[str]]:
    """The modules a Fortran source defines and those it uses (lower case; ``use, intrinsic`` ones left out).

    >>> defined, used = fortran_modules("module m\\n contains\\nend module m\\nprogram p\\n  use m, only: x\\n"
    ...                                 "  use, intrinsic :: iso_c_binding\\n  USE :: mpi\\n  module procedure f\\nend")
    >>> sorted(defined), sorted(used)
    (['m'], ['m', 'mpi'])
    """
    defined = {m.group(1).lower() for m in _F_MODULE.finditer(text)}
    used = {(m.group(2) or m.group(3)).lower() for m in _F_USE.finditer(text)
            if not (m.group(1) and "non_" not in m.group(1).lower())}
    return defined, used


def compile_order(sources: Sequence[Path], langs: Sequence[str]) -> list[int]:
    """Indices of ``sources`` in the order to compile them: a Fortran file that defines ``module X`` before the files
    that ``use X`` (the compiler reads ``x.mod``, written by the file that defines it, from the build folder); else
    the order given.  Modules no source defines (``mpi``, ``iso_c_binding``, those of ``-I`` folders) do not count;
    when the sources' modules use each other in a cycle, the order given is kept (the compiler then names the
    module it missed)."""
    defines: dict[str, int] = {}
    uses: list[set[str]] = []
    for i, (src, lang) in enumerate(zip(sources, langs, strict=True)):
        defined, used = fortran_modules(src.read_text(errors="replace")) if lang == "fortran" else (set(), set())
        for name in defined:
            defines.setdefault(name, i)
        uses.append(used)
    needs = [{defines[u] for u in used if u in defines and defines[u] != i} for i, used in enumerate(uses)]
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(sources):
        ready = next((i for i in range(len(sources)) if i not in done and needs[i] <= done), None)
        if ready is None:
            return list(range(len(sources)))
        order.append(ready)
        done.add(ready)
    return order


#: gfortran's ``Cannot open module file 'x.mod'`` (the quotes are the locale's).
_NO_MODULE = re.compile(r"Cannot open module file [‘'`\"]?([\w.-]+?)\.mod[’'`\"]?")
#: GCC's and Clang's errors at the C++ bindings (``MPI::Init``), which MPI-3 removed and SMPI never had.
_CXX_BINDINGS = re.compile(r"[‘'`\"]MPI[’'`\"] (?:has not been declared|was not declared|is not a namespace|"
                           r"is not a class)|undeclared identifier [‘'`\"]MPI[’'`\"]")


def _compile_failure(out: str, src: Path, lang: str, language: str | None, sources: Sequence[Path],
                     compile_flags: Sequence[str], origin: str) -> InputError:
    """The error of a failed compile of ``src``: the compiler's first error with the fix that fits its cause (a flag,
    the ``language`` key, a module, SMPI's missing bindings), else "fix the program"."""
    where, hint = _failing_file(out, src, compile_flags)
    again = shlex.join([COMPILERS[lang], *compile_flags, "-c", str(src)])
    first = _first_error(out)
    said = f"{COMPILERS[lang]} could not compile {src.name}: {first}"
    if _FLAG_ERROR.search(out):  # the compiler refused one of the user's flags, not the program
        return InputError(origin, "application.compile_flags", f"{COMPILERS[lang]} refused a flag: {first}",
                          f"remove or correct that flag (all messages: {again})")
    own = SUFFIXES.get(src.suffix) or SUFFIXES.get(src.suffix.lower())
    if language is not None and own is not None and own != language and {own, language} & {"fortran"}:
        return InputError(origin, "application.language", f"{said} ({src.name} is {own} by its suffix, compiled as "
                          f"{language} because of language = \"{language}\")",
                          f"remove application.language (each source's language then comes from its suffix) or set "
                          f"language = \"{own}\"")
    if lang == "fortran" and (m := _NO_MODULE.search(out)):
        module = m.group(1).lower()
        if module == "mpi_f08":
            return InputError(where, "(compile)", said, "SimGrid's SMPI has no mpi_f08 module: write `use mpi` (or "
                              "`include 'mpif.h'`) instead of `use mpi_f08`, with integer handles (integer :: comm, "
                              f"not type(MPI_Comm)) (all messages: {again})")
        if not any(module in fortran_modules(s.read_text(errors="replace"))[0] for s in sources):
            return InputError(origin, "application.sources", f"{said} (no file of application.sources defines "
                              f"module {m.group(1)})", f"add the file that defines module {m.group(1)} to "
                              f"application.sources, or the folder of its {m.group(1)}.mod to compile_flags "
                              f"(\"-I<folder>\")")
    if lang == "c++" and _CXX_BINDINGS.search(out):
        return InputError(where, "(compile)", said, "the C++ bindings (MPI::Init, MPI::COMM_WORLD, ...) were removed "
                          "in MPI-3 and SMPI has none: call the C API from C++ (MPI_Init(&argc, &argv), "
                          f"MPI_COMM_WORLD, ...) (all messages: {again})")
    return InputError(where, "(compile)", f"{said}{hint}", f"fix the program (all messages: {again})")


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
    manifest = target.with_name(target.name + ".deps.json")
    if target.exists() and _inputs_unchanged(manifest):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    deps: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="waitlab-build-", dir=target.parent) as tmp:
        work = Path(tmp)
        objects = [str(work / f"{i}_{src.stem}.o") for i, src in enumerate(srcs)]
        for i in compile_order(srcs, langs):  # Fortran modules before their users; linked in the order given
            src, lang, obj = srcs[i], langs[i], Path(objects[i])
            # C/C++: the compiler lists every file it read (-MD); Fortran: the files of every -I folder
            dep_flags = ["-MD", "-MF", str(obj.with_suffix(".d"))] if lang != "fortran" else []
            cmd = [tools[lang], "-g", "-O2", f"-I{NATIVE_DIR}", f"-I{src.parent}", *compile_flags, *dep_flags, "-c",
                   str(src), "-o", str(obj)]
            proc = _run(cmd, work)
            if proc.returncode != 0:
                # smpif90 compiles a copy beside the source (NAME_XXXXXXXXXX.f90, gone now): name the source
                out = re.sub(re.escape(str(src)) + r"_[A-Za-z0-9]{6,}\.\w+", str(src),
                             f"{proc.stdout}{proc.stderr}".rstrip())
                raise _compile_failure(out, src, lang, language, srcs, compile_flags, origin)
            deps |= _dependencies(obj.with_suffix(".d"), work) if dep_flags else _include_dir_files(compile_flags)
        exe = work / "program"
        proc = _run([tools[linker_lang], "-g", *objects, str(layer), "-o", str(exe), *link_flags, "-lm"], work)
        if proc.returncode != 0:
            out = f"{proc.stdout}{proc.stderr}".rstrip()
            raise InputError(str(srcs[0]), "(link)", f"{COMPILERS[linker_lang]} could not link the program:\n{out}",
                             "add the missing objects or libraries (application.link_flags)")
        os.replace(exe, target)
    manifest.write_text(json.dumps({p: _file_digest(Path(p)) for p in sorted(deps)}, indent=0) + "\n")
    return target


def _file_digest(path: Path) -> str:
    try:
        return _digest(path.read_bytes())
    except OSError:
        return "missing"


def _inputs_unchanged(manifest: Path) -> bool:
    """Whether every file a cached build read (its ``.deps.json``) still has the content it had then."""
    try:
        recorded = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False  # built before the manifest existed, or damaged: build again
    return all(_file_digest(Path(p)) == d for p, d in recorded.items())


def _dependencies(depfile: Path, work: Path) -> set[str]:
    """Absolute paths of the files a compiler's ``-MD`` output lists (the object's prerequisites)."""
    try:
        text = depfile.read_text()
    except OSError:
        return set()
    text = text.replace("\\\n", " ")
    out: set[str] = set()
    for rule in text.split("\n"):
        if ":" not in rule:
            continue
        body = rule.split(":", 1)[1].replace("\\ ", "\0")
        for token in body.split():
            path = Path(token.replace("\0", " "))
            out.add(str(path if path.is_absolute() else (work / path).resolve()))
    return out


def _include_dir_files(flags: Sequence[str]) -> set[str]:
    """Header-like files of every ``-I`` folder of ``flags`` (for compilers without ``-MD``)."""
    out: set[str] = set()
    dirs = [f[2:] for f in flags if f.startswith("-I") and len(f) > 2]
    dirs += [b for a, b in itertools.pairwise(flags) if a == "-I"]
    for d in dirs:
        folder = Path(d)
        if folder.is_dir():
            out |= {str(h) for h in folder.iterdir() if h.suffix in _HEADER_SUFFIXES and h.is_file()}
    return out


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
