"""Alltoall guards, send-order contention and the Rao et al. reproduction helpers."""

from __future__ import annotations

import math
import shutil
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest
from pandas import testing as pd_testing

import waitlab.experiments.reproduce.alltoall_points as points
import waitlab.simulator.smpi as smpi
from waitlab.cli import main as cli_main
from waitlab.errors import InputError, SimulationError
from waitlab.experiments.reproduce import rao_alltoall
from waitlab.experiments.reproduce.alltoall_points import alltoall_point
from waitlab.experiments.reproduce.rao_statements import STATEMENTS, judge
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.alltoall import check_alltoall_point, mesh_shape
from waitlab.models.columns import frame
from waitlab.models.ops import OpBuilder
from waitlab.platforms import load_platform, render_platform
from waitlab.simulator.replay import replay_ops

needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")


@pytest.mark.parametrize(("algorithm", "ranks", "largest_ok"), [
    ("rdb", 64, 2**31 // 64**2 - 1),  # p^2 n < 2^31
    ("rdb", 256, 2**31 // 256**2 - 1),
    ("2dmesh", 256, 2**31 // (256 * 16) - 1),  # mesh 16 x 16: n p Y < 2^31
    ("3dmesh", 128, 2**31 // (128 * 8 * 8) - 1),  # mesh 8 x 8 x 2: n p X Y < 2^31
    ("bruck", 1024, 2**31 // 1024 - 1),  # p n < 2^31
])
def test_overflow_bounds_by_hand(algorithm: str, ranks: int, largest_ok: int) -> None:
    check_alltoall_point(algorithm, ranks, largest_ok)
    with pytest.raises(InputError) as exc:
        check_alltoall_point(algorithm, ranks, largest_ok + 1)
    assert algorithm in str(exc.value) and "2^31" in str(exc.value)


def test_mesh_shapes_follow_simgrid() -> None:
    assert mesh_shape("2dmesh", 64) == (8, 8) and mesh_shape("2dmesh", 128) == (8, 16)
    assert mesh_shape("3dmesh", 64) == (4, 4, 4) and mesh_shape("3dmesh", 256) == (8, 8, 4)


def test_other_algorithms_are_never_refused_at_paper_sizes() -> None:
    for algorithm in ("ring", "pair", "basic_linear", "lam_simple"):
        check_alltoall_point(algorithm, 1024, 512 * 1024)
    with pytest.raises(InputError):
        check_alltoall_point("pair", 96, 512)  # not a power of two


@needs_simgrid
@pytest.mark.simgrid
def test_guarded_point_really_overflows_in_simgrid(monkeypatch: pytest.MonkeyPatch) -> None:
    # without the guard, rdb at 64 ranks and 512 KiB (64^2 x 2^19 = 2^31) aborts SimGrid 3.32
    monkeypatch.setattr(points, "check_alltoall_point", lambda *a: None)
    with pytest.raises(SimulationError):
        alltoall_point("dawning_5000a", "rdb", 64, 512 * 1024, model="smpi-default", timeout=120)


@needs_simgrid
@pytest.mark.simgrid
def test_lam_simple_differs_from_native_only_with_send_order_costs() -> None:
    args = ("deepcomp_7000", 32, 4096)
    before = [alltoall_point(args[0], a, args[1], args[2], model="smpi-default").seconds
              for a in ("basic_linear", "lam_simple")]
    assert before[0] == pytest.approx(before[1], rel=1e-9)  # the old model: bit-identical
    native, lam = (alltoall_point(args[0], a, args[1], args[2]).seconds for a in ("basic_linear", "lam_simple"))
    assert lam > 1.05 * native  # every rank starting with rank 0 makes one node's NIC the bottleneck


def test_statements_are_judged_from_the_table() -> None:
    assert len(STATEMENTS) == 18  # sections 5.1-5.4 and the abstract (rao_statements docstring)
    # a table where nothing differs cannot make an ordering statement hold

    rows = [{"platform": p, "algorithm": a, "ranks": r, "size": s, "seconds": 1.0}
            for p in ("dawning_5000a", "deepcomp_7000")
            for a in ("2dmesh", "3dmesh", "bruck", "basic_linear", "pair", "rdb", "ring", "lam_simple")
            for r in (64, 128, 256) for s in (512, 2048, 4096, 16384, 65536, 131072, 262144, 524288)]
    verdicts = judge(pd.DataFrame(rows))
    assert (verdicts["verdict"] != "holds").all()


def test_scenario_refuses_an_overflowing_alltoall_point() -> None:

    base = {"scenario": {"name": "a2a", "ranks": 256}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "fft", "bytes_per_peer": 65536}}
    with pytest.raises(InputError) as exc:  # 256^2 x 65536 = 2^32 >= 2^31
        from_mapping({**base, "simulation": {"alltoall": "rdb"}}, "a2a.toml")
    msg = str(exc.value)
    assert exc.value.field == "simulation.alltoall" and "'rdb'" in msg and "2^31" in msg and "32767 B" in msg
    # the application's own algorithm is checked too; the bound is 2^31 / (256 x 16) for a 16 x 16 mesh
    app = {**base["application"], "alltoall_algorithm": "2dmesh", "bytes_per_peer": 2**31 // (256 * 16)}
    with pytest.raises(InputError) as exc:
        from_mapping({**base, "application": app}, "a2a.toml")
    assert exc.value.field == "application.bytes_per_peer" and "'2dmesh'" in str(exc.value)
    from_mapping({**base, "application": {**app, "bytes_per_peer": 2**31 // (256 * 16) - 1}}, "a2a.toml")
    from_mapping({**base, "simulation": {"alltoall": "ring"}}, "a2a.toml")  # ring keeps sizes in size_t


def test_refused_and_failed_points_are_never_results(monkeypatch: pytest.MonkeyPatch) -> None:


    def fake(platform: str, algorithm: str, ranks: int, size: int, timeout: float = 0.0) -> points.AlltoallPoint:
        check_alltoall_point(algorithm, ranks, size)
        if algorithm == "basic_linear":
            raise SimulationError("smpirun crashed: Cannot saturate more a constraint")
        return points.AlltoallPoint(platform, algorithm, ranks, size, "calibrated", 1e-3, 0.0)

    monkeypatch.setattr(rao_alltoall, "alltoall_point", fake)
    grid = {"platforms": ("dawning_5000a",), "algorithms": ("rdb", "basic_linear", "ring"), "sizes": (524288,),
            "ranks": (64,)}
    res = rao_alltoall.reproduce(grid)
    status = dict(zip(res.table["algorithm"], res.table["status"], strict=True))
    assert status == {"rdb": "refused", "basic_linear": "failed", "ring": "ok"}
    bad = res.table[res.table["status"] != "ok"]
    assert all(math.isnan(x) for x in bad["seconds"])
    assert "2^31" in res.table.set_index("algorithm").loc["rdb", "note"]


@needs_simgrid
@pytest.mark.simgrid
def test_one_nic_per_node_carries_the_mpi_level_bandwidth_in_aggregate(tmp_path: object) -> None:
    # 8 ranks of node 0 each send 1 MiB to their partner on node 1 at once.  The NIC is shared: by hand,
    # 8 x (2^20 + 16) B at Dawning's MPI-level 1.5 GB/s (platform file) = 5.59 ms, not the 3.36 ms that the
    # 2.5 GB/s signalling rate would give, nor the 0.70 ms of eight independent 1.5 GB/s flows.


    rp = render_platform(load_platform("dawning_5000a"), 16, ranks_per_node=8)
    b = OpBuilder(n_ranks=16)
    b.add("barrier", np.arange(16, dtype=np.int32), step=0)
    senders, receivers = np.arange(8, dtype=np.int32), np.arange(8, 16, dtype=np.int32)
    b.add("irecv", receivers, step=1, value=2**20, peer=senders, tag=1)
    b.add("isend", senders, step=1, value=2**20, peer=receivers, tag=1)
    b.add("waitall", np.arange(16, dtype=np.int32), step=1)
    xml, hostfile = rp.write(str(tmp_path))
    rep = replay_ops(b.build(), xml, hostfile, rp.core_speed, config={**rp.smpi_config, **points.SOLVER_CONFIG},
                     timeout=60, what="NIC aggregate")
    ev = frame(rep.events)
    elapsed = float(ev["exit"].max()) - float(ev.loc[ev["op"] == "barrier", "exit"].max())
    assert elapsed == pytest.approx(8 * (2**20 + 16) / 1.5e9, rel=0.03)


def _judged_on(grid: dict[str, object]) -> set[str]:
    """Keys of the statements a table of exactly ``grid``'s points leaves "not run" (times are arbitrary)."""

    pts = rao_alltoall._points(dict(grid))
    rng = np.random.default_rng(22)
    table = pd.DataFrame([{"platform": p, "algorithm": a, "ranks": r, "size": s, "status": "ok",
                           "seconds": float(rng.uniform(1e-4, 1e-1))} for p, a, r, s in pts])
    verdicts = judge(table)
    return set(verdicts.loc[verdicts["verdict"] == "not run", "key"])


def test_statement_grid_runs_every_statement_and_the_default_leaves_out_statements_12_to_15() -> None:
    keys = [st.key for st in STATEMENTS]
    assert _judged_on(rao_alltoall.DEFAULT_SUBSET) == set(keys[11:15])  # statements 12-15 (1-based)
    assert _judged_on(rao_alltoall.STATEMENT_GRID) == set()
    extra = len(rao_alltoall._points(dict(rao_alltoall.STATEMENT_GRID))) - len(
        rao_alltoall._points(dict(rao_alltoall.DEFAULT_SUBSET)))
    # at 256 ranks 5 x 2 + 2 + 4 points, of which pair and ring (4 + 2) already run in the default
    assert extra == (10 - 4) + 2 + (4 - 2)
    # the default runs statement 11's points: MPICH native at 128 ranks, every size
    assert {(a, r) for _, a, r, _ in rao_alltoall._points(dict(rao_alltoall.DEFAULT_SUBSET))} >= {
        ("basic_linear", 128)}


def test_points_on_an_executor_give_the_sequential_table(monkeypatch: pytest.MonkeyPatch) -> None:

    def fake(platform: str, algorithm: str, ranks: int, size: int, timeout: float = 0.0) -> points.AlltoallPoint:
        check_alltoall_point(algorithm, ranks, size)
        if algorithm == "pair" and size == 512:
            raise SimulationError("smpirun crashed")
        # a time that depends on the point only, and points that finish out of order
        return points.AlltoallPoint(platform, algorithm, ranks, size, "calibrated", ranks * 1e-6 + size * 1e-9,
                                    0.0)

    monkeypatch.setattr(rao_alltoall, "alltoall_point", fake)
    grid = {"platforms": ("dawning_5000a",), "algorithms": ("rdb", "basic_linear", "pair", "ring"),
            "sizes": (512, 524288), "ranks": (64,), "extra": (("dawning_5000a", 128, ("ring",)),)}
    seq = rao_alltoall.reproduce(grid)
    lines: list[str] = []
    with ThreadPoolExecutor(3) as ex:
        par = rao_alltoall.reproduce(grid, executor=ex, progress=lines.append)
    pd_testing.assert_frame_equal(seq.table, par.table)
    pd_testing.assert_frame_equal(seq.verdicts, par.verdicts)
    assert len(lines) == len(seq.table)
    assert set(par.table["status"]) == {"ok", "failed", "refused"}  # rdb at 512 KB x 64 ranks overflows


def test_a_worker_that_dies_fails_its_point_only(monkeypatch: pytest.MonkeyPatch) -> None:

    class DyingWorkers(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            if args[1] == "pair":  # as PointProcesses reports a child that died
                fut: Future[object] = Future()
                fut.set_exception(SimulationError("the worker process ended with signal 9"))
                return fut
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(rao_alltoall, "alltoall_point", lambda p, a, r, s, timeout=0.0: points.AlltoallPoint(
        p, a, r, s, "calibrated", 1e-3, 0.0))
    grid = {"platforms": ("dawning_5000a",), "algorithms": ("pair", "ring"), "sizes": (512,), "ranks": (64,)}
    with DyingWorkers(2) as ex:
        res = rao_alltoall.reproduce(grid, executor=ex)
    status = dict(zip(res.table["algorithm"], res.table["status"], strict=True))
    assert status == {"pair": "failed", "ring": "ok"}
    assert "signal 9" in res.table.set_index("algorithm").loc["pair", "note"]


@needs_simgrid
@pytest.mark.simgrid
def test_huge_pages_change_no_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert smpi.SIMGRID_ENV == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    with_pages = alltoall_point("dawning_5000a", "basic_linear", 16, 4096).seconds
    monkeypatch.setattr(smpi, "SIMGRID_ENV", {})
    assert alltoall_point("dawning_5000a", "basic_linear", 16, 4096).seconds == with_pages  # memory placement only


def test_cli_statements_flag_runs_the_statement_grid(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:

    seen: list[object] = []

    def fake(grid: object = None, **_: object) -> rao_alltoall.RaoResult:
        seen.append(grid)
        return rao_alltoall.RaoResult(pd.DataFrame(columns=["platform", "algorithm", "ranks", "size", "status",
                                                            "seconds", "wall", "note"]),
                                      pd.DataFrame({"verdict": []}), {}, 0.0)

    monkeypatch.setattr(rao_alltoall, "reproduce", fake)
    monkeypatch.setattr(rao_alltoall, "write", lambda *a, **k: None)
    monkeypatch.setattr(rao_alltoall, "markdown", lambda res: "")
    for flags, want in (([], None), (["--statements"], rao_alltoall.STATEMENT_GRID),
                        (["--full"], rao_alltoall.FULL_GRID)):
        assert cli_main(["reproduce", "rao-alltoall", "-o", str(tmp_path), "--no-png", *flags]) == 0
        assert seen.pop() is want
