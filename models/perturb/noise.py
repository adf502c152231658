"""System noise models: periodic, Poisson and recorded detours, and Gaussian jitter on compute.

A *detour* is an interval during which the operating system (or a daemon)
takes the CPU away from the application.  waitlab makes detours hit whatever
a rank is doing at that simulated time by turning every host's pattern into
a SimGrid *speed profile*: during a detour the host runs at
:data:`~waitlab.models.perturb.detours.DETOUR_SCALE` (1e-12) of its peak speed, so a ``compute`` or
``overhead`` action in progress is stalled for exactly the detour, while a
rank that is waiting in MPI (not using the CPU) loses nothing.  SimGrid 3.32
ignores a speed scale of exactly 0, hence the tiny positive value; the
resulting error is 1e-12 of the detour length.

After the simulation, :func:`noise_hits` intersects the detours with the
intervals in which every rank was using the CPU and returns one ledger row
per (detour, operation) pair that delayed work -- the noise part of the cause
ledger (DESIGN.md section 8).

Every pattern is *periodic* (it repeats after ``period`` seconds), which lets
SimGrid replay it forever with two profile lines per detour:

* :class:`PeriodicNoise` -- one detour of ``duration`` every ``1/frequency``
  seconds, at a phase drawn per host (``"random"``), drawn once for all hosts
  (``"shared"``), or given in seconds;
* :class:`PoissonNoise` -- arrivals at ``rate`` per second with constant,
  exponential or Pareto durations; a detour arriving during another one waits
  for it (detours queue, so no noise is lost).  The arrivals are drawn over a
  ``horizon`` that is chosen longer than the run, then repeated;
* :class:`SignatureNoise` -- a measured noise signature (lines of start and
  duration, as LogGOPSim reads them), repeated with its period and shifted by
  a per-host offset.

Gaussian jitter on compute (:class:`GaussianJitter`) does not depend on time:
each ``compute`` is lengthened by ``max(0, N(mean, std))`` times its duration,
inserted as a CPU-bound ``noise`` operation right after it.

Everything is seeded and deterministic; the models are pure (no files, no SMPI).

Examples
--------
>>> pat = PeriodicNoise(frequency=4.0, duration=0.125, phase=0.0625).pattern(2, np.random.default_rng(0))
>>> pat.period.tolist(), pat.start.tolist(), pat.duration.tolist()
([0.25, 0.25], [0.0625, 0.0625], [0.125, 0.125])
>>> from waitlab.models.perturb.detours import profile_text
>>> print(profile_text(pat, 0))
PERIODICITY 0.25
0.0625 1e-12
0.1875 1.0
>>> from waitlab.models.perturb.noise_hits import detour_measure
>>> float(detour_measure(pat, np.array([0]), np.array([0.0]), np.array([0.5]))[0])
0.25
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import CODE, OpTable
from waitlab.models.perturb.detours import NoisePattern, empty_pattern, normalize, queue_detours, uncovered_time

#: Duration laws of :class:`PoissonNoise`.
DURATION_LAWS = ("constant", "exponential", "pareto")

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]



@dataclass(frozen=True)
class NoNoise:
    """No detours."""

    def pattern(self, n_hosts: int, rng: np.random.Generator, horizon: float = 1.0) -> NoisePattern:
        """An empty pattern."""
        return empty_pattern(n_hosts)


@dataclass(frozen=True)
class PeriodicNoise:
    """One detour of ``duration`` seconds every ``1/frequency`` seconds.

    Parameters
    ----------
    frequency : float
        Detours per second (Hz), >= 0; 0 means no noise.
    duration : float
        Seconds per detour, >= 0 and shorter than the period.
    phase : "random", "shared" or float
        Start of the first detour: drawn uniformly in ``[0, period)`` for every
        host, drawn once for all hosts, or this many seconds for all hosts.
    """

    frequency: float
    duration: float
    phase: str | float = "random"

    def __post_init__(self) -> None:
        if not self.frequency >= 0 or not np.isfinite(self.frequency):
            raise ValueError(f"frequency must be >= 0, got {self.frequency}")
        if not self.duration >= 0 or not np.isfinite(self.duration):
            raise ValueError(f"duration must be >= 0, got {self.duration}")
        if self.frequency > 0 and self.duration * self.frequency >= 1:
            raise ValueError(f"a detour of {self.duration} s every {1 / self.frequency} s leaves no time to compute")
        if isinstance(self.phase, str) and self.phase not in ("random", "shared"):
            raise ValueError(f"phase must be 'random', 'shared' or seconds, got {self.phase!r}")
        if not isinstance(self.phase, str) and not self.phase >= 0:
            raise ValueError(f"phase must be >= 0 seconds, got {self.phase}")

    def pattern(self, n_hosts: int, rng: np.random.Generator, horizon: float = 1.0) -> NoisePattern:
        """The detours of ``n_hosts`` hosts (``horizon`` is not needed: the pattern is exactly periodic)."""
        if self.frequency == 0 or self.duration == 0:
            return empty_pattern(n_hosts)
        period = 1.0 / self.frequency
        if self.phase == "random":
            phase = rng.uniform(0.0, period, n_hosts)
        elif self.phase == "shared":
            phase = np.full(n_hosts, rng.uniform(0.0, period))
        else:
            phase = np.full(n_hosts, float(self.phase))
        return normalize(n_hosts, period, np.arange(n_hosts), phase, np.full(n_hosts, self.duration))


@dataclass(frozen=True)
class PoissonNoise:
    """Detours arriving as a Poisson process of ``rate`` per second on every host.

    Parameters
    ----------
    rate : float
        Arrivals per second, >= 0; 0 means no noise.
    duration : float
        Mean detour length in seconds (``"constant"``: every detour).
    law : {"constant", "exponential", "pareto"}
        Distribution of the durations.
    pareto_shape : float
        Shape alpha > 1 of the Pareto law (scale ``duration * (alpha - 1) / alpha``
        so the mean is ``duration``).
    """

    rate: float
    duration: float
    law: str = "constant"
    pareto_shape: float = 2.5

    def __post_init__(self) -> None:
        if not self.rate >= 0 or not np.isfinite(self.rate):
            raise ValueError(f"rate must be >= 0, got {self.rate}")
        if not self.duration >= 0 or not np.isfinite(self.duration):
            raise ValueError(f"duration must be >= 0, got {self.duration}")
        if self.law not in DURATION_LAWS:
            raise ValueError(f"unknown duration law {self.law!r}; use one of {', '.join(DURATION_LAWS)}")
        if not self.pareto_shape > 1:
            raise ValueError(f"pareto_shape must be > 1 (finite mean), got {self.pareto_shape}")
        if self.rate * self.duration >= 1:
            raise ValueError(f"rate x duration = {self.rate * self.duration:g}: the host would be in a detour "
                             "all the time (must be < 1)")

    def durations(self, n: int, rng: np.random.Generator) -> _F:
        """``n`` detour lengths drawn from the law."""
        if self.law == "constant":
            return np.full(n, self.duration)
        if self.law == "exponential":
            return rng.exponential(self.duration, n)
        a = self.pareto_shape
        xm = self.duration * (a - 1) / a
        return xm * (1.0 + rng.pareto(a, n))

    def pattern(self, n_hosts: int, rng: np.random.Generator, horizon: float = 1.0) -> NoisePattern:
        """Arrivals over ``[0, horizon)`` on every host (the pattern then repeats every ``horizon``)."""
        if self.rate == 0 or self.duration == 0:
            return empty_pattern(n_hosts)
        if not horizon > 0:
            raise ValueError(f"horizon must be > 0, got {horizon}")
        counts = rng.poisson(self.rate * horizon, n_hosts)
        host = np.repeat(np.arange(n_hosts), counts)
        arrival = rng.uniform(0.0, horizon, host.size)
        order = np.lexsort((arrival, host))
        host, arrival = host[order], arrival[order]
        dur = self.durations(host.size, rng)
        start = queue_detours(host, arrival, dur)
        # a single very long draw (Pareto tail) is capped below the period
        dur = np.minimum(dur, 0.999 * horizon)
        return normalize(n_hosts, horizon, host, start, dur)


@dataclass(frozen=True)
class SignatureNoise:
    """A recorded noise signature, repeated with ``period`` and shifted per host.

    Parameters
    ----------
    start, duration : tuple of float
        Detour starts (seconds from the beginning of the signature) and lengths.
    period : float
        The signature repeats every ``period`` seconds (at least its last end); its detours must leave some of
        it free (detours covering the whole period, back to back, would stop the host for ever).
    offset : "random", "shared" or float
        Shift of the signature on each host: uniform in ``[0, period)`` per host
        (LogGOPSim's per-process offset), one draw for all hosts, or given seconds.
    """

    start: tuple[float, ...]
    duration: tuple[float, ...]
    period: float
    offset: str | float = "random"

    def __post_init__(self) -> None:
        s = np.asarray(self.start, float)
        d = np.asarray(self.duration, float)
        if s.shape != d.shape:
            raise ValueError("start and duration must have the same length")
        if (s < 0).any() or (d < 0).any() or not (np.isfinite(s).all() and np.isfinite(d).all()):
            raise ValueError("signature starts and durations must be finite and >= 0")
        if not self.period > 0:
            raise ValueError(f"period must be > 0, got {self.period}")
        if s.size and float((s + d).max()) > self.period:
            raise ValueError(f"the signature ends at {float((s + d).max())} s, after its period {self.period} s")
        if s.size and uncovered_time(s, d, self.period) == 0.0:
            raise ValueError(f"the detours cover the whole {self.period:g} s period: the host would never compute")
        if isinstance(self.offset, str) and self.offset not in ("random", "shared"):
            raise ValueError(f"offset must be 'random', 'shared' or seconds, got {self.offset!r}")
        if not isinstance(self.offset, str) and not self.offset >= 0:
            raise ValueError(f"offset must be >= 0 seconds, got {self.offset}")

    def pattern(self, n_hosts: int, rng: np.random.Generator, horizon: float = 1.0) -> NoisePattern:
        """The signature on every host, shifted by the host's offset."""
        s = np.asarray(self.start, float)
        d = np.asarray(self.duration, float)
        if s.size == 0 or not (d > 0).any():
            return empty_pattern(n_hosts)
        if self.offset == "random":
            off = rng.uniform(0.0, self.period, n_hosts)
        elif self.offset == "shared":
            off = np.full(n_hosts, rng.uniform(0.0, self.period))
        else:
            off = np.full(n_hosts, float(self.offset))
        host = np.repeat(np.arange(n_hosts), s.size)
        # an offset o means the host starts o seconds into the signature: detours move to s - o
        start = np.tile(s, n_hosts) - np.repeat(off, s.size)
        return normalize(n_hosts, self.period, host, start, np.tile(d, n_hosts))


def parse_signature(text: str, source: str = "<signature>") -> tuple[_F, _F]:
    """Read a noise signature: one detour per line, ``START DURATION`` in seconds.

    ``#`` starts a comment; blank lines are skipped.  Raises :class:`ValueError`
    naming the line for anything else (the caller turns it into an input error).

    Examples
    --------
    >>> parse_signature("# t d\\n0.0 0.001\\n0.5 0.002\\n")
    (array([0. , 0.5]), array([0.001, 0.002]))
    >>> parse_signature("0.1 -1")
    Traceback (most recent call last):
    ...
    ValueError: <signature> line 1: duration must be >= 0, got '0.1 -1'
    """
    starts: list[float] = []
    durs: list[float] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{source} line {no}: expected 'START DURATION', got {raw.strip()!r}")
        try:
            s, d = float(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"{source} line {no}: not numbers: {raw.strip()!r}") from None
        if not (np.isfinite(s) and np.isfinite(d)):
            raise ValueError(f"{source} line {no}: values must be finite, got {raw.strip()!r}")
        if s < 0:
            raise ValueError(f"{source} line {no}: start must be >= 0, got {raw.strip()!r}")
        if d < 0:
            raise ValueError(f"{source} line {no}: duration must be >= 0, got {raw.strip()!r}")
        if starts and s < starts[-1]:
            raise ValueError(f"{source} line {no}: starts must not decrease ({s} after {starts[-1]})")
        if starts and s < starts[-1] + durs[-1]:
            raise ValueError(f"{source} line {no}: detour starts at {s} before the previous one ends at "
                             f"{starts[-1] + durs[-1]}")
        starts.append(s)
        durs.append(d)
    if not starts:
        raise ValueError(f"{source}: no detour lines (expected 'START DURATION' per line)")
    return np.asarray(starts), np.asarray(durs)


@dataclass(frozen=True)
class GaussianJitter:
    """Lengthen every ``compute`` by ``max(0, N(mean, std))`` times its duration.

    Parameters
    ----------
    std : float
        Standard deviation of the relative extra time (0.05 = 5 %), >= 0.
    mean : float
        Mean of the relative extra time; negative draws are clipped to 0 (a
        rank never computes faster than its noise-free speed).
    """

    std: float
    mean: float = 0.0

    def __post_init__(self) -> None:
        if not self.std >= 0 or not np.isfinite(self.std):
            raise ValueError(f"jitter std must be >= 0, got {self.std}")
        if not np.isfinite(self.mean):
            raise ValueError(f"jitter mean must be finite, got {self.mean}")

    @property
    def active(self) -> bool:
        """Whether the jitter can add any time."""
        return self.std > 0 or self.mean > 0

    def extra(self, ops: OpTable, rng: np.random.Generator) -> tuple[_I, _F]:
        """Rows of the compute operations and the extra seconds drawn for each (>= 0)."""
        rows = np.flatnonzero(ops.code == CODE["compute"])
        if not self.active or rows.size == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        rel = np.maximum(rng.normal(self.mean, self.std, rows.size), 0.0) if self.std > 0 else \
            np.full(rows.size, max(self.mean, 0.0))
        return rows.astype(np.int64), rel * ops.value[rows]


def describe(model: Any) -> str:
    """One line describing a noise model (for reports)."""
    if isinstance(model, PeriodicNoise):
        return f"periodic {model.frequency:g} Hz x {model.duration:g} s, phase {model.phase}"
    if isinstance(model, PoissonNoise):
        return f"poisson {model.rate:g}/s x {model.duration:g} s ({model.law})"
    if isinstance(model, SignatureNoise):
        return f"signature of {len(model.start)} detours every {model.period:g} s, offset {model.offset}"
    return "none"
