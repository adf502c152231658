"""The memory made ready while a program's SMPI stage runs (:mod:`waitlab.simulator.heap`, issue 25).

The reserve must follow the measurement layer's record count (which must be the count of the records it writes),
stay within its bounds, be set only inside :func:`reserving`, and change no result: a run's files are the same bytes
with and without it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from waitlab import api
from waitlab.experiments.stage import execute, prepare
from waitlab.simulator import heap
from waitlab.simulator import programs as prog

BSP = Path(__file__).resolve().parent / "programs" / "bsp.c"
SCENARIO = ('[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n[application]\n'
            'kind = "program"\nsources = ["{bsp}"]\nargs = ["{steps}"]\n')


def test_a_reserve_grows_by_at_most_a_step_per_call_and_never_past_its_limit():
    reserve = heap.Reserve(limit=heap.STEP_BYTES + (1 << 20))
    with heap.reserving():  # glibc keeps the blocks only inside a run (restored at its end)
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES  # one step
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES + (1 << 20)  # the limit
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES + (1 << 20)
        assert reserve.grow_to(1000) == heap.STEP_BYTES + (1 << 20)  # it never shrinks


def test_a_reserve_follows_the_records_of_the_count_file(tmp_path: Path):
    reserve = heap.Reserve(limit=1 << 30)
    assert reserve.follow(tmp_path) == 0  # no count file yet: nothing
    np.array([1000, -1, 24], np.int64).tofile(tmp_path / heap.COUNT_FILE)  # a slot not yet written is ignored
    with heap.reserving():
        assert reserve.follow(tmp_path) == heap.BYTES_PER_RECORD * 1024


def test_reserving_is_set_inside_its_block_only_and_bounded_by_the_memory_available():
    assert heap.active() is None
    with heap.reserving() as reserve:
        assert heap.active() is reserve
        if reserve is not None:  # glibc
            with open("/proc/meminfo") as f:
                available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
            assert 0 < reserve.limit <= heap.MAX_SHARE * available * 1.1
    assert heap.active() is None


@pytest.mark.simgrid
def test_the_layer_s_count_file_holds_the_number_of_records_it_wrote(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    scenario = tmp_path / "bsp.toml"
    scenario.write_text(SCENARIO.format(bsp=BSP, steps=300))
    followed: list[int] = []
    real = heap.Reserve.follow

    def follow(self: heap.Reserve, folder: Path) -> int:
        followed.append(heap.records_so_far(folder))
        return real(self, folder)

    monkeypatch.setattr(heap.Reserve, "follow", follow)
    monkeypatch.setattr("waitlab.simulator.output_reader.MEANWHILE_TICK", 0.01)
    with heap.reserving():
        ex = execute(prepare(api.load_scenario(scenario)), keep_dir=tmp_path / "work")
    out = tmp_path / "work" / "records"
    records = prog.read_records(out, 4)
    assert heap.records_so_far(out) == len(records) > 0
    per_rank = np.fromfile(out / heap.COUNT_FILE, np.int64)
    assert per_rank.tolist() == np.bincount(records.log["rank"], minlength=4).tolist()
    assert followed and all(0 <= n <= len(records) for n in followed)  # read while SMPI ran
    assert len(ex.ops) > 0


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.parquet"))}


@pytest.mark.simgrid
def test_a_run_writes_the_same_tables_with_and_without_a_reserve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    scenario = tmp_path / "bsp.toml"
    scenario.write_text(SCENARIO.format(bsp=BSP, steps=4000))  # a stage of several ticks
    grown: list[int] = []
    real = heap.Reserve.grow_to

    def grow_to(self: heap.Reserve, nbytes: int) -> int:
        grown.append(real(self, nbytes))
        return grown[-1]

    monkeypatch.setattr(heap.Reserve, "grow_to", grow_to)
    monkeypatch.setattr("waitlab.simulator.output_reader.MEANWHILE_TICK", 0.01)
    api.run(scenario, tmp_path / "with", png=False)
    monkeypatch.setattr(heap, "BYTES_PER_RECORD", 0)
    api.run(scenario, tmp_path / "without", png=False)
    assert max(grown, default=0) > 0  # the first run did reserve memory
    assert _digests(tmp_path / "with") == _digests(tmp_path / "without")
