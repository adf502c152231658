"""What every application model shares: the parameter base class, seeded streams, region emission.

An application model is a pure function ``generate(params, n_ranks, seed)``
returning an :class:`~waitlab.models.ops.OpTable`.  Its parameters are a
frozen, keyword-only dataclass derived from :class:`AppParams`, which holds
the two fields every application has (``steps`` and the list of injected
``imbalance`` specs) and validates them against the application's regions.

Randomness is split into independent streams keyed by name
(:func:`stream_rng`): the imbalance of region ``"Hydro"`` is drawn from the
stream ``(seed, "imbalance:Hydro")``, so adding or changing the imbalance of
one region never changes the draws of any other region or of the
application's own structure.

Examples
--------
>>> process_grid(960)
(32, 30)
>>> process_grid(12, (3, 4))
(3, 4)
>>> from waitlab.models.ops import ACTIONS, OpBuilder
>>> b = OpBuilder(n_ranks=2)
>>> emit_region(b, "solve", step=0, seconds=[1.0, 1.5], excess=[0.0, 0.5])
>>> ops = b.build()
>>> [ACTIONS[c] for c in ops.code[ops.rank == 1]], ops.ledger.total()
(['enter', 'compute', 'leave'], 0.5)
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from waitlab.models.apps.imbalance import Imbalance, excess_matrix
from waitlab.models.ops import OpBuilder
from waitlab.models.validation import ParamError, num, params


@dataclass(frozen=True)
class WorkTerm:
    """One part of an application's own compute in one step, from its parameters (:meth:`AppParams.work_terms`).

    Attributes
    ----------
    key : str
        The parameter that scales it (``compute_seconds``).
    what : str
        How it is computed, for messages (``"compute_seconds = 0.01 s"``).
    seconds : ndarray
        Seconds of every rank in one step.
    inverse : bool
        The term scales with ``1 / key`` (a speed) instead of ``key``.
    also : tuple of str
        Other keys whose sum scales it too (``if970_visits``, ``if946_visits``).
    """

    key: str
    what: str
    seconds: npt.NDArray[np.float64]
    inverse: bool = False
    also: tuple[str, ...] = ()


@params
class AppParams:
    """Parameters every application has.

    Attributes
    ----------
    steps : int
        Number of BSP steps (iterations).
    imbalance : tuple of Imbalance
        Injected excess per region, recorded in the ledger as kind ``"imbalance"``.
    """

    #: Application kind (key of ``APPLICATIONS``).
    KIND: ClassVar[str] = ""
    #: Names of the compute regions, in the order a step visits them.
    REGIONS: ClassVar[tuple[str, ...]] = ()

    steps: int = num(10, ge=1, doc="number of BSP steps")
    imbalance: tuple[Imbalance, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "imbalance", tuple(self.imbalance))
        for i, spec in enumerate(self.imbalance):
            if not isinstance(spec, Imbalance):
                raise ParamError(f"imbalance[{i}]", f"expected an Imbalance, got {spec!r}",
                                 "write [[application.imbalance]] tables")
        self._check_imbalance()

    def regions(self) -> tuple[str, ...]:
        """Region names this application's imbalance specs may name."""
        return self.REGIONS

    def n_steps(self) -> int:
        """Number of steps the generated trace has (``steps`` unless a subclass derives it)."""
        return self.steps

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        """The application's own compute in one step (s per rank), from its parameters alone, without the
        ``imbalance`` specs (:meth:`Imbalance.nominal <waitlab.models.apps.imbalance.Imbalance.nominal>`) and
        without generating the operations: what the scenario loader checks against the simulated time waitlab
        resolves (``waitlab.experiments.physics_limits.MAX_SIMULATED_SECONDS``).  A random part counts with its
        mean."""
        return []

    def _check_imbalance(self) -> None:
        names = self.regions()
        n_steps = self.n_steps()
        for i, spec in enumerate(self.imbalance):
            if spec.region not in names:
                raise ParamError(f"imbalance[{i}].region",
                                 f"application {self.KIND!r} has no region {spec.region!r}",
                                 f"use one of: {', '.join(names)}")
            if not isinstance(spec.steps, str) and spec.steps and max(spec.steps) >= n_steps:
                raise ParamError(f"imbalance[{i}].steps",
                                 f"step {max(spec.steps)} does not exist (the application has {n_steps} "
                                 f"steps, numbered 0..{n_steps - 1})", "list steps below the step count")


def stream_rng(seed: int, name: str) -> np.random.Generator:
    """Independent generator for stream ``name`` of run ``seed`` (stable across Python runs)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])


def region_excess(params: AppParams, region: str, n_ranks: int, seed: int,
                  extra: Sequence[Imbalance] = ()) -> npt.NDArray[np.float64]:
    """``[n_steps, n_ranks]`` seconds of injected imbalance of ``region``.

    ``extra`` specs (an application's built-in imbalance) are drawn before the
    user's specs, from the same per-region stream.
    """
    specs = [*extra, *(s for s in params.imbalance if s.region == region)]
    if region not in params.regions():
        raise ValueError(f"application {params.KIND!r} has no region {region!r}; "
                         f"its regions are: {', '.join(params.regions())}")
    return excess_matrix(specs, n_ranks, params.n_steps(), stream_rng(seed, f"imbalance:{region}"))


def check_imbalance_regions(params: AppParams) -> None:
    """Raise ValueError naming any imbalance region the application does not have."""
    names = params.regions()
    for spec in params.imbalance:
        if spec.region not in names:
            raise ValueError(f"application {params.KIND!r} has no region {spec.region!r}; "
                             f"its regions are: {', '.join(names)}")


def check_ranks(n_ranks: int, kind: str, minimum: int = 1) -> None:
    """Raise ValueError unless ``n_ranks`` is an integer >= ``minimum``."""
    if isinstance(n_ranks, bool) or not isinstance(n_ranks, int | np.integer) or n_ranks < minimum:
        raise ValueError(f"application {kind!r} needs at least {minimum} rank(s), got {n_ranks!r}")


def emit_region(builder: OpBuilder, region: str, *, step: int, seconds: npt.ArrayLike,
                excess: npt.ArrayLike = 0.0, ranks: npt.ArrayLike | None = None) -> None:
    """Append ``enter(region)``, ``compute`` and ``leave(region)`` for ``ranks`` (default: all).

    ``seconds`` is the whole compute time and includes ``excess``, the part
    recorded in the ledger as imbalance.
    """
    r = np.arange(builder.n_ranks, dtype=np.int32) if ranks is None else np.asarray(ranks, dtype=np.int32)
    builder.add("enter", r, step=step, region=region)
    builder.add("compute", r, step=step, value=seconds, excess=excess, region=region)
    builder.add("leave", r, step=step, region=region)


def uniform_work(n_ranks: int, key: str, what: str, seconds: float) -> WorkTerm:
    """A :class:`WorkTerm` of ``seconds`` on every rank."""
    return WorkTerm(key, what, np.full(n_ranks, float(seconds)))


def process_grid(n_ranks: int, grid: Sequence[int] = ()) -> tuple[int, int]:
    """``(px, py)`` with ``px * py == n_ranks``: ``grid`` if given, else the most square factorisation.

    Like ``MPI_Dims_create``, ``px >= py``.  Rank ``r`` sits at ``x = r % px``,
    ``y = r // px``.
    """
    if len(grid):
        if len(grid) != 2 or any(g < 1 for g in grid) or grid[0] * grid[1] != n_ranks:
            raise ValueError(f"process grid {tuple(grid)} does not hold {n_ranks} ranks "
                             f"(need two positive numbers whose product is {n_ranks})")
        return int(grid[0]), int(grid[1])
    py = max(d for d in range(1, math.isqrt(n_ranks) + 1) if n_ranks % d == 0)
    return n_ranks // py, py

