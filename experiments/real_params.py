"""``[application]`` of real MPI applications: a program (C/C++/Fortran) or a captured TI trace.

The input keys are declared once as pydantic models (:class:`ProgramSection`,
:class:`TraceSection`); validation resolves paths against the scenario's folder
and adds a digest of the input files (``derived``: part of the scenario hash,
never written back as input).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from waitlab.errors import InputError
from waitlab.experiments.schema import RECORDED, STRICT, freeze, raise_validation
from waitlab.readers import not_a_file, read_bytes
from waitlab.simulator.programs import COMPILERS, language_of, sources_digest
from waitlab.simulator.ti_files import ti_kind, trace_files

REAL_KINDS = ("program", "trace", "otf2", "recorded")

#: Largest program source read (bytes).
MAX_SOURCE_BYTES = 64 << 20


class ProgramSection(BaseModel):
    """``[application] kind = "program"``: a real MPI program built with SMPI's compilers."""

    model_config = STRICT
    sources: tuple[str, ...] = Field((), description="C/C++/Fortran sources (relative to the scenario file)")
    binary: str | None = Field(None, min_length=1, description="an executable linked with waitlab's layer, "
                               "instead of sources")
    language: Literal["c", "c++", "fortran"] | None = Field(None, description="language of every source "
                                                             "(default: from the suffixes)")
    args: tuple[str, ...] = Field((), description="program arguments, one word each (no blanks, not empty, no "
                                  "* ? [, not --cfg=/--log=, which are SimGrid's); {ranks} is replaced by the "
                                  "rank count")
    compile_flags: tuple[str, ...] = Field((), description="extra compiler flags (paths of -I, -include, ... "
                                           "relative to the scenario file)")
    link_flags: tuple[str, ...] = Field((), description="extra linker flags (paths of -L relative to the scenario "
                                        "file)")
    computation: Literal["none", "measured", "counted"] = Field(
        "none", description="none: deterministic, computation costs nothing; measured: SMPI benchmarks the real CPU "
        "time between MPI calls; counted: deterministic, flops_per_block flops per basic block the program executed")
    flops_per_block: float | None = Field(None, gt=0, allow_inf_nan=False, description="computation = "
                                          "\"counted\": flops charged per executed basic block (calibrated from "
                                          "one measured run, docs/real_programs.md)")
    callsite_regions: Literal["auto", "always", "never"] = Field("auto", description="name compute between MPI "
                                                                 "calls after the call sites")
    exit_codes: tuple[int, ...] = Field((0,), min_length=1, description="exit statuses of main that are not "
                                        "failures")
    inputs: tuple[str, ...] = Field((), description="input files copied into the program's working folder before "
                                    "it runs (relative to the scenario file); what it writes there is kept in "
                                    "RUNDIR/program/workdir")
    description: str = Field("", description="free text")

    @field_validator("args")
    @classmethod
    def _passable(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        """What smpirun hands over unchanged: it splits its arguments at blanks, drops empty ones, expands the
        shell's patterns (``* ? [``) and takes ``--cfg=``/``--log=`` (SimGrid's own options) for itself."""
        for i, a in enumerate(args):
            if not a or any(c.isspace() for c in a):
                raise ValueError(f"args[{i}] would not reach the program: smpirun splits arguments at blanks and "
                                 "drops empty ones")
            if any(c in a for c in "*?["):
                raise ValueError(f"args[{i}] would not reach the program: smpirun expands its arguments unquoted, so "
                                 "* ? [ become the names of the files they match (write the file names themselves)")
            if a.startswith(("--cfg=", "--log=")):
                raise ValueError(f"args[{i}] would not reach the program: smpirun takes --cfg= and --log= for "
                                 "SimGrid's own options (set those in [simulation.config])")
        return args

    @model_validator(mode="after")
    def _one_input(self) -> ProgramSection:
        if bool(self.sources) == (self.binary is not None):
            raise ValueError("give exactly one of sources or binary: sources = [\"main.c\"] (or binary = "
                             "\"path/to/program\" linked with waitlab's layer)")
        if (self.computation == "counted") != (self.flops_per_block is not None):
            raise ValueError("computation = \"counted\" and flops_per_block go together: give flops_per_block "
                             "(flops per executed basic block; docs/real_programs.md, 'Deterministic compute', says "
                             "how to calibrate it from one measured run) with counted, and only with it")
        if self.computation == "counted" and self.binary is not None:
            raise ValueError("computation = \"counted\" needs the program's sources (waitlab compiles them with "
                             "basic-block counting): give sources instead of binary")
        if any(not 0 <= c < 256 for c in self.exit_codes):
            raise ValueError("exit_codes are statuses 0..255")
        return self


class TraceSection(BaseModel):
    """``[application] kind = "trace"``: a time-independent trace (index file) to replay."""

    model_config = STRICT
    trace: str = Field(min_length=1, description="index file of the trace (written by waitlab capture)")
    flops_per_second: float | None = Field(None, gt=0, le=1e18, description="speed that turns the trace's flops "
                                           "into seconds (default: the platform's core speed)")
    description: str = Field("", description="free text")


class Otf2Section(BaseModel):
    """``[application] kind = "otf2"``: an OTF2 trace of a real MPI run (e.g. recorded by Score-P) to replay."""

    model_config = STRICT
    trace: str = Field(min_length=1, description="anchor file of the OTF2 archive (traces.otf2 in Score-P's "
                       "experiment folder), relative to the scenario file")
    cpu_ratio: float = Field(1.0, gt=0, le=1e6, description="speed of the traced machine's core over the modeled "
                             "one's (Dimemas' CPU ratio): the time between MPI calls is multiplied by it")
    description: str = Field("", description="free text")


class RecordedSection(BaseModel):
    """``[application] kind = "recorded"``: an OTF2 trace of a real MPI run read as it was recorded (no simulation)."""

    model_config = STRICT
    trace: str = Field(min_length=1, description="anchor file of the OTF2 archive (traces.otf2 in Score-P's "
                       "experiment folder), relative to the scenario file")
    description: str = Field("", description="free text")


@dataclass(frozen=True)
class RecordedParams:
    """A validated recorded trace: the absolute anchor path and a digest of the archive's files."""

    trace: str
    description: str = ""
    digest: str = field(default="", metadata={"derived": True})


@dataclass(frozen=True)
class Otf2Params:
    """A validated OTF2 trace: the absolute anchor path and a digest of the archive's files."""

    trace: str
    cpu_ratio: float = 1.0
    description: str = ""
    digest: str = field(default="", metadata={"derived": True})


@dataclass(frozen=True)
class ProgramParams:
    """A validated program: absolute source paths and the digest of the sources (see :class:`ProgramSection`)."""

    sources: tuple[str, ...] = ()
    binary: str | None = None
    language: str | None = None
    args: tuple[str, ...] = ()
    compile_flags: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ()
    computation: str = "none"
    flops_per_block: float | None = None
    callsite_regions: str = "auto"
    exit_codes: tuple[int, ...] = (0,)
    inputs: tuple[str, ...] = ()
    description: str = ""
    digest: str = field(default="", metadata={"derived": True})


@dataclass(frozen=True)
class TraceParams:
    """A validated trace: the absolute index path and a digest of the trace files."""

    trace: str
    flops_per_second: float | None = None
    description: str = ""
    digest: str = field(default="", metadata={"derived": True})


def file_digest(paths: Sequence[Path]) -> str:
    """Digest of the paths, sizes and modification times of files."""
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def archive_files(anchor: Path) -> list[Path]:
    """The files of the OTF2 archive whose anchor file is ``anchor``: itself, ``traces.def`` and ``traces/*``."""
    folder = anchor.with_suffix("")
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    extra = [anchor.with_suffix(".def")] if anchor.with_suffix(".def").is_file() else []
    return [anchor, *extra, *files]


def real_params(kind: str, table: Mapping[str, Any], file: str, base: Path
                ) -> ProgramParams | TraceParams | Otf2Params | RecordedParams:
    """Validate ``[application]`` of a program or trace (``kind`` removed); paths relative to ``base``."""
    models: dict[str, type[BaseModel]] = {"trace": TraceSection, "otf2": Otf2Section, RECORDED: RecordedSection}
    model = models.get(kind, ProgramSection)
    try:
        sec = model.model_validate(freeze(dict(table)))
    except ValidationError as exc:
        raise_validation(exc, file, "application", model)
        raise
    if isinstance(sec, Otf2Section | RecordedSection):
        anchor = (base / sec.trace).resolve()
        if not anchor.is_file():
            raise InputError(file, "application.trace", f"{anchor} {not_a_file(anchor)}", "give the anchor file of the "
                             "archive (traces.otf2 in Score-P's experiment folder), relative to the scenario file")
        digest = file_digest(archive_files(anchor))
        if isinstance(sec, RecordedSection):
            return RecordedParams(str(anchor), sec.description, digest)
        return Otf2Params(str(anchor), sec.cpu_ratio, sec.description, digest)
    if isinstance(sec, TraceSection):
        path = (base / sec.trace).resolve()
        if path.is_dir():  # the folder of a trace: its index is the file to give
            indexes = sorted(p.name for p in path.iterdir() if p.is_file() and ti_kind(p) == "index")
            raise InputError(file, "application.trace", f"{path} is a folder, not a trace's index file",
                             "give the index file in it" + (f" ({', '.join(indexes[:3])})" if indexes else
                                                            ": the one smpirun -trace-ti wrote as NAME.txt beside "
                                                            "NAME.txt_files/, or waitlab capture's index.txt"))
        if not path.is_file():
            raise InputError(file, "application.trace", f"{path} {not_a_file(path)}",
                             "give the trace's index file (relative to the scenario file), or record one with "
                             "'waitlab capture SCENARIO -o DIR'")
        files = trace_files(path)
        return TraceParams(str(path), sec.flops_per_second, sec.description, file_digest([path, *files]))
    assert isinstance(sec, ProgramSection)
    src_paths = [(base / s).resolve() for s in sec.sources]
    for s in src_paths:
        if not s.is_file():
            raise InputError(file, "application.sources", f"{s} {not_a_file(s)}",
                             "paths are relative to the scenario file")
        read_bytes(s, "program source", MAX_SOURCE_BYTES)  # unreadable or absurdly large: one clear error
        if sec.language is None:
            language_of(s)
    bin_path = (base / sec.binary).resolve() if sec.binary is not None else None
    if bin_path is not None and not bin_path.is_file():
        raise InputError(file, "application.binary", f"{bin_path} {not_a_file(bin_path)}", "build it with smpicc first")
    assert sec.language is None or sec.language in COMPILERS
    inputs = [(base / f).resolve() for f in sec.inputs]
    for f in inputs:
        if not f.is_file():
            raise InputError(file, "application.inputs", f"{f} {not_a_file(f)}",
                             "paths are relative to the scenario file")
    names = [f.name for f in inputs]
    if len(set(names)) != len(names):
        raise InputError(file, "application.inputs", "two input files have the same name",
                         "the files are copied side by side into the working folder: rename one")
    digest = (sources_digest(src_paths, resolve_flag_paths(sec.compile_flags, base)) if src_paths else
              file_digest([bin_path]) if bin_path else "")
    if inputs:
        digest = f"{digest}:{file_digest(inputs)}"
    return ProgramParams(
        sources=tuple(str(s) for s in src_paths), binary=str(bin_path) if bin_path is not None else None,
        language=sec.language, args=sec.args, compile_flags=resolve_flag_paths(sec.compile_flags, base),
        link_flags=resolve_flag_paths(sec.link_flags, base),
        computation=sec.computation, flops_per_block=sec.flops_per_block, callsite_regions=sec.callsite_regions,
        exit_codes=tuple(sorted(set(sec.exit_codes))), inputs=tuple(str(f) for f in inputs),
        description=sec.description, digest=digest,
    )  # fmt: skip


#: Flags whose path (joined, ``-Ipath``, or the next argument, ``-I path``) is resolved against the scenario file.
PATH_FLAGS = ("-I", "-L", "-isystem", "-iquote", "-idirafter", "-include")


def split_flag_values(flags: Sequence[str]) -> list[str]:
    """``flags`` with a flag of :data:`PATH_FLAGS` and its value written in one element, separated by blanks
    (``"-I include"``, as on a command line), made two elements (``"-I", "include"``): the compiler would take the
    blanks as the start of the path.

    >>> split_flag_values(["-I include", "-Iinc", "-include  cfg.h", "-O2"])
    ['-I', 'include', '-Iinc', '-include', 'cfg.h', '-O2']
    """
    out: list[str] = []
    for f in flags:
        flag = next((p for p in PATH_FLAGS if f.startswith(p) and f[len(p):len(p) + 1].isspace()), None)
        if flag is not None and f[len(flag):].strip():
            out += [flag, f[len(flag):].strip()]
        else:
            out.append(f)
    return out


def resolve_flag_paths(flags: Sequence[str], base: Path) -> tuple[str, ...]:
    """``flags`` with every relative path of :data:`PATH_FLAGS` made absolute against ``base`` (a flag and its value
    in one element are split first: :func:`split_flag_values`).

    >>> resolve_flag_paths(("-I../inc", "-O2", "-include", "cfg.h", "-I/abs", "-I inc"), Path("/s/x"))
    ('-I/s/inc', '-O2', '-include', '/s/x/cfg.h', '-I/abs', '-I', '/s/x/inc')
    """
    out: list[str] = []
    take_next = False
    for f in split_flag_values(flags):
        if take_next:
            out.append(str((base / f).resolve()) if not Path(f).is_absolute() else f)
            take_next = False
            continue
        if f in PATH_FLAGS:
            take_next = True
            out.append(f)
            continue
        joined = next((p for p in ("-I", "-L") if f.startswith(p) and len(f) > len(p)), None)
        if joined is not None and not Path(f[len(joined):]).is_absolute():
            out.append(joined + str((base / f[len(joined):]).resolve()))
        else:
            out.append(f)
    return tuple(out)


def real_params_to_toml(p: ProgramParams | TraceParams | Otf2Params | RecordedParams) -> dict[str, Any]:
    """The ``[application]`` table (without kind) that validates back into ``p``."""
    if isinstance(p, RecordedParams):
        return {"trace": p.trace, "description": p.description}
    if isinstance(p, Otf2Params):
        return {"trace": p.trace, "cpu_ratio": p.cpu_ratio, "description": p.description}
    if isinstance(p, TraceParams):
        out: dict[str, Any] = {"trace": p.trace, "description": p.description}
        if p.flops_per_second is not None:
            out["flops_per_second"] = p.flops_per_second
        return out
    out = {"args": list(p.args), "compile_flags": list(p.compile_flags), "link_flags": list(p.link_flags),
           "computation": p.computation, "callsite_regions": p.callsite_regions, "exit_codes": list(p.exit_codes),
           "description": p.description}
    if p.flops_per_block is not None:
        out["flops_per_block"] = p.flops_per_block
    if p.sources:
        out["sources"] = list(p.sources)
    if p.binary is not None:
        out["binary"] = p.binary
    if p.language is not None:
        out["language"] = p.language
    if p.inputs:
        out["inputs"] = list(p.inputs)
    return out
