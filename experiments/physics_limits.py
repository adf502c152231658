"""Values that cannot work physically: sizes beyond any node's memory, rank-steps beyond memory, excess beyond a
year.  The schema's validators and the scenario loader refuse them with one clear message (issue 10)."""

from __future__ import annotations

import functools
from typing import Any

from waitlab.platforms import list_platforms, load_platform

#: Most rank-steps (ranks x steps) of a synthetic application: beyond this its operation table alone passes
#: tens of GiB (a 4-rank, 10^9-step stencil asked numpy for 30 GiB before this check).
MAX_RANK_STEPS = 1 << 27
#: Largest injected excess per step (s): a year; larger values overflow SimGrid's clock arithmetic.
MAX_EXCESS_SECONDS = 3.2e7


def is_platform_path(name: str) -> bool:
    """Whether a ``platform.name`` is a file path (as :func:`waitlab.platforms.load_platform` decides)."""
    return name.endswith(".toml") or "/" in name or "\\" in name


@functools.cache
def largest_node_memory() -> float:
    """The largest node memory (bytes) of the built-in platforms: no message can be larger."""
    return max(float(load_platform(n).node.memory) for n in list_platforms())


def application_problem(params: Any, ranks: int) -> tuple[str, str, str] | None:
    """``(field, problem, fix)`` when an application's parameters cannot work physically, else ``None``.

    Checks: ranks x steps within :data:`MAX_RANK_STEPS`; every ``*_bytes`` size within the largest node memory
    of any platform; every imbalance magnitude within :data:`MAX_EXCESS_SECONDS`.
    """
    steps = getattr(params, "steps", None)
    if isinstance(steps, int) and ranks * steps > MAX_RANK_STEPS:
        return ("application.steps", f"{ranks} ranks x {steps} steps = {ranks * steps:.3g} rank-steps; waitlab "
                f"simulates at most {MAX_RANK_STEPS:.3g} (the operation table would not fit in memory)",
                "use fewer steps or ranks")
    fields = getattr(params, "__dataclass_fields__", {})
    for name in fields:
        value = getattr(params, name, None)
        if name.endswith("bytes") and isinstance(value, int | float) and not isinstance(value, bool) \
                and value > largest_node_memory():
            return (f"application.{name}", f"{value:g} bytes is larger than the memory of any platform's node "
                    f"({largest_node_memory():g} bytes)", "use a message size that fits in memory")
    for i, spec in enumerate(getattr(params, "imbalance", ()) or ()):
        magnitude = getattr(spec, "magnitude", 0.0)
        if isinstance(magnitude, int | float) and magnitude > MAX_EXCESS_SECONDS:
            return (f"application.imbalance[{i}].magnitude", f"{magnitude:g} s per step is more than a year",
                    f"use at most {MAX_EXCESS_SECONDS:g} s")
    return None
