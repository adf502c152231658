"""Read and write SMPI time-independent (TI) traces, with per-peer counts of v-collectives.

A TI trace is what ``smpirun -trace-ti`` records and what ``smpirun -replay``
replays (docs/real_programs.md describes the format for converter writers).
:func:`parse_ti_trace` turns one into an :class:`~waitlab.models.ops.OpTable`
so it goes through the synthetic pipeline (perturbations, what-if platforms);
:func:`waitlab.simulator.trace.write_trace` writes an OpTable back, exactly, including the per-peer
counts of ``alltoallv``/``gatherv``/``scatterv``/``allgatherv``/``reducescatter``
that an OpTable row cannot hold (they travel in a :class:`VectorStore`).

Sizes in a TI trace are element counts of an MPI datatype (SMPI's datatype ids;
without one, ``MPI_BYTE``, or ``MPI_DOUBLE`` when the rank's ``init`` line has
an argument).  The OpTable holds bytes; :func:`waitlab.simulator.trace.write_trace` writes bytes
with ``MPI_BYTE`` (id 6), so a trace round-trips to the same byte counts.
``compute`` amounts are flops; the OpTable holds seconds at a reference speed
(``flops_per_second``), and the writer multiplies by the target core speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import Ledger, OpTable, seq_within_rank
from waitlab.models.vocabulary import (
    ACTION,
    ACTIONS,
    CODE,
    EXCHANGE_ARGS,
    NBC_TWIN,
    RECV_ACTIONS,
    REDUCTION_ARGS,
    REGION_ARGS,
    REPLAYABLE_ACTIONS,
    RMA_ACTIONS,
    ROOTED_EXCHANGE_ARGS,
    SECONDS_ACTIONS,
    SUBCOMM_COLLECTIVES,
    TI_ALIASES,
    VOCABULARY,
)
from waitlab.models.vocabulary import V_ACTIONS as V_ACTIONS
from waitlab.simulator.matching import ANY_TAG, resolve_any_tag
from waitlab.simulator.nbc_capture import pop_nbc
from waitlab.simulator.replayable import unrunnable
from waitlab.simulator.ti_args import BadLine, counts, datatype_size, number, root_arg
from waitlab.simulator.ti_files import iter_lines, trace_files
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import SUBCOMM_PREFIX
from waitlab.simulator.trace_rma import RMA_TI_ACTIONS, parse_rma

#: One-sided names: waitlab's and those SMPI 3.32's ``-trace-ti`` writes (smpi_pmpi_win.cpp); none replays.
_RMA_TI_NAMES = frozenset({*RMA_ACTIONS, "raccumulate", "rget_accumulate", "fetch_and_op", "compare_and_swap"})

#: Point-to-point send spellings SMPI's tracer may write, mapped to the action waitlab replays.
_SEND_ALIASES = {**{a: a for a in ACTIONS if ACTION[a].kind == "send"}, **TI_ALIASES}
#: Stock actions that take no time and need no row (communicator set-up, source locations).
_IGNORED = frozenset(a.name for a in VOCABULARY if a.stock and a.kind in ("setup", "marker")) - {"init", "finalize"}
_SECONDS = SECONDS_ACTIONS


def _pos(action: str, arg: str, n: int = 1) -> int:
    """Position of TI argument ``arg`` of ``action`` in a line of ``n`` ranks (SimGrid 3.32 order)."""
    return ACTION[action].arg_position(arg, n)


@dataclass(frozen=True)
class ParsedTrace:
    """A TI trace as operations: ``ops`` (compute in seconds at ``flops_per_second``) and ``vectors``."""

    ops: OpTable
    vectors: VectorStore
    files: tuple[Path, ...]
    flops_per_second: float


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------

class _Lines:
    """Column accumulator for parsed operations."""

    def __init__(self) -> None:
        self.rank: list[int] = []
        self.code: list[int] = []
        self.value: list[float] = []
        self.value2: list[float] = []
        self.peer: list[int] = []
        self.tag: list[int] = []
        self.name: list[int] = []
        self.names: dict[str, int] = {}
        self.comm: dict[int, int] = {}  # row -> communicator id (1, 2, ...) of collectives on sub-communicators
        self.comms: dict[tuple[int, ...], int] = {}
        self.line: list[int] = []  # line number of each row
        self.at = 0  # line number of the line being read

    def add(self, rank: int, action: str, value: float = 0.0, value2: float = 0.0, peer: int = -1, tag: int = 0,
            name: str | None = None) -> None:
        self.rank.append(rank)
        self.code.append(CODE[action])
        self.value.append(value)
        self.value2.append(value2)
        self.peer.append(peer)
        self.tag.append(tag)
        self.line.append(self.at)
        if name is None:
            self.name.append(-1)
        else:
            self.name.append(self.names.setdefault(name, len(self.names)))


def parse_ti_trace(path: Path, *, flops_per_second: float, n_ranks: int | None = None) -> ParsedTrace:
    """Parse a TI trace (index or single file) into operations.

    Parameters
    ----------
    path : Path
        Index file (one trace file per rank, or one shared file) or a trace file.
    flops_per_second : float
        Converts ``compute`` flops into the OpTable's seconds (use the core speed of
        the platform the trace will be replayed on to keep flops as flops).
    n_ranks : int, optional
        Expected number of ranks; checked against the trace.

    Raises
    ------
    InputError
        Naming the file and line of the first malformed or unsupported line.
    """
    if not flops_per_second > 0:
        raise InputError(str(path), "flops_per_second", f"must be > 0, got {flops_per_second}", "")
    files = trace_files(Path(path))
    per_rank_files = len(files) > 1
    out = _Lines()
    vectors = VectorStore()
    default_dt: dict[int, int] = {}
    v_seen: dict[tuple[int, int], int] = {}
    ranks_seen: set[int] = set()
    finalized: dict[int, int] = {}  # rank -> line of its finalize
    last_at: dict[int, int] = {}  # rank -> its last line (in files[rank], or in the one shared file)
    started: set[int] = set()  # ranks with an init line
    posted: dict[tuple[int, int], str] = {}
    if per_rank_files and n_ranks is not None and len(files) != n_ranks:
        raise InputError(str(path), "(ranks)", f"the trace has {len(files)} rank{'s' * (len(files) != 1)} (one "
                         f"file each in the index) but the scenario asks for {n_ranks}",
                         "set [scenario] ranks to the trace's number of ranks")
    world = n_ranks if n_ranks is not None else (len(files) if per_rank_files else None)
    if world is None:  # one shared file: count the ranks first
        ranks: set[int] = set()
        for _fi, _f, _n, parts in iter_lines(files):
            if parts[0].lstrip("-").isdigit():
                ranks.add(int(parts[0]))
        world = max(ranks) + 1 if ranks else 0
    for fi, f, n, parts in iter_lines(files):
        def bad(problem: str, fix: str = "see docs/real_programs.md, 'The TI trace format'", _f: Path = f,
                _n: int = n) -> InputError:
            return InputError(str(_f), f"line {_n}", problem, fix)

        if len(parts) < 2 or not parts[0].lstrip("-").isdigit():
            raise _truncated(f, n, parts) or bad(f"expected '<rank> <action> <arguments>', got {' '.join(parts)!r}")
        rank = int(parts[0])
        if not 0 <= rank < world:
            raise bad(f"rank {rank} is outside 0..{world - 1}", "the trace and the scenario's ranks must agree")
        if per_rank_files and rank != fi:
            raise bad(f"line of rank {rank} in the file of rank {fi} (index order is rank order)")
        ranks_seen.add(rank)
        last_at[rank] = n
        action, args = parts[1], parts[2:]
        if rank in finalized:
            raise bad(f"{action} of rank {rank} after its finalize (line {finalized[rank]}): an action after finalize "
                      "cannot be replayed", "end each rank's trace with its finalize (remove the lines after it)")
        if action == "finalize":
            finalized[rank] = n
        elif action == "init":
            started.add(rank)
        out.at = n
        try:
            serial = pop_nbc(action, args, rank, posted)  # a nonblocking collective's post or completion: nbc=<k>
            members = None
            if args and args[-1].startswith(SUBCOMM_PREFIX):
                members = _parse_subcomm(out, rank, action, args.pop(), world)
            _parse_action(out, vectors, v_seen, default_dt, rank, NBC_TWIN.get(action, action), args, world,
                          flops_per_second)
            if members is not None:
                _subcomm_root(out, members, NBC_TWIN.get(action, action), args)
            if serial:
                out.code[-1], out.tag[-1] = CODE[action], serial
        except ValueError as exc:
            raise _truncated(f, n, parts) or bad(str(exc), getattr(exc, "fix", "see docs/real_programs.md, 'The TI "
                                                                  "trace format'")) from None
    _refuse_unfinished(files, started, finalized, last_at)
    # per-rank files: the index's lines are the ranks (a rank's file may be empty: it made no call)
    if not per_rank_files and n_ranks is not None and ranks_seen and max(ranks_seen) + 1 != n_ranks:
        raise InputError(str(path), "(ranks)", f"the trace has {max(ranks_seen) + 1} rank{'s' * (max(ranks_seen) > 0)}"
                         f" but the scenario asks for {n_ranks}", "set [scenario] ranks to the trace's number of ranks")
    ops, lines = _to_table(out, world)
    resolve_any_tag(ops)
    _refuse_unrunnable(ops, vectors, lines, files, flops_per_second)
    return ParsedTrace(ops, vectors, tuple(files), flops_per_second)


#: Every action name a trace line may hold (:func:`_truncated`: a last line's action cut short is the beginning of one).
_KNOWN_ACTIONS = frozenset({*(a.name for a in VOCABULARY), *TI_ALIASES, *_RMA_TI_NAMES})
_TRUNCATED_FIX = "copy the file again whole, or record the trace again (let the run reach MPI_Finalize)"


def _file_end(path: Path, block: int = 1 << 20) -> tuple[int, bool]:
    """The number of the last non-blank line of ``path`` (0: none) and whether a newline ends it."""
    newlines, last = 0, 0
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            body = chunk.rstrip()
            if body:
                last = newlines + body.count(b"\n") + 1
            newlines += chunk.count(b"\n")
    return last, newlines >= last


def _truncated(path: Path, n: int, parts: list[str]) -> InputError | None:
    """The error for line ``n`` of ``path`` (its fields ``parts``), which cannot be read, when the file looks cut
    short there: the line is the file's last, and its action is the beginning of a known one (``1 final``: of
    ``finalize``) or no newline ends it; else None (the line's own error says what is wrong)."""
    last, ended = _file_end(path)
    if n != last:
        return None
    action = parts[1] if len(parts) > 1 else ""
    longer = sorted(a for a in _KNOWN_ACTIONS if a.startswith(action) and a != action) \
        if action and action not in _KNOWN_ACTIONS else []
    if longer:
        why = f"its action {action!r} is the beginning of {' or '.join(repr(a) for a in longer[:3])}"
    elif not ended:
        why = "no newline ends it"
    else:
        return None
    return InputError(str(path), f"line {n}", f"the file looks truncated: its last line {' '.join(parts)!r} is cut "
                      f"short ({why})", _TRUNCATED_FIX)


def _refuse_unfinished(files: list[Path], started: set[int], finalized: dict[int, int],
                       last_at: dict[int, int]) -> None:
    """Refuse a rank whose lines begin with init (``started``) but end without a finalize when another rank's end
    with one (SMPI's tracer and waitlab's write both for every rank): its file lost its last lines, and its missing
    calls would be blamed on the collectives or the messages of the whole trace.  A rank without an init line (a
    converter may write neither init nor finalize) is left alone."""
    unfinished = sorted(started - finalized.keys())
    if not finalized or not unfinished:
        return
    r, k = unfinished[0], min(finalized)
    per_rank = len(files) > 1  # one file per rank (its lines are the rank's: parse_ti_trace), else one shared file
    raise InputError(str(files[r] if per_rank else files[0]), f"line {last_at[r]}", f"rank {r}'s lines end here "
                     f"without a finalize, while rank {k}'s end with one (line {finalized[k]}"
                     f"{f' of {files[k].name}' if per_rank else ''}"
                     f"): the file looks truncated", f"{_TRUNCATED_FIX}; if rank {r} really stops here, end its lines "
                     f"with '{r} finalize'")


def _refuse_unrunnable(ops: OpTable, vectors: VectorStore, lines: npt.NDArray[np.int64], files: list[Path],
                       fps: float) -> None:
    """Refuse, naming the file and line, what the replay cannot run or represent: sizes past a C int, times past a
    year (:func:`~waitlab.simulator.ti_args.value_problem`), unbalanced regions, waits without their request, and
    v-collectives whose counts disagree between ranks (SMPI would wrap, abort or stop with MPI_ERR_TRUNCATE)."""
    def file_of(i: int) -> Path:
        return files[int(ops.rank[i])] if len(files) > 1 else files[0]

    def where(i: int) -> str:
        return f"line {int(lines[i])}" + (f" of {file_of(i).name}" if len(files) > 1 else "")

    found = unrunnable(ops, vectors, where, fps)
    if found is not None:
        i, problem, fix = found
        raise InputError(str(file_of(i)), f"line {int(lines[i])} (rank {int(ops.rank[i])}, operation "
                         f"{int(ops.seq[i])})", problem, fix)


def _parse_action(out: _Lines, vectors: VectorStore, v_seen: dict[tuple[int, int], int], default_dt: dict[int, int],
                  rank: int, action: str, args: list[str], world: int, fps: float) -> None:
    dflt = default_dt.get(rank, 1)
    if action == "init":
        default_dt[rank] = 8 if args else 1
        return
    if action == "finalize" or action in _IGNORED:
        return
    shape = ACTION[action].ti_args if action in ACTION else None  # actions of one TI argument shape read alike
    if action in _SEND_ALIASES or action in RECV_ACTIONS:
        kind = _SEND_ALIASES.get(action, action)
        if args and args[0] in ("-333", "-555"):
            raise BadLine(f"{action} from any source (MPI_ANY_SOURCE, written as {args[0]}) cannot be replayed: "
                           "the trace does not say which rank sent the message",
                           "capture with waitlab's layer (waitlab capture --via layer), which records the source")
        if len(args) > 4:
            raise BadLine(f"{action} takes at most 4 arguments (partner tag count [datatype]), got {len(args)}: "
                           f"{' '.join(args)!r}")
        peer = number(args, 0, "partner rank")
        # a receive of any tag (MPI_ANY_TAG) takes the tag of the message it matches (resolve_any_tag)
        tag = ANY_TAG if kind in RECV_ACTIONS and args[1:2] == [str(ANY_TAG)] else number(args, 1, "tag")
        count = number(args, 2, "count")
        if peer >= world:
            raise BadLine(f"partner rank {int(peer)} is outside 0..{world - 1}")
        out.add(rank, kind, count * datatype_size(args, 3, dflt), peer=int(peer), tag=int(tag))
    elif action in ACTIONS and ACTION[action].kind == "completion" and shape:
        src, dst, tag = (int(number(args, i, w, negative=True)) for i, w in enumerate(("source", "destination",
                                                                                      "tag")))
        is_recv = dst == rank
        out.add(rank, action, 0.0, 1.0 if is_recv else 0.0, peer=src if is_recv else dst, tag=tag)
    elif action == "waitall":
        out.add(rank, "waitall")
    elif action == "sendRecv":
        scount, fdst, rcount, fsrc = (number(args, i, w) for i, w in enumerate(("send count", "destination",
                                                                             "receive count", "source")))
        # run as its parts, named after the call (the event table's `call`: the outputs say MPI_Sendrecv)
        out.add(rank, "isend", scount * datatype_size(args, 4, dflt), peer=int(fdst), name="MPI_Sendrecv")
        out.add(rank, "irecv", rcount * datatype_size(args, 5, dflt), peer=int(fsrc), name="MPI_Sendrecv")
        out.add(rank, "waitall", name="MPI_Sendrecv")
    elif action == "barrier":
        out.add(rank, "barrier")
    elif action == "bcast":
        out.add(rank, "bcast", number(args, 0, "count") * datatype_size(args, _pos(action, "dt"), dflt),
                peer=root_arg(args, _pos(action, "root"), world))
    elif action == "reduce":
        out.add(rank, "reduce", number(args, 0, "count") * datatype_size(args, _pos(action, "dt"), dflt),
                number(args, _pos(action, "flops"), "flops", integer=False),
                peer=root_arg(args, _pos(action, "root"), world))
    elif shape == REDUCTION_ARGS:
        out.add(rank, action, number(args, 0, "count") * datatype_size(args, _pos(action, "dt"), dflt),
                number(args, _pos(action, "flops"), "flops", integer=False))
    elif shape == EXCHANGE_ARGS:
        out.add(rank, action, number(args, 0, "send count") * datatype_size(args, _pos(action, "sdt"), dflt),
                number(args, _pos(action, "rcount"), "receive count") * datatype_size(args, _pos(action, "rdt"), dflt))
    elif shape == ROOTED_EXCHANGE_ARGS:
        out.add(rank, action, number(args, 0, "send count") * datatype_size(args, _pos(action, "sdt"), dflt),
                number(args, _pos(action, "rcount"), "receive count") * datatype_size(args, _pos(action, "rdt"), dflt),
                peer=root_arg(args, _pos(action, "root"), world))
    elif action in V_ACTIONS:
        _parse_v(out, vectors, v_seen, rank, action, args, world, dflt)
    elif action == "compute":
        out.add(rank, "compute", number(args, 0, "flops", integer=False) / fps)
    elif action in _SECONDS:
        out.add(rank, action, number(args, 0, "seconds", integer=False))
    elif action == "flush":
        rate = number(args, 1, "bytes per second", integer=False)
        if rate <= 0:
            raise BadLine("flush rate must be > 0")
        out.add(rank, "flush", number(args, 0, "bytes", integer=False), rate)
    elif shape == REGION_ARGS:
        if len(args) != 1:
            raise BadLine(f"{action} takes one region name without spaces")
        out.add(rank, action, name=args[0])
    elif action in RMA_TI_ACTIONS:  # waitlab's one-sided lines (waitlab.simulator.trace_rma)
        try:
            value, value2, peer, tag, group = parse_rma(action, args, world)
        except ValueError as exc:
            raise BadLine(str(exc), "see docs/rma.md, 'Capture and replay'") from None
        if group is not None:  # post/start: the row's communicator is its group
            out.comm[len(out.rank)] = out.comms.setdefault(group, len(out.comms) + 1)
        out.add(rank, action, value, value2, peer=peer, tag=tag)
    elif action.lower() in _RMA_TI_NAMES or action.lower().startswith("win_"):  # SMPI writes Win_fence, Put, ...
        raise BadLine(f"action {action!r} is one-sided MPI (RMA): SimGrid 3.32's time-independent replay has no "
                       f"RMA action and waitlab's replay runs only {', '.join(RMA_TI_ACTIONS)}",
                       'run the program itself (application.kind = "program")')
    elif action.lower() in _UNREPLAYABLE_COMPLETIONS:
        raise BadLine(f"action {action!r} is {_UNREPLAYABLE_COMPLETIONS[action.lower()]} as stock SMPI's -trace-ti "
                      "writes it, without the requests it completed: neither waitlab nor stock smpireplaymain can "
                      "replay it", "record the program with `waitlab capture`, which writes the request each call "
                      'completed, or run it as application.kind = "program"')
    else:
        known = sorted({*REPLAYABLE_ACTIONS, *TI_ALIASES})
        raise BadLine(f"action {action!r} cannot be replayed by waitlab", f"use one of: {', '.join(known)}")


#: Completions stock SMPI's time-independent tracing writes without naming their requests (``waitAny 3``,
#: ``testall``): SimGrid 3.32's replay has no action for them.
_UNREPLAYABLE_COMPLETIONS = {"waitany": "MPI_Waitany", "testall": "MPI_Testall", "testany": "MPI_Testany",
                             "waitsome": "MPI_Waitsome", "testsome": "MPI_Testsome"}


def _parse_subcomm(out: _Lines, rank: int, action: str, arg: str, world: int) -> tuple[int, ...]:
    """The last argument ``comm=<w0>,<w1>,...`` of a collective on a sub-communicator (its members' world ranks in
    communicator-rank order): the next row gets that communicator."""
    if action not in SUBCOMM_COLLECTIVES:
        raise BadLine(f"{action} cannot run on a sub-communicator ({arg})",
                       f"only {', '.join(SUBCOMM_COLLECTIVES)} can; run the program itself "
                       '(application.kind = "program")')
    try:
        members = tuple(int(m) for m in arg[len(SUBCOMM_PREFIX):].split(","))
    except ValueError:
        raise BadLine(f"bad communicator {arg!r}", "write comm=<world rank>,<world rank>,... "
                       "(the members in communicator-rank order)") from None
    if len(set(members)) != len(members) or rank not in members or not all(0 <= m < world for m in members):
        raise BadLine(f"communicator {arg!r} must list distinct world ranks 0..{world - 1}, including rank {rank}")
    out.comm[len(out.rank)] = out.comms.setdefault(members, len(out.comms) + 1)
    return members


def _subcomm_root(out: _Lines, members: tuple[int, ...], action: str, args: list[str]) -> None:
    """The root of a rooted collective on a sub-communicator (the row just added): a member, given as its world
    rank; without one the communicator's rank 0, as waitlab's replay extension takes it."""
    if not ACTION[action].is_rooted:
        return
    if len(args) <= _pos(action, "root"):
        out.peer[-1] = members[0]
    elif out.peer[-1] not in members:
        raise BadLine(f"root {out.peer[-1]} is not a member of comm={','.join(map(str, members))}",
                      "give the root's world rank, one of the communicator's members")


def _parse_v(out: _Lines, vectors: VectorStore, v_seen: dict[tuple[int, int], int], rank: int, action: str,
             args: list[str], world: int, dflt: int) -> None:
    """A v-collective line; argument positions come from the vocabulary's TI arguments (SimGrid 3.32 order)."""
    n = world
    code = CODE[action]

    def at(arg: str) -> int:
        return _pos(action, arg, n)

    value2: float | None = None
    if action == "alltoallv":
        ssz, rsz = datatype_size(args, at("sdt"), dflt), datatype_size(args, at("rdt"), dflt)
        send = [c * ssz for c in counts(args, at("scounts"), n, "send counts")]
        recv = [c * rsz for c in counts(args, at("rcounts"), n, "receive counts")]
        root = -1
    elif action in ("gatherv", "allgatherv"):  # allgatherv has no root
        scount = number(args, at("scount"), "send count")
        r = counts(args, at("rcounts"), n, "receive counts")
        root = root_arg(args, at("root"), world) if action == "gatherv" else -1
        ssz, rsz = datatype_size(args, at("sdt"), dflt), datatype_size(args, at("rdt"), dflt)
        send, recv = [0.0] * n, [c * rsz for c in r]
        send[root if root >= 0 else rank] = scount * ssz
    elif action == "scatterv":
        s = counts(args, at("scounts"), n, "send counts")
        rcount = number(args, at("rcount"), "receive count")
        root = root_arg(args, at("root"), world)
        ssz, rsz = datatype_size(args, at("sdt"), dflt), datatype_size(args, at("rdt"), dflt)
        send, recv = [c * ssz for c in s], [0.0] * n
        recv[root] = rcount * rsz
    else:  # reducescatter: value = bytes of the whole reduced vector, value2 = flops
        sz = datatype_size(args, at("dt"), dflt)
        send, recv, root = [0.0] * n, [c * sz for c in counts(args, at("rcounts"), n, "receive counts")], -1
        value2 = number(args, at("flops"), "flops", integer=False)
    k = v_seen.get((rank, code), 0)
    v_seen[(rank, code)] = k + 1
    vectors.put(rank, code, k, send, recv)
    if value2 is not None:
        out.add(rank, action, float(sum(recv)), value2)
    else:
        out.add(rank, action, float(sum(send)), float(sum(recv)), peer=root)


def _to_table(out: _Lines, n_ranks: int) -> tuple[OpTable, npt.NDArray[np.int64]]:
    """The operations, in (rank, line) order, and the line number of each."""
    rank = np.asarray(out.rank, np.int32)
    order = np.argsort(rank, kind="stable")
    n = rank.size
    cols: dict[str, Any] = {  # numpy columns (Any: OpTable also takes comms)
        "rank": rank[order],
        "code": np.asarray(out.code, np.int8)[order],
        "step": np.full(n, -1, np.int32),
        "name": np.asarray(out.name, np.int32)[order],
        "value": np.asarray(out.value, np.float64)[order],
        "value2": np.asarray(out.value2, np.float64)[order],
        "peer": np.asarray(out.peer, np.int32)[order],
        "tag": np.asarray(out.tag, np.int32)[order],
        "cause": np.full(n, -1, np.int64),
        "excess": np.zeros(n, np.float64),
    }
    comm = np.zeros(n, np.int32)
    if out.comm:
        comm[np.fromiter(out.comm.keys(), np.int64)] = np.fromiter(out.comm.values(), np.int32)
    cols["comm"] = comm[order]
    cols["seq"] = seq_within_rank(cols["rank"], n_ranks)
    names = tuple(sorted(out.names, key=out.names.__getitem__))
    comms = tuple(sorted(out.comms, key=out.comms.__getitem__))
    ops = OpTable(n_ranks=n_ranks, names=names, ledger=Ledger.empty(), comms=comms, **cols)
    return ops, np.asarray(out.line, np.int64)[order]
