"""Round 21, perturbation: refusals and messages of [noise], [instrumentation], [tracing] and check-c (pure, no SMPI).

Every expected number is worked out by hand in the comments.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.experiments.perturbation import noise_config, parse_perturbation
from waitlab.experiments.schema import validate_section
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.perturb.condition_c import EVENT_KINDS, check_condition_c, kinds_problem
from waitlab.models.perturb.detours import normalize
from waitlab.models.perturb.instrumentation import Instrumentation, select_records
from waitlab.models.perturb.noise import PeriodicNoise, SignatureNoise
from waitlab.models.perturb.noise_hits import noise_hits
from waitlab.models.perturb.spill_policies import SwapOutF
from waitlab.models.perturb.stage import PlatformFacts, perturb_ops
from waitlab.models.perturb.tracebuffer import BufferOverflow, BufferSpec, Stream, SyncPoints
from waitlab.simulator.timeline import KINDS


def facts(n: int = 2) -> PlatformFacts:
    return PlatformFacts(n_ranks=n, ranks_per_node=1, core_speed=1e9, host_of_rank=tuple(f"h{i}" for i in range(n)),
                         node_of_rank=np.arange(n, dtype=np.int64), node_memory=1e12, disk_bandwidth=1e6,
                         disk_latency=0.0)


def two_ranks(steps: int = 3) -> OpTable:
    """Rank 0 sends to rank 1 every step, then both barrier."""
    b = OpBuilder(2)
    for s in range(steps):
        b.add("compute", 0, step=s, value=0.01)
        b.add("send", 0, step=s, peer=1, value=1000)
        b.add("recv", 1, step=s, peer=0, value=1000)
        b.add("barrier", [0, 1], step=s)
    return b.build()


def tracing(**tr: object) -> dict[str, object]:
    return {"instrumentation": {"events": "mpi", "record_bytes": 100},
            "tracing": {"disk_bandwidth": 1e6, "disk_latency": 0.0, **tr}}


# ---- bug 1: swapout_f and buffer_bytes ------------------------------------------------------------------------


def test_swapout_f_plan_refuses_an_interval_larger_than_the_buffer() -> None:
    # rank 0: 300 B records at keys 50, 150, 250, 350; collectives at 100, 200, 300, 400.  f every 2 points: at
    # points 1 and 3, so rank 0 records 2 x 300 = 600 B before the f call at point 1: more than a 500 B buffer
    s = Stream.build(2, [0] * 4 + [1] * 4, [50, 150, 250, 350] * 2, [300.0] * 4 + [100.0] * 4)
    pts = SyncPoints(2, np.array([0, 1] * 4), np.repeat(np.arange(4), 2), np.repeat([100, 200, 300, 400], 2))
    spec = BufferSpec(memory=1e9, buffer_bytes=500.0, flush_rate=1e6)
    with pytest.raises(BufferOverflow) as exc:
        SwapOutF(tau=1.0, every=2).plan(s, spec, pts, SyncPoints.none(2))
    assert (exc.value.rank, exc.value.point, exc.value.nbytes, exc.value.every) == (0, 1, 600.0, 2)
    # 600 B fit a 600 B buffer
    fl = SwapOutF(tau=1.0, every=2).plan(s, BufferSpec(memory=1e9, buffer_bytes=600.0, flush_rate=1e6), pts,
                                         SyncPoints.none(2))
    assert fl.rank.tolist() == [0, 0, 1, 1]
    # every = 3 of 4 points: one f call, at point 2, after 3 x 300 = 900 B; 300 B after it: a 900 B buffer fits
    fl = SwapOutF(tau=1.0, every=3).plan(s, BufferSpec(memory=1e9, buffer_bytes=900.0, flush_rate=1e6), pts,
                                         SyncPoints.none(2))
    assert fl.point.tolist() == [2, 2]


def test_swapout_f_tail_after_the_last_f_call_must_fit() -> None:
    # one point at key 100: rank 0 records 300 B before it and 2 x 300 B after it (keys 150, 250)
    s = Stream.build(1, [0, 0, 0], [50, 150, 250], [300.0] * 3)
    pts = SyncPoints(1, np.array([0]), np.array([0]), np.array([100]))
    with pytest.raises(BufferOverflow) as exc:
        SwapOutF(tau=1.0).plan(s, BufferSpec(memory=1e9, buffer_bytes=500.0, flush_rate=1e6), pts, SyncPoints.none(1))
    assert (exc.value.point, exc.value.nbytes) == (-1, 600.0)


def test_perturb_ops_refuses_swapout_f_overflow_with_a_fix() -> None:
    ops = two_ranks(3)
    # records after the call: rank 0 sends (key after send) and barriers: 100 B before barrier 0 (the send), then
    # between barriers k-1 and k: barrier record + send record = 200 B.  every = 2 with 250 B: 400 B -> refused,
    # every = 1 fits (200 B <= 250 B)
    cfg = parse_perturbation(tracing(policy="swapout_f", buffer_bytes=250.0, every=2))
    with pytest.raises(InputError) as exc:
        perturb_ops(ops, cfg, facts(), seed=0)
    assert exc.value.field == "tracing.every" and "more than buffer_bytes = 250" in exc.value.problem
    assert exc.value.fix.startswith("use every = 1 ")
    # buffer 150 B: no every works (200 B between two barriers) -> buffer_bytes, and "auto" says it finds none
    for every in (1, "auto"):
        cfg = parse_perturbation(tracing(policy="swapout_f", buffer_bytes=150.0, every=every))
        with pytest.raises(InputError) as exc:
            perturb_ops(ops, cfg, facts(), seed=0)
        assert exc.value.field == "tracing.buffer_bytes" and "use buffer_bytes >= 200" in exc.value.fix
        assert ('"auto" finds no interval' in exc.value.problem) == (every == "auto")
    # 200 B buffer: every = "auto" -> 1, runs
    p = perturb_ops(ops, parse_perturbation(tracing(policy="swapout_f", buffer_bytes=200.0, every="auto")), facts(),
                    seed=0)
    assert p.state is not None and float(p.state.peak.max()) <= 200.0


# ---- bug 2: a buffer smaller than one record ------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["per_rank", "vampir_sync", "padded_sync", "predictive_sync", "swapout_f"])
def test_buffer_smaller_than_a_record_is_refused(policy: str) -> None:
    extra = {"tau": 1.0} if policy == "swapout_f" else {}
    cfg = parse_perturbation(tracing(policy=policy, buffer_bytes=10.0, **extra))
    with pytest.raises(InputError) as exc:
        perturb_ops(two_ranks(2), cfg, facts(), seed=0)
    assert exc.value.field == "tracing.buffer_bytes"
    assert "100-byte record" in exc.value.problem and exc.value.fix == "use buffer_bytes >= 100"


# ---- bug 3 and 5: check-c kinds ------------------------------------------------------------------------------


def _events() -> object:
    return make_events(rank=[0, 0, 1], op=["overhead", "send", "recv"], enter=[0.0, 0.5, 0.0], exit=[0.5, 0.5, 0.5],
                       match=[-1, 0, 0], kind=["overhead", "mpi", "mpi"])


def test_check_condition_c_refuses_unknown_kinds() -> None:
    assert set(EVENT_KINDS) >= {"overhead", "swap", "flush", "delay", "noise", "mpi", "region"}
    assert kinds_problem(("overhead", "delay")) == ""
    assert kinds_problem(("bogus",)).startswith("'bogus' is not an event kind")
    assert kinds_problem(()).startswith("names no event kind")
    for kinds in (("bogus",), ()):
        with pytest.raises(ValueError):
            check_condition_c(_events(), kinds=kinds)  # type: ignore[arg-type]
    assert check_condition_c(_events(), kinds=("overhead",)).violating_pairs == 1  # type: ignore[arg-type]


def test_event_kinds_are_the_event_tables() -> None:

    assert set(EVENT_KINDS) == set(KINDS)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "waitlab", *args], capture_output=True, text=True, timeout=120)


def test_cli_check_c_kinds_and_hint(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    ev = _events()
    ev["seq"] = [0, 1, 0]  # type: ignore[index]
    ev.to_csv(path, index=False)  # type: ignore[attr-defined]
    for kinds in ("bogus", "", "overhead,bogus"):
        res = _cli("check-c", str(path), "--kinds", kinds)
        assert res.returncode == 2 and res.stdout == "", (kinds, res)
        assert res.stderr.count("\n") == 1 and "--kinds" in res.stderr
    res = _cli("check-c", str(path), "--kinds", "overhead,swap,flush")
    assert res.returncode == 1  # 0.5 s of overhead before the send: violated
    # the hint no longer calls the tracer's pads (delay rows) "injected delays"
    assert "not injected delays" not in res.stdout and "(delay)" in res.stdout


# ---- bug 6: only that selects nothing -------------------------------------------------------------------------


def test_only_region_names_with_mpi_events_are_refused() -> None:
    with pytest.raises(InputError) as exc:
        parse_perturbation({"instrumentation": {"events": "mpi", "only": ["Sweep"]}})
    assert exc.value.field == "instrumentation.only" and "'Sweep' is not an MPI action" in exc.value.problem
    assert 'events = "all"' in exc.value.fix
    with pytest.raises(InputError):  # events defaults to "mpi"
        parse_perturbation({"instrumentation": {"only": ["recv", "Sweep"]}})
    assert parse_perturbation({"instrumentation": {"events": "all", "only": ["Sweep"]}}).instrumentation.only == \
        ("Sweep",)


def test_select_records_refuses_mpi_names_under_regions() -> None:
    b = OpBuilder(1)
    b.add("enter", 0, step=0, region="A")
    b.add("compute", 0, step=0, value=0.01, region="A")
    b.add("leave", 0, step=0, region="A")
    ops = b.build()
    with pytest.raises(ValueError, match="selects nothing"):
        select_records(ops, Instrumentation(events="regions", only=("send",)))
    assert len(select_records(ops, Instrumentation(events="regions", only=("A",)))) == 2


# ---- bug 7: noise hits below the precision --------------------------------------------------------------------


def test_phase_a_whole_number_of_periods_lands_on_zero() -> None:
    # 5.0 mod 0.1 is 0.0999999999999997 in floating point: the detour [0.09999.., 0.10099..) was split into a
    # 2.7e-16 s sliver at the end of the period and [0, 0.00099..); it must be the detour [0, 0.001)
    rng = np.random.default_rng(0)
    p5 = PeriodicNoise(10.0, 0.001, phase=5.0).pattern(1, rng)
    p0 = PeriodicNoise(10.0, 0.001, phase=0.0).pattern(1, rng)
    assert p5.start.tolist() == p0.start.tolist() == [0.0]
    assert p5.duration.tolist() == p0.duration.tolist() == [0.001]
    # a start just below the period that is not a rounding error stays
    assert normalize(1, [1.0], [0], [0.9], [0.05]).start.tolist() == [0.9]


def test_noise_hits_shorter_than_the_precision_are_not_hits() -> None:
    # detour [0.005, 0.006) every 0.01 s.  A reduction's flops found to start 1e-16 s before the detour's end
    # ([0.006 - 1e-16, 0.0061)) overlap it by 1e-16 s: not a hit with a 1e-9 s precision; a compute over
    # [0, 0.021) overlaps two detours by 0.001 s each
    pat = PeriodicNoise(100.0, 0.001, phase=0.005).pattern(1, np.random.default_rng(0))
    args = (pat, np.array([0]), np.array([0, 0]), np.array([3, 7]), np.array([0.006 - 1e-16, 0.0]),
            np.array([0.0061, 0.021]))
    assert noise_hits(*args).row.tolist() == [3, 7, 7]  # without the precision the sliver counts
    hits = noise_hits(*args, min_seconds=1e-9)
    assert hits.row.tolist() == [7, 7] and hits.seconds.tolist() == pytest.approx([0.001, 0.001])


def test_noise_config_carries_the_precision() -> None:
    sec = validate_section("noise", {"model": "periodic", "frequency": 10.0, "duration": 0.001}, "s.toml")
    assert noise_config(sec, "s.toml", 1e-7).precision == 1e-7  # type: ignore[arg-type]


# ---- bug 8: noise and tracing checks with real fixes ----------------------------------------------------------


@pytest.mark.parametrize(("section", "table", "field", "fix"), [
    # 0.01 s every 1 / 100 Hz = 0.01 s: a tenth of the period is 0.001 s
    ("noise", {"model": "periodic", "frequency": 100.0, "duration": 0.01}, "noise.duration", "set duration = 0.001"),
    # rate x duration = 100 x 0.02 = 2: rate = 0.1 / 0.02 = 5 gives 0.1
    ("noise", {"model": "poisson", "rate": 100.0, "duration": 0.02}, "noise.rate", "set rate = 5 "),
    ("noise", {"model": "periodic", "frequency": 10.0, "duration": 0.001, "rate": 5.0}, "noise.rate",
     'remove rate from [noise], or set model = "poisson"'),
    # -0.05 s is 0.05 s into a 0.1 s period
    ("noise", {"model": "periodic", "frequency": 10.0, "duration": 0.001, "phase": -0.05}, "noise.phase",
     "set phase = 0.05 "),
    # -1 s is 9 s into a 10 s period
    ("noise", {"model": "signature", "file": "n.txt", "period": 10.0, "offset": -1.0}, "noise.offset",
     "set offset = 9 "),
    ("noise", {"model": "signature", "file": "n.txt", "offset": -1.0}, "noise.offset", "set offset = 0.0 "),
    ("tracing", {"policy": "swapout_f", "every": 0}, "tracing.every", "set every = 1 "),
    ("tracing", {"policy": "per_rank", "tau": 2.0}, "tracing.tau", 'remove tau from [tracing], or set policy = '
     '"swapout_f"'),
    ("tracing", {"policy": "per_rank", "safety": 2.0}, "tracing.safety", 'set policy = "predictive_sync"'),
])
def test_noise_and_tracing_errors_give_real_fixes(section: str, table: dict[str, object], field: str,
                                                  fix: str) -> None:
    with pytest.raises(InputError) as exc:
        validate_section(section, table, "s.toml")
    assert exc.value.field == field
    assert fix in exc.value.fix, exc.value.fix
    # the fix is not the key's description
    assert not exc.value.fix.startswith(("periodic", "poisson", "signature", "fixed duration", "f after"))


def test_signature_negative_offset_refused_by_the_model_too() -> None:
    with pytest.raises(ValueError, match="offset must be >= 0"):
        SignatureNoise((0.0,), (0.001,), 1.0, -1.0)


def test_signature_detour_of_zero_seconds_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("0.05 0.0\n0.2 0.001\n")
    sec = validate_section("noise", {"model": "signature", "file": str(tmp_path / "n.txt"), "period": 10.0,
                                     "offset": 0.0}, str(tmp_path / "s.toml"))
    with pytest.raises(InputError) as exc:
        noise_config(sec, str(tmp_path / "s.toml"))  # type: ignore[arg-type]
    assert "1 detour(s) are shorter" in exc.value.problem and "the shortest 0 s" in exc.value.problem


def test_phase_larger_than_the_period_is_taken_modulo() -> None:
    # documented: phase = 0.25 s with a 0.1 s period is 0.05 s into the period
    pat = PeriodicNoise(10.0, 0.001, phase=0.25).pattern(1, np.random.default_rng(0))
    assert pat.start.tolist() == pytest.approx([0.05])
