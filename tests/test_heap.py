"""The memory made ready while a program's SMPI stage runs (:mod:`waitlab.simulator.heap`, issue 25).

The reserve must follow the measurement layer's record count (which must be the count of the records it writes),
stay within its bounds, be set only inside :func:`reserving`, and change no result: a run's files are the same bytes
with and without it.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from waitlab import api
from waitlab.experiments.stage import execute, prepare
from waitlab.simulator import heap
from waitlab.simulator import programs as prog
from waitlab.simulator.progress import (
    INTERVAL_ENV,
    LAYER_COUNT_DTYPE,
    LAYER_COUNT_FILE,
    Progress,
    read_layer_count,
    reporting,
)

BSP = Path(__file__).resolve().parent / "programs" / "bsp.c"
SCENARIO = ('[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n[application]\n'
            'kind = "program"\nsources = ["{bsp}"]\nargs = ["{steps}"]\n')


@pytest.mark.skipif(heap._mallopt() is None, reason="a reserve needs glibc's mallopt")
def test_a_reserve_grows_by_at_most_a_step_per_call_and_never_past_its_limit():
    reserve = heap.Reserve(limit=heap.STEP_BYTES + (1 << 20))
    with heap.reserving():  # glibc keeps the blocks only inside a run (restored at its end)
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES  # one step
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES + (1 << 20)  # the limit
        assert reserve.grow_to(1 << 40) == heap.STEP_BYTES + (1 << 20)
        assert reserve.grow_to(1000) == heap.STEP_BYTES + (1 << 20)  # it never shrinks


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
def test_the_layer_s_count_file_holds_its_records_and_a_program_run_reports_its_progress(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    scenario = tmp_path / "bsp.toml"
    scenario.write_text(SCENARIO.format(bsp=BSP, steps=4000))
    seen: list[Progress | None] = []
    monkeypatch.setenv(INTERVAL_ENV, "0.02")
    monkeypatch.setattr("waitlab.simulator.output_reader.MEANWHILE_TICK", 0.01)
    with heap.reserving() as reserve, reporting(seen.append):
        execute(prepare(api.load_scenario(scenario)), keep_dir=tmp_path / "work")
    out = tmp_path / "work" / "records"
    records = prog.read_records(out, 4)
    slots = np.fromfile(out / LAYER_COUNT_FILE, LAYER_COUNT_DTYPE)
    assert slots["records"].tolist() == np.bincount(records.log["rank"], minlength=4).tolist()
    assert slots["clock"].tolist() == [float(records.log["t_exit"][records.log["rank"] == r][-1]) for r in range(4)]
    assert read_layer_count(out) == (float(slots["clock"].max()), len(records))
    # progress while it ran: calls recorded, growing, at most the final count, then the end
    assert len(seen) >= 2 and seen[-1] is None
    shown = [p for p in seen[:-1] if p is not None]
    assert all(p.unit == "calls recorded" and 0 <= p.actions <= len(records) for p in shown)
    assert [p.actions for p in shown] == sorted(p.actions for p in shown)
    assert "calls recorded" in shown[-1].text()
    if reserve is not None:  # glibc: the reserve followed the count
        assert 0 < reserve.size <= heap.BYTES_PER_RECORD * len(records)


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
    api.run(scenario, tmp_path / "with", png=False, ready_memory=True)
    assert max(grown, default=0) > 0  # the run did reserve memory
    grown.clear()
    api.run(scenario, tmp_path / "without", png=False)  # the API's default: no reserve
    assert not grown
    assert _digests(tmp_path / "with") == _digests(tmp_path / "without")


#: A fresh interpreter counts glibc's arenas (``malloc_info``: one ``<heap nr=...>`` each) after a thread started
#: inside (argv[1] == "1") or outside a reserve's block has allocated memory.
_ARENAS = r"""
import ctypes, sys, threading
import numpy as np
from waitlab.simulator import heap

def arenas() -> int:
    libc = ctypes.CDLL(None)
    libc.open_memstream.restype = ctypes.c_void_p
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    return ctypes.string_at(buf, size.value).decode().count("<heap nr=")

def work() -> None:
    block = np.ones(1 << 20)  # 8 MB from this thread
    block.sum()

def in_thread() -> None:
    t = threading.Thread(target=work)
    t.start()
    t.join()

if sys.argv[1] == "1":
    with heap.reserving():
        in_thread()
        print(arenas())
else:
    in_thread()
    print(arenas())
"""


@pytest.mark.skipif(heap._mallopt() is None, reason="a reserve needs glibc's mallopt")
def test_threads_started_inside_a_reserve_allocate_from_its_heap() -> None:
    # issue 25: the encoders' and writers' memory after the stage lands in the reserve (glibc's main arena), not in
    # an arena of their own that the kernel faults in then
    counts = {}
    for inside in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", _ARENAS, inside], capture_output=True, text=True, check=True)
        counts[inside] = int(out.stdout.split()[-1])
    assert counts == {"0": 2, "1": 1}
