"""Machine limits at scale (issue 15): one shared trace file, open-file and memory-map limits."""

from __future__ import annotations

import hashlib
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import EnvironmentProblem
from waitlab.experiments.estimate import (
    SCRATCH_EVENT_BYTES,
    SCRATCH_SPILLED_OP_BYTES,
    SMPI_BASE_BYTES,
    SMPI_EVENT_BYTES,
    SMPI_RANK_BYTES,
    Budget,
    _duration,
    _gib,
    estimate,
)
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.scenario import from_mapping
from waitlab.experiments.sources import compute_speed
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.simulator import limits
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.smpi import limit_hint
from waitlab.simulator.trace import write_trace

SCENARIO = """[scenario]
name = "limits"
ranks = 64
seed = 1

[platform]
name = "dawning_5000a"

[application]
kind = "lared_s"
steps = 2
"""


def _ops() -> OpBuilder:
    b = OpBuilder(3)
    b.add("compute", [0, 1, 2], value=0.5, region="a")
    b.add("send", 0, peer=1, value=8, tag=3)
    b.add("recv", 1, peer=0, value=8, tag=3)
    b.add("allreduce", [0, 1, 2], value=8, value2=1.0)
    b.add("compute", [2], value=0.1, region="b")
    return b


def test_shared_trace_has_every_rank_line_once_in_superstep_order(tmp_path: Path) -> None:
    ops = _ops().build()
    index = write_trace(ops, 1e9, tmp_path / "t", shared=True)
    assert index.read_text().strip() == str((tmp_path / "t" / "trace.txt").resolve())
    lines = (tmp_path / "t" / "trace.txt").read_text().splitlines()
    per_file = write_trace(ops, 1e9, tmp_path / "f")
    for r, name in enumerate(per_file.read_text().split()):
        own = [ln for ln in lines if ln.split()[0] == str(r)]
        assert own == Path(name).read_text().splitlines()  # each rank replays the same lines, in order
    # by hand: all init lines, then superstep 0 (up to and with the allreduce) rank by rank, then the rest
    assert lines[:3] == ["0 init", "1 init", "2 init"]
    assert lines[3:6] == ["0 compute 500000000.0", "0 send 1 3 8", "0 allreduce 8 1.0"]
    assert lines[6:11] == ["1 compute 500000000.0", "1 recv 0 3 8", "1 allreduce 8 1.0", "2 compute 500000000.0",
                           "2 allreduce 8 1.0"]
    assert lines[11:] == ["0 finalize", "1 finalize", "2 compute 100000000.0", "2 finalize"]


def test_limits_name_the_limit_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "open_files_limit", lambda: 40)
    monkeypatch.setattr(limits, "max_map_count", lambda: 65_530)
    assert limits.check_replay_limits(4096) == {}  # shared trace: no file per rank, guards fit
    with pytest.raises(EnvironmentProblem, match=r"ulimit -n.*40"):
        limits.check_replay_limits(64, per_rank_files=True)
    # 2 maps per rank with guard pages (8,365 measured at 4,096 ranks): 40,000 ranks do not fit 65,530
    assert limits.check_replay_limits(40_000) == {"contexts/guard-size": "0"}
    assert limits.check_replay_limits(30_000) == {}
    assert "vm.max_map_count" in limit_hint("[0.0] xbt: Failed to protect stack")
    assert "ulimit -n" in limit_hint("Cannot read replay file '/x/rank1020.txt'")


@pytest.mark.simgrid
def test_shared_trace_gives_the_same_log_bytes_as_per_rank_files(tmp_path: Path) -> None:
    sc = from_mapping({"scenario": {"name": "x", "ranks": 16, "seed": 1}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "lared_s", "steps": 2}}, "x")
    prep = prepare(sc)
    ops = prep.source.operations(prep.platform, prep.smpi_config(), tmp_path)
    xml, host = prep.platform.write(tmp_path)
    digests = []
    for shared in (False, True):
        work = tmp_path / str(shared)
        replay_ops(ops, xml, host, compute_speed(sc, prep.platform), config=prep.smpi_config(), timeout=120,
                   work=work, shared_trace=shared)
        digests.append(hashlib.sha256((work / "events.bin").read_bytes()).hexdigest())
        # one 24-byte record per replayed line: the operations without region markers, plus init and finalize
        assert np.fromfile(work / "events.bin", np.uint8).size == 24 * (2 * 16 + len(ops.take(np.flatnonzero(
            ~ops.mask(["enter", "leave"])))))
    assert digests[0] == digests[1]


def _limit_files(n: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


@pytest.mark.simgrid
def test_waitlab_run_of_64_ranks_works_under_ulimit_n_40(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "waitlab.cli", "run", str(scenario), "-o", str(out), "--no-png"],
                          capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limit_files(40))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "events.parquet").is_file()
    # the same limit stops a replay of one file per rank, with a message naming the limit
    code = ("import sys; from waitlab.simulator.limits import check_replay_limits\n"
            "check_replay_limits(64, per_rank_files=True)")
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         preexec_fn=lambda: _limit_files(40))
    assert bad.returncode != 0 and "ulimit -n" in bad.stderr


def test_estimate_counts_operations_and_checks_a_budget() -> None:

    sc = from_mapping({"scenario": {"name": "x", "ranks": 32, "seed": 1}, "platform": {"name": "dawning_5000a"},
                       "application": {"kind": "lared_s", "steps": 2}}, "x")
    prep = prepare(sc)
    ops = prep.source.operations(prep.platform, prep.smpi_config(), Path("/tmp"))
    est = estimate(prep)
    assert est.exact_events and est.events == len(ops) + 2 * 32  # + init and finalize per rank
    assert est.smpi_memory_bytes == SMPI_BASE_BYTES + 32 * SMPI_RANK_BYTES + SMPI_EVENT_BYTES * est.events
    assert est.scratch_bytes == SCRATCH_EVENT_BYTES * est.events  # a table this small is not spilled
    assert est.check(Budget(memory_bytes=est.memory_bytes, scratch_bytes=est.scratch_bytes)) is est
    tight = Budget(memory_bytes=est.memory_bytes - 1, seconds=est.seconds * 2)
    with pytest.raises(EnvironmentProblem, match="of memory"):
        est.check(tight)
    assert len(est.problems(tight)) == 1  # only the memory is over budget
    assert len(est.problems(Budget(scratch_bytes=0, seconds=0.0))) == 2
    # beyond EXACT_UP_TO ranks the operations per rank of the same scenario at 1,024 ranks are scaled
    small = prepare(sc.with_values({"scenario.ranks": 1024}))
    per_rank = len(small.source.operations(small.platform, small.smpi_config(), Path("/tmp"))) / 1024
    big = estimate(prepare(sc.with_values({"scenario.ranks": 20_000})))
    assert not big.exact_events
    assert big.events == round(per_rank * 20_000) + 40_000
    # a spilled table's columns are in the scratch folder too: their bytes per operation, counted from the table
    assert SCRATCH_SPILLED_OP_BYTES == sum(getattr(ops, c).dtype.itemsize for c in OpTable.COLUMNS)
    assert big.scratch_bytes == SCRATCH_EVENT_BYTES * big.events  # 1.1 M operations: held in memory
    spilled = estimate(prepare(sc.with_values({"scenario.ranks": 20_000, "application.steps": 20})))
    assert spilled.events - 40_000 > 1 << 22  # SPILL_MIN_OPS: memory-mapped from the scratch folder
    assert spilled.scratch_bytes == (SCRATCH_EVENT_BYTES * spilled.events
                                     + SCRATCH_SPILLED_OP_BYTES * (spilled.events - 40_000))


def test_the_estimates_in_docs_performance_are_the_models():
    """docs/performance.md's estimate table (memory, scratch, predicted time) is what ``estimate`` says today."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "performance.md").read_text()
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[3:6]]
            for r in text.splitlines() if r.startswith("| ") and " ranks x 20 steps" in r.split("|")[1]}
    cases = {"1,024 ranks x 20 steps": (1024, "dawning_5000a", {}),
             "16,384 ranks x 20 steps": (16_384, "dawning_5000a", {}),
             "163,840 ranks x 20 steps, Sunway, eager small messages":
                 (163_840, "sunway_taihulight", {"smpi/async-small-thresh": "65536"})}
    for title, (ranks, platform, config) in cases.items():
        sc = from_mapping({"scenario": {"name": "x", "ranks": ranks, "seed": 1}, "platform": {"name": platform},
                           "application": {"kind": "lared_s", "steps": 20}, "simulation": {"config": config}}, "x")
        est = estimate(prepare(sc))
        assert rows[title] == [_gib(est.memory_bytes), _gib(est.scratch_bytes), _duration(est.seconds)], title
