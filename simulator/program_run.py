"""Running a real MPI program under SMPI with waitlab's measurement layer, and its injection schedule.

:func:`run_program` runs it with ``smpirun`` (privatization on: real programs have global variables) and turns every
failure of the program (a crash, ``MPI_Abort``, a deadlock SMPI detected, a non-zero exit status, a time-out, a rank
that never reached ``MPI_Finalize``, more than :data:`OUTPUT_LIMIT` of output) into one :class:`ProgramError`: one
line naming the program's file, what happened (which ranks, at which simulated time, SimGrid's words) and its last
output line.
"""

from __future__ import annotations

import re
import shlex
import signal
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError, problem_text
from waitlab.models.vocabulary import ACTIONS, LOCAL_ACTIONS
from waitlab.simulator import progress
from waitlab.simulator.build import CONTENTION_SOURCE, PLUGIN_FLAGS, contention_plugin, simgrid_version
from waitlab.simulator.smpi import (
    PLUGIN_ENV,
    DeadlockError,
    OutputLimitError,
    SmpiFailed,
    SmpiResult,
    parse_deadlock,
    run_smpirun,
    simgrid_words,
)

ITEM_DTYPE = np.dtype([("anchor", "<i8"), ("code", "<i4"), ("phase", "<i4"), ("value", "<f8"), ("value2", "<f8")])

#: The contention plugin's file in a program's stock re-run folder (:func:`rerun_files`).
PLUGIN_FILE = "waitlab_contention.so"

#: The files of a program's stock re-run folder besides the program's inputs (:func:`rerun_files`).
RERUN_NAMES = ("platform.xml", "hostfile", "program", "smpirun.sh", "schedule", PLUGIN_FILE,
               PLUGIN_FILE.replace(".so", ".cpp"))
#: The program's working folder in its re-run folder when an input has one of the :data:`RERUN_NAMES`.
RERUN_CWD = "cwd"

#: Actions the layer can inject (``WAITLAB_SCHEDULE``).
INJECTABLE = tuple(sorted(a for a in ACTIONS if a in LOCAL_ACTIONS))


#: Most output (SimGrid's and the program's together) a program run keeps in memory; a program that prints more is
#: stopped (issue 23: one that prints gigabytes would otherwise hold them all).
OUTPUT_LIMIT = 64 << 20


class ProgramError(SimulationError):
    """A program run failed because of the program (crash, ``MPI_Abort``, deadlock, exit status, endless loop, too
    much output): one line naming its file, what happened and the fix.  A bad input, so exit status 2."""

    exit_code = 2

    def __init__(self, program: str, problem: str, fix: str) -> None:
        self.program = program
        self.problem = problem
        self.fix = fix
        super().__init__(problem_text(f"{program}: (run)", problem, fix))


#: What SimGrid and the layer print about a failure: ``[host:rank:(pid) time]`` prefixes SMPI's lines.
_ABORT_LAYER = re.compile(r"waitlab-layer: rank (?P<rank>-?\d+) called MPI_Abort\((?P<comm>[^,]*), (?P<code>-?\d+)\) "
                          r"at simulated (?P<t>[0-9.eE+-]+) s")
_WHO = r"\[[^:\]\s]+:(?P<rank>\d+):\(\d+\) (?P<t>[0-9.]+)\] "
_ABORT_SIMGRID = re.compile(_WHO + r".*MPI_Abort was called")
_EXIT_STATUS = re.compile(_WHO + r".*did not return 0\. Return value : (?P<code>-?\d+)")
#: The layer's own fatal message (``wl_die`` in native/waitlab_pmpi.c): it names the cause and the fix.
_LAYER_DIED = re.compile(r"waitlab measurement layer \(rank (?P<rank>-?\d+)\): (?P<what>.*)$", re.MULTILINE)
#: Lines that are not the program's own output (SimGrid's log, backtraces, smpirun's summary, the layer's line).
_NOT_PROGRAM = re.compile(r"^(\[|Backtrace|\s+->|Segmentation fault|Execution failed with code|Aborted|"
                          r"waitlab-layer:|waitlab measurement layer|waitlab contention|\S+ --cfg=)")
#: The MPI call a rank was in when SimGrid killed it (a deadlock): ``wl_report_inside`` in
#: native/waitlab_pmpi_abort.c.
_INSIDE = re.compile(r"^waitlab-layer: rank (?P<rank>\d+) ended inside (?P<call>\w+)(?: from (?P<src>-?\d+|any|none))?"
                     r"(?: to (?P<dst>-?\d+|any|none))?(?: root (?P<root>-?\d+|any|none))?(?: tag (?P<tag>-?\d+|any))?"
                     r" site 0x(?P<site>[0-9a-f]+)\s*$", re.MULTILINE)
_PEER_WORDS = {"any": "any rank", "none": "MPI_PROC_NULL"}
#: Most blocked ranks a deadlock's message names one by one; beyond, the first few and how many more.
DEADLOCK_SHOWN = 8
#: Blocking collectives (and calls that are collective over their communicator), by name without ``MPI_``.
_COLLECTIVE = re.compile(r"^(I?(Barrier|Bcast|Reduce|Allreduce|Gatherv?|Scatterv?|Allgatherv?|Alltoall[vw]?|Scan|"
                         r"Exscan|Reduce_scatter(_block)?)|Comm_(split|dup|create)\w*|Cart_create|Win_\w+)$")
#: The ranks of :func:`_missing`'s words (``" (ranks 0, 1 did not reach MPI_Finalize)"``).
_MISSING = re.compile(r"(?P<ranks>ranks? [^();]*?) did not reach MPI_Finalize")
#: The ranks of :func:`_missing`'s words that never called ``MPI_Init`` (``" (ranks 0, 1 never called MPI_Init)"``).
_NO_INIT = re.compile(r"(?P<ranks>ranks? [^();]*?) never called MPI_Init")
#: SMPI's refusal of an MPI function it does not have (``Not yet implemented: PMPI_Mprobe``).
_NOT_IMPLEMENTED = re.compile(_WHO + r".*Not yet implemented: P?(?P<call>MPI_\w+)")
#: What to use instead of a call SMPI 3.32 does not implement (``src/smpi/bindings/smpi_mpi.cpp``'s unimplemented
#: calls), by the call's name or its prefix; a call not listed gets no suggestion.
_INSTEAD: tuple[tuple[tuple[str, ...], str], ...] = (
    (("MPI_Mprobe", "MPI_Mrecv", "MPI_Message_"), "MPI_Probe then MPI_Recv from the probed source and tag"),
    (("MPI_Improbe", "MPI_Imrecv"), "MPI_Iprobe then MPI_Recv or MPI_Irecv from the probed source and tag"),
    (("MPI_Intercomm_", "MPI_Comm_remote_"), "an intracommunicator (MPI_Comm_split of MPI_COMM_WORLD) in which "
     "the two groups address each other by rank"),
    (("MPI_Neighbor_", "MPI_Ineighbor_"), "MPI_Isend and MPI_Irecv to each neighbour, then MPI_Waitall"),
    (("MPI_Comm_idup",), "MPI_Comm_dup"),
    (("MPI_Dist_graph_", "MPI_Graph"), "MPI_Cart_create, or neighbour lists kept by the program"),
    (("MPI_Comm_spawn", "MPI_Comm_get_parent", "MPI_Comm_accept", "MPI_Comm_connect", "MPI_Comm_join",
      "MPI_Open_port", "MPI_Close_port", "MPI_Publish_name", "MPI_Lookup_name", "MPI_Unpublish_name"),
     "all ranks started at once ([scenario] ranks) instead of spawned or connected processes"),
)


def _not_implemented_fix(call: str) -> str:
    """The fix for a program stopped by SMPI at ``call``, which it does not implement.

    >>> _not_implemented_fix("MPI_Intercomm_create")
    'do without MPI_Intercomm_create (use an intracommunicator (MPI_Comm_split of MPI_COMM_WORLD) in which the two \
groups address each other by rank), or run the program with another MPI'
    >>> _not_implemented_fix("MPI_Pcontrol")
    'do without MPI_Pcontrol, or run the program with another MPI'
    """
    instead = next((use for names, use in _INSTEAD if call.startswith(names)), None)
    return f"do without {call}{f' (use {instead})' if instead else ''}, or run the program with another MPI"


def _call_name(name: str) -> str:
    """The MPI name of a wrapper's name (C's as is, Fortran's ``mpi_sendrecv_replace_`` -> ``MPI_Sendrecv_replace``).

    >>> _call_name("MPI_Recv"), _call_name("mpi_sendrecv_replace_")
    ('MPI_Recv', 'MPI_Sendrecv_replace')
    """
    if name.startswith("mpi_"):
        rest = name[4:].rstrip("_")
        return "MPI_" + rest[:1].upper() + rest[1:]
    return name


def _blocked_calls(output: str, binary: Path | None) -> dict[int, tuple[str, str]]:
    """Per rank the layer reported inside a call when SimGrid killed it: the call's name and its words
    (``"MPI_Recv from rank 1 (dl.c:12)"``); the site as ``file:line`` when ``binary`` has debug information."""
    found = {int(m["rank"]): m for m in _INSIDE.finditer(output)}
    if not found:
        return {}
    sites: dict[int, str] = {}
    if binary is not None and binary.exists():
        from waitlab.simulator.program_records import resolve_sites  # only for a deadlock: addr2line

        offsets = np.array([int(m["site"], 16) for m in found.values()], np.uint64)
        sites = {k: v for k, v in resolve_sites(binary, offsets).items() if not v.startswith("0x")}
    out = {}
    for rank, m in found.items():
        call = _call_name(m["call"])
        words = [call]
        for word, key in (("to", "dst"), ("from", "src")):
            if (r := m[key]) is not None:
                words.append(f"{word} {_PEER_WORDS.get(r, f'rank {r}')}")
        if m["root"] is not None:
            words.append(f"root {m['root']}")
        if m["tag"] not in (None, "any", "0"):
            words.append(f"tag {m['tag']}")
        site = sites.get(int(m["site"], 16))
        out[rank] = (call, " ".join(words) + (f" ({site})" if site else ""))
    return out


def _deadlock_fix(calls: Sequence[str]) -> str:
    """The fix of a deadlock whose ranks are in ``calls`` (their MPI names; "" for a rank the layer did not name)."""
    smpi = (" (a program that completes under another MPI may have met a limit of SMPI: rerun it with stock smpirun "
            "to tell)")
    kinds = {"collective" if _COLLECTIVE.match(c.removeprefix("MPI_")) else
             "recv" if c in ("MPI_Recv", "MPI_Probe") else
             "send" if c in ("MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend") else "other" for c in calls if c}
    if kinds == {"collective"}:
        return ("every rank of a communicator must call the same collectives in the same order: here ranks wait in "
                "different collectives, or for a rank that never calls theirs" + smpi)
    if "collective" in kinds:
        return ("a rank in a collective waits for every rank of its communicator to call it, while the others wait "
                "for a point-to-point message: the rank in the collective is the one that should send (or receive) "
                "it first; post that call before the collective, or use MPI_Irecv/MPI_Isend" + smpi)
    if kinds == {"send"}:
        return ("ranks that all send first with a synchronous or large message wait for each other's receive: "
                "receive first on one side, or use MPI_Sendrecv or MPI_Isend" + smpi)
    if kinds and kinds <= {"recv", "send"}:
        return ("every blocking receive needs a matching send: ranks that all receive first wait for each other "
                "(a cycle of receives): send first on one side, or use MPI_Sendrecv or MPI_Irecv" + smpi)
    return ("every blocking receive or wait needs a matching send, and every collective all the ranks of its "
            "communicator: two ranks that both call MPI_Recv first wait for each other: send first on one side, "
            "or use MPI_Sendrecv or MPI_Irecv" + smpi)


def explain_failure(output: str, returncode: int | None, missing: str, program: str,
                    binary: Path | None = None, unfinished: Collection[int] = ()) -> ProgramError:
    """The one-line error of a failed program run from SimGrid's output, its exit status and the ranks that did
    not reach ``MPI_Finalize`` (``missing``, e.g. " (rank 1 did not reach MPI_Finalize)"; ``unfinished``: their
    numbers).  ``binary``: the program, to name the source line of the call each rank of a deadlock is in.

    The first cause wins: an abort, a crash or a rank's exit status leaves the other ranks blocked, and SimGrid then
    reports a deadlock too."""
    said = [ln.strip() for ln in output.splitlines() if ln.strip() and not _NOT_PROGRAM.match(ln)]
    last = f"; the program's last output line: {said[-1][:160]!r}" if said else ""  # any rank's
    if m := _LAYER_DIED.search(output):
        return ProgramError(program, f"waitlab's measurement layer stopped rank {m['rank']}: {m['what'].strip()}",
                            "")
    if m := _NOT_IMPLEMENTED.search(output):
        return ProgramError(program, f"rank {m['rank']} called {m['call']}, which SMPI (SimGrid {simgrid_version()}) "
                            "does not implement", _not_implemented_fix(m["call"]))
    if m := _ABORT_LAYER.search(output):
        return ProgramError(program, f"rank {m['rank']} called MPI_Abort({m['comm']}, {m['code']}) at simulated "
                            f"{float(m['t']):.6g} s{last}", "the program stopped itself: see why in its own output")
    if m := _ABORT_SIMGRID.search(output):
        return ProgramError(program, f"rank {m['rank']} called MPI_Abort at simulated {float(m['t']):.6g} s{last}",
                            "the program stopped itself: see why in its own output")
    if "Segmentation fault" in output or returncode in (139, -signal.SIGSEGV):
        return ProgramError(program, f"the program crashed with a segmentation fault (SIGSEGV){missing}{last}",
                            "find the bad memory access outside waitlab, e.g. smpirun -wrapper valgrind or gdb")
    if m := _EXIT_STATUS.search(output):
        code = int(m["code"])
        status = code % 256  # what the OS reports (-1 -> 255), the only form [application] exit_codes accepts
        ended = f"ended with exit status {code}" if code == status else f"returned {code} (exit status {status})"
        return ProgramError(program, f"rank {m['rank']} {ended} at simulated {float(m['t']):.6g} s{missing}{last}",
                            "every rank must return 0 after MPI_Finalize, or list the status"
                            f"{'' if code == status else f', {status},'} in [application] exit_codes")
    dl = parse_deadlock(output)
    if dl is not None:
        ranks = sorted({a.rank if a.rank is not None else a.pid for a in dl[1]})
        inside = _blocked_calls(output, binary)
        # a rank neither at MPI_Finalize nor blocked ended early (exit(0), or main returned 0): it is the cause
        gone = sorted(set(unfinished) - {a.rank for a in dl[1]} - set(inside))
        cause = f"{_ranks_text(gone)} ended without calling MPI_Finalize, leaving the others in a " if gone else ""
        fix = "call MPI_Finalize on every rank before main returns or the program exits" if gone else ""
        if inside:
            ranks = sorted(set(ranks) | set(inside))
            few = ranks if len(ranks) <= DEADLOCK_SHOWN else ranks[:DEADLOCK_SHOWN - 2]
            named = ", ".join(f"rank {r} in {inside[r][1]}" if r in inside else f"rank {r} blocked" for r in few)
            more = f", and {len(ranks) - len(few)} more" if len(few) < len(ranks) else ""
            return ProgramError(program, f"{cause}deadlock at simulated {dl[0]:.6g} s: {named}{more} (SimGrid: "
                                f"Deadlock detected){last}",
                                fix or _deadlock_fix([inside[r][0] if r in inside else "" for r in ranks]))
        shown = ", ".join(map(str, ranks[:12])) + (" ..." if len(ranks) > 12 else "")
        return ProgramError(program, f"{cause}deadlock at simulated {dl[0]:.6g} s: rank{'s' if len(ranks) > 1 else ''} "
                            f"{shown} blocked waiting for communications that can never complete (SimGrid: "
                            f"Deadlock detected){last}", fix or _deadlock_fix([]))
    if returncode is not None and (returncode < 0 or returncode > 128):
        sig = -returncode if returncode < 0 else returncode - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        words = simgrid_words(output)
        said_simgrid = f"; SimGrid said: {words[:200]!r}" if words and "Aborted" not in words else ""
        return ProgramError(program, f"the program was killed by {name}{missing}{said_simgrid}{last}",
                            "run it outside waitlab to see why (smpirun -wrapper gdb)")
    if m := _NO_INIT.search(missing):  # nothing else went wrong: ranks ran without MPI at all
        others = f"; {o['ranks']} did not reach MPI_Finalize" if (o := _MISSING.search(missing)) else ""
        return ProgramError(program, f"{m['ranks']} ended without calling MPI_Init (nor MPI_Finalize){others}{last}",
                            "call MPI_Init at the start of main and MPI_Finalize before it returns, on every rank: "
                            "waitlab records the MPI calls a program makes between them")
    if m := _MISSING.search(missing):  # nothing else went wrong: the ranks ended without MPI_Finalize
        return ProgramError(program, f"{m['ranks']} ended without calling MPI_Finalize{last}",
                            "call MPI_Finalize on every rank before main returns or the program exits")
    words = simgrid_words(output)
    return ProgramError(program, f"the program failed in SimGrid (exit status {returncode})"
                        + (f": {words[:200]}" if words else "") + last, "run it outside waitlab to see why")


def write_schedule(folder: Path, n_ranks: int, anchor: npt.NDArray[np.int64], rank: npt.NDArray[np.int32],
                   code: npt.NDArray[np.int8], value: npt.NDArray[np.float64], value2: npt.NDArray[np.float64],
                   phase: npt.NDArray[np.int32]) -> None:
    """Write the layer's injection schedule, one file per rank (``s<rank>.bin``), in the given order.

    ``phase`` 0 runs an item just before anchor ``anchor`` (the anchor-th MPI call
    or region marker of its rank), 1 right after anchor ``anchor - 1`` returns.
    Items must be in execution order within each rank.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        sel = np.flatnonzero(rank == r)
        items = np.zeros(sel.size, ITEM_DTYPE)
        items["anchor"], items["code"], items["phase"] = anchor[sel], code[sel], phase[sel]
        items["value"], items["value2"] = value[sel], value2[sel]
        items.tofile(folder / f"s{r}.bin")


def run_program(binary: Path, n_ranks: int, platform_xml: Path, hostfile: Path, out_dir: Path, *,
                args: Sequence[str] = (), config: Mapping[str, str] | None = None,
                schedule_dir: Path | None = None, extra_flags: Sequence[str] = (), timeout: float | None = None,
                exit_codes: Sequence[int] = (0,), cwd: Path | None = None, what: str = "program",
                env: Mapping[str, str] | None = None, measured: bool = False, program: str = "",
                on_start: Callable[[], object] | None = None) -> SmpiResult:
    """Run a program built by :func:`build_program` under SMPI with the layer recording into ``out_dir``.

    ``config`` is every SimGrid setting of the run (:func:`waitlab.platforms.machine.program_settings` and the
    platform's); ``env`` adds environment variables for the layer (e.g. the platform's ``program_env``: its one-sided
    protocol); ``measured``: SimGrid benchmarks the program's computation (the layer books it before each call).
    ``program`` names the program's file in the error of a failed run (default ``binary``); ``on_start``: the
    caller's work while SMPI runs (:func:`~waitlab.simulator.smpi.run_smpirun`).

    Raises
    ------
    SimulationError
        The program crashed, aborted, deadlocked, exceeded ``timeout``, returned an
        exit status not in ``exit_codes``, or some rank never reached ``MPI_Finalize``.
        The message quotes SimGrid and the last lines of the program's output.
    """
    name = program or str(binary)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*out_dir.glob("r*.*"), out_dir / progress.LAYER_COUNT_FILE]:
        stale.unlink(missing_ok=True)
    watch = _Watch(out_dir, progress.reporter())
    cfg = dict(config or {})
    env = {**layer_env(env, schedule_dir, measured), "WAITLAB_OUT": str(out_dir.resolve())}
    try:
        res = run_smpirun(binary, n_ranks, platform_xml, hostfile, args=[*args, "--log=ker_engine.thres:info"],
                          config=cfg, extra_flags=extra_flags, env=env, cwd=cwd, timeout=timeout, what=what,
                          privatize=True, accept_returncodes=tuple(exit_codes), output_limit=OUTPUT_LIMIT,
                          meanwhile=watch if watch.needed else None, on_start=on_start)
    except OutputLimitError:
        raise ProgramError(name, f"the program printed more than {OUTPUT_LIMIT >> 20} MiB and was stopped",
                           "print less (waitlab keeps at most this much output), or write to a file") from None
    except SimulationError as exc:
        text = str(exc)
        if "exceeded the time limit" in text:
            raise ProgramError(name, f"the program did not finish within the time limit of {timeout:g} s and was "
                               "stopped", "look for an endless loop, or raise [simulation] timeout") from None
        if isinstance(exc, DeadlockError):
            raise explain_failure(exc.output, None, _missing(out_dir, n_ranks), name, binary,
                                  _unfinished(out_dir, n_ranks)) from None
        if isinstance(exc, SmpiFailed):
            raise explain_failure(exc.output, exc.returncode, _missing(out_dir, n_ranks), name, binary,
                                  _unfinished(out_dir, n_ranks)) from None
        raise
    finally:
        watch.end()
    missing = _missing(out_dir, n_ranks)
    if missing:
        raise explain_failure(res.output, res.returncode, missing, name, binary, _unfinished(out_dir, n_ranks))
    return res


class _Watch:
    """What the waiting thread does while a program's ``smpirun`` runs (``meanwhile`` of :func:`run_smpirun`): read
    the layer's count (:func:`waitlab.simulator.progress.read_layer_count`) and report progress
    (:class:`~waitlab.simulator.progress.Throttled`); :meth:`end` reports the end (``None``) if anything was
    reported."""

    def __init__(self, out_dir: Path, report: progress.Reporter | None) -> None:
        self.out_dir = out_dir
        self.report = progress.Throttled(report) if report is not None else None
        self.needed = report is not None
        self.t0 = time.perf_counter()

    def __call__(self) -> None:
        if self.report is not None:
            simulated, records = progress.read_layer_count(self.out_dir)
            self.report(progress.Progress(simulated, records, 0, time.perf_counter() - self.t0, "calls recorded"))

    def end(self) -> None:
        if self.report is not None and self.report.shown:
            self.report(None)


def layer_env(env: Mapping[str, str] | None, schedule_dir: Path | None, measured: bool) -> dict[str, str]:
    """Environment of the measurement layer besides its output folder: the platform's, the schedule, the mode."""
    out = dict(env or {})
    if schedule_dir is not None:
        out["WAITLAB_SCHEDULE"] = str(schedule_dir.resolve())
    if measured:  # the layer books measured computation before each call
        out["WAITLAB_MEASURED"] = "1"
    return out


def rerun_files(command: Sequence[str], binary: Path, platform_xml: Path, hostfile: Path, env: Mapping[str, str],
                schedule_dir: Path | None, inputs: Sequence[Path] = ()) -> dict[str, bytes]:
    """What re-runs a program run with stock SimGrid, no Python: ``platform.xml``, ``hostfile``, the program,
    its injection schedule (if any) and ``smpirun.sh``, the exact smpirun command line (every ``--cfg``) with
    those files' names; arguments given to the script are appended (e.g. ``--cfg=smpi/display-timing:yes``).
    The layer linked into the program records nothing without ``WAITLAB_OUT``.

    A run under contention laws (``WAITLAB_CONTENTION`` in ``env``) also ships the contention plugin, built for this
    SimGrid (``waitlab_contention.so``, and its source to rebuild it), which the script loads into the simulator
    process the way waitlab did (``-wrapper "env LD_PRELOAD=..."``): the stock run gets the same laws.

    ``inputs``, the program's input files (``[application] inputs``), are shipped where the program finds them: in
    its working folder, which is the re-run folder itself, or its :data:`RERUN_CWD` subfolder when an input has the
    name of one of the re-run's own files (:data:`RERUN_NAMES`)."""
    up = "../" if any(f.name in RERUN_NAMES for f in inputs) else ""
    cwd = RERUN_CWD + "/" if up else ""
    files = {"platform.xml": platform_xml.read_bytes(), "hostfile": hostfile.read_bytes(),
             "program": binary.read_bytes()}
    for f in inputs:
        files[cwd + f.name] = f.read_bytes()
    rename = {str(platform_xml): f"{up}platform.xml", str(hostfile): f"{up}hostfile",
              str(binary): f"{up or './'}program"}
    cmd = list(command)
    if "-wrapper" in cmd:  # waitlab's own guard that kills the simulator with smpirun, and its plugin path
        i = cmd.index("-wrapper")
        del cmd[i:i + 2]
    cmd = ["smpirun" if i == 0 else rename.get(c, c) for i, c in enumerate(cmd)]
    lines = ["#!/bin/sh", "# The exact smpirun command of this run (waitlab's measurement layer, linked into the",
             "# program, records nothing when WAITLAB_OUT is unset). Extra arguments are appended, e.g.",
             "#   sh smpirun.sh --cfg=smpi/display-timing:yes"]
    if env.get(PLUGIN_ENV):
        files[PLUGIN_FILE] = contention_plugin().read_bytes()
        files[PLUGIN_FILE.replace(".so", ".cpp")] = CONTENTION_SOURCE.read_bytes()
        cmd[1:1] = ["-wrapper", f"env LD_PRELOAD={up or './'}{PLUGIN_FILE}"]
        lines += ["# The platform's contention laws (WAITLAB_CONTENTION) act through waitlab's contention plugin,",
                  f"# {PLUGIN_FILE}, loaded into the simulator as waitlab loads it; built for SimGrid "
                  f"{simgrid_version()} (rebuild:", f"#   smpicxx {' '.join(PLUGIN_FLAGS)} -o {PLUGIN_FILE} "
                  f"{PLUGIN_FILE.replace('.so', '.cpp')}). Without it stock smpirun runs without the laws."]
    if cwd:
        lines += [f"# The program runs in {RERUN_CWD}/, the folder of its input files (an input has the name of",
                  "# one of the files of this folder)."]
    lines.append(f'cd "$(dirname "$0"){"/" + RERUN_CWD if cwd else ""}" || exit 1')
    if schedule_dir is not None:
        for f in sorted(schedule_dir.glob("s*.bin")):
            files[f"schedule/{f.name}"] = f.read_bytes()
    for key, value in sorted(env.items()):
        shown = f'"$(pwd)/{up}schedule"' if key == "WAITLAB_SCHEDULE" else shlex.quote(value)
        lines.append(f"export {key}={shown}")
    lines.append("exec " + " ".join(shlex.quote(c) for c in cmd) + ' "$@"')
    files["smpirun.sh"] = ("\n".join(lines) + "\n").encode()
    return files


def _missing(out_dir: Path, n_ranks: int) -> str:
    """The ranks that did not reach ``MPI_Finalize`` (no ``r<rank>.done``), in words: those that never called
    ``MPI_Init`` apart (their slot of the layer's count file, which ``MPI_Init`` opens, holds no record; no rank
    did when there is no count file), e.g. ``" (ranks 0, 1 never called MPI_Init; rank 2 did not reach
    MPI_Finalize)"``; '' when every rank did."""
    missing = _unfinished(out_dir, n_ranks)
    if not missing:
        return ""
    never = [r for r in missing if r not in _started(out_dir, n_ranks)]
    rest = [r for r in missing if r not in never]
    parts = [f"{_ranks_text(never)} never called MPI_Init"] if never else []
    parts += [f"{_ranks_text(rest)} did not reach MPI_Finalize"] if rest else []
    return f" ({'; '.join(parts)})"


def _unfinished(out_dir: Path, n_ranks: int) -> list[int]:
    """The ranks that did not reach ``MPI_Finalize``: no ``r<rank>.done`` from the layer."""
    return [r for r in range(n_ranks) if not (out_dir / f"r{r}.done").exists()]


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:10])) + (" ..." if len(ranks) > 10 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}"


def _started(out_dir: Path, n_ranks: int) -> set[int]:
    """The ranks that called ``MPI_Init``: those with a record in the layer's count file; every rank when the file
    cannot be read (other than missing: then none did), as nothing can be said of them."""
    path = out_dir / progress.LAYER_COUNT_FILE
    try:
        raw = np.fromfile(path, np.uint8)
    except FileNotFoundError:
        return set()
    except (OSError, ValueError):
        return set(range(n_ranks))
    slots = raw[: raw.size - raw.size % progress.LAYER_COUNT_DTYPE.itemsize].view(progress.LAYER_COUNT_DTYPE)
    return {int(r) for r in np.flatnonzero(slots["records"] > 0)}


def exit_statuses(output: str) -> dict[int, int]:
    """The ranks whose ``main`` returned a status other than 0 and that status, from SMPI's warning in the run's
    ``output`` (a run that ends so is one whose statuses ``[application] exit_codes`` accepts).

    >>> exit_statuses("[node-0:2:(3) 0.090006] smpi_global.cpp:308: [smpi_kernel/WARNING] SMPI process did not "
    ...               "return 0. Return value : 3")
    {2: 3}
    """
    return {int(m["rank"]): int(m["code"]) for m in _EXIT_STATUS.finditer(output)}
