"""Checks of the measurement layer's one-sided (RMA) records (``native/waitlab_pmpi_rma.c``).

The layer numbers windows per rank (the k-th window a rank created); the numbers agree across ranks only for
windows every rank creates in the same order, i.e. windows on ``MPI_COMM_WORLD`` (or a duplicate of it).
:func:`check_rma_records` refuses records of windows on other communicators, as the event table does for
collectives on sub-communicators.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.vocabulary import ACTIONS, RMA_ACTIONS, codes_of


def check_rma_records(log: npt.NDArray[np.void], arg: npt.NDArray[np.void],
                      comms: tuple[tuple[int, ...], ...], n_ranks: int) -> None:
    """Raise :class:`SimulationError` if an RMA call uses a window created on a sub-communicator.

    ``log``, ``arg`` and ``comms`` (members of the global communicators 1, 2, ...; 0 is ``MPI_COMM_WORLD``) are
    those of :class:`waitlab.simulator.program_records.Records`.
    """
    code = log["code"]
    world = tuple(range(n_ranks))
    # a duplicate of MPI_COMM_WORLD (same members in the same order) is as good as MPI_COMM_WORLD
    ok = np.array([True, *(m == world for m in comms)], bool)
    if ok.all():  # every window is on MPI_COMM_WORLD or a duplicate of it (no pass over the records)
        return
    rma = np.flatnonzero(np.isin(code, codes_of(RMA_ACTIONS)))  # usually none: the rest looks at these rows only
    comm = arg["comm"][rma].astype(np.int64)
    bad = np.flatnonzero(~ok[np.clip(comm, 0, ok.size - 1)])
    if bad.size == 0:
        return
    i = int(rma[bad[0]])
    comm = arg["comm"].astype(np.int64)
    rank, c = int(log["rank"][i]), int(comm[i])
    members = comms[c - 1] if 0 < c <= len(comms) else ()
    shown = ", ".join(map(str, members[:16])) + (" ..." if len(members) > 16 else "")
    raise SimulationError(
        f"rank {rank} calls {ACTIONS[int(code[i])]} on a window created on a sub-communicator (world ranks "
        f"{shown}); waitlab's event table supports one-sided communication on windows of MPI_COMM_WORLD (or a "
        "duplicate of it) only")
