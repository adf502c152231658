"""Scenarios: a TOML file validated by the schema into one typed, frozen :class:`Scenario`.

Every problem is one :class:`~waitlab.errors.InputError` naming the file, the
key and the fix.  :meth:`Scenario.resolved` is the scenario with every default
filled in as plain TOML data: it is valid input again (``waitlab run
RUNDIR/scenario.toml`` reproduces the run), and its hash keys results and caches.

Examples
--------
>>> sc = from_mapping({"scenario": {"name": "demo", "ranks": 4}, "platform": {"name": "dawning_5000a"},
...                    "application": {"kind": "stencil", "steps": 2}})
>>> sc.name, sc.ranks, sc.application.steps, sc.noise is None
('demo', 4, 2, True)
>>> from_mapping(sc.resolved()).hash() == sc.hash()
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from waitlab.errors import InputError, unknown_name
from waitlab.experiments.physics_limits import application_problem, is_platform_path
from waitlab.experiments.real_params import REAL_KINDS, real_params, real_params_to_toml
from waitlab.experiments.schema import (
    RECORDED,
    SECTIONS,
    InstrumentationSection,
    NoiseSection,
    PlatformSection,
    ScenarioSection,
    SimulationSection,
    TracingSection,
    check_name,
    require_key,
    validate_section,
)
from waitlab.models.apps.alltoall import check_alltoall_algorithm, check_alltoall_point
from waitlab.models.apps.imbalance import Imbalance, RankSelection
from waitlab.models.apps.registry import APPLICATIONS, params_from_mapping
from waitlab.platforms.model import read_platform_file
from waitlab.readers import MAX_TOML_BYTES, not_a_file, path_argument
from waitlab.readers import read_toml as read_toml
from waitlab.simulator.ti_files import ti_replay_hint

#: Maximum size of a scenario or sweep file read (bytes): larger files are refused before parsing.
MAX_FILE_BYTES = MAX_TOML_BYTES

#: The sections every scenario has, with what an example of each holds.
_REQUIRED = {"scenario": "ranks = 64", "platform": 'name = "dawning_5000a"', "application": 'kind = "stencil"'}


@dataclass(frozen=True)
class InputFiles:
    """The files a scenario reads besides itself, read once when it is loaded: a platform file's bytes and a noise
    signature file's SHA-256, by path.

    Its hash (:meth:`Scenario.fingerprint`) and its run (:func:`waitlab.experiments.stage.prepare` parses the
    platform from these bytes) come from this one reading, so a file edited afterwards (while a sweep runs, say)
    changes neither: a result's ``scenario_hash`` names what was simulated.  A sweep hands its points' snapshot
    to its workers (:func:`from_mapping`'s ``inputs``).
    """

    platforms: tuple[tuple[str, bytes], ...] = ()
    noise: tuple[tuple[str, str], ...] = ()

    def platform(self, path: str) -> bytes | None:
        """The bytes of the platform file ``path`` as read, or None when it was not read."""
        return next((raw for p, raw in self.platforms if p == path), None)

    def noise_digest(self, path: str) -> str | None:
        """The digest of the noise signature file ``path`` as read, or None when it was not read."""
        return next((d for p, d in self.noise if p == path), None)

    def merged(self, other: InputFiles) -> InputFiles:
        """These files and those of ``other`` not among them (the files a sweep has read so far)."""
        return InputFiles(self.platforms + tuple(e for e in other.platforms if self.platform(e[0]) is None),
                          self.noise + tuple(e for e in other.noise if self.noise_digest(e[0]) is None))


#: Largest noise signature file digested (bytes): the perturbation stage refuses larger ones
#: (:data:`waitlab.experiments.perturbation.MAX_SIGNATURE_BYTES`).
MAX_NOISE_FILE_BYTES = 64 << 20


def noise_file_digest(path: str) -> str:
    """SHA-256 (hex) of a noise signature file, or ``missing PATH`` when it is not a regular file that can be read
    (a device or FIFO would never end or block) or is too large: the run that reads it says why."""
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size > MAX_NOISE_FILE_BYTES:
            return f"missing {path}"
        with open(p, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return f"missing {path}"


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: its sections, its application parameters, the file it came from and the files it
    reads as they were when it was loaded (:class:`InputFiles`)."""

    meta: ScenarioSection
    platform: PlatformSection
    application_kind: str
    application: Any  # the application's frozen parameter dataclass
    simulation: SimulationSection
    noise: NoiseSection | None = None
    instrumentation: InstrumentationSection | None = None
    tracing: TracingSection | None = None
    source: str = "<memory>"
    inputs: InputFiles = field(default=InputFiles(), repr=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def seed(self) -> int:
        return self.meta.seed

    @property
    def ranks(self) -> int:
        return self.meta.ranks

    @property
    def perturbed(self) -> bool:
        """Whether any perturbation section (noise, instrumentation, tracing) is present."""
        return any(s is not None for s in (self.noise, self.instrumentation, self.tracing))

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, as TOML-ready plain data (valid input again)."""
        out: dict[str, Any] = {
            "scenario": _dump(self.meta), "platform": _dump(self.platform),
            "application": {"kind": self.application_kind, **params_to_toml(self.application)},
            "simulation": _dump(self.simulation),
        }
        for sec in ("noise", "instrumentation", "tracing"):
            value = getattr(self, sec)
            if value is not None:
                out[sec] = _dump(value)
        if self.noise is not None:  # only the keys the noise model uses (the others are errors as input)
            keep = self.noise.used_keys()
            out["noise"] = {k: v for k, v in out["noise"].items() if k in keep}
        if self.application_kind == RECORDED:  # read as recorded: no platform, nothing simulated
            del out["platform"], out["simulation"]
        return out

    def platform_bytes(self) -> bytes | None:
        """The bytes of the scenario's platform file as read when it was loaded (None: a built-in platform, or a
        file that could not be read then)."""
        return self.inputs.platform(self.platform.name) if is_platform_path(self.platform.name) else None

    def noise_digest(self) -> str | None:
        """SHA-256 of the noise signature file as read when the scenario was loaded (None: no noise file)."""
        if self.noise is None or self.noise.file is None:
            return None
        kept = self.inputs.noise_digest(self.noise.file)
        return kept if kept is not None else noise_file_digest(self.noise.file)

    def fingerprint(self) -> str:
        """Digest of what the scenario reads besides itself: program sources, trace files, a platform file and a
        noise signature file (an edited file is another scenario, whose results a sweep or a cache must not reuse).

        The platform and noise files are those read when the scenario was loaded (:class:`InputFiles`), not
        read again: the hash names the bytes the run simulates.
        """
        digests = [str(getattr(self.application, "digest", ""))]
        if is_platform_path(self.platform.name):
            raw = self.platform_bytes()
            if raw is None:  # not read at load (unreadable then): as the file is now; the run that reads it says why
                try:
                    raw = read_platform_file(self.platform.name)
                except InputError:
                    digests.append(f"missing {self.platform.name}")
            if raw is not None:
                digests.append(hashlib.sha256(raw).hexdigest())
        noise = self.noise_digest()
        if noise is not None:
            digests.append(noise)
        return digests[0] if len(digests) == 1 else json.dumps(digests)

    def hash(self) -> str:
        """SHA-256 (first 16 hex digits) of the resolved scenario and its input files' digest."""
        return scenario_hash(self.resolved(), self.fingerprint())

    def to_toml(self) -> str:
        """The resolved scenario as TOML text."""
        return tomli_w.dumps(self.resolved())

    def with_values(self, changes: Mapping[str, Any]) -> Scenario:
        """A new scenario with dotted keys changed (``"noise.duration"``, ``"application.imbalance[0].magnitude"``).

        An error about a key of ``changes`` names the call, not the scenario's file the value did not come from
        (``(python call): scenario.ranks: must be an integer, got '16'``); ``changes`` must be a dict.
        """
        if not isinstance(changes, Mapping) or not all(isinstance(k, str) for k in changes):
            raise InputError("(python call)", "changes", "must be a dict of dotted keys (text) to values, got "
                             f"{type(changes).__name__} {str(changes)[:80]}", 'e.g. with_values({"scenario.ranks": 4})')
        data = self.resolved()
        for key, value in changes.items():
            set_dotted(data, key, value, "(python call)")
        try:
            return from_mapping(data, self.source, inputs=self.inputs)
        except InputError as exc:
            if type(exc) is not InputError or exc.file != self.source or not any(
                    exc.field == k or exc.field.startswith((f"{k}.", f"{k}[")) for k in changes):
                raise
            raise InputError("(python call)", exc.field, exc.problem, exc.fix) from None

    def with_platform_bytes(self, raw: bytes) -> Scenario:
        """The scenario with ``raw`` as its platform file's bytes (what a run that read the file itself simulated)."""
        kept = tuple(e for e in self.inputs.platforms if e[0] != self.platform.name)
        return dataclasses.replace(self, inputs=InputFiles(((self.platform.name, raw), *kept), self.inputs.noise))


def scenario_hash(resolved: Mapping[str, Any], fingerprint: str) -> str:
    """:meth:`Scenario.hash` of a resolved scenario (plain data, as ``run.json`` records it) and the digest of its
    input files (:meth:`Scenario.fingerprint`)."""
    text = json.dumps([resolved, fingerprint], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _dump(model: Any) -> dict[str, Any]:
    return {k: _plain(v) for k, v in model.model_dump().items() if v is not None}


def _plain(x: Any) -> Any:
    if isinstance(x, RankSelection):
        return x.as_spec()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                if getattr(x, f.name) is not None and not f.metadata.get("derived")}
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items() if v is not None}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return x.item()
    return x


def params_to_toml(params: Any) -> dict[str, Any]:
    """An application's parameters as the ``[application]`` table (without ``kind``)."""
    if type(params).__name__ in ("ProgramParams", "TraceParams", "Otf2Params", "RecordedParams"):
        return real_params_to_toml(params)
    out = _plain(params)
    assert isinstance(out, dict)
    return out


_INDEX = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<i>\d+)\])?$")
#: A bare key part beyond names: a free key of a table such as ``simulation.config`` (``smpi/allreduce``).
_BARE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_/:+-]*$")
_FIX = ('write keys like "noise.duration", "application.imbalance[0].magnitude" or, for a key holding dots or '
        "other characters, quote that part: 'simulation.config.\"smpi/allreduce\"'")


def split_key(key: str, file: str) -> list[tuple[str, int | None]]:
    """The parts of a dotted grid key: ``(name, list index or None)``; a part in quotes is taken as it is."""
    parts: list[tuple[str, int | None]] = []
    i, n = 0, len(key)
    while True:
        if i < n and key[i] in "\"'":
            end = key.find(key[i], i + 1)
            if end < 0:
                raise InputError(file, key, f"the quote opened at character {i + 1} is not closed", _FIX)
            name = key[i + 1:end]
            if not name:
                raise InputError(file, key, "has an empty quoted part", _FIX)
            parts.append((name, None))
            i = end + 1
        else:
            end = key.find(".", i)
            end = n if end < 0 else end
            part = key[i:end].strip()
            m = _INDEX.match(part)
            if m is not None:
                parts.append((m.group("key"), None if m.group("i") is None else int(m.group("i"))))
            elif _BARE.match(part) and parts:
                parts.append((part, None))
            else:
                raise InputError(file, key, f"cannot read key part {part!r}", _FIX)
            i = end
        if i >= n:
            return parts
        if key[i] != ".":
            raise InputError(file, key, f"expected a dot after the quoted part, got {key[i]!r}", _FIX)
        i += 1


def set_dotted(data: dict[str, Any], key: str, value: Any, file: str) -> None:
    """Set ``data[a][b][c] = value`` for ``key = "a.b.c"`` (:func:`split_key`); ``name[i]`` indexes a list of tables.

    >>> d = {"application": {"imbalance": [{"magnitude": 0.1}]}}
    >>> set_dotted(d, "application.imbalance[0].magnitude", 0.5, "s.toml"); d["application"]["imbalance"][0]
    {'magnitude': 0.5}
    >>> d = {"simulation": {}}
    >>> set_dotted(d, 'simulation.config."smpi/allreduce"', "rdb", "s.toml"); d
    {'simulation': {'config': {'smpi/allreduce': 'rdb'}}}
    """
    parts = split_key(key, file)
    if parts[0][0] not in SECTIONS or parts[0][1] is not None:
        raise InputError(file, key, f"{parts[0][0]!r} is not a scenario section",
                         f"start the key with one of: {', '.join(SECTIONS)}")
    node: Any = data
    for n, (name, idx) in enumerate(parts):
        last = n == len(parts) - 1
        if idx is None:
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, {})
                if not isinstance(node, dict):
                    raise InputError(file, key, f"{name} is not a table", "check the key")
            continue
        seq = node.get(name)
        if not isinstance(seq, list) or idx >= len(seq):
            raise InputError(file, key, f"{name}[{idx}] does not exist in the base scenario",
                             f"the base scenario has {len(seq) if isinstance(seq, list) else 0} entries")
        if last:
            seq[idx] = value
        else:
            node = seq[idx]


def python_numbers(x: Any) -> Any:
    """``x`` with every integer that is not a Python ``int`` (``numpy.int64``; not a bool) made one, through dicts
    and lists; a copy, the caller's data unchanged.

    >>> import numpy as np
    >>> python_numbers({"scenario": {"ranks": np.int64(8), "x": [np.int32(1), True]}})
    {'scenario': {'ranks': 8, 'x': [1, True]}}
    """
    if isinstance(x, Mapping):
        return {k: python_numbers(v) for k, v in x.items()}
    if type(x) in (list, tuple):  # (not a named tuple: its constructor takes its fields)
        return type(x)(python_numbers(v) for v in x)
    if isinstance(x, numbers.Integral) and not isinstance(x, bool | int):
        return int(x)
    return x


def from_mapping(data: Mapping[str, Any], file: str = "<scenario>", inputs: InputFiles | None = None) -> Scenario:
    """Validate parsed TOML into a :class:`Scenario`.

    Its platform file and noise signature file are read once, here (:class:`InputFiles`), unless ``inputs`` holds
    them already (files a sweep read for an earlier point, or the snapshot a sweep's worker is handed): those are
    used as they are.
    """
    if not isinstance(data, Mapping):
        raise InputError(file, "(content)", "is not a table of sections", "start with [scenario]")
    data = python_numbers(data)  # ranks = np.int64(8) from a notebook's loop: an integer
    if "base" in data and ("grid" in data or "sweep" in data) and "scenario" not in data:
        raise InputError(file, "(file)", "is a sweep file (base, [grid], [sweep]), not a scenario",
                         f"run it with `waitlab sweep {file}`, or give the scenario it names as base")
    for key in data:
        if key not in SECTIONS:
            raise unknown_name(file, key, key, SECTIONS, f"allowed sections: {', '.join(SECTIONS)}", "section")
    if kind_of(data) == RECORDED:
        _check_recorded(data, file)
        data = {**data, "platform": {"name": RECORDED}}
    missing = [sec for sec in _REQUIRED if sec not in data]  # [scenario] alone: its name and ranks say what is
    if len(missing) == 1 and missing != ["scenario"]:
        raise InputError(file, missing[0], "section is missing", f"add [{missing[0]}] with {_REQUIRED[missing[0]]}")
    if len(missing) > 1:  # every one in one line (an empty file)
        names = [f"[{s}]" for s in missing]
        raise InputError(file, "(file)", f"sections {', '.join(names[:-1])} and {names[-1]} are missing",
                         "add " + ", ".join(f"[{s}] with {_REQUIRED[s]}" for s in missing))
    sc = dict(data.get("scenario", {})) if isinstance(data.get("scenario", {}), Mapping) else data["scenario"]
    if isinstance(sc, dict) and "name" not in sc:
        stem = Path(file).stem if not file.startswith("<") else "scenario"
        if check_name(stem):
            raise InputError(file, "scenario.name", f"is missing and the file name {stem!r} is not a plain name",
                             'add name = "my-run" to [scenario]')
        sc["name"] = stem
    if isinstance(sc, dict):
        require_key(sc, "scenario", "ranks", ScenarioSection.model_fields, file,
                    "set ranks = 64 (the number of MPI processes)")
    meta = validate_section("scenario", sc, file)
    platform = validate_section("platform", data["platform"], file)
    assert isinstance(meta, ScenarioSection) and isinstance(platform, PlatformSection)
    if platform.name.endswith(".toml") and not Path(platform.name).is_absolute() and not file.startswith("<"):
        platform = platform.model_copy(update={"name": str((Path(file).parent / platform.name).resolve())})
    if is_platform_path(platform.name) and not Path(platform.name).is_file():
        raise InputError(file, "platform.name", f"platform file {platform.name} {not_a_file(Path(platform.name))}",
                         f"{relative_paths(file)}; or use a built-in name (waitlab platforms)")
    if platform.name == RECORDED and kind_of(data) != RECORDED:
        raise InputError(file, "platform.name", f"{RECORDED!r} is the platform of a recorded run only "
                         '([application] kind = "recorded")', "name a platform to simulate on (waitlab platforms)")
    app = data["application"]
    if not isinstance(app, Mapping):
        raise InputError(file, "application", "must be a table", 'write [application] with kind = "stencil"')
    kind = app.get("kind")
    if not isinstance(kind, str):
        raise InputError(file, "application.kind", "is required (a string)", 'e.g. kind = "lared_s"')
    table = {k: v for k, v in app.items() if k != "kind"}
    if kind in APPLICATIONS:  # an unknown key with the key it looks like (the application's own check lists the
        # allowed keys only; a program's or a trace's keys are checked by raise_validation, which names it too)
        imbalance = table.get("imbalance")
        _check_keys(file, "application", table, APPLICATIONS[kind].__pydantic_fields__)  # type: ignore[attr-defined]
        for i, spec in enumerate(imbalance if isinstance(imbalance, list | tuple) else ()):
            _check_keys(file, f"application.imbalance[{i}]", spec, Imbalance.__pydantic_fields__)  # type: ignore[attr-defined]
    base = Path(file).parent if not file.startswith("<") else Path.cwd()
    params: Any = real_params(kind, table, file, base) if kind in REAL_KINDS else \
        params_from_mapping(kind, table, file)
    simulation = validate_section("simulation", data.get("simulation", {}), file)
    assert isinstance(simulation, SimulationSection)
    _check_alltoall(simulation, params, meta.ranks, file)
    sections: dict[str, Any] = {}
    for sec in ("noise", "instrumentation", "tracing"):
        if sec in data:
            sections[sec] = validate_section(sec, data[sec], file)
    noise = sections.get("noise")
    if isinstance(noise, NoiseSection) and noise.file is not None and not Path(noise.file).is_absolute() \
            and not file.startswith("<"):
        sections["noise"] = noise.model_copy(update={"file": str((Path(file).parent / noise.file).resolve())})
    if isinstance(noise, NoiseSection) and noise.file is not None and _from_current_folder(file) \
            and not Path(noise.file).is_file():  # (a scenario file's noise file is checked by its run)
        raise InputError(file, "noise.file", f"noise file {str(Path(noise.file).resolve())!r} "
                         f"{not_a_file(Path(noise.file))}", f"check the path: {relative_paths(file)}")
    _check_imbalance_ranks(params, meta.ranks, file)
    problem = application_problem(params, meta.ranks)
    if problem is not None:
        raise InputError(file, *problem)
    read = _read_inputs(platform.name, sections.get("noise"), inputs)
    return Scenario(meta=meta, platform=platform, application_kind=kind, application=params,
                    simulation=simulation, source=file, inputs=read, **sections)


def _check_keys(file: str, where: str, table: Any, allowed: Mapping[str, Any]) -> None:
    """Refuse the first key of ``table`` (the table at ``where``) that is not ``allowed``, naming the key it looks
    like (:func:`~waitlab.errors.unknown_name`)."""
    key = next((k for k in table if k not in allowed), None) if isinstance(table, Mapping) else None
    if key is not None:
        raise unknown_name(file, f"{where}.{key}", key, allowed, f"allowed keys: {', '.join(allowed)}")


def _from_current_folder(file: str) -> bool:
    """Whether the relative paths of the scenario ``file`` are read from the current folder: a scenario read from
    standard input (``-``) or given as data (``<...>``)."""
    return file == "-" or file.startswith("<")


def relative_paths(file: str) -> str:
    """What the relative paths of the scenario ``file`` are relative to, as an error's fix says it.

    >>> relative_paths("s.toml")
    'relative paths are relative to the scenario file'
    >>> "current folder" in relative_paths("-")
    True
    """
    if file == "-":
        return "relative paths of a scenario read from standard input are relative to the current folder"
    if file.startswith("<"):
        return "relative paths of a scenario given as data are relative to the current folder"
    return "relative paths are relative to the scenario file"


def _read_inputs(platform: str, noise: Any, known: InputFiles | None) -> InputFiles:
    """The scenario's platform file (bytes) and noise signature file (digest), taken from ``known`` or read now.

    A platform file that cannot be read is left out: its run reads it and says why (:func:`waitlab.experiments
    .stage.prepare`)."""
    known = known if known is not None else InputFiles()
    platforms: tuple[tuple[str, bytes], ...] = ()
    if is_platform_path(platform):
        raw = known.platform(platform)
        if raw is None:
            try:
                raw = read_platform_file(platform)
            except InputError:
                raw = None
        platforms = ((platform, raw),) if raw is not None else ()
    digests: tuple[tuple[str, str], ...] = ()
    if isinstance(noise, NoiseSection) and noise.file is not None:
        digest = known.noise_digest(noise.file)
        digests = ((noise.file, digest if digest is not None else noise_file_digest(noise.file)),)
    return InputFiles(platforms, digests)


def kind_of(data: Mapping[str, Any]) -> Any:
    """``[application] kind`` of parsed scenario data, ``None`` when absent."""
    app = data.get("application")
    return app.get("kind") if isinstance(app, Mapping) else None


def _check_recorded(data: Mapping[str, Any], file: str) -> None:
    """A recorded run (``kind = "recorded"``) is read, not simulated: no platform, no perturbation."""
    default = {"platform": {"name": RECORDED}, "simulation": {}}  # as the resolved scenario writes them back
    for sec in ("platform", "noise", "instrumentation", "tracing", "simulation"):
        if sec in default and (sec not in data or validate_section(sec, data[sec], file) ==
                               validate_section(sec, default[sec], file)):
            continue
        if sec in data:
            what = "it has no platform model" if sec == "platform" else "nothing in it is simulated or perturbed"
            raise InputError(file, sec, f"a recorded run is read as it ran: {what}",
                             f'remove [{sec}], or replay the trace on a platform with kind = "otf2"')


def _check_alltoall(sim: SimulationSection, params: Any, ranks: int, file: str) -> None:
    _check_alltoall_overflow(sim, params, ranks, file)
    if sim.alltoall == "default":
        return
    try:
        check_alltoall_algorithm(sim.alltoall, ranks)
    except ValueError as exc:
        raise InputError(file, "simulation.alltoall", str(exc), "pick another algorithm or rank count") from None
    app_alg = getattr(params, "alltoall_algorithm", "default")
    if app_alg not in ("default", sim.alltoall):
        raise InputError(file, "simulation.alltoall", f"conflicts with application.alltoall_algorithm = {app_alg!r}",
                         "set the algorithm in one place only")


def _check_alltoall_overflow(sim: SimulationSection, params: Any, ranks: int, file: str) -> None:
    """Refuse an alltoall point where SimGrid 3.32's algorithm overflows 32-bit ``int`` (docs/calibration.md)."""
    nbytes = getattr(params, "bytes_per_peer", None)
    algorithm = sim.alltoall if sim.alltoall != "default" else getattr(params, "alltoall_algorithm", "default")
    if nbytes is None or algorithm == "default":
        return
    if sim.alltoall == "default":  # the application's algorithm: one that cannot run these ranks is its key's fault
        try:
            check_alltoall_algorithm(algorithm, ranks)
        except ValueError as exc:
            raise InputError(file, "application.alltoall_algorithm", str(exc),
                             "pick another algorithm or rank count") from None
    try:
        check_alltoall_point(algorithm, ranks, nbytes)
    except InputError as exc:
        field = "simulation.alltoall" if sim.alltoall != "default" else "application.bytes_per_peer"
        raise InputError(file, field, exc.problem, exc.fix) from None


def _check_imbalance_ranks(params: Any, ranks: int, file: str) -> None:
    for i, spec in enumerate(getattr(params, "imbalance", ())):
        sel = spec.selection
        if sel.mode == "list" and sel.ranks and max(sel.ranks) >= ranks:
            raise InputError(file, f"application.imbalance[{i}].ranks", f"rank {max(sel.ranks)} does not exist "
                             f"with {ranks} ranks", f"use ranks 0..{ranks - 1}")
        if sel.mode == "random" and sel.count > ranks:
            raise InputError(file, f"application.imbalance[{i}].ranks.random", f"cannot choose {sel.count} of "
                             f"{ranks} ranks", f"use at most {ranks}")
    root = getattr(params, "root", None)
    if isinstance(root, int) and root >= ranks:
        raise InputError(file, "application.root", f"rank {root} does not exist with {ranks} ranks",
                         f"use a root below {ranks}")


def as_scenario(scenario: Scenario | str | Path) -> Scenario:
    """``scenario`` itself, or the scenario of the TOML file it names (:func:`load_scenario`)."""
    return scenario if isinstance(scenario, Scenario) else load_scenario(path_argument(scenario, "scenario",
                                                                                      "scenario TOML file"))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario TOML file (anything but a path is refused, naming the argument ``path``)."""
    path = path_argument(path, "path", "scenario TOML file")
    try:
        data = read_toml(path)
    except InputError as exc:
        hint = ti_replay_hint(Path(path)) if exc.field == "(syntax)" and str(path) != "-" else None
        if hint is None:
            raise
        raise InputError(str(path), "(syntax)", f"not a scenario TOML file: it looks like {hint[0]}",
                         hint[1]) from None
    return from_mapping(data, str(path))
