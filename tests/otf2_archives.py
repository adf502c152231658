"""Small OTF2 archives written by hand for tests (python3-otf2's writer), as Score-P lays them out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def score_p_ranks(d: Any, n: int, host: str = "machine") -> tuple[list[Any], Any]:
    """In the definitions ``d`` of an archive being written: ``n`` MPI ranks laid out as Score-P does (a master
    thread in its own location group per rank, on ``host``) and MPI_COMM_WORLD over them; (locations, world)."""
    from otf2.enums import GroupType, LocationType, Paradigm  # optional: Debian's python3-otf2

    node = d.system_tree_node(host)
    locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                       group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(n)]
    d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
    return locs, communicator(d, "MPI_COMM_WORLD", list(range(n)), group_name="")


def communicator(d: Any, name: str, members: list[int], group_name: str | None = None) -> Any:
    """An MPI communicator of ranks ``members`` (communicator-rank order) in the definitions ``d``."""
    from otf2.enums import GroupType, Paradigm  # optional: Debian's python3-otf2

    return d.comm(name, group=d.group(name if group_name is None else group_name, group_type=GroupType.COMM_GROUP,
                                      paradigm=Paradigm.MPI, members=members))


def two_rank_archive(folder: Path, body: Callable[[list[Any], dict[str, Any], Any], None]) -> Path:
    """A 2-rank OTF2 archive (1 ns ticks, both ranks on host ``node7``) with the MPI regions ``MPI_Sendrecv`` and
    ``MPI_Comm_rank``; ``body(writers, regions, world)`` writes the events.  Returns the anchor file."""
    otf2 = pytest.importorskip("otf2")
    from otf2.enums import Paradigm, RegionRole  # optional: Debian's python3-otf2

    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, 2, "node7")
        regions = {n: d.region(n, region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
                   for n in ("MPI_Sendrecv", "MPI_Comm_rank")}
        body([trace.event_writer_from_location(x) for x in locs], regions, world)
    return folder / "traces.otf2"
