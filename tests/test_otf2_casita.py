"""A second Score-P trace of a real MPI run, with a collective: CASITA's late-sender-and-barrier test trace.

The program's ranks block in ``MPI_Recv`` (inside a region ``late_sender``) and in ``MPI_Barrier`` (inside
``barrier``) because other ranks arrive late; on the traced machine nearly all of that blocking time is waiting
(the messages are small, and the ranks left ``MPI_Init`` within 4 us of each other, which the replay does not
copy). Replayed with the traced compute (``cpu_ratio = 1``), the wait states must add up to the blocking time
the trace recorded, read here with ``otf2-print`` (OTF2's own reader, independent of waitlab's), on both machines.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from waitlab import api

pytestmark = pytest.mark.skipif(shutil.which("otf2-print") is None, reason="otf2-tools not installed")

ANCHOR = Path(__file__).parent / "data" / "casita_ls_barr" / "traces.otf2"


def recorded_seconds(anchor: Path) -> dict[tuple[str, str], float]:
    """Seconds spent in each (enclosing region, MPI call) of the trace, from ``otf2-print``'s ENTER/LEAVE lines."""
    text = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True).stdout
    ticks = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    per_second = int(next(x for x in ticks.splitlines() if x.startswith("CLOCK_PROPERTIES"))
                     .split("Ticks per Seconds:")[1].split(",")[0])
    stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] not in ("ENTER", "LEAVE"):
            continue
        location, time, region = int(parts[1]), int(parts[2]), parts[4].strip('"')
        if parts[0] == "ENTER":
            stacks[location].append((region, time))
            continue
        name, start = stacks[location].pop()
        assert name == region
        if name.startswith("MPI_") and stacks[location]:
            seconds[(stacks[location][-1][0], name)] += (time - start) / per_second
    return dict(seconds)


def scenario_file(folder: Path, name: str, platform: str, anchor: Path) -> Path:
    """A scenario replaying the OTF2 archive ``anchor`` with 4 ranks on ``platform``."""
    path = folder / f"{name}.toml"
    path.write_text(f'[scenario]\nname = "{name}"\nranks = 4\n[platform]\nname = "{platform}"\n'
                    f'[application]\nkind = "otf2"\ntrace = "{anchor}"\n')
    return path


def wait_seconds(result: Any, keys: list[str]) -> dict[Any, float]:
    """The run's wait seconds summed per ``keys`` (columns of the wait states, or ``region``: the waiting event's)."""
    region = result.events["region"].to_numpy()[result.waits["event"].to_numpy()].astype(str)
    return result.waits.assign(region=region).groupby(keys, observed=True)["wait"].sum().to_dict()


@pytest.mark.simgrid
@pytest.mark.parametrize("platform", ["dawning_5000a", "sunway_taihulight"])
def test_casita_late_sender_and_barrier_trace_replays_with_the_waits_it_recorded(tmp_path: Path, platform: str):
    recorded = recorded_seconds(ANCHOR)
    assert recorded[("late_sender", "MPI_Recv")] > 29 and recorded[("barrier", "MPI_Barrier")] > 21  # the trace's
    run = api.run(scenario_file(tmp_path, "casita_ls_barr", platform, ANCHOR), tmp_path / "out").result
    by = wait_seconds(run, ["pattern", "region"])
    assert set(by) == {("late_sender", "late_sender"), ("wait_at_barrier", "barrier")}  # the trace's region names
    assert by[("late_sender", "late_sender")] == pytest.approx(recorded[("late_sender", "MPI_Recv")], rel=1e-3)
    assert by[("wait_at_barrier", "barrier")] == pytest.approx(recorded[("barrier", "MPI_Barrier")], rel=1e-3)
    assert run.metadata["platform"] == platform


@pytest.mark.simgrid
def test_casita_trace_survives_export_and_import_with_its_waits_and_names(tmp_path: Path):
    """Score-P's trace -> a waitlab run -> ``export --otf2`` -> the export imported and replayed on the same
    platform: the same wait states per (rank, pattern, region), to 0.1%."""
    first = api.run(scenario_file(tmp_path, "scorep", "sunway_taihulight", ANCHOR), tmp_path / "first").result
    exported = Path(api.export(tmp_path / "first", ("otf2",))["otf2"])
    again = api.run(scenario_file(tmp_path, "again", "sunway_taihulight", exported), tmp_path / "again").result
    keys = ["rank", "pattern", "region"]
    want, got = wait_seconds(first, keys), wait_seconds(again, keys)
    assert set(got) == set(want) and len(want) >= 4
    for key, seconds in want.items():
        assert got[key] == pytest.approx(seconds, rel=1e-3), key
