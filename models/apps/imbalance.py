"""Injected load imbalance: which ranks of a region do extra work, when, and how much.

An :class:`Imbalance` names a region of an application, a set of ranks, a
distribution of the extra seconds and the steps it applies to.
:func:`excess_matrix` turns the specs of one region into a ``[steps, ranks]``
matrix of non-negative seconds, which the application adds to the region's
compute (``excess=``) so that it lands in the cause ledger with kind
``"imbalance"``.

``magnitude`` is the *mean* excess (seconds per step) of an affected rank:

- ``constant``: every affected rank gets ``magnitude``;
- ``uniform``: U(0, 2 * magnitude);
- ``normal``: max(0, N(magnitude, (spread * magnitude)^2));
- ``exponential``: Exp(mean = magnitude);
- ``linear``: proportional to the world rank ``r``, scaled so that the mean over
  the affected ranks is ``magnitude``: ``magnitude * r / mean(affected ranks)``
  (all ranks: ``2 * magnitude * r / (n_ranks - 1)``, rank 0 gets 0 and the
  last rank ``2 * magnitude``; ranks [1, 3] get 0.5 and 1.5 times the
  magnitude; a single rank, rank 0 included, gets ``magnitude``); deterministic.

With ``redraw = False`` (default) the random draw is made once per rank and
kept for every selected step (a persistent imbalance, e.g. a bad partition);
with ``redraw = True`` it is drawn anew for each step (noise-like).  Randomly
chosen ranks (``{"random": k}``, ``{"fraction": f}``) are chosen once.

An imbalance that selects nothing (``ranks = []``, ``steps = []``) and a ``spread`` with a distribution other than
``normal`` (the only one that reads it) are refused: they would change nothing without a word.

Examples
--------
>>> import numpy as np
>>> spec = Imbalance("solve", ranks=[1, 3], magnitude=0.5, steps=[0, 2])
>>> excess_matrix([spec], n_ranks=4, n_steps=3, rng=np.random.default_rng(0)).tolist()
[[0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5]]
>>> Imbalance("solve", ranks={"every": 2}).selection
RankSelection(mode='every', ranks=(), count=2, fraction=0.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import numpy as np
import numpy.typing as npt
from pydantic import PlainValidator

from waitlab.models.validation import ParamError, StrictBool, StrictInt, num, positional_params

Distribution = Literal["constant", "uniform", "normal", "exponential", "linear"]
#: Allowed values of :attr:`Imbalance.distribution`.
DISTRIBUTIONS: tuple[str, ...] = get_args(Distribution)

#: Default ``spread`` of :class:`Imbalance` (a resolved scenario writes it with every distribution: only another
#: value is refused with a distribution that does not read it).
SPREAD_DEFAULT = 0.25

SelectionMode = Literal["all", "list", "random", "fraction", "every"]
_SELECTOR_KEYS = ("random", "fraction", "every")
_RANKS_FIX = 'write ranks = "all", a list like [0, 5], or a table {random = 4}, {fraction = 0.1} or {every = 16}'


@dataclass(frozen=True)
class RankSelection:
    """Which ranks an imbalance affects (canonical, hashable form of the ``ranks`` spec).

    Attributes
    ----------
    mode : {"all", "list", "random", "fraction", "every"}
    ranks : tuple of int
        The ranks of mode ``"list"``.
    count : int
        ``k`` of ``{"random": k}`` or ``n`` of ``{"every": n}``.
    fraction : float
        ``f`` of ``{"fraction": f}``: ``max(1, round(f * n_ranks))`` random ranks.
    """

    mode: SelectionMode = "all"
    ranks: tuple[int, ...] = ()
    count: int = 0
    fraction: float = 0.0

    @classmethod
    def parse(cls, spec: RankSpec) -> RankSelection:
        """Normalise ``"all"``, a list of ranks or a one-key table into a :class:`RankSelection`.

        Raises
        ------
        ParamError
            With key ``"ranks"`` when the spec is malformed.
        """
        if isinstance(spec, RankSelection):
            return spec
        if isinstance(spec, str):
            if spec != "all":
                raise ParamError("ranks", f"unknown rank selection {spec!r}", _RANKS_FIX)
            return cls("all")
        if isinstance(spec, Mapping):
            if len(spec) != 1 or next(iter(spec)) not in _SELECTOR_KEYS:
                raise ParamError("ranks", f"a rank table needs exactly one of the keys {', '.join(_SELECTOR_KEYS)}, "
                                          f"got {dict(spec)!r}", _RANKS_FIX)
            key, value = next(iter(spec.items()))
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParamError(f"ranks.{key}", f"expected a number, got {value!r}", _RANKS_FIX)
            if key == "fraction":
                if not (0.0 < float(value) <= 1.0):
                    raise ParamError("ranks.fraction", f"must be in (0, 1], got {value}",
                                     "e.g. ranks = {fraction = 0.1}")
                return cls("fraction", fraction=float(value))
            if not float(value).is_integer() or value < 1:
                raise ParamError(f"ranks.{key}", f"must be a whole number >= 1, got {value}",
                                 f"e.g. ranks = {{{key} = 4}}")
            return cls("random" if key == "random" else "every", count=int(value))
        if isinstance(spec, Sequence):
            out = []
            for i, r in enumerate(spec):
                if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 0:
                    raise ParamError(f"ranks[{i}]", f"expected a rank (integer >= 0), got {r!r}", _RANKS_FIX)
                out.append(int(r))
            if not out:
                raise ParamError("ranks", "an empty list selects no rank: the imbalance would inject nothing",
                                 'list the ranks to slow down, e.g. ranks = [0], or ranks = "all"; or remove this '
                                 "[[application.imbalance]] table")
            if len(set(out)) != len(out):
                raise ParamError("ranks", f"duplicate ranks in {out}", "list each rank once")
            return cls("list", ranks=tuple(sorted(out)))
        raise ParamError("ranks", f"cannot read rank selection {spec!r}", _RANKS_FIX)

    def resolve(self, n_ranks: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Sorted array of the selected ranks among ``n_ranks`` (random modes draw from ``rng``).

        Raises
        ------
        ValueError
            A listed rank or a random count does not fit ``n_ranks``.
        """
        if self.mode == "all":
            return np.arange(n_ranks, dtype=np.int64)
        if self.mode == "list":
            arr = np.asarray(self.ranks, dtype=np.int64)
            if arr.size and arr.max() >= n_ranks:
                raise ValueError(f"imbalance rank {int(arr.max())} does not exist with {n_ranks} ranks "
                                 f"(ranks are 0..{n_ranks - 1})")
            return arr
        if self.mode == "every":
            return np.arange(0, n_ranks, self.count, dtype=np.int64)
        k = self.count if self.mode == "random" else max(1, math.floor(self.fraction * n_ranks + 0.5))
        if k > n_ranks:
            raise ValueError(f"cannot choose {k} random ranks among {n_ranks}")
        return np.sort(rng.choice(n_ranks, size=k, replace=False)).astype(np.int64)

    def as_spec(self) -> str | list[int] | dict[str, float]:
        """The TOML form of this selection (inverse of :meth:`parse`)."""
        if self.mode == "all":
            return "all"
        if self.mode == "list":
            return list(self.ranks)
        if self.mode == "fraction":
            return {"fraction": self.fraction}
        return {self.mode: self.count}


#: What ``Imbalance.ranks`` accepts.
RankSpec = str | Sequence[int] | Mapping[str, Any] | RankSelection


@positional_params
class Imbalance:
    """Extra seconds of compute injected into one region (a cause of kind ``"imbalance"``).

    Parameters
    ----------
    region : str
        Region name of the application (see ``regions(params)``).
    ranks : "all", list of int, or one-key table
        ``"all"``, explicit ranks, ``{"random": k}``, ``{"fraction": f}`` or
        ``{"every": n}`` (ranks 0, n, 2n, ...).  Stored as a :class:`RankSelection`.
    distribution : {"constant", "uniform", "normal", "exponential", "linear"}
        How an affected rank's excess is drawn, with mean ``magnitude``: the
        same for every rank, U(0, 2 x magnitude), normal (``spread``),
        exponential, or in proportion to the rank (``linear``).
    magnitude : float
        Mean excess seconds per affected rank and step (see the module doc).
    steps : "all" or tuple of int
        Steps (0-based) the excess applies to.
    redraw : bool
        Draw random values anew for every step instead of once per rank.
    spread : float
        Relative standard deviation of ``"normal"``.
    """

    region: str
    ranks: Annotated[RankSpec, PlainValidator(lambda spec: RankSelection.parse(spec))] = "all"
    distribution: Distribution = "constant"
    magnitude: float = num(0.0, ge=0.0)
    steps: str | tuple[StrictInt, ...] = "all"
    redraw: StrictBool = False
    spread: float = num(SPREAD_DEFAULT, ge=0.0)

    def __post_init__(self) -> None:
        if not isinstance(self.region, str) or not self.region:
            raise ParamError("region", f"expected a region name, got {self.region!r}", 'write region = "Hydro"')
        object.__setattr__(self, "ranks", RankSelection.parse(self.ranks))
        if self.distribution not in DISTRIBUTIONS:
            raise ParamError("distribution", f"unknown distribution {self.distribution!r}",
                             f"use one of: {', '.join(DISTRIBUTIONS)}")
        if isinstance(self.magnitude, bool) or not isinstance(self.magnitude, int | float):
            raise ParamError("magnitude", f"expected a number of seconds, got {self.magnitude!r}",
                             "write magnitude = 0.5")
        object.__setattr__(self, "magnitude", float(self.magnitude))
        steps = self.steps
        if isinstance(steps, str):
            if steps != "all":
                raise ParamError("steps", f"expected \"all\" or a list of step numbers, got {steps!r}",
                                 'write steps = "all" or steps = [0, 2]')
        else:
            vals = []
            for i, s in enumerate(steps):
                if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
                    raise ParamError(f"steps[{i}]", f"expected a step number (integer >= 0), got {s!r}",
                                     "write steps = [0, 2]")
                vals.append(int(s))
            if not vals:
                raise ParamError("steps", "an empty list selects no step: the imbalance would inject nothing",
                                 'list the steps, e.g. steps = [0], or steps = "all"; or remove this '
                                 "[[application.imbalance]] table")
            object.__setattr__(self, "steps", tuple(sorted(set(vals))))
        if self.distribution != "normal" and self.spread != SPREAD_DEFAULT:
            raise ParamError("spread", f"spread is read by distribution = \"normal\" only, not by "
                             f"{self.distribution!r}: it would change nothing",
                             'remove spread, or set distribution = "normal" (mean magnitude, standard deviation '
                             "spread x magnitude)")

    @property
    def selection(self) -> RankSelection:
        """The normalised rank selection."""
        return RankSelection.parse(self.ranks)

    def step_indices(self, n_steps: int) -> npt.NDArray[np.int64]:
        """Steps this imbalance applies to, checked against ``n_steps``."""
        if isinstance(self.steps, str):
            return np.arange(n_steps, dtype=np.int64)
        arr = np.asarray(self.steps, dtype=np.int64)
        if arr.size and arr.max() >= n_steps:
            raise ValueError(f"imbalance of region {self.region!r} names step {int(arr.max())}, "
                             f"but the application has {n_steps} steps (0..{n_steps - 1})")
        return arr

    def nominal(self, n_ranks: int) -> npt.NDArray[np.float64]:
        """Mean excess (s) of every rank in one selected step, from the parameters alone: ``magnitude`` on each
        affected rank (``linear``: :func:`linear_excess`); a random choice of ``k`` ranks, drawn only at
        run time, spreads ``k / n_ranks`` of it over every rank.  Zeros when a listed rank does not exist."""
        out = np.zeros(n_ranks, dtype=np.float64)
        sel = self.selection
        if sel.mode in ("random", "fraction"):
            k = sel.count if sel.mode == "random" else max(1, math.floor(sel.fraction * n_ranks + 0.5))
            out[:] = self.magnitude * min(k, n_ranks) / n_ranks
            return out
        try:
            ranks = sel.resolve(n_ranks, np.random.default_rng(0))  # all, list, every: no draw
        except ValueError:
            return out
        if ranks.size:
            out[ranks] = linear_excess(ranks, self.magnitude) if self.distribution == "linear" else self.magnitude
        return out

    def draw(self, n_ranks: int, n_steps: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        """This spec's ``[n_steps, n_ranks]`` excess matrix (zeros outside its ranks and steps)."""
        out = np.zeros((n_steps, n_ranks), dtype=np.float64)
        ranks = self.selection.resolve(n_ranks, rng)
        steps = self.step_indices(n_steps)
        if ranks.size == 0 or steps.size == 0 or self.magnitude == 0.0:
            return out
        shape = (steps.size, ranks.size) if self.redraw else (1, ranks.size)
        m = self.magnitude
        if self.distribution == "constant":
            vals = np.full(shape, m)
        elif self.distribution == "uniform":
            vals = rng.uniform(0.0, 2.0 * m, size=shape)
        elif self.distribution == "normal":
            vals = np.maximum(rng.normal(m, self.spread * m, size=shape), 0.0)
        elif self.distribution == "exponential":
            vals = rng.exponential(m, size=shape)
        else:  # linear
            vals = linear_excess(ranks, m)[None, :]
        out[np.ix_(steps, ranks)] = np.broadcast_to(vals, (steps.size, ranks.size))
        return out


def linear_excess(ranks: npt.NDArray[np.int64], magnitude: float) -> npt.NDArray[np.float64]:
    """Excess (s) the ``linear`` distribution gives the affected ``ranks`` (world ranks): proportional to the rank,
    mean ``magnitude`` over them, ``2 m r / d`` with ``d = 2 mean(ranks)`` (``n_ranks - 1`` when every rank is
    affected); a single rank (rank 0 included) gets ``magnitude``.

    >>> linear_excess(np.arange(4), 1.0).tolist(), linear_excess(np.array([1, 3]), 1.0).tolist()
    ([0.0, 0.6666666666666666, 1.3333333333333333, 2.0], [0.5, 1.5])
    >>> linear_excess(np.array([0]), 0.1).tolist()
    [0.1]
    """
    r = np.asarray(ranks, dtype=np.int64)
    denom = 2.0 * float(r.sum()) / r.size if r.size else 0.0  # an integer, exactly, when every rank is affected
    if denom > 0:
        return np.asarray(2.0 * magnitude * r / denom, dtype=np.float64)
    return np.full(r.size, float(magnitude))


def excess_matrix(imbalances: Sequence[Imbalance], n_ranks: int, n_steps: int,
                  rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Sum of the excess of ``imbalances`` as a ``[n_steps, n_ranks]`` array of seconds (all >= 0).

    The specs are drawn in order from ``rng``, so the result is a deterministic
    function of the specs and the generator's state.  Applications pass the
    specs of one region with a generator seeded from (seed, region name), so
    adding an imbalance to one region never changes the draws of another.

    Raises
    ------
    ValueError
        A spec names a rank or step that does not exist.
    """
    if n_ranks < 1 or n_steps < 0:
        raise ValueError(f"need n_ranks >= 1 and n_steps >= 0, got {n_ranks}, {n_steps}")
    total = np.zeros((n_steps, n_ranks), dtype=np.float64)
    for spec in imbalances:
        total += spec.draw(n_ranks, n_steps, rng)
    return total
