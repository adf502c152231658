"""Large operation tables are memory-mapped from unlinked files (issue 15); results do not change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from waitlab.experiments.pipeline import run
from waitlab.experiments.scenario import from_mapping
from waitlab.models.ops import OpBuilder
from waitlab.simulator import spill
from waitlab.simulator.spill import release_free_memory, spill_ops


def test_spilled_table_equals_the_original_and_leaves_no_file(tmp_path: Path) -> None:
    b = OpBuilder(3)
    b.add("compute", [0, 1, 2], value=[0.5, 0.25, 0.125], region="a", excess=[0.0, 0.1, 0.0])
    b.add("allreduce", [0, 1, 2], value=8, value2=1.0)
    ops = b.build()
    mapped = spill_ops(ops, tmp_path, min_ops=0)
    for c in ops.COLUMNS:
        col = getattr(mapped, c)
        assert isinstance(col, np.memmap) and not col.flags.writeable
        assert np.array_equal(col, getattr(ops, c)) and col.dtype == getattr(ops, c).dtype
    assert mapped.names == ops.names and mapped.ledger is ops.ledger
    assert list(tmp_path.iterdir()) == []  # the files were unlinked: the mappings hold the data
    assert spill_ops(ops, tmp_path) is ops  # below the size limit: unchanged


@pytest.mark.simgrid
def test_a_run_from_a_spilled_table_is_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = from_mapping({"scenario": {"name": "spill", "ranks": 8, "seed": 3}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "lared_s", "steps": 2}}, "test_spill")
    plain = run(sc).result
    monkeypatch.setattr(spill, "SPILL_MIN_OPS", 0)
    mapped = run(sc).result
    assert isinstance(mapped.ops.rank, np.memmap) and not isinstance(plain.ops.rank, np.memmap)
    pd.testing.assert_frame_equal(mapped.events, plain.events)
    pd.testing.assert_frame_equal(mapped.waits, plain.waits)
    assert mapped.summary == plain.summary


def test_no_room_to_spill_keeps_the_table_in_memory(tmp_path: Path) -> None:
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=[0.5, 0.25])
    ops = b.build()
    missing = tmp_path / "not-a-folder"  # tempfile cannot create its folder there: an OSError, as a full disk
    assert spill_ops(ops, missing, min_ops=0) is ops


def _own_memory() -> int:
    line = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("RssAnon:"))
    return int(line.split()[1]) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_freed_memory_goes_back_to_the_system() -> None:
    blocks = [np.ones(8192) for _ in range(20_000)]  # 64 KiB each: glibc serves them from its heap
    pin = np.ones(8192)  # allocated last, above them: glibc cannot shrink its heap by itself
    before = _own_memory()
    del blocks
    kept = _own_memory()
    assert release_free_memory()
    after = _own_memory()
    assert kept - after > 500 * 2**20 and after < before  # 1.25 GiB freed, most of it handed back
    del pin
