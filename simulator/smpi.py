"""Run ``smpirun`` safely: own process group, time limit, SimGrid's words on failure."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from waitlab.errors import SimulationError
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import ACTIONS
from waitlab.simulator import progress
from waitlab.simulator.build import contention_plugin, require_tool
from waitlab.simulator.log_reader import LOG_DTYPE
from waitlab.simulator.output_reader import OutputReader, wait_for_output

#: Settings of waitlab's own native plugins, handed to them as environment variables instead of ``--cfg``
#: (SimGrid refuses keys it does not know): the contention plugin (simulator/native/waitlab_contention.cpp).
CONTENTION_SETTING = "waitlab/contention"
#: The contention plugin's environment variable (its rules).
PLUGIN_ENV = "WAITLAB_CONTENTION"
PLUGIN_SETTINGS: dict[str, str] = {CONTENTION_SETTING: PLUGIN_ENV}

#: Environment of every SimGrid process: glibc's malloc asks the kernel for transparent huge pages
#: (``madvise``), which cuts the TLB misses of SimGrid's solver walking tens of thousands of flows.  It changes
#: no simulated time (memory placement only); docs/performance.md, "All-concurrent alltoall", measures it.
SIMGRID_ENV: dict[str, str] = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}


@dataclass(frozen=True)
class SmpiResult:
    """What one smpirun invocation produced."""

    command: tuple[str, ...]
    returncode: int
    output: str
    wall_seconds: float


#: SimGrid failures caused by a machine limit, and what to do about them.
_LIMIT_HINTS = {
    "Cannot read replay file": "too many open files? a trace with one file per rank needs one descriptor per rank: "
                               "raise 'ulimit -n' or replay one shared trace file (a one-line index)",
    "Failed to protect stack": "vm.max_map_count is too low for the stack guard pages of this many ranks: "
                               "pass --cfg=contexts/guard-size:0 or 'sudo sysctl -w vm.max_map_count=262144'",
    "Failed to allocate stack": "the simulator could not allocate a stack for every rank: a virtual-memory limit "
                                "('ulimit -v') or too little memory; raise the limit, use fewer ranks, or smaller "
                                "stacks (--cfg=contexts/stack-size:KiB)",
}


def limit_hint(output: str) -> str:
    """A sentence naming the machine limit behind a SimGrid failure ('' when none is recognised)."""
    return "".join(f"\nLikely cause: {hint}" for key, hint in _LIMIT_HINTS.items() if key in output)


def _tail(text: str, n: int = 25) -> str:
    lines = [ln for ln in text.splitlines() if "Configuration change" not in ln and not ln.startswith("  ->")]
    return "\n".join(lines[-n:])


# ---------------------------------------------------------------------------------------------------------------
# SimGrid's failures in its own words
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlockedActor:
    """One actor of SimGrid's deadlock listing: ``Actor <pid> (<name>@<host>): <status>``."""

    pid: int
    rank: int | None  # SMPI names rank r's actor "r"
    host: str
    status: str


class DeadlockError(SimulationError):
    """SimGrid found a deadlock; ``actors`` are the blocked ones, ``time`` the simulated time it happened."""

    def __init__(self, what: str, time: float, actors: tuple[BlockedActor, ...], output: str,
                 blocked: str = "", fix: str = "") -> None:
        listed = blocked or "; ".join(f"rank {a.rank if a.rank is not None else a.pid} on {a.host}: {a.status}"
                                      for a in actors[:8])
        more = f" and {len(actors) - 8} more" if len(actors) > 8 and not blocked else ""
        head = (f"{what} deadlocked at simulated time {time:g} s (SimGrid: Deadlock detected): {len(actors)} ranks "
                f"are blocked: {listed}{more}")
        # the calls named in the input (fix): one line, bad input; else what SimGrid listed
        super().__init__(f"{head} (fix: {fix})" if fix else
                         f"{head}. Last lines of SimGrid's output:\n{_tail(output, 12)}")
        if fix:
            self.exit_code = 2
        self.what = what
        self.time = time
        self.actors = actors
        self.output = output


class ConfigKeyError(SimulationError):
    """SimGrid refused a ``--cfg`` setting (a key it does not know, or a value it cannot read): bad input."""

    exit_code = 2


#: Characters smpirun's unquoted expansion of ``--cfg`` settings would split or glob on.
_SPLIT = re.compile(r"[\s*?\[\]]")
#: SimGrid lists a blocked actor as ``Actor <pid> (<name>@<host>): <status>``, or without the colon when it is blocked
#: in a simcall (``Actor 3 (2@h2) simcall actor::ActivityWaitanySimcall``).
_ACTOR = re.compile(r"Actor (?P<pid>\d+) \((?P<name>[^@)]*)@(?P<host>[^)]*)\):? (?P<status>.*)$")
_TIME = re.compile(r"^\[(?P<t>[0-9.]+)\]")
_ADDRESS = re.compile(r" ?0x[0-9a-f]+ ?(\(\))?")
#: SimGrid's words when a setting's value cannot be read (SMPI's own keys: not checked before the run).
_VALUE_REFUSED = re.compile(r"std::range_error: invalid|std::invalid_argument: Invalid|has no algorithm|"
                            r"is invalid! Valid")
#: SimGrid lines that say what went wrong (first match wins), ahead of the tail of its output.
_KEY_LINES = ("Bad config key", "Invalid value", "Cannot parse", "Deadlock detected", "File size limit exceeded",
              "No space left on device", "xbt_die", "Assertion",
              "CRITICAL]", "malloc", "Segmentation fault", "Aborted")


def parse_deadlock(output: str) -> tuple[float, tuple[BlockedActor, ...]] | None:
    """The simulated time and blocked actors of SimGrid's deadlock report in ``output``, else ``None``.

    >>> line = "[0.001000] [ker_engine/INFO] Actor 1 (0@n0): waiting for communication activity 0x55ac () in state"
    >>> head = "[0.001000] src/x.cpp:1: [ker_engine/CRITICAL] Oops! Deadlock detected"
    >>> t, actors = parse_deadlock(head + chr(10) + line)
    >>> t, actors[0].rank, actors[0].host, actors[0].status
    (0.001, 0, 'n0', 'waiting for communication activity in state')
    >>> parse_deadlock(head + chr(10) + "[0.1] [ker_engine/INFO] Actor 3 (2@h2) simcall actor::ActivityWaitanySimcall")
    (0.001, (BlockedActor(pid=3, rank=2, host='h2', status='simcall actor::ActivityWaitanySimcall'),))
    """
    if "Deadlock detected" not in output:
        return None
    t = 0.0
    actors = []
    for line in output.splitlines():
        if "Deadlock detected" in line and (m := _TIME.match(line)):
            t = float(m.group("t"))
        m = _ACTOR.search(line)
        if m:
            name = m.group("name")
            actors.append(BlockedActor(int(m.group("pid")), int(name) if name.isdigit() else None,
                                       m.group("host"), " ".join(_ADDRESS.sub(" ", m.group("status")).split())))
    return t, tuple(actors)


def simgrid_words(output: str) -> str:
    """The line of SimGrid's output that says what went wrong ('' when none is recognised)."""
    lines = output.splitlines()
    for needle in _KEY_LINES:
        for line in lines:
            if needle in line:
                if needle in _KEY_LINES[:3]:
                    return line[line.index(needle):].strip()
                return re.sub(r"^\[[0-9.]+\] (\./src/[^ ]+ )?", "", line.strip())
    return ""


def failure(what: str, returncode: int, output: str) -> SimulationError:
    """The error for a failed smpirun: a deadlock naming the blocked ranks, a refused setting, or SimGrid's
    own key line followed by the tail of its output."""
    dl = parse_deadlock(output)
    if dl is not None:
        return DeadlockError(what, dl[0], dl[1], output)
    words = simgrid_words(output)
    if "Bad config key" in words or "Invalid value" in words or "Cannot parse" in words:
        key = words.split(":")[-1].strip()
        return ConfigKeyError(f"{what}: SimGrid refused a setting of simulation.config: \"{words}\" (fix: remove or "
                              f"correct {key!r}; `smpirun --help-cfg` lists every key)")
    if _VALUE_REFUSED.search(words):  # a value of an SMPI setting SimGrid could not read, or an unknown model
        said = re.sub(r"^\[[^]]*CRITICAL\] (Uncaught exception )?", "", words)[:400]
        return ConfigKeyError(f"{what}: simulation.config: SimGrid refused a value: \"{said}\" (fix: correct that "
                              "setting of [simulation.config] or remove it)")
    reason = f"exit status {returncode}"
    if returncode < 0:
        reason = f"killed by signal {signal.Signals(-returncode).name}"
    if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or "File too large" in output \
            or "File size limit exceeded" in output:
        reason += "; a file grew past the file-size limit (ulimit -f): raise the limit or write elsewhere"
    elif "No space left on device" in output:
        reason += "; the disk is full: free space or set TMPDIR to a larger disk"
    elif returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        reason += "; the CPU time limit ('ulimit -t') was reached: raise it"
    elif returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
        reason += ("; something killed it: the kernel when memory ran out, or a CPU time limit ('ulimit -t') past "
                   "its hard limit")
    first = f" SimGrid said: {words}." if words else ""
    return SmpiFailed(f"{what} failed in SimGrid ({reason}).{first} Last lines of its output:\n{_tail(output)}"
                      f"{limit_hint(output)}", output, returncode)


class SmpiFailed(SimulationError):
    """smpirun failed (other than a deadlock or a refused setting); ``output`` and ``returncode`` are its own."""

    def __init__(self, message: str, output: str, returncode: int) -> None:
        super().__init__(message)
        self.output = output
        self.returncode = returncode


# ---------------------------------------------------------------------------------------------------------------
# Processes that die with their parent
# ---------------------------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``; no-op elsewhere).

    Used as ``preexec_fn`` of smpirun and as the initializer of worker processes, so a ``kill -9`` of waitlab
    leaves no simulation running.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def death_wrapper() -> list[str]:
    """smpirun flags that make the simulator process (a child of smpirun's shell) die with that shell."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return ["-wrapper", f"{setpriv} --pdeathsig KILL"] if setpriv else []


def plugin_environment(config: Mapping[str, str] | None) -> dict[str, str]:
    """The environment variables of waitlab's native plugins from a run's settings (:data:`PLUGIN_SETTINGS`)."""
    return {PLUGIN_SETTINGS[k]: v for k, v in (config or {}).items() if k in PLUGIN_SETTINGS}


def plugin_wrapper(flags: Sequence[str], plugin: Path) -> list[str]:
    """``flags`` whose ``-wrapper`` (or a new one) loads ``plugin`` into the simulator process alone
    (``env LD_PRELOAD=...``; in the environment of smpirun's shell it would load SimGrid into each of its helpers).

    smpirun splits the wrapper on spaces: a plugin path with spaces or shell characters is refused.
    """
    if _SPLIT.search(str(plugin)):
        raise ConfigKeyError(f"waitlab's contention plugin lives at {plugin}, whose path holds spaces or shell "
                             "characters smpirun would split (fix: set WAITLAB_CACHE to a plain folder)")
    out = list(flags)
    preload = f"env LD_PRELOAD={plugin}"
    if "-wrapper" in out:
        i = out.index("-wrapper") + 1
        out[i] = f"{out[i]} {preload}"
    else:
        out += ["-wrapper", preload]
    return out


#: The contention plugin's line per rule once it has set the links' sharing policies (waitlab_contention.cpp).
_LAW_LINE = re.compile(r"^waitlab contention: (?P<kind>\w+) law on (?P<links>\d+) links$", re.MULTILINE)


def laws_acted(output: str) -> dict[str, int]:
    """Links each contention law of the plugin was installed on in a run (crossed by a message or not), from the
    plugin's own lines in ``output`` (``{}``: the plugin set no link's sharing policy, or was not loaded).

    >>> laws_acted("waitlab contention: hol law on 8 links\\nwaitlab contention: mem law on 4 links\\n")
    {'hol': 8, 'mem': 4}
    """
    acted: dict[str, int] = {}
    for m in _LAW_LINE.finditer(output):
        acted[m["kind"]] = acted.get(m["kind"], 0) + int(m["links"])
    return acted


def name_blocked_calls(exc: DeadlockError, log_path: Path, ops: OpTable) -> DeadlockError:
    """``exc`` with the MPI call each blocked rank is in, read from the replay log (what each rank finished).

    A rank that logged ``c`` actions (its ``init`` first) is blocked in its ``c``-th operation of ``ops``.
    """
    try:
        log = np.fromfile(log_path, dtype=LOG_DTYPE)
    except (OSError, ValueError):
        return exc
    done = np.bincount(log["rank"], minlength=ops.n_ranks) if log.size else np.zeros(ops.n_ranks, np.int64)
    counts = ops.per_rank_counts()
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    order = np.lexsort((ops.seq, ops.rank))
    parts, calls = [], []
    for a in exc.actors[:8]:
        if a.rank is None or not 0 <= a.rank < ops.n_ranks:
            continue
        k = int(done[a.rank]) - 1  # operations finished after init
        if k < 0:
            call = "init"
        elif k >= counts[a.rank]:
            call = "finalize"
        else:
            i = order[first[a.rank] + k]
            call = f"{ACTIONS[int(ops.code[i])]} (operation {k}"
            if ops.peer[i] >= 0:
                call += f", partner rank {int(ops.peer[i])}, tag {int(ops.tag[i])}"
            call += ")"
        parts.append(f"rank {a.rank} in {call}")
        calls.append(call.split(" ")[0])
    if not parts:
        return exc
    more = f" and {len(exc.actors) - 8} more" if len(exc.actors) > 8 else ""
    if set(calls) <= {"send", "ssend", "sendRecv"}:
        fix = ("a blocking send above the platform's eager threshold ([mpi] eager_threshold), and every ssend, "
               "waits until its receive is posted: post the receives first (irecv before the send), or send with "
               "isend and wait after the receive")
    else:
        fix = ("the blocked calls wait for each other: check that every send has its receive and every rank of a "
               "communicator calls its collectives in the same order, then reorder the trace's lines")
    return DeadlockError(exc.what, exc.time, exc.actors, exc.output, "; ".join(parts) + more, fix)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (smpirun and the simulator); quiet if it is already gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_smpirun(
    binary: Path,
    n_ranks: int,
    platform_xml: Path,
    hostfile: Path,
    *,
    replay_index: Path | None = None,
    args: Sequence[str] = (),
    config: Mapping[str, str] | None = None,
    extra_flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    what: str = "simulation",
    privatize: bool = False,
    accept_returncodes: Sequence[int] = (0,),
    progress_file: Path | None = None,
    progress_total: int = 0,
    output_limit: int | None = None,
    meanwhile: Callable[[], object] | None = None,
    on_start: Callable[[], object] | None = None,
) -> SmpiResult:
    """Run ``smpirun -no-privatize`` on ``binary`` and return its output.

    A non-zero exit, a crash or a time-out raises :class:`SimulationError`
    quoting the last lines SimGrid printed.  On time-out the whole process group
    is killed (smpirun starts children of its own).  ``privatize=True`` omits
    ``-no-privatize`` (real programs with global variables need SMPI's
    privatization); ``accept_returncodes`` lists exit statuses that are not failures.

    ``progress_file``: when a caller asked for progress (:func:`waitlab.simulator.progress.reporting`), the
    replay program writes its simulated time there and it is reported while SMPI runs (``progress_total``: the
    actions it will replay).  ``output_limit``: the output (SimGrid's and the program's) is read in a thread and
    kept up to that many bytes; beyond it the run is stopped with :class:`OutputLimitError` (a program that
    prints gigabytes never holds more than the limit in memory).  ``meanwhile`` is called on this thread about ten
    times a second while ``smpirun`` runs (a program's progress is read then).  ``on_start`` is called once on this
    thread as soon as ``smpirun`` has started: the caller's own work, done while SimGrid simulates (a run imports
    what it needs after its stage then).  The result's ``wall_seconds`` end when the output ended, even if
    ``on_start`` was still working then.
    """
    smpirun = require_tool("smpirun")
    cmd = [smpirun, *([] if privatize else ["-no-privatize"]), "-np", str(n_ranks), "-platform", str(platform_xml),
           "-hostfile", str(hostfile)]
    plugin_env = plugin_environment(config)
    flags = list(extra_flags) if "-wrapper" in extra_flags else [*extra_flags, *death_wrapper()]
    if plugin_env.get(PLUGIN_ENV):  # one plugin for every run: replays and programs
        flags = plugin_wrapper(flags, contention_plugin())
    cmd += flags
    if replay_index is not None:
        cmd += ["-replay", str(replay_index)]
    cmd.append(str(binary))
    cmd += list(args)
    for key, value in (config or {}).items():
        if key in PLUGIN_SETTINGS:  # read by waitlab's native plugin from its environment, not by SimGrid
            continue
        setting = f"--cfg={key}:{value}"
        if _SPLIT.search(setting):  # smpirun re-expands its settings unquoted: this one would become several
            raise ConfigKeyError(f"{what}: the SimGrid setting {setting[:80]!r} holds spaces or shell characters "
                                 "(* ? [ ]); smpirun would split it (fix: one value without spaces per key)")
        cmd.append(setting)
    cmd.append("--log=root.thres:warning")
    cmd.append("--log=ker_engine.thres:info")
    full_env = {k: v for k, v in os.environ.items() if k not in PLUGIN_SETTINGS.values()}
    for key, value in SIMGRID_ENV.items():
        full_env.setdefault(key, value)  # a user's own glibc tunables win
    full_env.update(plugin_env)
    full_env.update(env or {})
    report = progress.reporter() if progress_file is not None else None
    if report is not None:
        full_env[progress.PROGRESS_ENV] = str(progress_file)
        full_env[progress.INTERVAL_ENV] = repr(progress.interval())
    t0 = time.perf_counter()
    calls = [] if meanwhile is None else [meanwhile]
    if report is not None and progress_file is not None:  # a replay's progress, read while it runs
        calls.append(progress.replay_reader(report, progress_file, progress_total, t0))
    tick = None if meanwhile is not None else progress.interval()  # None: output_reader.MEANWHILE_TICK
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
                            cwd=cwd, start_new_session=True, preexec_fn=die_with_parent)
    assert proc.stdout is not None
    reader = OutputReader(proc.stdout, output_limit)
    try:
        if on_start is not None:
            on_start()
        ended = wait_for_output(reader, t0, timeout, partial(_each, calls) if calls else None, tick)
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        reader.join()
        raise
    finally:
        if report is not None:
            report(None)
    if not ended or reader.over:
        kill_group(proc.pid)
    proc.wait()
    reader.join()
    out = reader.text()
    if reader.over:
        assert output_limit is not None
        raise OutputLimitError(what, output_limit, out)
    if not ended:
        raise SimulationError(f"{what} exceeded the time limit of {timeout:g} s and was stopped. "
                              f"Last output of SimGrid:\n{_tail(out or '')}")
    wall = (reader.ended_at or time.perf_counter()) - t0
    if proc.returncode not in accept_returncodes or "Deadlock detected" in out:
        raise failure(what, proc.returncode, out)
    if plugin_env.get(PLUGIN_ENV) and not _LAW_LINE.search(out):  # a law recorded in run.json must have acted
        raise SimulationError(f"{what}: the platform's contention laws did not act: waitlab's contention plugin "
                              "reported no link (it was not loaded into the simulator); rebuild it with: python -m "
                              "waitlab.simulator.build, or set [simulation] contention = \"none\"")
    return SmpiResult(tuple(cmd), proc.returncode, out, wall)


def _each(calls: Sequence[Callable[[], object]]) -> None:
    """Each of ``calls``, in order (what the waiting thread does every tick)."""
    for call in calls:
        call()


# ---------------------------------------------------------------------------------------------------------------
# Reading smpirun's output while it runs: bounded, with progress
# ---------------------------------------------------------------------------------------------------------------

class OutputLimitError(SimulationError):
    """The output of smpirun (SimGrid's and the program's) grew past ``limit`` bytes and the run was stopped."""

    def __init__(self, what: str, limit: int, output: str) -> None:
        super().__init__(f"{what} printed more than {limit / (1 << 20):g} MiB and was stopped. "
                         f"Last lines of its output:\n{_tail(output, 5)}")
        self.what = what
        self.limit = limit
        self.output = output
