"""Values that cannot work physically: sizes beyond any node's memory, rank-steps beyond memory, excess beyond a
year.  The schema's validators and the scenario loader refuse them with one clear message (issue 10); the
collective buffers of a node's ranks against that node's memory are checked once the platform is rendered
(:func:`buffer_problem`)."""

from __future__ import annotations

import functools
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
        if "bytes" in name and value > largest_node_memory():
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
            return ("application.grid", str(exc), f"give a grid whose product is {ranks}, or leave grid out")
    if getattr(params, "KIND", "") == "pingpong" and (ranks < 2 or ranks % 2):
        return ("scenario.ranks", f"pingpong pairs ranks (0, 1), (2, 3), ...: needs an even rank count of at "
                f"least 2, got {ranks}", f"use ranks = {max(2, ranks + ranks % 2)}")
    for i, spec in enumerate(getattr(params, "imbalance", ()) or ()):
        magnitude = getattr(spec, "magnitude", 0.0)
        if isinstance(magnitude, int | float) and magnitude > MAX_EXCESS_SECONDS:
            return (f"application.imbalance[{i}].magnitude", f"{magnitude:g} s per step is more than a year",
                    f"use at most {MAX_EXCESS_SECONDS:g} s")
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
