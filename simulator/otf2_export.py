"""OTF2 export of the event table (Debian's ``python3-otf2``): the format Vampir, Scalasca, Score-P's tools
and pipit read.

One location (a CPU thread in its own process location group) per rank, timer resolution 1 ns (times
rounded once, like the Chrome trace), every row of the event table as an Enter/Leave pair of a region
(user regions, ``MPI_*`` functions, and the local activities ``compute``, ``noise``, ...), and inside
the MPI functions the MPI records Scalasca's wait-state analysis replays:

=====================  =====================================================================
event table row        OTF2 records (between the row's Enter and Leave)
=====================  =====================================================================
``send``               ``MpiSend`` (receiver, communicator, tag, bytes)
``isend``              ``MpiIsend`` (request id = row); ``MpiIsendComplete`` in the completing
                       ``wait``/``waitall`` (column ``done``)
``recv``               ``MpiRecv`` (sender, communicator, tag, bytes)
``irecv``              ``MpiIrecvRequest``; ``MpiIrecv`` in the completing ``wait``/``waitall``
collective             ``MpiCollectiveBegin`` and ``MpiCollectiveEnd`` (operation, communicator,
                       root, bytes sent and received)
=====================  =====================================================================

All communication is on ``MPI_COMM_WORLD`` (see ``docs/event_table.md``).  Gap: ``sendRecv`` and
``test`` rows get their region but no message records (the table keeps one peer per row).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.errors import EnvironmentProblem
from waitlab.simulator.export import to_ns

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
#: Event-table ops that are not MPI but the measurement system's own activity.
MEASUREMENT_OPS = frozenset({"overhead", "flush", "swap"})

_P2P = {"send": 0, "isend": 1, "recv": 2, "irecv": 3}


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


def write_otf2(events: pd.DataFrame, waits: pd.DataFrame, metadata: dict[str, Any], folder: Path) -> Path:
    """Write the event table as an OTF2 archive in ``folder``; return the anchor file ``folder/traces.otf2``.

    Parameters
    ----------
    events : DataFrame
        Event table (``docs/event_table.md``), rows sorted by ``(rank, seq)``.
    waits : DataFrame
        Wait states; not stored as records (OTF2 readers such as Scalasca recompute them), their count
        and total go to the archive's description.
    metadata : dict
        Run metadata; its scalar values go to the archive's description (JSON).
    folder : Path
        Output folder; replaced if it exists.
    """
    otf2 = _import_otf2()
    from otf2.enums import CollectiveOp, GroupType, LocationGroupType, LocationType, Paradigm, RegionRole

    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    n = len(events)
    rank = events["rank"].to_numpy().astype(np.int64)
    ranks = np.unique(rank)
    enter = to_ns(events["enter"].to_numpy())
    exit_ = np.maximum(to_ns(events["exit"].to_numpy()), enter)
    op = events["op"].astype(str).to_numpy()
    is_region = (events["kind"] == "region").to_numpy()
    region_name = np.where(is_region, events["region"].astype(str).to_numpy(), "")
    kind = events["kind"].astype(str).to_numpy()
    peer = events["peer"].to_numpy().astype(np.int64)
    tag = events["tag"].to_numpy().astype(np.int64) if "tag" in events else np.zeros(n, np.int64)
    nbytes = events["bytes"].to_numpy().astype(np.int64)
    rbytes = events["recv_bytes"].to_numpy().astype(np.int64) if "recv_bytes" in events else nbytes
    rbytes = np.where(rbytes > 0, rbytes, nbytes)
    parent = events["parent"].to_numpy().astype(np.int64)
    done = events["done"].to_numpy().astype(np.int64)
    # completions: for each completing row, the non-blocking rows it completes (irecv -> MpiIrecv)
    nb = np.flatnonzero(np.isin(op, ("isend", "irecv")) & (done >= 0))
    completes: dict[int, list[int]] = {}
    for row, d in zip(nb.tolist(), done[nb].tolist(), strict=True):
        completes.setdefault(d, []).append(row)

    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        defs = trace.definitions
        machine = defs.system_tree_node("machine")
        locations = {}
        for r in ranks.tolist():
            group = defs.location_group(f"rank {r}", location_group_type=LocationGroupType.PROCESS,
                                        system_tree_parent=machine)
            locations[r] = defs.location(f"rank {r}", type=LocationType.CPU_THREAD, group=group)
        loc_group = defs.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS,
                               paradigm=Paradigm.MPI, members=[locations[r] for r in ranks.tolist()])
        del loc_group  # referenced by the COMM_GROUP below through the registry
        world_group = defs.group("MPI_COMM_WORLD", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                 members=list(range(len(ranks))))
        world = defs.comm("MPI_COMM_WORLD", group=world_group)
        regions: dict[str, Any] = {}

        def region(name: str, o: str, k: str) -> Any:
            key = name if k == "region" else ("mpi:" if k == "mpi" else "act:") + o
            if key not in regions:
                if k == "region":
                    regions[key] = defs.region(name, region_role=RegionRole.CODE, paradigm=Paradigm.USER)
                elif k == "mpi":
                    role = COLLECTIVES[o][1] if o in COLLECTIVES else "POINT2POINT"
                    regions[key] = defs.region(mpi_function_name(o), region_role=getattr(RegionRole, role),
                                               paradigm=Paradigm.MPI)
                else:
                    par = Paradigm.MEASUREMENT_SYSTEM if o in MEASUREMENT_OPS else Paradigm.USER
                    regions[key] = defs.region(o, region_role=RegionRole.ARTIFICIAL, paradigm=par)
            return regions[key]

        writers = {r: trace.event_writer_from_location(locations[r]) for r in ranks.tolist()}
        stacks: dict[int, list[int]] = {r: [] for r in ranks.tolist()}
        last = {r: 0 for r in ranks.tolist()}
        for i in range(n):  # one pass in (rank, seq) order: regions open before their children
            r = int(rank[i])
            w, stack = writers[r], stacks[r]
            while stack and stack[-1] != parent[i]:
                j = stack.pop()
                last[r] = max(last[r], int(exit_[j]))
                w.leave(last[r], region(region_name[j], op[j], "region"))
            t0 = max(last[r], int(enter[i]))
            reg = region(region_name[i], op[i], kind[i])
            w.enter(t0, reg)
            if is_region[i]:
                stack.append(i)
                last[r] = t0
                continue
            t1 = max(t0, int(exit_[i]))
            o = op[i]
            p2p = _P2P.get(o, -1)
            if p2p == 0:
                w.mpi_send(t0, int(peer[i]), world, int(tag[i]), int(nbytes[i]))
            elif p2p == 1:
                w.mpi_isend(t0, int(peer[i]), world, int(tag[i]), int(nbytes[i]), i)
            elif p2p == 2:
                w.mpi_recv(t1, int(peer[i]), world, int(tag[i]), int(nbytes[i]))
            elif p2p == 3:
                w.mpi_irecv_request(t0, i)
            elif o in COLLECTIVES:
                root = int(peer[i]) if o in ROOTED and peer[i] >= 0 else UNDEFINED_UINT32
                w.mpi_collective_begin(t0)
                w.mpi_collective_end(t1, getattr(CollectiveOp, COLLECTIVES[o][0]), world, root,
                                     int(nbytes[i]), int(rbytes[i]))
            for j in completes.get(i, ()):
                if op[j] == "isend":
                    w.mpi_isend_complete(t1, j)
                else:
                    w.mpi_irecv(t1, int(peer[j]), world, int(tag[j]), int(nbytes[j]), j)
            w.leave(t1, reg)
            last[r] = t1
        for r, stack in stacks.items():
            while stack:
                j = stack.pop()
                last[r] = max(last[r], int(exit_[j]))
                writers[r].leave(last[r], region(region_name[j], op[j], "region"))
        props = {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool))}
        props["wait_states"] = len(waits)
        props["wait_seconds"] = float(waits["wait"].sum()) if len(waits) else 0.0
        trace.creator = "waitlab (SimGrid SMPI simulation)"
        trace.description = json.dumps(props, sort_keys=True)
    return folder / "traces.otf2"
