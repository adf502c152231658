"""Values that cannot work physically: sizes beyond any node's memory, rank-steps beyond memory, excess beyond a
year, a run longer than the simulated time waitlab resolves.  The schema's validators and the scenario loader
refuse them with one clear message (issue 10); the collective buffers of a node's ranks against that node's memory
are checked once the platform is rendered (:func:`buffer_problem`), and so are the trace memory and buffer of
``[tracing]`` (:func:`tracing_problem`); a run's length once it is simulated (:func:`makespan_problem`).

Simulated time
--------------
waitlab simulates runs of at most :data:`MAX_SIMULATED_SECONDS` = 2^32 s (4.29e9 s, about 136 years) and promises
that every time it reports, and every difference of two times, resolves a microsecond:

* the event table holds times as float64 seconds.  Near a time T the spacing of doubles is
  2^(floor(log2 T) - 52) s: below 2^32 s it is at most 2^-21 s = 0.48 us, so a time is exact to 0.24 us and a
  wait or a message of a microsecond keeps its size.  At 4.2e15 s (a run 1e6 times longer) the spacing is 0.5 s
  and microsecond messages vanished from the numbers (communication 0.0000);
* the exports (the Chrome trace, OTF2) hold times as int64 nanoseconds, which end at 2^63 ns = 9.2e9 s: a longer
  run was written as timestamps of -9.2e15 us.  2^32 s leaves them a factor of two;
* nanosecond resolution (a spacing of at most 1 ns) holds only below 2^22 s = 4.2e6 s (48 days): waitlab does
  not promise it for longer runs, whose times still resolve a microsecond.

A synthetic application whose parameters ask one rank for more compute than that (:func:`work_problem`, from
the parameters alone: generating the operations of a long run can take longer than the check is worth) is refused
when the scenario is loaded; any run whose simulated makespan passes it (an OTF2 trace, a slow reference core,
noise, waits) is refused once simulated, before anything is written (:func:`makespan_problem`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from waitlab.models.apps.common import process_grid
from waitlab.platforms import list_platforms, load_platform

#: Most rank-steps (ranks x steps) of a synthetic application: beyond this its operation table alone passes
#: tens of GiB (a 4-rank, 10^9-step stencil asked numpy for 30 GiB before this check).
MAX_RANK_STEPS = 1 << 27
#: Largest injected excess per step (s): a year; larger values overflow SimGrid's clock arithmetic.
MAX_EXCESS_SECONDS = 3.2e7
#: Largest message (bytes) SimGrid 3.32's replay takes: it parses a count as a C ``int`` and stops with
#: "out of range" above (``src/smpi/internals/smpi_replay.cpp``, line 84; checked: 3e9 bytes per peer fails).
MAX_MESSAGE_BYTES = 2**31 - 1
#: Bytes of one matrix element of the matmul application (double precision).
MATRIX_ELEMENT_BYTES = 8
#: Longest simulated run (s): 2^32 s, about 136 years.  Below it a double resolves 0.48 us (2^-21 s) of simulated
#: time, and the exports' int64 nanoseconds (which end at 9.2e9 s) keep a factor of two (module doc).
MAX_SIMULATED_SECONDS = float(2**32)
#: How :data:`MAX_SIMULATED_SECONDS` is said in messages.
LIMIT_TEXT = (f"{MAX_SIMULATED_SECONDS:.4g} s (2^32 s, about 136 years), the longest run waitlab simulates: past it "
              "a double no longer resolves a microsecond of simulated time")


def is_platform_path(name: str) -> bool:
    """Whether a ``platform.name`` is a file path (as :func:`waitlab.platforms.load_platform` decides)."""
    return name.endswith(".toml") or "/" in name or "\\" in name


@functools.cache
def largest_node_memory() -> float:
    """The largest node memory (bytes) of the built-in platforms: no message can be larger."""
    return max(float(load_platform(n).node.memory) for n in list_platforms())


def application_problem(params: Any, ranks: int) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when an application's parameters cannot work physically, else ``None``.

    Checks: ranks x steps within :data:`MAX_RANK_STEPS`; every ``*bytes*`` size within the largest node memory
    of any platform and within :data:`MAX_MESSAGE_BYTES`; every ``*seconds*`` value and imbalance magnitude
    within :data:`MAX_EXCESS_SECONDS`; a matmul broadcast within :data:`MAX_MESSAGE_BYTES`.
    """
    if hasattr(params, "matrix_size") and hasattr(params, "block_columns"):  # matmul broadcasts M x L doubles
        nbytes = int(params.matrix_size) * int(params.block_columns) * MATRIX_ELEMENT_BYTES
        if nbytes > MAX_MESSAGE_BYTES:
            return ("application.matrix_size", f"a broadcast of {params.matrix_size} x {params.block_columns} "
                    f"doubles is {nbytes:.3g} bytes, more than SimGrid's replay takes in one message "
                    f"({MAX_MESSAGE_BYTES} bytes)", "use a smaller matrix_size or block_columns")
    steps = params.n_steps() if callable(getattr(params, "n_steps", None)) else getattr(params, "steps", None)
    if isinstance(steps, int) and ranks * steps > MAX_RANK_STEPS:
        return ("application.steps", f"{ranks} ranks x {steps} steps = {ranks * steps:.3g} rank-steps; waitlab "
                f"simulates at most {MAX_RANK_STEPS:.3g} (the operation table would not fit in memory)",
                "use fewer steps or ranks" + (" (or a smaller matrix_size)" if hasattr(params, "matrix_size")
                                              else ""))
    fields = getattr(params, "__dataclass_fields__", {})
    for name in fields:
        value = getattr(params, name, None)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        # every node holds more than MAX_MESSAGE_BYTES: the platforms are loaded only for a size above it
        if "bytes" in name and value > MAX_MESSAGE_BYTES and value > largest_node_memory():
            return (f"application.{name}", f"{value:g} bytes is larger than the memory of any platform's node "
                    f"({largest_node_memory():g} bytes)", "use a message size that fits in memory")
        if "bytes" in name and value > MAX_MESSAGE_BYTES:
            return (f"application.{name}", f"{value:g} bytes is more than SimGrid's replay takes in one message "
                    f"({MAX_MESSAGE_BYTES} bytes: it reads a size as a C int)", "use at most 2 GiB - 1 per message")
        if "seconds" in name and value > MAX_EXCESS_SECONDS:
            return (f"application.{name}", f"{value:g} s per step is more than a year",
                    f"use at most {MAX_EXCESS_SECONDS:g} s")
    grid = getattr(params, "grid", None)
    if grid is not None:
        try:
            process_grid(ranks, grid)
        except ValueError as exc:
            return ("application.grid", str(exc), grid_fix(ranks))
    if getattr(params, "KIND", "") == "pingpong" and (ranks < 2 or ranks % 2):
        return ("scenario.ranks", f"pingpong pairs ranks (0, 1), (2, 3), ...: needs an even rank count of at "
                f"least 2, got {ranks}", f"use ranks = {max(2, ranks + ranks % 2)}")
    for i, spec in enumerate(getattr(params, "imbalance", ()) or ()):
        magnitude = getattr(spec, "magnitude", 0.0)
        if isinstance(magnitude, int | float) and magnitude > MAX_EXCESS_SECONDS:
            return (f"application.imbalance[{i}].magnitude", f"{magnitude:g} s per step is more than a year",
                    f"use at most {MAX_EXCESS_SECONDS:g} s")
    return work_problem(params, ranks)


def grid_fix(ranks: int) -> str:
    """The fix of a process grid that does not hold ``ranks``: grids whose product is ``ranks``.

    >>> grid_fix(8)[:60]
    'write grid = [4, 2] (or [8, 1]: two numbers whose product is'
    >>> grid_fix(7)
    'write grid = [7, 1] (two numbers whose product is the 7 ranks), or leave grid out (waitlab then uses [7, 1])'
    """
    px, py = process_grid(ranks)
    other = [(ranks // d, d) for d in range(1, math.isqrt(ranks) + 1) if ranks % d == 0 and d != py][:3]
    more = " or ".join(f"[{a}, {b}]" for a, b in other)
    return (f"write grid = [{px}, {py}] ({f'or {more}: ' if more else ''}two numbers whose product is the {ranks} "
            f"ranks), or leave grid out (waitlab then uses [{px}, {py}])")


def _round(x: float, up: bool) -> float:
    """``x`` to three significant digits, rounded down (or up): a bound that stays on the safe side."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10.0 ** (math.floor(math.log10(x)) - 2)
    return (math.ceil(x / scale) if up else math.floor(x / scale)) * scale


def _steps(n: int) -> str:
    return f"{n} step" + ("" if n == 1 else "s")


def _changed_most(params: Any, keys: Sequence[str]) -> str:
    """The key of ``keys`` whose value is furthest above its default (the one the user most likely raised)."""
    fields = getattr(params, "__pydantic_fields__", {})

    def ratio(key: str) -> float:
        default = getattr(fields.get(key), "default", None)
        value = float(getattr(params, key))
        return value / default if isinstance(default, int | float) and default > 0 else math.inf * (value > 0)

    return max(keys, key=ratio)


def work_problem(params: Any, ranks: int) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when the parameters of a synthetic application ask one rank for more compute than
    :data:`MAX_SIMULATED_SECONDS`, else ``None``.

    A rank's compute is ``n_steps`` times its own work per step (:meth:`~waitlab.models.apps.common.AppParams
    .work_terms`) plus each imbalance's mean excess on it (:meth:`~waitlab.models.apps.imbalance.Imbalance.nominal`)
    times the steps it applies to: from the parameters alone, a random part with its mean.  The field is the key
    of the largest part on that rank; the fix names the value of that key that fits, and the steps that fit.

    >>> from waitlab.models.apps.stencil import StencilParams
    >>> work_problem(StencilParams(steps=300, dims=1, compute_seconds=3.2e7), 2)[2]
    'set compute_seconds <= 1.43e+07, or steps = 134 or fewer'
    >>> work_problem(StencilParams(steps=100, dims=1, compute_seconds=3.2e7), 2) is None
    True
    """
    terms = getattr(params, "work_terms", None)
    if not callable(terms):  # a program or a trace: no parameters to count from
        return None
    n_steps = int(params.n_steps())
    parts: list[tuple[Any, str, np.ndarray, bool]] = []  # (WorkTerm or Imbalance index, what, s per rank, per step)
    for t in terms(ranks):
        parts.append((t, f"{t.what} per step x {_steps(n_steps)}", np.asarray(t.seconds, np.float64) * n_steps, True))
    for i, spec in enumerate(params.imbalance):
        every = isinstance(spec.steps, str)
        count = n_steps if every else len(spec.steps)
        parts.append((i, f"imbalance[{i}]: a mean {spec.magnitude:g} s per step x {_steps(count)}",
                      spec.nominal(ranks) * count, every))
    if not parts:
        return None
    total = np.sum([p[2] for p in parts], axis=0)
    rank = int(np.argmax(total))
    if total[rank] <= MAX_SIMULATED_SECONDS:
        return None
    part, what, seconds, _ = max(parts, key=lambda p: float(p[2][rank]))
    mine, rest = float(seconds[rank]), float(total[rank] - seconds[rank])
    others = f", and {rest:.3g} s more from the other parts" if rest > 0 else ""
    problem = (f"the parameters ask rank {rank} for {total[rank]:.4g} s of compute ({what}{others}), more than "
               f"{LIMIT_TEXT}")
    room = MAX_SIMULATED_SECONDS - rest
    fixes = []
    if isinstance(part, int):  # an imbalance
        key = f"imbalance[{part}].magnitude"
        if room > 0:
            fixes.append(f"{key} <= {_round(params.imbalance[part].magnitude * room / mine, up=False):g}")
    else:
        keys = (part.key, *part.also)
        key = _changed_most(params, keys)
        if room > 0:
            value = float(getattr(params, part.key))
            fixes.append(f"{part.key} >= {_round(value * mine / room, up=True):g}" if part.inverse else
                         f"{part.key} <= {_round(value * room / mine, up=False):g}")
            if part.also:
                both = sum(float(getattr(params, k)) for k in part.also)
                fixes.append(f"{' + '.join(part.also)} <= {_round(both * room / mine, up=False):g}")
    per_step = sum(float(p[2][rank]) / n_steps for p in parts if p[3])
    fixed = sum(float(p[2][rank]) for p in parts if not p[3])
    listed = max((max(s.steps) for s in params.imbalance if not isinstance(s.steps, str)), default=-1)
    steps = math.floor((MAX_SIMULATED_SECONDS - fixed) / per_step) if per_step > 0 else 0
    if steps > listed and steps >= 1:
        fixes.append(f"steps = {steps} or fewer")
    fix = ("set " + ", or ".join(fixes)) if fixes else f"make {key} smaller"
    return f"application.{key}", problem, fix


def makespan_problem(scenario: Any, makespan: float, core_speed: float | None = None) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when a simulated run lasts longer than :data:`MAX_SIMULATED_SECONDS`, else ``None``.

    Called once a run is simulated, before its wait states are computed or anything is written: the times of a
    longer run lose their microseconds and its exports would overflow.  The field names what made the run long:
    ``simulation.reference_core_speed`` when it makes the platform's cores slower than the application's
    seconds (``core_speed``: flop/s of the platform's cores), else the largest part of a synthetic application's
    compute (:func:`work_problem`), else the application.

    >>> from types import SimpleNamespace as NS
    >>> sc = NS(simulation=NS(reference_core_speed=None), application=None, noise=None, application_kind="trace")
    >>> makespan_problem(sc, 1e3) is None, makespan_problem(sc, 5e9)[0]
    (True, 'application')
    """
    if not makespan > MAX_SIMULATED_SECONDS:  # NaN: nothing to judge
        return None

    def problem(why: str = "") -> str:
        return (f"the simulated run lasts {makespan:.4g} s{why}, more than {LIMIT_TEXT} (and the outputs' int64 "
                "nanoseconds end at 9.2e9 s); nothing was written")

    noise = getattr(scenario, "noise", None)
    noisy = noise is not None and getattr(noise, "model", "none") != "none"
    also = ", or less [noise] (its detours slow the hosts)" if noisy else ""
    ref = getattr(scenario.simulation, "reference_core_speed", None)
    if ref is not None and core_speed is not None and ref > core_speed:
        return ("simulation.reference_core_speed", problem(f" (the platform's {core_speed:g} flop/s cores take "
                f"{ref / core_speed:.3g} times the application's seconds of a {ref:g} flop/s reference core)"),
                f"lower reference_core_speed towards {core_speed:g} flop/s or remove it, or shorten the run (fewer "
                f"steps or less compute per step){also}")
    params = scenario.application
    if callable(getattr(params, "work_terms", None)):
        n = scenario.ranks if isinstance(getattr(scenario, "ranks", None), int) else 1
        terms = [(_changed_most(params, (t.key, *t.also)), float(np.max(t.seconds)) * params.n_steps(), t.inverse)
                 for t in params.work_terms(n)]
        terms += [(f"imbalance[{i}].magnitude", float(np.max(s.nominal(n))) * params.n_steps(), False)
                  for i, s in enumerate(params.imbalance)]
        key, _, inverse = max(terms, key=lambda t: t[1]) if terms else ("steps", 0.0, False)
        return (f"application.{key}", problem(), f"shorten the run: a {'larger' if inverse else 'smaller'} {key} or "
                f"fewer steps{also}")
    return ("application", problem(), f"simulate a shorter run (fewer iterations or less compute in each){also}")


def tracing_problem(tracing: Any, memory: int, platform: str) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when ``[tracing]`` gives trace memory (per node) or a trace buffer (per rank) larger
    than a node's memory (``memory``: bytes, ``node.memory`` of ``platform``), else ``None``: such a buffer could
    never fill and the run would simulate a tracer that never swaps nor flushes, as no node can.

    >>> from types import SimpleNamespace as NS
    >>> tracing_problem(NS(memory=1e15, buffer_bytes=None), 2**36, "dawning_5000a")[0]
    'tracing.memory'
    >>> tracing_problem(NS(memory=None, buffer_bytes=1e6), 2**36, "dawning_5000a") is None
    True
    """
    if tracing is None:
        return None
    for key, what, default in (("memory", "trace memory per node", "the platform's trace buffer memory"),
                               ("buffer_bytes", "a trace buffer per rank", "the rank's share of the trace memory")):
        value = getattr(tracing, key, None)
        if value is not None and value > memory:
            return (f"tracing.{key}", f"{value:g} bytes of {what} is more than a node has: {memory} bytes "
                    f"(node.memory of {platform}), so the buffer would never fill", f"set {key} to at most "
                    f"{memory} bytes, or remove {key} (its default: {default})")
    return None


def collective_buffers(params: Any, ranks: int) -> tuple[str, str, np.ndarray] | None:
    """``(field, buffers, multiple)`` of the application's collective whose buffers grow with the ranks, else
    ``None``: rank ``r`` holds ``multiple[r]`` times the ``application.<field>`` bytes during it.

    As SMPI 3.32's replay allocates them (``smpi_replay.cpp``, datatype MPI_BYTE) and an MPI program must: an
    ``alltoall`` (fft) a send and a receive buffer of ``p x bytes_per_peer`` each on every rank; a ``gather``
    (stencil) ``p x allreduce_bytes`` at its root besides each rank's own block; an ``allgather`` ``c x
    allreduce_bytes`` on every rank of a communicator of ``c`` ranks besides its own block.

    >>> from waitlab.models.apps.fft import FftParams
    >>> collective_buffers(FftParams(bytes_per_peer=8), 4)[2].tolist()
    [8.0, 8.0, 8.0, 8.0]
    """
    kind = getattr(params, "KIND", "")
    if kind == "fft":
        return ("bytes_per_peer", f"an alltoall's send and receive buffers ({ranks} x bytes_per_peer each, on every "
                "rank)", np.full(ranks, 2.0 * ranks))
    if kind != "stencil" or params.collective not in ("gather", "allgather") or not params.allreduce_every \
            or params.steps < params.allreduce_every:
        return None
    if params.collective == "gather":
        multiple = np.ones(ranks)
        multiple[params.root] += ranks
        return "allreduce_bytes", f"a gather's receive buffer at its root ({ranks} x allreduce_bytes)", multiple
    px, py = (ranks, 1) if params.dims == 1 else process_grid(ranks, params.grid)
    members = {"world": ranks, "row": px, "column": py}[params.collective_comm]
    return ("allreduce_bytes", f"an allgather's receive buffer ({members} x allreduce_bytes, on every rank)",
            np.full(ranks, 1.0 + members))


def buffer_problem(params: Any, node_of_rank: Sequence[int], memory: int, platform: str) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when the collective buffers of the ranks on one node (:func:`collective_buffers`)
    exceed the node's ``memory`` (bytes, ``node.memory`` of ``platform``), else ``None``.

    The fix names the largest value of the field that fits.  (SMPI's replay allocates these buffers for real, once
    for all ranks, in the simulating process: a size beyond any node is also beyond this machine, and SimGrid
    aborted with ``std::bad_alloc``.)
    """
    found = collective_buffers(params, len(node_of_rank))
    if found is None:
        return None
    field, buffers, multiple = found
    nbytes = int(getattr(params, field))
    per_node = np.bincount(np.asarray(node_of_rank, dtype=np.int64), weights=multiple)
    node = int(np.argmax(per_node))
    if nbytes * per_node[node] <= memory:
        return None
    on_node = int(np.count_nonzero(np.asarray(node_of_rank) == node))
    fits = int(memory // per_node[node])
    return (f"application.{field}", f"{buffers} take {nbytes * per_node[node]:.4g} bytes on node {node} "
            f"({on_node} ranks), more than its memory ({memory} bytes, node.memory of {platform})",
            f"use {field} = {fits} or less, or fewer ranks per node (platform.ranks_per_node)")
