"""Arguments of time-independent trace lines: numbers, datatype sizes, per-rank counts and roots, checked.

Every reader of a TI line (:mod:`waitlab.simulator.ti_trace`) takes its arguments through these functions, so a
bad argument is reported the same way everywhere: :class:`BadLine` carries the problem and the fix, and the
reader adds the file and line number.
"""

from __future__ import annotations

import numpy as np

from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import ACTIONS, VOCABULARY, lut

#: Byte size of SimGrid 3.32's predefined datatype ids (``src/smpi/mpi/smpi_datatype.cpp``).
DATATYPE_SIZES: dict[str, int] = {
    "0": 8, "1": 4, "2": 1, "3": 2, "4": 8, "5": 4, "6": 1, "7": 8, "8": 1, "9": 1, "10": 2, "11": 4, "12": 8,
    "13": 8, "14": 16, "15": 4, "16": 1, "17": 1, "18": 2, "19": 4, "20": 8, "21": 1, "22": 2, "23": 4, "24": 8,
    "25": 8, "26": 16, "27": 32, "28": 8, "29": 8, "30": 8, "31": 16, "32": 16, "33": 8, "34": 8, "35": 8,
    "36": 16, "37": 16, "38": 4, "39": 4, "40": 8, "41": 16, "42": 8, "43": 16, "44": 16, "45": 4, "46": 2,
    "47": 4, "48": 8, "49": 16, "50": 32, "51": 1, "52": 8, "53": 16, "54": 32, "57": 1, "58": 8, "59": 8,
}  # fmt: skip



class BadLine(ValueError):
    """A trace line that cannot be read: the problem, and the fix to print with it."""

    def __init__(self, problem: str, fix: str = "see docs/real_programs.md, 'The TI trace format'") -> None:
        super().__init__(problem)
        self.fix = fix


#: Largest integer argument (a count, a tag, a rank): 2**53, the largest a double holds exactly; its bytes, times any
#: datatype's size, still fit the event table's int64 columns.
MAX_INTEGER = 2**53


def number(args: list[str], i: int, what: str, *, integer: bool = True, negative: bool = False) -> float:
    if i >= len(args):
        raise BadLine(f"missing argument {i + 1} ({what})")
    try:  # as C's strtod reads it: no digit separators (1_000) nor non-ASCII digits, which Python's float() takes
        if "_" in args[i] or not args[i].isascii():
            raise ValueError(args[i])
        x = float(args[i])
    except ValueError:
        raise BadLine(f"argument {i + 1} ({what}) is not a number: {args[i]!r}") from None
    if not np.isfinite(x) or (x < 0 and not negative):
        raise BadLine(f"argument {i + 1} ({what}) must be a finite number >= 0, got {args[i]!r}")
    if integer and x != int(x):
        raise BadLine(f"argument {i + 1} ({what}) must be an integer, got {args[i]!r}")
    if integer and abs(x) > MAX_INTEGER:
        raise BadLine(f"argument {i + 1} ({what}) is too large: {args[i]!r} (at most 2**53 = {MAX_INTEGER:,}, "
                      "the largest integer a double holds exactly)")
    return x


def datatype_size(args: list[str], i: int, default: int) -> int:
    if i >= len(args):
        return default
    size = DATATYPE_SIZES.get(args[i])
    if size is None:
        raise BadLine(f"unknown datatype id {args[i]!r} (argument {i + 1})",
                       "only SimGrid's predefined datatype ids 0-59 can be replayed; write sizes in bytes "
                       "with datatype 6 (MPI_BYTE)")
    return size


def counts(args: list[str], start: int, n: int, what: str) -> list[float]:
    if start + n > len(args):
        raise BadLine(f"needs {n} {what} (one per rank), got {max(len(args) - start, 0)}")
    return [number(args, start + i, what) for i in range(n)]


def root_arg(args: list[str], i: int, world: int) -> int:
    """Root rank at argument ``i`` (0 when absent, as SimGrid's ``parse_root``), checked against the world."""
    root = int(number(args, i, "root")) if len(args) > i else 0
    if root >= world:
        raise BadLine(f"root {root} is outside 0..{world - 1}")
    return root


#: Most bytes of one message or one collective buffer (a v-collective's total): SimGrid 3.32's replay reads a count
#: as a C ``int`` (waitlab's traces give bytes, datatype MPI_BYTE), so a count of 2**31 wraps around (a 2 GiB message
#: took 1e10 s).  The bound of ``waitlab.experiments.physics_limits.MAX_MESSAGE_BYTES``.
MAX_MESSAGE_BYTES = 2**31 - 1
#: Longest time of one line (compute, sleep, a reduction's flops, ...), in seconds on the platform: a year, as a
#: synthetic model's step (``waitlab.experiments.physics_limits.MAX_EXCESS_SECONDS``).
MAX_LINE_SECONDS = 3.2e7
#: Most such time one rank adds up: a century.  Times are stored as int64 nanoseconds (the Chrome trace, the timeline),
#: which end at 9.2e9 s; the margin leaves room for the communication and waits around it.
MAX_RANK_SECONDS = 3.2e9

_INT_VALUE = lut(a.name for a in VOCABULARY if a.is_mpi and "bytes" in a.value and a.name != "win_create")
_INT_VALUE2 = lut(a.name for a in VOCABULARY if a.is_mpi and "bytes" in a.value2)
_SECONDS = lut(a.name for a in VOCABULARY if a.value.startswith("seconds"))  # compute: seconds at the trace's speed
_FLOPS2 = lut(a.name for a in VOCABULARY if a.flops_in_value2)
_FLUSH = lut(("flush",))


def value_problem(ops: OpTable, flops_per_second: float) -> tuple[int, str, str] | None:
    """``(row, problem, fix)`` of the first operation the replay cannot represent, else ``None``: a message or
    collective buffer above :data:`MAX_MESSAGE_BYTES`, a line taking more than :data:`MAX_LINE_SECONDS` (compute in
    ``ops`` is seconds; a reduction's flops run at ``flops_per_second``), a rank's time above :data:`MAX_RANK_SECONDS`.
    """
    code, value, value2 = ops.code, ops.value, ops.value2
    nbytes = np.maximum(np.where(_INT_VALUE[code], value, 0.0), np.where(_INT_VALUE2[code], value2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = (np.where(_SECONDS[code], value, 0.0) + np.where(_FLOPS2[code], value2 / flops_per_second, 0.0)
                   + np.where(_FLUSH[code] & (value2 > 0), value / np.where(value2 > 0, value2, 1.0), 0.0))
    total = np.cumsum(seconds)
    starts = np.concatenate(([0], np.cumsum(ops.per_rank_counts())[:-1])).astype(np.int64)
    total = total - np.repeat(np.concatenate(([0.0], total))[starts], ops.per_rank_counts())  # restarted per rank
    found = [(int(np.flatnonzero(bad)[0]), kind) for kind, bad in (
        ("bytes", nbytes > MAX_MESSAGE_BYTES), ("line", seconds > MAX_LINE_SECONDS), ("rank", total > MAX_RANK_SECONDS))
        if bad.any()]
    if not found:
        return None
    i, kind = min(found)
    action = ACTIONS[int(code[i])]
    if kind == "bytes":
        return i, (f"{action} of {nbytes[i]:.0f} bytes: SimGrid 3.32's replay reads a message's (or a collective "
                   f"buffer's) size as a C int, so at most {MAX_MESSAGE_BYTES} bytes (2 GiB - 1)"), \
            f"split it into several {action}s of at most {MAX_MESSAGE_BYTES} bytes"
    if kind == "line":
        speed = f" at {flops_per_second:g} flop/s" if action == "compute" or _FLOPS2[code[i]] else ""
        return i, (f"{action} takes {seconds[i]:.3g} s{speed}, more than a year ({MAX_LINE_SECONDS:g} s), the "
                   "longest one line may take"), \
            f"check the number (compute counts flops, sleep seconds); at most {MAX_LINE_SECONDS:g} s per line"
    return i, (f"rank {int(ops.rank[i])}'s compute and sleeps add up to {total[i]:.3g} s by this line, more than "
               f"{MAX_RANK_SECONDS:g} s (a century; times are kept as int64 nanoseconds)"), \
        "check the trace's compute amounts (flops) and sleeps (seconds)"
