"""End-to-end perturbation runs with real SimGrid SMPI (small: 2 to 8 ranks).

A test platform with exactly known figures: 1 Gflop/s single-core nodes, a
1 GB/s, 1 us crossbar, SMPI's correction factors off.  Expected times are
worked out by hand in the comments.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scenario_files import imbalance_toml, scenario_toml
from test_instrumentation import imbalanced  # the same 2-rank steps, declared once

from waitlab.cli import main
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.reproduce import okita_spilling as okita
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.ops import CAUSE_KINDS, OpBuilder, OpTable

pytestmark = pytest.mark.simgrid

PLATFORM = """
name = "exact_test"
[machine]
max_nodes = { value = 16, assumed = true, reason = "test" }
[node]
cores = { value = 1, assumed = true, reason = "test" }
core_speed = { value = 1.0e9, assumed = true, reason = "test" }
memory = { value = 1073741824, assumed = true, reason = "test" }
[intra_node]
bandwidth = { value = 1.0e9, assumed = true, reason = "test" }
latency = { value = 1.0e-6, assumed = true, reason = "test" }
[inter_node]
bandwidth = { value = 1.0e9, assumed = true, reason = "test" }
latency = { value = 1.0e-6, assumed = true, reason = "test" }
[topology]
kind = "crossbar"
[disk]
bandwidth = { value = 1.0e5, assumed = true, reason = "test: 1000 bytes take 10 ms" }
latency = { value = 0.0, assumed = true, reason = "test" }
[trace]
buffer_memory = { value = 1000000, assumed = true, reason = "test" }
"""

EPS = 1e-9


@pytest.fixture
def platform_file(tmp_path: Path) -> str:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")
    f = tmp_path / "exact.toml"
    f.write_text(PLATFORM)
    return str(f)


def scenario(platform: str, ranks: int, **sections: Any) -> Scenario:
    data: dict[str, Any] = {
        "scenario": {"name": "e2e", "ranks": ranks, "seed": 5},
        "platform": {"name": platform},
        "application": {"kind": "pingpong", "steps": 1},
        "simulation": {"config": {"smpi/bw-factor": "0:1", "smpi/lat-factor": "0:1"}, "timeout": 120.0},
        **sections,
    }
    return from_mapping(data, "<e2e>")


def late_sender_ops(x: float = 1.0, tail: float = 0.5) -> OpTable:
    """Rank 0 computes ``x`` s (region W) and sends 8 bytes; rank 1 receives, then both compute ``tail`` s."""
    b = OpBuilder(2)
    b.add("enter", 0, step=0, region="W")
    b.add("compute", 0, step=0, value=x, region="W")
    b.add("leave", 0, step=0, region="W")
    b.add("send", 0, step=0, peer=1, value=8)
    b.add("recv", 1, step=0, peer=0, value=8)
    b.add("compute", [0, 1], step=0, value=tail, region="T")
    return b.build()


def rows(ev: pd.DataFrame, rank: int, op: str) -> pd.DataFrame:
    return ev[(ev["rank"] == rank) & (ev["op"].astype(str) == op)]


def test_periodic_detour_lands_only_on_compute(platform_file: str) -> None:
    # 0.1 s detour every 1 s at t = 0.5 on both (single-core) nodes.
    # rank 0: compute [0, 1) is stalled 0.1 s -> exit 1.1; send; compute 0.5 s from 1.1 hits [1.5, 1.6) -> 1.7
    # rank 1: waits in recv during its detour at 0.5 (costs nothing), receives at 1.1 + ~1 us (8 B message),
    #         then computes 0.5 s from ~1.100001: hits [1.5, 1.6) too -> lasts 0.6 s
    sc = scenario(platform_file, 2, noise={"model": "periodic", "frequency": 1.0, "duration": 0.1, "phase": 0.5})
    res = run_pipeline(sc, ops=late_sender_ops()).perturbation
    ev = res.measured.events
    c0 = rows(ev, 0, "compute")
    assert c0["exit"].tolist() == pytest.approx([1.1, 1.7], abs=EPS)
    recv = rows(ev, 1, "recv").iloc[0]
    assert 1.1 + 1e-6 <= recv["exit"] <= 1.1 + 2e-6
    c1 = rows(ev, 1, "compute").iloc[0]
    assert c1["exit"] - c1["enter"] == pytest.approx(0.6, abs=EPS)
    # ledger: three hits of 0.1 s: rank 0 region W (step 0) and T, rank 1 T; nothing during the wait
    led = res.measured.ledger()
    noise = led[led["kind"] == "noise"].sort_values(["rank", "region"])
    assert noise[["rank", "region"]].values.tolist() == [[0, "T"], [0, "W"], [1, "T"]]
    assert noise["seconds"].tolist() == pytest.approx([0.1] * 3, abs=EPS)
    # the late-sender wait grows by the detour that hit the sender: 1.0 -> 1.1
    d = res.distortion
    ls = d[d["pattern"] == "late_sender"].iloc[0]
    assert ls["unperturbed"] == pytest.approx(1.0, abs=EPS) and ls["distortion"] == pytest.approx(0.1, abs=EPS)


def test_detour_stretch_equals_ledger_per_operation(platform_file: str) -> None:
    # 1 kHz, 20 us detours with a random phase per node: every compute lasts its value plus its noise hits
    sc = scenario(platform_file, 4, application={"kind": "stencil", "steps": 3, "dims": 1, "compute_seconds": 0.003,
                                                 "halo_bytes": 1024},
                  noise={"model": "periodic", "frequency": 1000.0, "duration": 2e-5, "phase": "random"})
    res = run_pipeline(sc).perturbation
    ev = res.measured.events
    comp = ev[ev["kind"].astype(str) == "compute"]
    stretch = (comp["exit"] - comp["enter"]).to_numpy() - 0.003
    assert (stretch > -EPS).all() and stretch.max() > 1e-5
    hits = res.noise_hits
    per_row = np.bincount(hits.row, weights=hits.seconds, minlength=len(res.measured.ops))
    op_rows = np.concatenate(([0], np.cumsum(res.measured.ops.per_rank_counts())[:-1]))[comp["rank"].to_numpy()] \
        + comp["seq"].to_numpy()
    assert per_row[op_rows] == pytest.approx(stretch, abs=1e-9)


def test_zero_rate_noise_gives_identical_event_tables(platform_file: str) -> None:
    app = {"kind": "stencil", "steps": 2, "dims": 1, "compute_seconds": 0.002, "halo_bytes": 512}
    quiet = run_pipeline(scenario(platform_file, 4, application=app,
                                   noise={"model": "poisson", "rate": 0.0, "duration": 1e-3})).perturbation
    zero_f = run_pipeline(scenario(platform_file, 4, application=app,
                                    noise={"model": "periodic", "frequency": 0.0, "duration": 1e-3})).perturbation
    pd.testing.assert_frame_equal(quiet.measured.events, quiet.unperturbed.events)
    pd.testing.assert_frame_equal(zero_f.measured.events, quiet.unperturbed.events)
    assert quiet.report["makespan"]["difference"] == 0.0 and quiet.noise_hits.total() == 0.0


def test_equal_overhead_on_both_sides_keeps_waits(platform_file: str) -> None:
    # Both ranks run region W (rank 0 for 1 s, rank 1 for 0.5 s) and record its enter and leave (0.25 s each):
    # two records, 0.5 s, before the send and before the receive.
    b = OpBuilder(2)
    b.add("enter", [0, 1], step=0, region="W")
    b.add("compute", [0, 1], step=0, value=[1.0, 0.5], region="W")
    b.add("leave", [0, 1], step=0, region="W")
    b.add("send", 0, step=0, peer=1, value=8)
    b.add("recv", 1, step=0, peer=0, value=8)
    sc = scenario(platform_file, 2, instrumentation={"events": "regions", "record_bytes": 0, "fixed_cost": 0.25})
    res = run_pipeline(sc, ops=b.build()).perturbation
    assert res.condition_c.holds and res.condition_c.pairs == 1
    # late sender: unperturbed 1.0 - 0.5 = 0.5; measured (1.0 + 0.5) - (0.5 + 0.5) = 0.5: no distortion
    d = res.distortion
    assert d["unperturbed"].tolist() == pytest.approx([0.5], abs=EPS)
    assert d["distortion"].abs().max() == pytest.approx(0.0, abs=EPS)
    assert res.report["makespan"]["difference"] == pytest.approx(0.5, abs=EPS)


def test_overhead_before_one_send_grows_the_late_sender_wait(platform_file: str) -> None:
    sc = scenario(platform_file, 2, instrumentation={"events": "mpi", "only": ["send"], "where": "before",
                                                     "record_bytes": 0, "fixed_cost": 0.25})
    res = run_pipeline(sc, ops=late_sender_ops()).perturbation
    d = res.distortion
    ls = d[d["pattern"] == "late_sender"].iloc[0]
    assert (ls["rank"], ls["unperturbed"]) == (1, pytest.approx(1.0, abs=EPS))
    assert ls["distortion"] == pytest.approx(0.25, abs=EPS)
    cc = res.condition_c
    assert cc.violating_pairs == 1 and cc.max_difference == pytest.approx(0.25, abs=EPS)
    assert (cc.first["rank"], cc.first["op"], cc.first["peer_rank"]) == (0, "send", 1)
    led = res.measured.ledger()
    assert led[led["kind"] == "overhead"]["seconds"].tolist() == [0.25]


def test_per_rank_flush_on_imbalanced_growth_breaks_c_at_step_2(platform_file: str) -> None:
    # Rank 0 records 4 x 100 B per step (enter A, leave A, send, barrier), rank 1 2 x 100 B (recv, barrier).
    # Buffers of 1000 B: rank 0's send record of step 2 does not fit (900 + 100 after leave A -> 1000, + 100):
    # it flushes 1000 B (10 ms at 1e5 B/s) right after that send; rank 1 never flushes in 4 steps (800 B).
    # Records cost nothing, so the flush is the only overhead: C first breaks at the barrier of step 2.
    sc = scenario(platform_file, 2, instrumentation={"events": "all", "only": ["A", "send", "recv", "barrier"],
                                                     "record_bytes": 100},
                  tracing={"policy": "per_rank", "buffer_bytes": 1000})
    res = run_pipeline(sc, ops=imbalanced(steps=4)).perturbation  # region A on rank 0, send 0 -> 1, barrier
    cc = res.condition_c
    assert not cc.holds
    first = cc.first
    ev = res.measured.events
    step_of = ev.set_index(["rank", "seq"])["step"]
    assert (first["kind"], first["rank"], first["op"], first["peer_rank"]) == ("collective", 0, "barrier", 1)
    assert step_of[(first["rank"], first["seq"])] == 2
    assert first["difference"] == pytest.approx(0.01, abs=EPS)
    # the step-3 message is the violating pair: 1 of 4; the step-2 and step-3 barriers: 2 of 4
    assert (cc.violating_pairs, cc.pairs, cc.violating_collectives, cc.collectives) == (1, 4, 2, 4)
    assert res.report["spill"]["individual_flushes"] == 1
    led = res.measured.ledger()
    assert led[led["kind"] == "flush"]["seconds"].tolist() == pytest.approx([0.01])
    assert set(led["kind"]) <= set(CAUSE_KINDS)


def test_okita_table1_first_row() -> None:
    """R = 128 MB (1024 round trips): S, S_i, S_f within 10 % of Okita et al. table 1 (2.65, 3.11, 3.09 s)."""
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")

    res = okita.reproduce(points=(128,))
    row = res.table.iloc[0]
    for v, paper in zip(("S", "S_i", "S_f"), (2.65, 3.11, 3.09), strict=True):
        assert row[f"{v}_paper"] == paper
        assert abs(row[f"{v}_ours"] / paper - 1) <= 0.10
    # no f call yet (the first is after 4096 round trips) and nothing swapped
    assert row["S_f_flushes"] == 0 and row["S_i_swap_MB"] == 0
    assert res.checks == {"times_within_10pct": True}


def test_cli_run_writes_the_report_and_check_c(platform_file: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:

    toml = tmp_path / "s.toml"
    toml.write_text(scenario_toml("cli", 4, 'kind = "stencil"\nsteps = 3\ndims = 1\ncompute_seconds = 0.002\n'
                                  "halo_bytes = 512", platform=platform_file,
                                  more=imbalance_toml("1", 0.001) + '[instrumentation]\nevents = "mpi"\n'
                                  'record_bytes = 200\nfixed_cost = 1e-5\n[tracing]\npolicy = "per_rank"\n'
                                  "buffer_bytes = 1000"))
    out = tmp_path / "out"
    assert main(["run", str(toml), "-o", str(out), "--no-png"]) == 0
    for f in ("perturbation.txt", "perturbation.json", "distortion.parquet", "buffer.parquet", "events.parquet",
              "unperturbed/events.parquet", "condition_c_violations.parquet"):
        assert (out / f).exists(), f
    text = capsys.readouterr().out
    assert "condition C (all tracer overhead): violated" in text
    assert main(["check-c", str(out), "--strict"]) == 1
    assert "first break at rank" in capsys.readouterr().out
    assert main(["check-c", str(out / "unperturbed" / "events.csv"), "--strict"]) == 0
    toml.write_text(toml.read_text().replace('"per_rank"', '"scorep"'))
    assert main(["run", str(toml), "-o", str(tmp_path / "bad")]) == 2
    assert "tracing.policy: unknown value" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
