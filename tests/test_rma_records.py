"""The measurement layer's one-sided records: windows on sub-communicators are refused (hand-built records)."""

from __future__ import annotations

import numpy as np
import pytest

from waitlab.errors import SimulationError
from waitlab.models.vocabulary import CODE
from waitlab.simulator.program_records import ARG_DTYPE, LOG_DTYPE
from waitlab.simulator.rma_records import check_rma_records


def _records(rows: list[tuple[int, str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(rank, action, communicator) rows as the layer's log and argument records."""
    log = np.zeros(len(rows), LOG_DTYPE)
    arg = np.zeros(len(rows), ARG_DTYPE)
    log["rank"] = [r for r, _, _ in rows]
    log["code"] = [CODE[a] for _, a, _ in rows]
    arg["comm"] = [c for _, _, c in rows]
    return log, arg


def test_a_put_on_a_window_of_a_sub_communicator_is_refused() -> None:
    log, arg = _records([(0, "barrier", 1), (0, "put", 0), (1, "put", 1)])
    with pytest.raises(SimulationError, match=r"rank 1 calls put on a window created on a sub-communicator "
                                              r"\(world ranks 0, 1\)"):
        check_rma_records(log, arg, ((0, 1),), 4)


def test_world_windows_and_duplicates_of_the_world_pass() -> None:
    log, arg = _records([(0, "put", 0), (1, "get", 1), (2, "barrier", 2)])
    check_rma_records(log, arg, ((0, 1, 2, 3), (0, 2)), 4)  # comm 1 duplicates the world; comm 2 has no RMA call
    check_rma_records(log[:2], arg[:2], ((0, 1, 2, 3),), 4)  # every communicator world-like: nothing looked at
