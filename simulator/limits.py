"""Operating-system limits that bound how many ranks SMPI can simulate, checked before a run.

Two limits stop large replays before any simulated time passes (measured with SimGrid 3.32 here):

- **open files** (``ulimit -n``): a trace index with one file per rank makes SMPI open every file at
  once; waitlab writes one shared trace, so a replay needs only a few descriptors, but a per-rank
  index still needs one per rank.
- **memory maps** (``vm.max_map_count``, 65,530 by default): each actor's stack guard page splits its
  stack into two maps (8,365 maps at 4,096 ranks with the default guard, 915 with
  ``contexts/guard-size:0``), so about 32,000 ranks exhaust the default limit ("Failed to protect
  stack").  The guard page only catches stack overflows of the replayed actions; it does not change
  simulated times, so waitlab turns it off when it would not fit.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

from waitlab.errors import EnvironmentProblem

#: Maps one actor needs with SimGrid's default stack guard page (stack + guard), and without it.
MAPS_PER_RANK_GUARDED = 2
#: Maps of the SMPI process that do not depend on the ranks (libraries, heap), with room to spare.
MAPS_BASE = 2_000
#: Descriptors of the SMPI process besides trace files (libraries, log, platform, pipes), with room to spare.
FILES_BASE = 32

MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")


def max_map_count() -> int | None:
    """``vm.max_map_count`` of this machine (``None`` when it cannot be read)."""
    try:
        return int(MAX_MAP_COUNT.read_text().strip())
    except (OSError, ValueError):
        return None


def open_files_limit() -> int:
    """The soft limit on open files of this process (``ulimit -n``), inherited by smpirun."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


@dataclass(frozen=True)
class LimitReport:
    """What a replay of ``n_ranks`` needs from the system and what it has."""

    n_ranks: int
    files_needed: int
    files_limit: int
    maps_needed_guarded: int
    maps_limit: int | None

    @property
    def guard_fits(self) -> bool:
        """Whether SimGrid's default stack guard pages fit under ``vm.max_map_count``."""
        return self.maps_limit is None or self.maps_needed_guarded <= self.maps_limit

    @property
    def files_fit(self) -> bool:
        return self.files_needed <= self.files_limit

    def settings(self) -> dict[str, str]:
        """SimGrid settings the limits call for (no guard page when the guards would not fit)."""
        return {} if self.guard_fits else {"contexts/guard-size": "0"}

    def problems(self) -> list[str]:
        """One plain sentence per limit the run would exceed, with the command that lifts it."""
        out = []
        if not self.files_fit:
            out.append(f"a replay of {self.n_ranks} ranks from one trace file per rank needs about "
                       f"{self.files_needed} open files but 'ulimit -n' is {self.files_limit}; raise it "
                       f"('ulimit -n {self.files_needed}') or give a one-line index naming a shared trace file")
        return out


def replay_limits(n_ranks: int, *, per_rank_files: bool = False) -> LimitReport:
    """The limits a replay of ``n_ranks`` meets on this machine."""
    files = FILES_BASE + (n_ranks if per_rank_files else 1)
    return LimitReport(n_ranks, files, open_files_limit(), MAPS_BASE + MAPS_PER_RANK_GUARDED * n_ranks,
                       max_map_count())


def check_replay_limits(n_ranks: int, *, per_rank_files: bool = False) -> dict[str, str]:
    """Raise :class:`EnvironmentProblem` when a limit would stop the replay; else the settings it needs."""
    report = replay_limits(n_ranks, per_rank_files=per_rank_files)
    problems = report.problems()
    if problems:
        raise EnvironmentProblem("this machine's limits would stop the simulation before it starts: "
                                 + "; ".join(problems))
    return report.settings()
