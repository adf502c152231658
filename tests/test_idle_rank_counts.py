"""A rank without any event (a trace rank that only calls init and finalize) still counts: the summary's ranks and
idle total, and the critical path's mean per rank (Scalasca averages over every process), by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import waitlab
from waitlab.models.analysis.critical_path import critical_path
from waitlab.models.analysis.waitstates import make_events, wait_states


def test_critical_path_mean_counts_ranks_without_events():
    # rank 0 computes 1 s then sends; rank 1 receives (waits 1 s); rank 2 has no event in the table
    ev = make_events(rank=[0, 0, 1], op=["compute", "send", "recv"], enter=[0.0, 1.0, 0.0], exit=[1.0, 1.0, 1.0],
                     match=[-1, 0, 0], done=[-1, 1, 2], peer=[-1, 1, 0])
    cp = critical_path(ev, wait_states(ev), n_ranks=3)
    row = cp.by_region.set_index("region").loc["compute"]
    assert row["mean_per_rank"] == pytest.approx(1.0 / 3)  # 1 s of compute over 3 ranks
    assert row["imbalance"] == pytest.approx(1.0 - 1.0 / 3)
    assert critical_path(ev, wait_states(ev)).by_region.set_index("region").loc["compute", "mean_per_rank"] == \
        pytest.approx(0.5)  # without n_ranks: the ranks up to the highest one in the table


@pytest.mark.simgrid
def test_summary_counts_a_rank_without_events(tmp_path: Path):
    # okita_myrinet computes 1e9 flops in 1 s (core speed 1 Gflop/s): rank 1 waits ~1 s, rank 2 idles ~1 s
    (tmp_path / "r0.txt").write_text("0 compute 1e9\n0 send 1 0 8 6\n")
    (tmp_path / "r1.txt").write_text("1 recv 0 0 8 6\n")
    (tmp_path / "r2.txt").write_text("2 init\n2 finalize\n")
    (tmp_path / "index.txt").write_text("r0.txt\nr1.txt\nr2.txt\n")
    (tmp_path / "s.toml").write_text('[scenario]\nname = "idle"\nranks = 3\n[platform]\nname = "okita_myrinet"\n'
                                     '[application]\nkind = "trace"\ntrace = "index.txt"\n')
    res = waitlab.run(tmp_path / "s.toml", tmp_path / "out", png=False).result
    s = res.summary
    assert s["ranks"] == 3
    makespan = s["makespan"]
    assert makespan == pytest.approx(1.0, abs=1e-3)
    # rank 2 idles the whole makespan, rank 0 and 1 almost nothing
    assert s["totals"]["idle"] == pytest.approx(makespan, rel=1e-3)


def test_critical_path_of_a_nonblocking_barrier_is_not_longer_than_the_run():
    # ranks 0, 1 wait in the barrier's completion from 0.011 to 0.201; rank 2 posted it at 0.201 (not in the table),
    # computed 0.01 more and entered its completion at 0.211. Rank 0 then computes to 0.4: the path is rank 2 up to
    # its post (0.201) and rank 0 after the barrier (0.199), 0.4 s: the 0.01 s after rank 2's post is not counted
    ev = make_events(rank=[0, 0, 0, 1, 1, 1, 2, 2, 2], op=["compute", "barrier", "compute"] * 3,
                     enter=[0.0, 0.011, 0.201, 0.0, 0.011, 0.201, 0.0, 0.211, 0.211],
                     exit=[0.011, 0.201, 0.4, 0.011, 0.201, 0.25, 0.211, 0.211, 0.212],
                     match=[-1, 0, -1] * 3)
    ws = wait_states(ev)
    assert sorted(ws["wait"].round(9).tolist()) == [0.19, 0.19]  # ranks 0, 1: min(0.211, 0.201) - 0.011
    cp = critical_path(ev, ws, n_ranks=3)
    assert cp.makespan == pytest.approx(0.4)
    assert cp.length == pytest.approx(0.4)
