"""``computation = "counted"`` (issue 25): a program's own computation charged deterministically, from the basic
blocks it executed (GCC's -fsanitize-coverage=trace-pc), flops_per_block flops each."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from program_scenarios import PROGRAMS, program_scenario

from waitlab.errors import InputError
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None


def _data(tmp: Path, **app: Any) -> dict[str, Any]:
    return {"scenario": {"name": "c", "ranks": 2}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "program", "sources": [str(PROGRAMS / "counted.c")], **app}}


@pytest.mark.parametrize(("app", "needle"), [
    ({"computation": "counted"}, "give flops_per_block"),
    ({"flops_per_block": 2.0}, "only with it"),
    ({"computation": "counted", "flops_per_block": 0.0}, "flops_per_block"),
    ({"computation": "counted", "flops_per_block": float("inf")}, "flops_per_block"),
])
def test_counted_needs_a_positive_flops_per_block(tmp_path: Path, app: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle) as exc:
        from_mapping(_data(tmp_path, **app), str(tmp_path / "s.toml"))
    assert "\n" not in str(exc.value)


def test_counted_needs_sources(tmp_path: Path) -> None:
    (tmp_path / "prog").write_bytes(b"\x7fELF")
    data = _data(tmp_path, computation="counted", flops_per_block=1.0)
    data["application"].pop("sources")
    data["application"]["binary"] = str(tmp_path / "prog")
    with pytest.raises(InputError, match="needs the program's sources"):
        from_mapping(data, str(tmp_path / "s.toml"))


def _before_first_barrier(res: Any) -> np.ndarray:
    """Per rank: the computation before its first barrier (the counted loop)."""
    ev = res.events
    first = ev[ev["op"].astype(str) == "barrier"].groupby("rank")["enter"].min()
    c = ev[ev["kind"].astype(str) == "compute"]
    c = c[c["exit"] <= c["rank"].map(first)]
    return (c["exit"] - c["enter"]).groupby(c["rank"]).sum().to_numpy()


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_counted_compute_is_deterministic_and_proportional(tmp_path: Path) -> None:

    def run(fpb: float, sub: str) -> Any:
        (tmp_path / sub).mkdir()
        return simulate(program_scenario(tmp_path / sub, "counted.c", ranks=2, args=["200000"],
                                         computation="counted", flops_per_block=fpb))

    a, b, double = run(1000.0, "a"), run(1000.0, "b"), run(2000.0, "c")
    # same scenario: the same event table, to the last bit (no host timing involved)
    cols = ["rank", "op", "enter", "exit"]
    assert a.events[cols].equals(b.events[cols])
    # the program's loop costs time although it has no smpi_execute (under "none" it costs nothing)
    assert (_before_first_barrier(a) > 0).all()
    # flops are blocks x flops_per_block: twice the flops per block, twice the compute (before the 1 ms wait loop,
    # which runs until 1 ms has passed whatever the block cost)
    w1, w2 = _before_first_barrier(a), _before_first_barrier(double)
    np.testing.assert_allclose(w2, 2 * w1, rtol=1e-9)
    # rank 1 adds up twice as many numbers as rank 0: about twice the blocks (the loop dominates the count)
    assert w1[1] / w1[0] == pytest.approx(2.0, rel=0.01)
    # the MPI_Wtime loop ended: each MPI_Wtime call charged the loop's blocks, so time passed
    assert float(a.events["exit"].max()) > 1e-3
    # rank 0 waited at the first barrier for rank 1's extra computation
    assert a.waits[a.waits["pattern"].astype(str) == "wait_at_barrier"]["wait"].sum() > 0


def test_counted_scenario_round_trips_through_its_resolved_form(tmp_path: Path) -> None:
    sc = from_mapping(_data(tmp_path, computation="counted", flops_per_block=2.5), str(tmp_path / "s.toml"))
    again = from_mapping(sc.resolved(), str(tmp_path / "s.toml"))
    assert again.application.flops_per_block == 2.5 and again.hash() == sc.hash()
