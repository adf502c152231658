"""Scenario files (TOML) validated into typed, frozen objects.

A scenario names a platform model, an application model and how to simulate
it.  Every problem is reported as one :class:`~waitlab.errors.InputError`
naming the file, the key and what is allowed.  The *resolved* scenario (all
defaults filled in) has a stable hash that keys results and caches.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waitlab.errors import InputError
from waitlab.models.apps.alltoall import SMPI_ALLTOALL_ALGORITHMS, check_alltoall_algorithm

SECTIONS = ("scenario", "platform", "application", "simulation", "noise", "instrumentation", "tracing")


@dataclass(frozen=True)
class PlatformChoice:
    """Which platform model, and how much of it."""

    name: str
    nodes: int | None = None
    ranks_per_node: int | None = None
    split_cores: bool = False


@dataclass(frozen=True)
class SimulationOptions:
    """How SMPI runs the scenario."""

    alltoall: str = "default"
    reference_core_speed: float | None = None
    timeout: float = 3600.0
    paje: bool = False
    config: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Scenario:
    """A validated scenario.  ``sections`` keeps the raw optional sections (noise, ...)."""

    name: str
    seed: int
    ranks: int
    platform: PlatformChoice
    application_kind: str
    application: Any  # the application's frozen parameter dataclass
    simulation: SimulationOptions
    source: str = "<memory>"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, as plain data (what the hash covers)."""
        from dataclasses import asdict, is_dataclass

        app = asdict(self.application) if is_dataclass(self.application) and not isinstance(self.application, type) \
            else dict(self.application)
        return _plain({
            "scenario": {"name": self.name, "seed": self.seed, "ranks": self.ranks},
            "platform": asdict(self.platform),
            "application": {"kind": self.application_kind, **app},
            "simulation": asdict(self.simulation),
            **{k: v for k, v in sorted(self.extra.items())},
        })  # fmt: skip

    def hash(self) -> str:
        """SHA-256 (first 16 hex digits) of the canonical JSON of :meth:`resolved`."""
        text = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return x.item()
    return x


def _get(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], file: str, where: str,
         default: Any = ..., check: Any = None, fix: str = "") -> Any:
    if key not in table:
        if default is ...:
            raise InputError(file, f"{where}.{key}", "is required", fix or f"add {key} = ... to [{where}]")
        return default
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise InputError(file, f"{where}.{key}", f"must be {'/'.join(k.__name__ for k in kinds)}, got {value!r}",
                         fix)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kinds):
        raise InputError(file, f"{where}.{key}",
                         f"must be {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__} {value!r}", fix)
    if check is not None:
        problem = check(value)
        if problem:
            raise InputError(file, f"{where}.{key}", f"{problem}, got {value!r}", fix)
    return value


def _no_unknown(table: Mapping[str, Any], allowed: tuple[str, ...], file: str, where: str) -> None:
    for key in table:
        if key not in allowed:
            raise InputError(file, f"{where}.{key}" if where else key, "unknown key",
                             f"allowed keys: {', '.join(allowed)}")


def _positive(v: float) -> str:
    return "" if v > 0 else "must be > 0"


def from_mapping(data: Mapping[str, Any], file: str = "<scenario>") -> Scenario:
    """Validate parsed TOML into a :class:`Scenario`."""
    from waitlab.models.apps.registry import params_from_mapping

    _no_unknown(data, SECTIONS, file, "")
    for sec in SECTIONS:
        if sec in data and not isinstance(data[sec], Mapping):
            raise InputError(file, sec, "must be a table", f"write it as [{sec}]")
    sc = data.get("scenario", {})
    _no_unknown(sc, ("name", "seed", "ranks", "description"), file, "scenario")
    name = _get(sc, "name", str, file, "scenario", default=Path(file).stem)
    seed = _get(sc, "seed", int, file, "scenario", default=0,
                check=lambda v: "" if 0 <= v < 2**63 else "must be a non-negative integer")
    ranks = _get(sc, "ranks", int, file, "scenario", check=lambda v: "" if v >= 1 else "must be >= 1",
                 fix="set ranks = 64 (the number of MPI processes) in [scenario]")

    if "platform" not in data:
        raise InputError(file, "platform", "section is missing", 'add [platform] with name = "dawning_5000a"')
    pl = data["platform"]
    _no_unknown(pl, ("name", "nodes", "ranks_per_node", "split_cores"), file, "platform")
    platform = PlatformChoice(
        name=_get(pl, "name", str, file, "platform", fix="use a built-in name (waitlab platforms) or a .toml path"),
        nodes=_get(pl, "nodes", int, file, "platform", default=None, check=lambda v: "" if v >= 1 else "must be >= 1"),
        ranks_per_node=_get(pl, "ranks_per_node", int, file, "platform", default=None,
                            check=lambda v: "" if v >= 1 else "must be >= 1"),
        split_cores=_get(pl, "split_cores", bool, file, "platform", default=False),
    )
    if platform.name.endswith(".toml") and not Path(platform.name).is_absolute():
        platform = PlatformChoice(str((Path(file).parent / platform.name).resolve()), platform.nodes,
                                  platform.ranks_per_node, platform.split_cores)

    if "application" not in data:
        raise InputError(file, "application", "section is missing", 'add [application] with kind = "stencil"')
    app = dict(data["application"])
    kind = _get(app, "kind", str, file, "application", fix='e.g. kind = "lared_s"')
    app.pop("kind")
    if kind in ("program", "trace"):  # real MPI applications (waitlab.experiments.programs)
        from waitlab.experiments.programs import params_from_mapping as real_params

        params: Any = real_params(kind, app, file)
    else:
        params = params_from_mapping(kind, app, file)

    sim = data.get("simulation", {})
    _no_unknown(sim, ("alltoall", "reference_core_speed", "timeout", "paje", "config"), file, "simulation")
    alltoall = _get(sim, "alltoall", str, file, "simulation", default="default")
    if alltoall != "default":
        if alltoall not in SMPI_ALLTOALL_ALGORITHMS:
            raise InputError(file, "simulation.alltoall", f"unknown SMPI alltoall algorithm {alltoall!r}",
                             f"one of: {', '.join(SMPI_ALLTOALL_ALGORITHMS)} (LAM's simple order is "
                             "application.alltoall_algorithm = \"lam_simple\")")
        try:
            check_alltoall_algorithm(alltoall, ranks)
        except ValueError as exc:
            raise InputError(file, "simulation.alltoall", str(exc), "pick another algorithm or rank count") from None
        app_alg = getattr(params, "alltoall_algorithm", "default")
        if app_alg not in ("default", alltoall):
            raise InputError(file, "simulation.alltoall", f"conflicts with application.alltoall_algorithm = "
                             f"{app_alg!r}", "set the algorithm in one place only")
    cfg = _get(sim, "config", dict, file, "simulation", default={})
    for k, v in cfg.items():
        if not isinstance(v, str | int | float | bool):
            raise InputError(file, f"simulation.config.{k}", "SimGrid settings must be strings or numbers",
                             f'write "{k}" = "VALUE"')
        if k.strip() == "smpi/simulate-computation":
            raise InputError(file, f"simulation.config.{k}", "disabling computation also skips compute actions "
                             "of a replay", "remove this setting")
    simulation = SimulationOptions(
        alltoall=alltoall,
        reference_core_speed=_get(sim, "reference_core_speed", float, file, "simulation", default=None,
                                  check=_positive, fix="flop/s of the core the application's seconds refer to"),
        timeout=_get(sim, "timeout", float, file, "simulation", default=3600.0, check=_positive),
        paje=_get(sim, "paje", bool, file, "simulation", default=False),
        config=tuple(sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v)) for k, v in cfg.items())),
    )
    extra = {k: data[k] for k in ("noise", "instrumentation", "tracing") if k in data}
    return Scenario(name=name, seed=seed, ranks=ranks, platform=platform, application_kind=kind,
                    application=params, simulation=simulation, source=file, extra=extra)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario TOML file."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "(file)", "does not exist", "check the path")
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(p), "(syntax)", f"not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except UnicodeDecodeError:
        raise InputError(str(p), "(encoding)", "not UTF-8 text", "save the file as UTF-8") from None
    return from_mapping(data, str(p))
