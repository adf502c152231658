"""Small OTF2 archives written by hand for tests (python3-otf2's writer), as Score-P lays them out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def two_rank_archive(folder: Path, body: Callable[[list[Any], dict[str, Any], Any], None]) -> Path:
    """A 2-rank OTF2 archive (1 ns ticks, both ranks on host ``node7``) with the MPI regions ``MPI_Sendrecv`` and
    ``MPI_Comm_rank``; ``body(writers, regions, world)`` writes the events.  Returns the anchor file."""
    otf2 = pytest.importorskip("otf2")
    from otf2.enums import GroupType, LocationType, Paradigm, RegionRole  # optional: Debian's python3-otf2

    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        node = d.system_tree_node("node7")
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                           group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(2)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=[0, 1]))
        regions = {n: d.region(n, region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
                   for n in ("MPI_Sendrecv", "MPI_Comm_rank")}
        body([trace.event_writer_from_location(x) for x in locs], regions, world)
    return folder / "traces.otf2"
