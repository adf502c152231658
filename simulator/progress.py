"""Progress of a long SMPI stage: the simulated time reached and the actions replayed (a replay) or the calls
recorded (a real program), read while SMPI runs.

SimGrid 3.32 has no progress output of its own (``smpirun --help-cfg`` lists none).  waitlab's replay program
writes it (``native/waitlab_progress.cpp``): when ``WAITLAB_PROGRESS`` names a file, at most once per
:func:`interval` seconds of wall time it rewrites one line ``<simulated seconds> <actions replayed>`` there.
Nothing is written unless a caller asked for progress with :func:`reporting`, and what is written is outside the
simulation: a run gives the same results with and without it.  A real program's measurement layer keeps its own
count (:func:`read_layer_count`: each rank's records so far and the simulated time of its last one, in a shared
mapping it updates at every record, ``native/waitlab_pmpi.c``); :func:`waitlab.simulator.program_run.run_program`
reports from it.

The caller (the command line, for a terminal) passes a function that receives a :class:`Progress` at most once
per interval while SMPI runs and ``None`` when the stage has ended::

    with reporting(lambda p: print(p)):
        run(...)

The setting is per thread of control (a :class:`contextvars.ContextVar`): runs in other threads or worker
processes (a sweep's points) report nothing.

"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Environment variables of the replay program: the progress file and the interval between its updates.
PROGRESS_ENV = "WAITLAB_PROGRESS"
INTERVAL_ENV = "WAITLAB_PROGRESS_INTERVAL"
#: Seconds of wall time between two updates, unless ``WAITLAB_PROGRESS_INTERVAL`` sets another (> 0).
DEFAULT_INTERVAL = 1.0


#: A real program's record-count file in the layer's output folder, and one rank's slot in it.
LAYER_COUNT_FILE = "count"
LAYER_COUNT_DTYPE = np.dtype([("records", "<i8"), ("clock", "<f8")])


@dataclass(frozen=True)
class Progress:
    """Where a running SMPI stage is: ``simulated`` seconds reached (``None`` before its first report),
    ``actions`` replayed of ``total`` (0: unknown) and ``elapsed`` seconds of wall time since it started;
    ``unit`` names what ``actions`` counts (a program's layer counts the calls it recorded)."""

    simulated: float | None
    actions: int
    total: int
    elapsed: float
    unit: str = "actions"

    def text(self) -> str:
        """One line for a terminal.

        >>> Progress(1.234, 42_000, 84_000, 42.4).text()
        'SMPI: simulated 1.234 s, 42,000 of 84,000 actions (50%), 42 s elapsed'
        >>> Progress(None, 0, 0, 3.0).text()
        'SMPI: starting, 3 s elapsed'
        >>> Progress(0.5, 1_200, 0, 2.0, "calls recorded").text()
        'SMPI: simulated 0.5 s, 1,200 calls recorded, 2 s elapsed'
        """
        if self.simulated is None:
            return f"SMPI: starting, {self.elapsed:.0f} s elapsed"
        done = f"{self.actions:,} of {self.total:,} {self.unit} ({100 * self.actions / self.total:.0f}%)" \
            if self.total else f"{self.actions:,} {self.unit}"
        return f"SMPI: simulated {self.simulated:.6g} s, {done}, {self.elapsed:.0f} s elapsed"


Reporter = Callable[["Progress | None"], None]

_REPORTER: ContextVar[Reporter | None] = ContextVar("waitlab_smpi_progress", default=None)


def interval() -> float:
    """Seconds between two updates: ``$WAITLAB_PROGRESS_INTERVAL`` when it is a positive number, else 1."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if math.isfinite(value) and value > 0 else DEFAULT_INTERVAL


@contextmanager
def reporting(report: Reporter) -> Iterator[None]:
    """SMPI replays run inside this block report their progress to ``report`` (see the module docstring)."""
    token = _REPORTER.set(report)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def reporter() -> Reporter | None:
    """The function progress goes to in this thread of control (``None``: nobody asked for it)."""
    return _REPORTER.get()


class Throttled:
    """``report`` called at most once per :func:`interval`, and ``None`` passed on as it comes; the first report
    goes out one interval after this is made, or with the first call (``at_once``: a caller that already waits an
    interval between calls).  ``shown`` says whether a report went out."""

    def __init__(self, report: Reporter, *, at_once: bool = False) -> None:
        self.report, self.every, self.shown = report, interval(), False
        self.last = -math.inf if at_once else time.perf_counter()

    def __call__(self, p: Progress | None) -> None:
        now = time.perf_counter()
        if p is None or now - self.last >= self.every:
            self.last, self.shown = now, self.shown or p is not None
            self.report(p)


def replay_reader(report: Reporter, path: Path, total: int, t0: float) -> Callable[[], None]:
    """What the waiting thread calls each tick while a replay runs: its progress file read and reported (at most
    once per :func:`interval`)."""
    throttled = Throttled(report, at_once=True)

    def read() -> None:
        got = read_progress(path)
        throttled(Progress(got[0] if got else None, got[1] if got else 0, total, time.perf_counter() - t0))

    return read


def read_layer_count(folder: Path) -> tuple[float | None, int]:
    """``(simulated seconds, records)`` of a running program's measurement layer writing into ``folder``: the
    latest simulated time any rank recorded (``None`` before the first record) and the ranks' records so far
    (``(None, 0)`` while the count file does not exist).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     np.array([(3, 0.25), (4, 0.5), (0, 0.0)], LAYER_COUNT_DTYPE).tofile(Path(d) / LAYER_COUNT_FILE)
    ...     read_layer_count(Path(d)), read_layer_count(Path(d) / "none")
    ((0.5, 7), (None, 0))
    """
    try:
        raw = np.fromfile(folder / LAYER_COUNT_FILE, np.uint8)
    except (OSError, ValueError):
        return None, 0
    slots = raw[: raw.size - raw.size % LAYER_COUNT_DTYPE.itemsize].view(LAYER_COUNT_DTYPE)
    started = slots[slots["records"] > 0]
    if not started.size:
        return None, 0
    clock = float(np.nanmax(started["clock"]))
    return (clock if math.isfinite(clock) and clock >= 0 else None), int(started["records"].sum())


def read_progress(path: Path) -> tuple[float, int] | None:
    """``(simulated seconds, actions)`` of the replay's progress file, ``None`` while it has none (or a torn line).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "progress"
    ...     _ = p.write_text("0.125000000 4096".ljust(63) + chr(10))
    ...     read_progress(p), read_progress(Path(d) / "none")
    ((0.125, 4096), None)
    """
    try:
        words = path.read_bytes()[:64].split()
        simulated, actions = float(words[0]), int(words[1])
    except (OSError, ValueError, IndexError):
        return None
    return (simulated, actions) if math.isfinite(simulated) and simulated >= 0 and actions >= 0 else None
