"""Acceptance (issue 9, item 2): gatherv and scatterv rooted at rank 2, through a TI trace and real SMPI.

Hosts compute at 1 Gflop/s, so ``compute F`` takes F/1e9 s and every rank's enter time into the collective is
known by hand; the waits below are computed from those enter times alone (DESIGN.md section 5).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SPEED, Replayer

from waitlab.simulator.ti_trace import parse_ti_trace

COUNTS = [8, 16, 24, 32]  # bytes each rank contributes (gatherv) or gets (scatterv)
ROOT = 2


def _trace(tmp_path: Path, compute_s: list[float], line: str) -> Path:
    path = tmp_path / "trace.txt"
    path.write_text("".join(f"{r} init\n{r} compute {c * SPEED:.0f}\n{r} {line.format(r=r, mine=COUNTS[r])}\n"
                            f"{r} finalize\n" for r, c in enumerate(compute_s)))
    return path


@pytest.mark.simgrid
def test_gatherv_rooted_at_2_early_reduce_and_bytes(tmp_path: Path, replay: Replayer) -> None:
    # enter times 0.5, 4, 1 (root), 2: the root waits for rank 1, the latest sender: 4 - 1 = 3 s
    counts = " ".join(map(str, COUNTS))
    parsed = parse_ti_trace(_trace(tmp_path, [0.5, 4.0, 1.0, 2.0], f"gatherv {{mine}} {counts} {ROOT} 6 6"),
                            flops_per_second=SPEED)
    ev, ws = replay(parsed.ops, vectors=parsed.vectors)
    g = ev[ev["op"] == "gatherv"].sort_values("rank")
    assert g["enter"].tolist() == pytest.approx([0.5, 4.0, 1.0, 2.0], abs=1e-9)
    assert g["peer"].tolist() == [ROOT] * 4
    assert g["bytes"].tolist() == COUNTS  # every rank sends its own block
    assert g["recv_bytes"].tolist() == [0, 0, sum(COUNTS), 0]  # only the root receives
    assert len(ws) == 1
    w = ws.iloc[0]
    assert (w["rank"], w["pattern"], w["op"], w["peer_rank"]) == (ROOT, "early_reduce", "gatherv", 1)
    assert w["wait"] == pytest.approx(3.0, abs=1e-9)


@pytest.mark.simgrid
def test_scatterv_rooted_at_2_late_broadcast_and_bytes(tmp_path: Path, replay: Replayer) -> None:
    # enter times 1, 0.5, 3 (root), 2: non-roots wait for the root: 3-1 = 2, 3-0.5 = 2.5, 3-2 = 1 s
    counts = " ".join(map(str, COUNTS))
    parsed = parse_ti_trace(_trace(tmp_path, [1.0, 0.5, 3.0, 2.0], f"scatterv {counts} {{mine}} {ROOT} 6 6"),
                            flops_per_second=SPEED)
    ev, ws = replay(parsed.ops, vectors=parsed.vectors)
    s = ev[ev["op"] == "scatterv"].sort_values("rank")
    assert s["peer"].tolist() == [ROOT] * 4
    assert s["bytes"].tolist() == [0, 0, sum(COUNTS), 0]  # only the root sends
    assert s["recv_bytes"].tolist() == COUNTS
    got = {int(r): (p, float(w), int(q)) for r, p, w, q in ws[["rank", "pattern", "wait", "peer_rank"]].itertuples(
        index=False)}
    assert set(got) == {0, 1, 3}
    for rank, expected in {0: 2.0, 1: 2.5, 3: 1.0}.items():
        pattern, wait, peer = got[rank]
        assert (pattern, peer) == ("late_broadcast", ROOT)
        assert wait == pytest.approx(expected, abs=1e-9)
