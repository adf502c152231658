"""Head-of-line (HOL) blocking in an input-queued switch: Karol, Hluchyj and Morgan's saturation throughput.

Karol, Hluchyj and Morgan, "Input versus output queueing on a space-division packet switch", IEEE Trans.
Commun. 35(12), 1987, model an ``N x N`` switch with one FIFO queue per input port.  Time is slotted; in
saturation every input always has a head-of-line (HOL) packet, whose output is uniform over the ``N``
outputs and independent of everything else.  In each slot every output that is the destination of at least
one HOL packet serves one of them (chosen at random); the served inputs move a new packet to their head.
The saturation throughput ``rho(N)`` is the mean fraction of outputs busy per slot; the rest of the
capacity is lost to HOL blocking.  Their table gives ``rho(2) = 0.75``, ``rho(8) = 0.6184`` and the limit
``2 - sqrt(2) = 0.5858`` for ``N -> infinity``.

:func:`saturation_throughput` computes ``rho(N)`` exactly as they did: the HOL destinations form a Markov
chain.  By symmetry the state can be the *multiset* of HOL packets per output (a partition of ``N``): in a
slot, every output with ``k >= 1`` packets sends one (``k -> k - 1``), and the ``m`` served inputs each add
one packet to a uniformly chosen output.  ``rho(N) = E[m] / N`` under the chain's stationary law.
:func:`monte_carlo_throughput` simulates the same model slot by slot (a check of the chain and of the limit).

:func:`hol_factors` is what the contention law of a link uses (:mod:`waitlab.platforms.contention`): the
usable fraction of a link's capacity when ``n`` inputs contend for it, ``f(1) = 1`` and ``f(n) = rho(n)``.

Examples
--------
>>> round(saturation_throughput(2), 12)
0.75
>>> round(saturation_throughput(8), 4)
0.6184
>>> round(LIMIT, 4)
0.5858
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import numpy.typing as npt

__all__ = ["EXACT_MAX", "LIMIT", "SATURATION_THROUGHPUT", "hol_factors", "monte_carlo_throughput",
           "saturation_throughput"]

#: Karol et al.'s large-N saturation throughput, 2 - sqrt(2) (their section III, equation (13)).
LIMIT = 2.0 - math.sqrt(2.0)
#: Largest switch size the exact Markov chain is solved for (partitions of 12: 77 states).
EXACT_MAX = 12
#: ``rho(n)`` for ``n = 1 ..`` :data:`EXACT_MAX`, as :func:`saturation_throughput` solves them (its chains, to the
#: last bit on this project's machine; ``tests/test_contention.py`` solves every one again and compares): what
#: :func:`hol_factors` uses, since solving the 12 chains took 0.016 s of every run's start, before its SMPI stage
#: (issue 25).  Karol et al.'s published values (their Table I, 4 digits) are checked against the chains too.
SATURATION_THROUGHPUT: tuple[float, ...] = (
    1.0, 0.7499999999999999, 0.6825396825396822, 0.655241935483871, 0.6399174806566312, 0.6301495667898707,
    0.6233705315107362, 0.6183898924632463, 0.614575466007526, 0.611560406340764, 0.6091171873402913,
    0.6070971741393494,
)

Partition = tuple[int, ...]  # sorted non-increasing counts of HOL packets per busy output (zeros dropped)


def _partitions(n: int, largest: int | None = None) -> list[Partition]:
    """Every partition of ``n`` (non-increasing parts, each at most ``largest``)."""
    largest = n if largest is None else largest
    if n == 0:
        return [()]
    return [(k, *rest) for k in range(min(n, largest), 0, -1) for rest in _partitions(n - k, k)]


@cache
def _one_ball(part: Partition, n: int) -> tuple[tuple[Partition, int], ...]:
    """Where one packet takes partition ``part`` among ``n`` outputs: each next partition and its number of outputs
    (an output with ``k`` HOL packets becomes one with ``k + 1``; ``k = 0``: an idle output becomes busy)."""
    counts: dict[int, int] = {}
    for k in part:
        counts[k] = counts.get(k, 0) + 1
    counts[0] = n - len(part)  # outputs without a HOL packet
    out = []
    for k, bins in counts.items():
        if bins == 0:
            continue
        lst = list(part)
        if k == 0:
            lst.append(1)
        else:
            lst[lst.index(k)] = k + 1
        out.append((tuple(sorted(lst, reverse=True)), bins))
    return tuple(out)


def _add_balls(state: Partition, balls: int, n: int) -> dict[Partition, float]:
    """Law of the partition after ``balls`` packets each pick one of ``n`` outputs uniformly at random."""
    dist: dict[Partition, float] = {state: 1.0}
    for _ in range(balls):
        nxt: dict[Partition, float] = {}
        for part, p in dist.items():
            for new, bins in _one_ball(part, n):  # the same partitions recur from every state: worked out once
                nxt[new] = nxt.get(new, 0.0) + p * bins / n
        dist = nxt
    return dist


@cache
def saturation_throughput(n: int) -> float:
    """Exact saturation throughput of an ``n x n`` input-queued switch under uniform traffic (Karol et al.).

    Parameters
    ----------
    n : int
        Switch size (inputs = outputs), ``1 <= n <=`` :data:`EXACT_MAX`.

    Returns
    -------
    float
        ``rho(n)``: mean fraction of outputs that send a packet per slot in saturation (1 for ``n = 1``).

    Raises
    ------
    ValueError
        ``n`` out of range.
    """
    if not 1 <= n <= EXACT_MAX:
        raise ValueError(f"switch size must be 1..{EXACT_MAX} for the exact chain, got {n}")
    states = _partitions(n)
    index = {s: i for i, s in enumerate(states)}
    trans = np.zeros((len(states), len(states)))
    served = np.array([len(s) for s in states], dtype=float)  # m = busy outputs = packets served this slot
    for i, s in enumerate(states):
        left = tuple(sorted((k - 1 for k in s if k > 1), reverse=True))
        for new, p in _add_balls(left, len(s), n).items():
            trans[i, index[new]] += p
    # stationary law pi = pi P, sum(pi) = 1: least squares on the stacked system (exact: P is irreducible)
    a = np.vstack([trans.T - np.eye(len(states)), np.ones(len(states))])
    b = np.zeros(len(states) + 1)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    return float(pi @ served / n)  # Karol et al.: throughput = E[departures per slot] / N


def monte_carlo_throughput(n: int, slots: int = 20000, seed: int = 0) -> float:
    """Saturation throughput of Karol et al.'s model simulated slot by slot (random HOL destinations).

    Every slot, each output with HOL packets serves one of them chosen at random and the served inputs draw
    new uniform destinations; the result is the mean fraction of busy outputs after a warm-up of
    ``slots // 10`` slots.  Deterministic for a given ``seed``.
    """
    if n < 1 or slots < 10:
        raise ValueError(f"need n >= 1 and slots >= 10, got n={n}, slots={slots}")
    rng = np.random.default_rng(seed)
    dest = rng.integers(0, n, size=n)
    warm = slots // 10
    busy = 0
    for t in range(slots + warm):
        order = np.lexsort((rng.random(n), dest))  # inputs grouped by output, random order within a group
        first = np.ones(n, dtype=bool)
        first[1:] = dest[order][1:] != dest[order][:-1]
        winners = order[first]  # one random winner per busy output
        if t >= warm:
            busy += len(winners)
        dest[winners] = rng.integers(0, n, size=len(winners))
    return busy / (slots * n)


def hol_factors(n_max: int) -> npt.NDArray[np.float64]:
    """Usable fraction of a port's capacity when ``n = 1 .. n_max`` inputs contend for it.

    ``f(1) = 1``; ``f(n) = rho(n)`` (:data:`SATURATION_THROUGHPUT`) up to :data:`EXACT_MAX`; beyond it the
    values move from ``rho(EXACT_MAX)`` towards Karol et al.'s limit ``2 - sqrt(2)`` as ``rho(N) - LIMIT``
    scales like ``1 / N`` (their finite-N values: ``N (rho(N) - LIMIT)`` is within 3% of constant from
    N = 8 to 12, checked in tests/test_contention.py), so ``f(n) = LIMIT + (rho(12) - LIMIT) * 12 / n``.
    """
    if n_max < 1:
        raise ValueError(f"n_max must be >= 1, got {n_max}")
    n = np.arange(1, n_max + 1)
    exact = np.array(SATURATION_THROUGHPUT[:min(n_max, EXACT_MAX)])
    tail = LIMIT + (SATURATION_THROUGHPUT[EXACT_MAX - 1] - LIMIT) * EXACT_MAX / n[EXACT_MAX:]
    return np.concatenate([exact, tail])
