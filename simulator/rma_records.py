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
                      comms: dict[tuple[int, int], tuple[int, ...]]) -> None:
    """Raise :class:`SimulationError` if an RMA call uses a window created on a sub-communicator.

    ``log``, ``arg`` and ``comms`` are those of :class:`waitlab.simulator.programs.Records`.
    """
    code = log["code"]
    rma = np.isin(code, codes_of(RMA_ACTIONS))
    bad = np.flatnonzero(rma & (arg["comm"] != 0))
    if bad.size == 0:
        return
    i = int(bad[0])
    rank, comm = int(log["rank"][i]), int(arg["comm"][i])
    members = comms.get((rank, comm), ())
    shown = ", ".join(map(str, members[:16])) + (" ..." if len(members) > 16 else "")
    raise SimulationError(
        f"rank {rank} calls {ACTIONS[int(code[i])]} on a window created on a sub-communicator (world ranks "
        f"{shown}); waitlab's event table supports one-sided communication on windows of MPI_COMM_WORLD (or a "
        "duplicate of it) only")
