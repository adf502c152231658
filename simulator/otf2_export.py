"""OTF2 export of the event table (Debian's ``python3-otf2``): the format Vampir, Scalasca, Score-P's tools
and pipit read.

One location (a CPU thread in its own process location group) per rank of the run, those without events too
(``MPI_COMM_WORLD`` has every rank, in rank order), timer resolution 1 ns (times rounded once, like the Chrome
trace), every row of the event table as an Enter/Leave pair of a region (user regions, ``MPI_*`` functions, and
the local activities ``compute``, ``noise``, ...), and inside the MPI functions the MPI records Scalasca's
wait-state analysis replays:

=====================  =====================================================================
event table row        OTF2 records (between the row's Enter and Leave)
=====================  =====================================================================
``send``, ``ssend``    ``MpiSend`` (receiver, communicator, tag, bytes), in ``MPI_Send`` / ``MPI_Ssend``
``isend``, ``issend``  ``MpiIsend`` (request id = row); ``MpiIsendComplete`` in the completing
                       ``wait``/``waitall`` (column ``done``), else in the rank's ``MPI_Finalize``
``recv``               ``MpiRecv`` (sender, communicator, tag, bytes received: ``recv_bytes``)
``irecv``              ``MpiIrecvRequest``; ``MpiIrecv`` (with ``recv_bytes``) in the completing
                       ``wait``/``waitall``, else in the rank's ``MPI_Finalize`` (a request only tested)
collective             ``MpiCollectiveBegin`` and ``MpiCollectiveEnd`` (operation, communicator,
                       root, bytes sent and received), in ``MPI_<Collective>``; a nonblocking
                       collective's completion (``tag`` > 0) in ``MPI_Wait``, the call that completed it
parts of a program's   one region named after the call (``MPI_Sendrecv``: the event table's ``call``),
call (``call`` set)    from the first part's entry to the last part's exit, as Score-P records it:
                       ``MpiSend`` at the send's entry and ``MpiRecv`` at the completion of the receive
                       (requests completed outside the call keep their non-blocking records), and the
                       parts' metrics; never the ``MPI_Isend``/``MPI_Irecv``/``MPI_Waitall`` the
                       program did not call; a ``wait`` of ``MPI_Waitany``/``MPI_Waitsome`` (one per
                       request completed) is one region of that name, holding its completion record
=====================  =====================================================================

Around each rank's records is the frame of a measured MPI run, which Scalasca's ``scout.mpi`` relies on
(Scalasca 2.6's sources): ``ProgramBegin`` and a zero-length ``MPI_Init`` at the run's first time (scout's
root-cause analysis starts from the synchronization point of ``MPI_Init``: without it it aborts,
``SynchpointHandler.cpp:120``), ``MPI_Finalize`` from the rank's last exit to the run's end, ``ProgramEnd``.
MPI regions carry the source file ``MPI``, as Score-P writes them: pearl classifies a region as MPI by that
file name, not by its paradigm (``Region.cpp``, ``classify``), so without it scout saw no MPI call and no wait.

Peers and roots are ranks within the operation's communicator (``MPI_COMM_WORLD`` and the
sub-communicators of the operation table's ``comms``, each an OTF2 ``Comm`` with its group), as Score-P
records them.  The system tree is ``machine / node k / rank r`` from the run's placement (``placement.csv``);
without one, every rank hangs under the machine.

What waitlab knows beyond the MPI records goes to two metrics (``Metric`` records at the exit of the row
they belong to, so Vampir plots them as counters and Cube-style readers find them per call):

* ``wait_state`` (seconds): the wait of the row (``waits.parquet``), with the wait pattern and the rank waited
  for as attributes ``wait_pattern`` / ``waited_for``;
* ``injected_excess`` (seconds): the injected excess the row carries (column ``excess``), with the cause
  kind as attribute ``cause_kind`` (the cause ledger of the run).

Deterministic: the archive holds no wall-clock time (the description is the run's metadata), so two
exports of one run are byte-identical.  Gap: ``sendRecv`` and ``test`` rows get their region but no
message records (the table keeps one peer per row).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.errors import EnvironmentProblem
from waitlab.simulator.chrome_trace import to_ns

#: OTF2 collective operation and region role of each collective of the event table.
COLLECTIVES: dict[str, tuple[str, str]] = {
    "barrier": ("BARRIER", "BARRIER"), "bcast": ("BCAST", "COLL_ONE2ALL"), "reduce": ("REDUCE", "COLL_ALL2ONE"),
    "allreduce": ("ALLREDUCE", "COLL_ALL2ALL"), "alltoall": ("ALLTOALL", "COLL_ALL2ALL"),
    "alltoallv": ("ALLTOALLV", "COLL_ALL2ALL"), "gather": ("GATHER", "COLL_ALL2ONE"),
    "scatter": ("SCATTER", "COLL_ONE2ALL"), "gatherv": ("GATHERV", "COLL_ALL2ONE"),
    "scatterv": ("SCATTERV", "COLL_ONE2ALL"), "allgather": ("ALLGATHER", "COLL_ALL2ALL"),
    "allgatherv": ("ALLGATHERV", "COLL_ALL2ALL"), "reducescatter": ("REDUCE_SCATTER", "COLL_ALL2ALL"),
    "scan": ("SCAN", "COLL_OTHER"), "exscan": ("EXSCAN", "COLL_OTHER"),
}  # fmt: skip
#: Rooted collectives: the event table's ``peer`` is the root.
ROOTED = frozenset({"bcast", "reduce", "gather", "scatter", "gatherv", "scatterv"})
#: OTF2's "undefined" 32-bit value (no root).
UNDEFINED_UINT32 = 0xFFFFFFFF
#: Source file of every MPI region, as Score-P writes it: Scalasca classifies regions as MPI by it.
MPI_SOURCE_FILE = "MPI"
#: Region (and program name) of the ``ProgramBegin``/``ProgramEnd`` records: the root of every call path.
PROGRAM_NAME = "waitlab"
#: Region roles of the MPI functions that are neither collectives nor point-to-point (Score-P's roles).
MPI_ROLES = {"waitall": "FUNCTION", "wait": "FUNCTION", "test": "FUNCTION", "put": "RMA", "rput": "RMA", "get": "RMA",
             "rget": "RMA", "accumulate": "ATOMIC", "get_accumulate": "ATOMIC",
             **{o: "FUNCTION" for o in ("win_create", "win_free", "win_fence", "win_post", "win_start", "win_complete",
                                        "win_wait", "win_lock", "win_lock_shared", "win_unlock", "win_lock_all",
                                        "win_unlock_all", "win_flush", "win_flush_local", "win_group")}}
#: Event-table ops that are not MPI but the measurement system's own activity.
MEASUREMENT_OPS = frozenset({"overhead", "flush", "swap"})

#: Point-to-point ops -> 0 MpiSend, 1 MpiIsend, 2 MpiRecv, 3 MpiIrecvRequest (a synchronous send is a send in its
#: own MPI_Ssend / MPI_Issend region, as Score-P records it).
_P2P = {"send": 0, "ssend": 0, "isend": 1, "issend": 1, "recv": 2, "irecv": 3}
_REQUESTS = ("isend", "issend", "irecv")
#: Calls recorded as one ``wait`` row per request they complete (the event table's ``call``): each row is one visit
#: of the call's region, never grouped with the next (two MPI_Waitany in a row are two calls), so Scalasca's late
#: sender of each is waitlab's.
_ONE_ROW_CALLS = frozenset({"MPI_Waitany", "MPI_Waitsome"})


def mpi_function_name(op: str) -> str:
    """The MPI function of an event-table op, as tools print it (``allreduce`` -> ``MPI_Allreduce``)."""
    special = {"sendRecv": "MPI_Sendrecv", "reducescatter": "MPI_Reduce_scatter", "waitall": "MPI_Waitall",
               "allgatherv": "MPI_Allgatherv", "alltoallv": "MPI_Alltoallv"}
    return special.get(op, "MPI_" + op[:1].upper() + op[1:])


def _import_otf2() -> Any:
    try:
        import otf2  # optional: Debian's python3-otf2
    except ImportError as exc:
        raise EnvironmentProblem(
            "OTF2 export needs the Python bindings of OTF2: apt-get install python3-otf2 otf2-tools "
            "(scripts/bootstrap.sh installs them; the venv must use the system site packages)") from exc
    return otf2


def _comm_local(peer: np.ndarray, comm: np.ndarray, comms: Sequence[Sequence[int]]) -> np.ndarray:
    """World ranks ``peer`` of rows on communicator ``comm`` as ranks within that communicator (-1 kept)."""
    out = peer.copy()
    for k, members in enumerate(comms, start=1):
        rows = np.flatnonzero((comm == k) & (peer >= 0))
        if rows.size:
            local = np.full(max(int(peer[rows].max()), max(members)) + 1, -1, np.int64)
            local[np.asarray(members, np.int64)] = np.arange(len(members))
            out[rows] = local[peer[rows]]
    return out


def _row_metrics(events: pd.DataFrame, waits: pd.DataFrame, ledger_kinds: Sequence[str] | None
                 ) -> dict[int, list[tuple[str, float, str, int]]]:
    """Row -> [(metric, seconds, label, peer)]: the row's wait states, then its injected excess."""
    out: dict[int, list[tuple[str, float, str, int]]] = {}
    if len(waits):
        peer = waits["peer_rank"].to_numpy() if "peer_rank" in waits else np.full(len(waits), -1)
        for row, w, pat, q in zip(waits["event"].to_numpy().tolist(), waits["wait"].to_numpy().tolist(),
                                  waits["pattern"].astype(str).tolist(), peer.tolist(), strict=True):
            out.setdefault(int(row), []).append(("wait_state", float(w), pat, int(q)))
    if "excess" in events:
        ex = events["excess"].to_numpy()
        cause = events["cause"].to_numpy() if "cause" in events else np.full(len(events), -1)
        for row in np.flatnonzero(ex > 0).tolist():
            c = int(cause[row])
            kind = ledger_kinds[c] if ledger_kinds is not None and 0 <= c < len(ledger_kinds) else ""
            out.setdefault(row, []).append(("injected_excess", float(ex[row]), kind, -1))
    return out


def write_otf2(events: pd.DataFrame, waits: pd.DataFrame, metadata: dict[str, Any], folder: Path,
               placement: pd.DataFrame | None = None, comms: Sequence[Sequence[int]] = (),
               ledger_kinds: Sequence[str] | None = None, n_ranks: int | None = None) -> Path:
    """Write the event table as an OTF2 archive in ``folder``; return the anchor file ``folder/traces.otf2``.

    Parameters
    ----------
    events : DataFrame
        Event table (``docs/event_table.md``), rows sorted by ``(rank, seq)``.
    waits : DataFrame
        Wait states: one ``wait_state`` metric record per wait (module docstring); their count and total
        also go to the archive's description.
    metadata : dict
        Run metadata; its scalar values go to the archive's description (JSON).
    folder : Path
        Output folder; replaced if it exists.
    placement : DataFrame, optional
        ``rank, node`` of the run (``placement.csv``): the system tree's nodes.
    comms : sequence of sequence of int
        Members (world ranks) of communicators 1, 2, ... of the event table's ``comm`` column.
    ledger_kinds : sequence of str, optional
        Cause kind of each cause-ledger row (attribute of the ``injected_excess`` metric).
    n_ranks : int, optional
        Ranks of the run (default: the highest rank of ``events`` plus one).  Every rank is a location and a member
        of ``MPI_COMM_WORLD``, those without events too (they get the frame alone: ``MPI_Init``, ``MPI_Finalize``).

    Raises
    ------
    ValueError
        When ``events`` name a rank outside ``0 .. n_ranks - 1``.
    """
    otf2 = _import_otf2()
    enums = otf2.enums
    CollectiveOp, GroupType, LocationGroupType = enums.CollectiveOp, enums.GroupType, enums.LocationGroupType
    LocationType, MetricMode, MetricType = enums.LocationType, enums.MetricMode, enums.MetricType
    Paradigm, RegionRole, Type = enums.Paradigm, enums.RegionRole, enums.Type

    n = len(events)
    rank = events["rank"].to_numpy().astype(np.int64)
    top = int(rank.max()) + 1 if n else 0
    if n_ranks is None:
        n_ranks = top
    if top > n_ranks or (n and int(rank.min()) < 0):  # before an older archive is removed
        raise ValueError(f"events name ranks {int(rank.min())} .. {top - 1}, outside the run's {n_ranks} ranks")
    # every rank of the run is a location, one without events too: MPI_COMM_WORLD has all of them, in rank order
    ranks = np.arange(n_ranks, dtype=np.int64)
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    enter = to_ns(events["enter"].to_numpy())
    exit_ = np.maximum(to_ns(events["exit"].to_numpy()), enter)
    op = events["op"].astype(str).to_numpy()
    is_region = (events["kind"] == "region").to_numpy()
    region_name = np.where(is_region, events["region"].astype(str).to_numpy(), "")
    kind = events["kind"].astype(str).to_numpy()
    # the MPI call the program made where waitlab runs it as several rows (``MPI_Sendrecv``: isend, irecv, waitall)
    call = events["call"].astype(str).to_numpy() if "call" in events else np.full(n, "", dtype=object)
    comm = events["comm"].to_numpy().astype(np.int64) if "comm" in events else np.zeros(n, np.int64)
    peer = _comm_local(events["peer"].to_numpy().astype(np.int64), comm, comms)
    tag = events["tag"].to_numpy().astype(np.int64) if "tag" in events else np.zeros(n, np.int64)
    nbytes = events["bytes"].to_numpy().astype(np.int64)
    # a receive's size is what it receives (before issue 25 the export wrote ``bytes``: 0 on every receive)
    rbytes = events["recv_bytes"].to_numpy().astype(np.int64) if "recv_bytes" in events else nbytes
    parent = events["parent"].to_numpy().astype(np.int64)
    done = events["done"].to_numpy().astype(np.int64)
    # completions: for each completing row, the non-blocking rows it completes (irecv -> MpiIrecv)
    nb = np.flatnonzero(np.isin(op, _REQUESTS) & (done >= 0))
    completes: dict[int, list[int]] = {}
    for row, d in zip(nb.tolist(), done[nb].tolist(), strict=True):
        completes.setdefault(d, []).append(row)
    # requests the run never completed (tested only, or left open): completed in their rank's MPI_Finalize, so every
    # request of the archive has its completion record (OTF2 readers, waitlab's own, refuse one without)
    open_requests: dict[int, list[int]] = {}
    for row in np.flatnonzero(np.isin(op, _REQUESTS) & (done < 0)).tolist():
        open_requests.setdefault(int(rank[row]), []).append(row)
    metrics_of = _row_metrics(events, waits, ledger_kinds)
    node_of = ({int(r): int(k) for r, k in zip(placement["rank"], placement["node"], strict=True)}
               if placement is not None and len(placement) else {})

    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        defs = trace.definitions
        machine = defs.system_tree_node("machine")
        nodes: dict[int, Any] = {}
        locations = {}
        for r in ranks.tolist():
            parent_node = machine
            if r in node_of:
                k = node_of[r]
                if k not in nodes:
                    nodes[k] = defs.system_tree_node(f"node {k}", class_name="node", parent=machine)
                parent_node = nodes[k]
            group = defs.location_group(f"rank {r}", location_group_type=LocationGroupType.PROCESS,
                                        system_tree_parent=parent_node)
            locations[r] = defs.location(f"rank {r}", type=LocationType.CPU_THREAD, group=group)
        defs.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                   members=[locations[r] for r in ranks.tolist()])  # the COMM_GROUPs index it (registry)
        world_group = defs.group("MPI_COMM_WORLD", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                 members=list(range(len(ranks))))
        comm_defs = [defs.comm("MPI_COMM_WORLD", group=world_group)]
        for k, members in enumerate(comms, start=1):
            g = defs.group(f"comm {k}", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                           members=[int(m) for m in members])
            comm_defs.append(defs.comm(f"comm {k}", group=g, parent=comm_defs[0]))
        metric_defs = {
            m: defs.metric(m, description=d, metric_type=MetricType.OTHER, metric_mode=MetricMode.ABSOLUTE_POINT,
                           value_type=Type.DOUBLE, unit="s")
            for m, d in (("wait_state", "wait state of the MPI call (waitlab)"),
                         ("injected_excess", "injected excess carried by the activity (waitlab cause ledger)"))}
        label_attr = {"wait_state": defs.attribute("wait_pattern", "wait-state pattern", Type.STRING),
                      "injected_excess": defs.attribute("cause_kind", "kind of the injected cause", Type.STRING)}
        peer_attr = defs.attribute("waited_for", "rank waited for", Type.INT64)
        regions: dict[str, Any] = {}

        def region(name: str, o: str, k: str) -> Any:
            key = name if k == "region" else ("mpi:" if k == "mpi" else "act:") + o
            if key not in regions:
                if k == "region":
                    regions[key] = defs.region(name, region_role=RegionRole.CODE, paradigm=Paradigm.USER)
                elif k == "mpi":
                    role = COLLECTIVES[o][1] if o in COLLECTIVES else MPI_ROLES.get(o, "POINT2POINT")
                    # source file "MPI": Scalasca classifies a region as MPI by it (pearl's Region.cpp ``classify``)
                    regions[key] = defs.region(mpi_function_name(o), region_role=getattr(RegionRole, role),
                                               paradigm=Paradigm.MPI, source_file=MPI_SOURCE_FILE)
                else:
                    par = Paradigm.MEASUREMENT_SYSTEM if o in MEASUREMENT_OPS else Paradigm.USER
                    regions[key] = defs.region(o, region_role=RegionRole.ARTIFICIAL, paradigm=par)
            return regions[key]

        def complete(w: Any, t: int, j: int) -> None:
            """The completion record of request row ``j`` at time ``t``."""
            if op[j] == "irecv":
                w.mpi_irecv(t, int(peer[j]), comm_defs[int(comm[j])], int(tag[j]), int(rbytes[j]), j)
            else:
                w.mpi_isend_complete(t, j)

        writers = {r: trace.event_writer_from_location(locations[r]) for r in ranks.tolist()}
        stacks: dict[int, list[int]] = {r: [] for r in ranks.tolist()}
        # the frame a measured MPI run has (Scalasca relies on it): the program, then MPI_Init on every rank at
        # the first time of the run; MPI_Finalize from each rank's end to the run's end (a synchronization)
        t_begin = int(enter.min()) if n else 0
        t_end = int(exit_.max()) if n else 0
        program = defs.region(PROGRAM_NAME, region_role=RegionRole.ARTIFICIAL, paradigm=Paradigm.MEASUREMENT_SYSTEM)
        init, finalize = (defs.region(f, region_role=RegionRole.FUNCTION, paradigm=Paradigm.MPI,
                                      source_file=MPI_SOURCE_FILE) for f in ("MPI_Init", "MPI_Finalize"))
        for r in ranks.tolist():
            writers[r].program_begin(t_begin, program.name, [])
            writers[r].enter(t_begin, init)
            writers[r].leave(t_begin, init)
        def metrics(w: Any, t: int, row: int) -> None:
            for name, value, label, q in metrics_of.get(row, ()):
                attrs: dict[Any, Any] = {label_attr[name]: label}
                if q >= 0:
                    attrs[peer_attr] = q
                w.metric(t, metric_defs[name], value, attributes=attrs)

        def write_call(w: Any, t0: int, rows: list[int]) -> int:
            """The program's call of ``rows`` (its parts, ``call`` = ``MPI_Sendrecv``) as Score-P records it: one
            region of the call, its send and receive records and its parts' metrics inside; returns its end."""
            name = call[rows[0]]
            if "call:" + name not in regions:
                regions["call:" + name] = defs.region(name, region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI,
                                                      source_file=MPI_SOURCE_FILE)
            reg = regions["call:" + name]
            t1 = max(t0, max(int(exit_[j]) for j in rows))
            inside = set(rows)
            recs: list[tuple[int, int, Any]] = []  # (time, order, write): records in time order, else as listed
            for j in rows:
                o, cm = op[j], comm_defs[int(comm[j])]
                own = int(done[j]) in inside  # completed within the call: a blocking record, as Score-P's
                tj = min(max(t0, int(enter[j])), t1)
                if o in ("isend", "issend"):
                    if own:
                        recs.append((tj, len(recs), lambda t, j=j, cm=cm: w.mpi_send(
                            t, int(peer[j]), cm, int(tag[j]), int(nbytes[j]))))
                    else:
                        recs.append((tj, len(recs), lambda t, j=j, cm=cm: w.mpi_isend(
                            t, int(peer[j]), cm, int(tag[j]), int(nbytes[j]), j)))
                elif o == "irecv":
                    if own:  # received when the part completing it returns
                        td = min(max(t0, int(exit_[int(done[j])])), t1)
                        recs.append((td, len(recs), lambda t, j=j, cm=cm: w.mpi_recv(
                            t, int(peer[j]), cm, int(tag[j]), int(rbytes[j]))))
                    else:
                        recs.append((tj, len(recs), lambda t, j=j: w.mpi_irecv_request(t, j)))
                te = min(max(t0, int(exit_[j])), t1)
                for k in completes.get(j, ()):
                    if k not in inside:
                        recs.append((te, len(recs), lambda t, k=k: complete(w, t, k)))
                recs.append((te, len(recs), lambda t, j=j: metrics(w, t, j)))
            w.enter(t0, reg)
            for t, _, write in sorted(recs, key=lambda x: (x[0], x[1])):
                write(t)
            w.leave(t1, reg)
            return t1

        last = {r: t_begin for r in ranks.tolist()}
        i = 0
        while i < n:  # one pass in (rank, seq) order: regions open before their children
            r = int(rank[i])
            w, stack = writers[r], stacks[r]
            while stack and stack[-1] != parent[i]:
                j = stack.pop()
                last[r] = max(last[r], int(exit_[j]))
                w.leave(last[r], region(region_name[j], op[j], "region"))
            t0 = max(last[r], int(enter[i]))
            if call[i] and kind[i] == "mpi":  # the parts of a program's call (MPI_Sendrecv): that call's region
                rows = [i]
                while (call[i] not in _ONE_ROW_CALLS and i + 1 < n and rank[i + 1] == r
                       and parent[i + 1] == parent[i] and call[i + 1] == call[i] and kind[i + 1] == "mpi"
                       and not (op[i + 1] in _REQUESTS and op[i] not in _REQUESTS)):
                    i += 1
                    rows.append(i)
                last[r] = write_call(w, t0, rows)
                i += 1
                continue
            # a nonblocking collective's completion is recorded in the MPI_Wait that completed it, not as a blocking
            # call whose entry would be its arrival (readers then take it for a rank that arrived late)
            nbc = op[i] in COLLECTIVES and tag[i] > 0 and kind[i] == "mpi"
            reg = region(region_name[i], "wait" if nbc else op[i], kind[i])
            w.enter(t0, reg)
            if is_region[i]:
                stack.append(i)
                last[r] = t0
                i += 1
                continue
            t1 = max(t0, int(exit_[i]))
            o = op[i]
            cm = comm_defs[int(comm[i])]
            p2p = _P2P.get(o, -1)
            if p2p == 0:
                w.mpi_send(t0, int(peer[i]), cm, int(tag[i]), int(nbytes[i]))
            elif p2p == 1:
                w.mpi_isend(t0, int(peer[i]), cm, int(tag[i]), int(nbytes[i]), i)
            elif p2p == 2:
                w.mpi_recv(t1, int(peer[i]), cm, int(tag[i]), int(rbytes[i]))
            elif p2p == 3:
                w.mpi_irecv_request(t0, i)
            elif o in COLLECTIVES:
                root = int(peer[i]) if o in ROOTED and peer[i] >= 0 else UNDEFINED_UINT32
                w.mpi_collective_begin(t0)
                w.mpi_collective_end(t1, getattr(CollectiveOp, COLLECTIVES[o][0]), cm, root,
                                     int(nbytes[i]), int(rbytes[i]))
            for j in completes.get(i, ()):
                complete(w, t1, j)
            metrics(w, t1, i)
            w.leave(t1, reg)
            last[r] = t1
            i += 1
        for r, stack in stacks.items():
            while stack:
                j = stack.pop()
                last[r] = max(last[r], int(exit_[j]))
                writers[r].leave(last[r], region(region_name[j], op[j], "region"))
            writers[r].enter(last[r], finalize)
            for j in open_requests.get(r, ()):
                complete(writers[r], last[r], j)
            writers[r].leave(t_end, finalize)
            writers[r].program_end(t_end, 0)
        props = {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool))}
        props["wait_states"] = len(waits)
        props["wait_seconds"] = float(waits["wait"].sum()) if len(waits) else 0.0
        trace.creator = "waitlab (SimGrid SMPI simulation)"
        # The bindings stamp the clock with the wall-clock time of the first event (``Writer._update_timestamps``,
        # python3-otf2 3.0): simulated time has no date, so the epoch, and two exports are byte-identical.
        trace._realtime_timestamp = 0.0
        trace.description = trace_description(props)
    anchor = folder / "traces.otf2"
    _fix_trace_id(otf2, anchor, hashlib.sha256(trace_description(props).encode()).digest()[:8])
    return anchor


def trace_description(props: dict[str, Any]) -> str:
    """The archive description: the run's scalar metadata as JSON (sorted keys)."""
    return json.dumps(props, sort_keys=True)


def _fix_trace_id(otf2: Any, anchor: Path, new_id: bytes) -> None:
    """Replace the random trace id OTF2 draws when an archive is opened by ``new_id`` (8 bytes, from the run).

    OTF2 3.0 has no setter for it; the anchor file holds it once, as a little-endian ``uint64``.
    """
    import _otf2  # the low-level module of the bindings (present whenever ``otf2`` is)

    with otf2.reader.open(str(anchor)) as reader:
        old = struct.pack("<Q", _otf2.Reader_GetTraceId(reader.handle))
    data = anchor.read_bytes()
    if data.count(old) != 1:
        raise EnvironmentProblem(f"cannot make {anchor} reproducible: its trace id is not stored once "
                                 "(an OTF2 other than 3.0?)")
    anchor.write_bytes(data.replace(old, new_id))
