"""The scenario schema: every section of a scenario file declared once, with pydantic v2.

Validation, the error messages (file, field, what is allowed), the scenario
reference page of the docs (:func:`waitlab.experiments.schema_reference.reference_markdown`) and the list of keys a
sweep may vary (:func:`sweepable_keys`) all come from the section models below.
The ``[application]`` table is validated by the application's own parameter
class (:mod:`waitlab.models.apps.registry` for synthetic models,
:mod:`waitlab.experiments.real_params` for programs and traces).

Examples
--------
>>> from waitlab.experiments.schema import SECTION_MODELS
>>> sorted(SECTION_MODELS)
['instrumentation', 'noise', 'platform', 'scenario', 'simulation', 'tracing']
>>> try:
...     SimulationSection.model_validate({"timeout": -1.0})
... except Exception as e:
...     print(type(e).__name__)
ValidationError
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from waitlab.errors import InputError, Picklable, unknown_name
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.models.apps.alltoall import SMPI_ALLTOALL_ALGORITHMS, USABLE_SMPI_ALLTOALL
from waitlab.models.apps.registry import APPLICATIONS
from waitlab.models.perturb.noise import DURATION_LAWS
from waitlab.models.perturb.spill_policies import POLICIES
from waitlab.models.validation import TYPE_TAGS, dotted
from waitlab.models.vocabulary import MPI_ACTIONS
from waitlab.platforms import PLATFORM_ALIASES, list_platforms
from waitlab.platforms.degraded import MIN_BANDWIDTH_FACTOR
from waitlab.platforms.figures import MIN_BANDWIDTH
from waitlab.platforms.machine import COMPUTATION_KEY, SOLVER_PRECISION, TIMING_PRECISION
from waitlab.platforms.placement import PLACEMENTS, Placement

STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

#: A scenario name becomes a folder name: letters, digits and ``._+-``, no separators, not ``.`` or ``..``.
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,99}$"
_NAME_RE = re.compile(NAME_PATTERN)

#: Largest rank count waitlab accepts (the full Sunway TaihuLight model has 163,840 core groups).
MAX_RANKS = 1 << 20
#: Longest simulation time-out accepted (one week).
MAX_TIMEOUT = 7 * 86400.0
#: One word of a ``--cfg`` setting: smpirun expands its settings unquoted (split on spaces, globbed).
_CFG_WORD = re.compile(r"^[^\s*?\[\]]+$")


class FieldProblem(Picklable, ValueError):
    """A rule broken by one key, with its fix: raised in model validators so the error names that key (``field``;
    "" in a field validator, whose error names its key already)."""

    def __init__(self, field: str, message: str, fix: str = "") -> None:
        self.field = field
        self.fix = fix  # what to write instead (default: the key's description)
        super().__init__(message)


def check_name(name: str) -> str:
    """The problem with a scenario or sweep name ('' when it is a plain folder name).

    >>> check_name("late-rank_2"), check_name("../victim") != "", check_name("..") != ""
    ('', True, True)
    """
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in (".", ".."):
        shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:50]}... ({len(str(name))} characters)"
        return (f"{shown} is not a plain name: use 1-100 letters, digits, '.', '_', '+' or '-', starting with a "
                "letter, digit or '_' (it names the results folder)")
    return ""


def _plain(name: str) -> str:
    problem = check_name(name)
    if problem:
        raise ValueError(problem)
    return name


#: A plain folder name (scenario and sweep names): see :func:`check_name`.
PlainName = Annotated[str, AfterValidator(_plain)]


class ScenarioSection(BaseModel):
    """``[scenario]``: what the run is called, its seed and its number of MPI ranks."""

    model_config = STRICT
    name: PlainName = Field(description="plain name of the run; names the results folder", json_schema_extra={
                            "default_text": "the file's stem"})  # filled in by the loader (scenario.from_mapping)
    seed: int = Field(0, ge=0, lt=2**63, description="seed of every random draw (imbalance, noise, jitter)")
    ranks: int = Field(ge=1, le=MAX_RANKS, description="number of MPI processes")
    description: str = Field("", description="free text")


class DegradedLink(BaseModel):
    """``[[platform.degraded_link]]``: one node's network link runs at a fraction of its bandwidth (cause ``link``)."""

    model_config = STRICT
    node: int = Field(ge=0, le=MAX_RANKS, description="node whose link to its switch is degraded")
    bandwidth_factor: float = Field(ge=MIN_BANDWIDTH_FACTOR, lt=1, description="fraction of the link's bandwidth "
                                    f"left ({MIN_BANDWIDTH_FACTOR:g} <= f < 1: a link slower than a millionth of its "
                                    "model is broken, not degraded, and its transfers would soon pass the 9.2e9 s "
                                    "the outputs' int64 nanoseconds hold)")


#: The ``[platform]`` name of a run read as recorded (``[application] kind = "recorded"``): no platform is modeled.
RECORDED = "recorded"


class PlatformSection(BaseModel):
    """``[platform]``: which machine model, and how much of it."""

    model_config = STRICT
    name: str = Field(description="built-in platform (waitlab platforms) or a platform .toml path")
    nodes: int | None = Field(None, ge=1, le=MAX_RANKS, description="nodes to model (default: as the ranks need)")
    ranks_per_node: int | None = Field(None, ge=1, le=4096, description="ranks placed on each node")
    split_cores: bool = Field(False, description="one SimGrid host per core instead of one multi-core host")
    placement: Literal[PLACEMENTS] = Field("block", description="how ranks map to nodes: block, cyclic, "  # type: ignore[valid-type]
                                           "random, nodes (placement_nodes) or supernodes (spread over k)")
    placement_seed: int = Field(0, ge=0, lt=2**63, description="placement = \"random\": seed of the draw")
    placement_nodes: tuple[int, ...] = Field((), description="placement = \"nodes\": node list (one per rank, "
                                             "or nodes filled ranks_per_node each)")
    supernodes: int = Field(1, ge=1, le=MAX_RANKS, description="placement = \"supernodes\": supernodes the "
                            "nodes are spread over")
    degraded_link: tuple[DegradedLink, ...] | None = Field(None, min_length=1, description="nodes whose network "
                                                           "link is slower, a cause of kind link")

    @model_validator(mode="after")
    def _placement_keys(self) -> PlatformSection:
        nodes = [d.node for d in self.degraded_link or ()]
        if len(set(nodes)) != len(nodes):
            raise FieldProblem("degraded_link", "a node is listed twice", "give each node one "
                               "[[platform.degraded_link]]")
        unused = [("placement_nodes", bool(self.placement_nodes), "nodes"),
                  ("placement_seed", self.placement_seed != 0, "random"),
                  ("supernodes", self.supernodes != 1, "supernodes")]
        for key, given, kind in unused:  # a setting the placement ignores would be silently dropped
            if given and self.placement != kind:
                raise FieldProblem(key, f"is only used with placement = \"{kind}\" (placement is "
                                   f"\"{self.placement}\")", f"remove {key} or set placement = \"{kind}\"")
        if self.placement == "nodes" and not self.placement_nodes:
            raise FieldProblem("placement_nodes", "placement = \"nodes\" needs a node list",
                               "add placement_nodes = [0, 1, ...]")
        return self

    def placement_rule(self) -> Placement:
        """The :class:`~waitlab.platforms.placement.Placement` of this section."""
        return Placement(self.placement, self.placement_seed, self.placement_nodes, self.supernodes)

    @field_validator("name")
    @classmethod
    def _known_platform(cls, v: str) -> str:
        v = PLATFORM_ALIASES.get(v, v)  # a deprecated name resolves to the current one
        if v == RECORDED:  # a recorded run's (kind = "recorded"): none is modeled
            return v
        if not is_platform_path(v) and v not in list_platforms():
            raise ValueError(f"unknown platform {v[:60]!r}; use one of: {', '.join(list_platforms())}, or a path "
                             "to a platform .toml file")
        return v


class SimulationSection(BaseModel):
    """``[simulation]``: how SMPI runs the scenario."""

    model_config = STRICT
    alltoall: str = Field("default", description="SMPI alltoall algorithm (" + ", ".join(USABLE_SMPI_ALLTOALL)
                          + ")")
    reference_core_speed: float | None = Field(None, gt=0, le=1e18, description="flop/s of the core the "
                                               "application's seconds refer to (machine what-ifs)")
    timeout: float = Field(3600.0, gt=0, le=MAX_TIMEOUT, description="wall-clock limit of one SMPI run (s)")
    paje: bool = Field(False, description="also record SMPI's Paje trace")
    config: dict[str, str | int | float | bool] = Field(default_factory=dict,
                                                        description="extra SimGrid --cfg settings")
    contention: Literal["platform", "none"] = Field("platform", description="the platform's contention laws "
                                                    "([contention] of its file), or none (fluid max-min sharing)")
    solver_precision: float = Field(SOLVER_PRECISION, gt=0, le=0.1, description="SimGrid's maxmin/precision "
                                    "(docs/calibration.md, \"Solver precision\")")
    timing_precision: float = Field(TIMING_PRECISION, gt=0, le=1e-6, description="SimGrid's surf/precision in s: "
                                    "events closer than this are handled together (1e-7 s: all-concurrent alltoalls "
                                    "2-4x faster)")

    @field_validator("alltoall")
    @classmethod
    def _known_algorithm(cls, v: str) -> str:
        if v != "default" and v not in SMPI_ALLTOALL_ALGORITHMS:
            raise FieldProblem("", f"unknown SMPI alltoall algorithm {v[:60]!r}", "use one of: "
                               f"{', '.join(USABLE_SMPI_ALLTOALL)} (LAM's simple order is "
                               "application.alltoall_algorithm = \"lam_simple\")")
        return v

    @field_validator("config")
    @classmethod
    def _no_skip_compute(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k, val in v.items():
            if k.strip() == COMPUTATION_KEY:
                raise FieldProblem(k, "disabling computation also skips compute actions of a replay: remove this "
                                   "setting")
            if isinstance(val, float) and not math.isfinite(val):
                raise FieldProblem(k, "must be finite")
            text = str(val)
            if not _CFG_WORD.match(str(k)) or not _CFG_WORD.match(text):
                bad = k if not _CFG_WORD.match(str(k)) else text
                raise FieldProblem(k, f"{bad[:60]!r} is empty or holds spaces or the shell characters * ? [ ]: "
                                   "smpirun would split it into several --cfg settings; give one value without "
                                   "spaces per key")
        return v

    def config_pairs(self) -> tuple[tuple[str, str], ...]:
        """The settings as sorted ``(key, value)`` strings, as SimGrid reads them."""
        return tuple(sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v))
                            for k, v in self.config.items()))


Phase = float | Literal["random", "shared"]


class NoiseSection(BaseModel):
    """``[noise]``: system noise as detours of the CPU (per node or per core) and compute jitter."""

    model_config = STRICT
    model: Literal["none", "periodic", "poisson", "signature"] = Field("none", description="detour model")
    scope: Literal["node", "core"] = Field("node", description="one detour pattern per node or per core")
    frequency: float | None = Field(None, ge=0, le=1e9, description="periodic: detours per second")
    duration: float | None = Field(None, ge=0, le=1e6, description="periodic/poisson: seconds per detour (mean)")
    phase: Phase = Field("random", description="periodic: offset in s, \"random\" per host or \"shared\"")
    rate: float | None = Field(None, ge=0, le=1e9, description="poisson: arrivals per second")
    law: Literal[DURATION_LAWS] = Field("constant", description="poisson: law of the detour durations")  # type: ignore[valid-type]
    pareto_shape: float = Field(2.5, gt=1, le=1e3, description="poisson, law = pareto: shape (> 1)")
    file: str | None = Field(None, min_length=1, description="signature: noise file of START DURATION lines "
                             "(relative to the scenario file)")
    period: float | None = Field(None, gt=0, le=1e9, description="signature: repeat period (s)")
    offset: Phase = Field("random", description="signature: offset in s, \"random\" or \"shared\"")
    jitter_std: float = Field(0.0, ge=0, le=10, description="relative standard deviation of compute jitter")
    jitter_mean: float = Field(0.0, ge=-1, le=10, description="relative mean of compute jitter")
    horizon_factor: float = Field(4.0, ge=1, le=1e3, description="detours are drawn up to this x the makespan")
    nodes: tuple[Annotated[int, Field(ge=0)], ...] | None = Field(None, min_length=1, description="only these "
                                                                  "nodes get detours (absent: every node)")

    _USES = {"none": set(), "periodic": {"frequency", "duration", "phase"},
             "poisson": {"rate", "duration", "law", "pareto_shape"}, "signature": {"file", "period", "offset"}}
    _COMMON = {"model", "scope", "jitter_std", "jitter_mean", "horizon_factor", "nodes"}

    def used_keys(self) -> set[str]:
        """The keys this section's model reads (the others must not be given)."""
        return set(self._USES[self.model]) | set(self._COMMON)

    @field_validator("phase", "offset", mode="before")
    @classmethod
    def _phase_value(cls, v: Any, info: ValidationInfo) -> Any:
        # the union's own errors would name "random" and "shared" only (inf is not a float here): say every choice
        if v in ("random", "shared") or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)):
            return v
        key = info.field_name
        what = "into the period" if key == "phase" else "into the signature"
        raise FieldProblem("", f'unknown value (allowed: a finite number of seconds >= 0 {what}, "random" or '
                           '"shared")',
                           f'set {key} = 0.0 (or another number of seconds {what}), {key} = "random" (a random '
                           f'offset per host) or {key} = "shared" (one random offset for every host)')

    @model_validator(mode="after")
    def _model_keys(self) -> NoiseSection:
        uses = self._USES[self.model]
        for key in sorted(self.model_fields_set - uses - self._COMMON):
            users = " or ".join(f'"{m}"' for m, keys in self._USES.items() if key in keys)
            raise FieldProblem(key, f"{key} is not used by model = {self.model!r}: remove it, or choose the model that "
                               "uses it", f"remove {key} from [noise], or set model = {users} (the model that reads "
                               f"{key})")
        need = {"periodic": ("frequency", "duration"), "poisson": ("rate", "duration"),
                "signature": ("file",)}.get(self.model, ())
        example = {"frequency": "1000.0", "duration": "2.5e-5", "rate": "100.0", "file": '"noise.txt"'}
        for key in need:
            if getattr(self, key) is None:
                raise FieldProblem(key, f"{key} is required for model = {self.model!r}",
                                   f"add {key} = {example[key]} to [noise] "
                                   f"({type(self).model_fields[key].description})")
        if self.model == "periodic" and self.frequency and self.duration and self.duration * self.frequency >= 1:
            raise FieldProblem("duration", f"a {self.duration:g} s detour every {1 / self.frequency:g} s leaves "
                               "no time to compute: make duration shorter than 1 / frequency",
                               f"set duration = {0.1 / self.frequency:g} (a tenth of the {1 / self.frequency:g} s "
                               f"period), or frequency = {0.1 / self.duration:g} (a detour of {self.duration:g} s "
                               "every ten times as long)")
        if self.model == "poisson" and self.rate and self.duration and self.rate * self.duration >= 1:
            raise FieldProblem("rate", f"rate x duration = {self.rate * self.duration:g}: the host would always "
                               "be in a detour; make rate x duration < 1",
                               f"set rate = {0.1 / self.duration:g} (arrivals per second; rate x duration = 0.1), "
                               f"or duration = {0.1 / self.rate:g}")
        for key, period in (("phase", 1 / self.frequency if self.frequency else None), ("offset", self.period)):
            value = getattr(self, key)
            if isinstance(value, str) or value >= 0:
                continue
            what = "into the period" if key == "phase" else "into the signature"
            if period is not None and period > 0:
                same = value % period
                if min(same, period - same) <= period * 1e-9:  # a multiple of the period, up to rounding
                    same = 0.0
                fix = (f"set {key} = {same:.6g} (the same instant: {key} is taken modulo the {period:g} s period), "
                       f'or {key} = "random"')
            else:
                fix = f'set {key} = 0.0 or a positive number of seconds {what}, or {key} = "random"'
            raise FieldProblem(key, f"must be >= 0 seconds ({what}), got {value:g}", fix)
        return self


def lists_every_key(section: BaseModel) -> bool:
    """Whether ``section`` was given every key that has a value (what :meth:`Scenario.resolved` writes: a resolved
    scenario file, valid input again); a hand-written section gives only the keys it changes."""
    fields = type(section).model_fields
    return all(name in section.model_fields_set for name, f in fields.items() if f.default is not None)


class InstrumentationSection(BaseModel):
    """``[instrumentation]``: what a tracer records and what each record costs."""

    model_config = STRICT
    events: Literal["none", "mpi", "regions", "all"] = Field("mpi", description="which events are recorded")
    only: tuple[str, ...] = Field((), description="record only these actions or regions")
    record_bytes: int = Field(64, ge=0, le=1 << 30, description="bytes per record")
    payload: float = Field(0.0, ge=0, le=1, description="fraction of the message bytes recorded too")
    fixed_cost: float = Field(0.0, ge=0, le=10, description="seconds per record")
    copy_cost: float = Field(0.0, ge=0, le=1, description="seconds per byte copied")
    where: Literal["after", "before", "both"] = Field("after", description="where the overhead is paid")

    @model_validator(mode="after")
    def _only_not_empty(self) -> InstrumentationSection:
        # an empty list records everything (as no list does): a hand-written `only = []` means something else.
        # A resolved scenario lists every key, `only = []` included, for "everything": accepted as such.
        if "only" in self.model_fields_set and not self.only and not lists_every_key(self):
            raise FieldProblem("only", "an empty list selects nothing, and waitlab would record every event (as "
                               "without only): name the MPI actions or regions to record, e.g. only = [\"recv\"], "
                               "remove only to record every event, or set events = \"none\" to record none")
        if self.events == "none" and self.only:  # nothing is recorded: any name selects nothing
            names = ", ".join(repr(n) for n in self.only[:3]) + (", ..." if len(self.only) > 3 else "")
            raise FieldProblem("only", f"{names}: events = \"none\" records nothing, so only selects nothing",
                               'remove only to record nothing, or set events = "mpi" (MPI calls), "regions" or '
                               '"all" to record what only names')
        if self.events == "mpi":  # only MPI calls are recorded: any other name selects nothing
            other = [n for n in self.only if n not in MPI_ACTIONS]
            if other:
                raise FieldProblem("only", f"{other[0]!r} is not an MPI action, and events = \"mpi\" records only "
                                   "MPI calls: it would select nothing",
                                   f'set events = "all" (or "regions") to record region {other[0]!r}, or name MPI '
                                   'actions only, e.g. only = ["recv"]')
        return self


class TracingSection(BaseModel):
    """``[tracing]``: the trace buffer, the disk, and the spilling policy."""

    model_config = STRICT
    policy: Literal[tuple(POLICIES)] = Field("keep", description="spilling policy")  # type: ignore[valid-type]
    memory: float | None = Field(None, gt=0, le=1e15, description="bytes per node left for trace buffers")
    buffer_bytes: float | None = Field(None, gt=0, le=1e15, description="bytes per rank of the trace buffer")
    swap_factor: float = Field(74.8, ge=1, le=1e6, description="per-MB cost factor past memory (Okita et al.: 74.8)")
    disk_bandwidth: float | None = Field(None, ge=MIN_BANDWIDTH, le=1e13, description="bytes per second per node")
    disk_latency: float | None = Field(None, ge=0, le=1e3, description="seconds per flush")
    writeback_cost: float = Field(0.0, ge=0, le=1, description="seconds per flushed byte")
    tau: float = Field(1.0, gt=0, le=1e5, description="fixed duration of the swap-out function f (s)")
    every: int | Literal["auto"] = Field(1, description="f after every N-th synchronisation point, or \"auto\"")
    sync: Literal["collectives", "steps"] = Field("collectives", description="synchronisation points of f")
    fill_level: float = Field(0.8, gt=0, le=1, description="fill level that triggers a synchronised flush")
    safety: float = Field(1.5, ge=1, le=1e3, description="safety factor of predictive flushes")
    window: int = Field(0, ge=0, le=1 << 30, description="intervals a predictive policy looks back (0 = all)")

    #: The policy parameters and the policies that read them (the others ignore them).
    _USES: ClassVar[dict[str, tuple[str, ...]]] = {
        "tau": ("swapout_f",), "every": ("swapout_f",), "sync": ("swapout_f",),
        "fill_level": ("vampir_sync", "padded_sync"), "safety": ("predictive_sync",), "window": ("predictive_sync",)}

    @field_validator("memory", "buffer_bytes")
    @classmethod
    def _whole_bytes(cls, v: float | None, info: ValidationInfo) -> float | None:
        # a buffer holds whole bytes: 100.5 would be compared with whole-byte records as if half a byte fitted
        if v is not None and math.isfinite(v) and v != math.floor(v):
            key = info.field_name
            per = "per rank" if key == "buffer_bytes" else "per node"
            raise FieldProblem("", f"{v!r} bytes is not a whole number of bytes",
                               f"set {key} = {max(math.floor(v), 1):.0f} (bytes {per})")
        return v

    @model_validator(mode="after")
    def _policy_keys(self) -> TracingSection:
        if isinstance(self.every, int) and self.every < 1:
            raise FieldProblem("every", f"must be an integer >= 1 or \"auto\", got {self.every}",
                               'set every = 1 (f after every synchronisation point), or every = "auto" (the largest '
                               "N for which no buffer overflows between two f calls)")
        # as [noise] refuses keys its model does not read; a resolved scenario (every key listed) keeps the
        # defaults of the other policies' parameters, so a default value is refused only in a hand-written section
        complete = lists_every_key(self)
        for key, policies in self._USES.items():
            if self.policy in policies or key not in self.model_fields_set:
                continue
            if getattr(self, key) != type(self).model_fields[key].default or not complete:
                users = " or ".join(repr(p) for p in policies)
                raise FieldProblem(key, f"{key} is not used by policy = {self.policy!r} (only by {users}): remove "
                                   "it, or choose the policy that uses it",
                                   f"remove {key} from [tracing], or set policy = "
                                   + " or ".join(f'"{p}"' for p in policies))
        return self


#: Every section of a scenario file except ``[application]`` (validated by the application's class).
SECTION_MODELS: dict[str, type[BaseModel]] = {
    "scenario": ScenarioSection, "platform": PlatformSection, "simulation": SimulationSection,
    "noise": NoiseSection, "instrumentation": InstrumentationSection, "tracing": TracingSection,
}
SECTIONS = ("scenario", "platform", "application", "simulation", "noise", "instrumentation", "tracing")
OPTIONAL_SECTIONS = ("simulation", "noise", "instrumentation", "tracing")
PERTURBATION_SECTIONS = ("noise", "instrumentation", "tracing")


def _fix_for(model: type[BaseModel] | None, field: str, err: Any) -> str:
    ctx = err.get("ctx") or {}
    if err["type"] == "extra_forbidden" and model is not None:
        return f"allowed keys: {', '.join(model.model_fields)}"
    if err["type"] == "literal_error":
        return f"use one of: {ctx.get('expected', '')}"
    if model is not None and field in model.model_fields:
        desc = model.model_fields[field].description or ""
        if err["type"] == "missing":
            return f"add {field} = ... ({desc})"
        rule = _MESSAGES.get(err["type"], "")
        if err["type"] == "too_short" and not model.model_fields[field].is_required():
            n = ctx.get("min_length", 1)
            return (f"list at least {n} {'entry' if n == 1 else 'entries'} in {field}, or remove {field}"
                    + (f" ({desc})" if desc else ""))
        if rule.startswith("must be "):  # a range or type rule: say what to give, then what the key is
            return f"give {field} a value that is {rule.removeprefix('must be ').format(**ctx)}" + \
                (f" ({desc})" if desc else "")
        return desc
    return ""


_MESSAGES = {
    "greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}", "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}", "int_type": "must be an integer", "int_from_float": "must be an integer",
    "float_type": "must be a number", "bool_type": "must be true or false", "string_type": "must be a string",
    "finite_number": "must be a finite number", "literal_error": "unknown value (allowed: {expected})",
    "extra_forbidden": "unknown key", "missing": "is required", "dict_type": "must be a table",
    "tuple_type": "must be a list", "string_too_short": "must not be empty", "string_pattern_mismatch":
    "has characters that are not allowed", "too_short": "must have at least {min_length} entries",
}


def near_miss(unknown: Iterable[Any], missing: str) -> str | None:
    """The key among ``unknown`` (keys a table should not have) that looks like a misspelt ``missing`` key.

    >>> near_miss(["rank"], "ranks"), near_miss(["colour"], "ranks")
    ('rank', None)
    """
    close = difflib.get_close_matches(missing, [str(k) for k in unknown], n=1, cutoff=0.6)
    return close[0] if close else None


def require_key(table: Mapping[str, Any], section: str, key: str, allowed: Iterable[str], file: str,
                fix: str) -> None:
    """Refuse a ``table`` of ``[section]`` without ``key``: name an unknown key that looks like it first
    ("unknown key 'rank' (did you mean 'ranks'?)"), else say ``key`` is required (with ``fix``)."""
    if key in table:
        return
    typo = near_miss((k for k in table if k not in set(allowed)), key)
    if typo is not None:
        raise InputError(file, f"{section}.{typo}", f"unknown key {typo!r} (did you mean {key!r}?)",
                         f"rename {typo} to {key}")
    raise InputError(file, f"{section}.{key}", "is required", fix)


def raise_validation(exc: ValidationError, file: str, section: str, model: type[BaseModel] | None) -> None:
    """Turn the first error of a pydantic :class:`ValidationError` into one :class:`InputError`.

    A required key that is missing next to an unknown key that looks like it (``nme`` for ``name``) is reported
    as that unknown key, with the key it probably means.
    """
    errors = exc.errors(include_url=False)
    for e in errors:  # union members tag the location with their type: drop the tags
        e["loc"] = tuple(p for p in e["loc"] if not (isinstance(p, str) and (p in TYPE_TAGS or "[" in p)))
    err = errors[0]
    same = [e for e in errors if e["loc"] == err["loc"]]
    err = next((e for e in same if e["type"] == "literal_error"), err)
    loc = tuple(err["loc"])
    if err["type"] == "missing" and loc:
        extra = (e["loc"][-1] for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == loc[:-1])
        typo = near_miss(extra, str(loc[-1]))
        if typo is not None:
            raise InputError(file, f"{section}.{dotted((*loc[:-1], typo))}", f"unknown key {typo!r} (did you mean "
                             f"{loc[-1]!r}?)", f"rename {typo} to {loc[-1]}") from None
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldProblem) and cause.field:
        loc = (*loc, cause.field)
    fix_model, field = _innermost(model, loc)
    where = f"{section}.{dotted(loc)}" if loc else section
    if err["type"] == "extra_forbidden" and fix_model is not None:  # with the allowed key it looks like
        raise unknown_name(file, where, field, fix_model.model_fields, _fix_for(fix_model, field, err)) from None
    ctx = err.get("ctx") or {}
    template = _MESSAGES.get(err["type"])
    msg = template.format(**ctx) if template is not None else err["msg"].removeprefix("Value error, ")
    if err["type"] == "too_short" and ctx.get("min_length") == 1:
        msg = "must have at least 1 entry"
    if "input" in err and err["type"] not in ("missing", "extra_forbidden") and not isinstance(err["input"], dict):
        inp = err["input"]
        got = repr(list(inp) if isinstance(inp, tuple) else inp)[:80]  # a TOML array (frozen to a tuple) as written
        msg = msg if got in msg else f"{msg}, got {got}"  # a message that quotes the value says it once
    fix = cause.fix if isinstance(cause, FieldProblem) and cause.fix else _fix_for(fix_model, field, err)
    raise InputError(file, where, msg, fix) from None


def _innermost(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, str]:
    """The model and key an error location ends in: ``degraded_link[0].node`` is ``node`` of the table model of
    ``degraded_link`` (so the fix names ``node``, not the table)."""
    field = str(loc[0]) if loc else ""
    for part in loc[1:]:
        if isinstance(part, int):
            continue
        sub = _table_model(model.model_fields[field].annotation) if model and field in model.model_fields else None
        if sub is None:
            break
        model, field = sub, str(part)
    return model, field


def _table_model(annotation: Any) -> type[BaseModel] | None:
    """The section model inside a field's type (``tuple[DegradedLink, ...] | None``: DegradedLink), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in get_args(annotation) if (m := _table_model(a)) is not None), None)


def validate_section(name: str, table: Any, file: str) -> BaseModel:
    """Validate one section table with its model (``InputError`` naming the file and key on failure)."""
    model = SECTION_MODELS[name]
    if not isinstance(table, dict):
        raise InputError(file, name, "must be a table", f"write it as [{name}]")
    try:
        return model.model_validate(freeze(table))
    except ValidationError as exc:
        raise_validation(exc, file, name, model)
        raise  # (unreachable)


def freeze(x: Any) -> Any:
    """TOML data with lists as tuples (the schema's sequences are tuples)."""
    if isinstance(x, dict):
        return {k: freeze(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return tuple(freeze(v) for v in x)
    return x


def sweepable_keys(kind: str | None = None) -> list[str]:
    """Dotted keys a sweep may vary: every key of every section, plus the keys of application ``kind``.

    >>> "instrumentation.fixed_cost" in sweepable_keys(), "scenario.ranks" in sweepable_keys()
    (True, True)
    >>> "application.halo_bytes" in sweepable_keys("stencil")
    True
    """
    keys = [f"{s}.{k}" for s, m in SECTION_MODELS.items() for k in m.model_fields]
    if kind in APPLICATIONS:
        keys += [f"application.{k}" for k in APPLICATIONS[kind].__pydantic_fields__]  # type: ignore[attr-defined]
    return keys
