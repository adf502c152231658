"""Noise models: detour patterns, profiles, the noise ledger and the [noise] section (pure, no SimGrid).

Expected values are computed by hand in the comments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation, perturbation_config
from waitlab.experiments.scenario import load_scenario
from waitlab.models.ops import OpBuilder
from waitlab.models.perturb import detours as dt
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb import noise_hits as nh
from waitlab.models.perturb.stage import PlatformFacts, noise_ledger, noise_setup


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_periodic_phase_given_random_and_shared() -> None:
    p = nz.PeriodicNoise(100.0, 0.001, phase=0.004).pattern(3, rng())
    assert p.period.tolist() == [0.01] * 3
    assert p.start.tolist() == [0.004] * 3 and p.duration.tolist() == [0.001] * 3
    r = nz.PeriodicNoise(100.0, 0.001, phase="random").pattern(64, rng(1))
    assert len(set(r.start.tolist())) > 1 and (r.start >= 0).all() and (r.start < 0.01).all()
    s = nz.PeriodicNoise(100.0, 0.001, phase="shared").pattern(64, rng(1))
    assert len(set(s.start.tolist())) == 1
    # same seed, same pattern
    again = nz.PeriodicNoise(100.0, 0.001, phase="random").pattern(64, rng(1))
    assert np.array_equal(r.start, again.start)


def test_zero_rate_or_duration_is_no_noise() -> None:
    assert nz.PeriodicNoise(0.0, 0.001).pattern(4, rng()).is_empty
    assert nz.PeriodicNoise(1000.0, 0.0).pattern(4, rng()).is_empty
    assert nz.PoissonNoise(0.0, 0.001).pattern(4, rng(), 10.0).is_empty
    assert dt.profile_text(nz.PoissonNoise(0.0, 0.001).pattern(4, rng(), 10.0), 0) == ""


def test_normalize_splits_at_the_period_and_merges_overlaps() -> None:
    # period 1: [0.9, 1.1) wraps into [0.9, 1.0) and [0.0, 0.1); [0.05, 0.15) overlaps the latter -> [0.0, 0.15)
    p = dt.normalize(1, 1.0, [0, 0], [0.9, 0.05], [0.2, 0.1])
    assert p.start.tolist() == pytest.approx([0.0, 0.9])
    assert p.duration.tolist() == pytest.approx([0.15, 0.1])


def test_queue_detours_lindley() -> None:
    # arrivals 0, 0.5, 3.0 of 1 s each on host 0: starts 0, 1 (waits for the first), 3; host 1 independent
    out = dt.queue_detours(np.array([0, 0, 0, 1]), np.array([0.0, 0.5, 3.0, 0.2]), np.ones(4))
    assert out.tolist() == [0.0, 1.0, 3.0, 0.2]


def test_poisson_counts_and_laws() -> None:
    pat = nz.PoissonNoise(rate=50.0, duration=1e-4, law="exponential").pattern(200, rng(3), horizon=10.0)
    # 200 hosts x 500 expected arrivals; queueing never merges at 0.5 % load... almost never
    assert abs(len(pat) / 200 - 500) < 10
    assert abs(pat.duration.mean() - 1e-4) < 5e-6
    par = nz.PoissonNoise(rate=1.0, duration=1e-3, law="pareto", pareto_shape=3.0)
    d = par.durations(400_000, rng(4))
    # Pareto with shape 3 and mean 1e-3: scale 2/3 ms, every draw >= scale, mean 1e-3
    assert d.min() >= 2e-3 / 3 - 1e-15 and abs(d.mean() - 1e-3) < 2e-5
    assert (nz.PoissonNoise(rate=5.0, duration=0.01).durations(3, rng()) == 0.01).all()


def test_signature_offset_shifts_the_pattern() -> None:
    # signature: detour at 0.2 for 0.1 s, period 1; offset 0.5 -> host starts 0.5 s in: detour at 0.7
    sig = nz.SignatureNoise((0.2,), (0.1,), period=1.0, offset=0.5)
    p = sig.pattern(2, rng())
    assert p.start.tolist() == pytest.approx([0.7, 0.7]) and p.period.tolist() == [1.0, 1.0]


def test_profile_text_is_simgrid_syntax() -> None:
    p = nz.PeriodicNoise(4.0, 0.125, phase=0.0625).pattern(1, rng())
    assert dt.profile_text(p, 0).splitlines() == ["PERIODICITY 0.25", "0.0625 1e-12", "0.1875 1.0"]


def test_detour_measure_by_hand() -> None:
    # 0.1 s detour every 1 s at 0.5: in [0.55, 2.55) -> 0.05 + 0.1 + 0.05 = 0.2
    p = nz.PeriodicNoise(1.0, 0.1, phase=0.5).pattern(1, rng())
    got = nh.detour_measure(p, np.array([0]), np.array([0.55, 0.0]), np.array([2.55, 0.5]))
    assert got.tolist() == pytest.approx([0.2, 0.0], abs=1e-15)


def test_noise_hits_only_inside_cpu_intervals() -> None:
    # detours [0.5, 0.6) + k; interval A [0, 1.1) hit once (0.1 s); B [1.2, 1.45) not hit; C [2.55, 2.65) 0.05 s
    p = nz.PeriodicNoise(1.0, 0.1, phase=0.5).pattern(1, rng())
    h = nh.noise_hits(p, np.array([0]), np.array([0, 0, 0]), np.array([10, 11, 12]), np.array([0.0, 1.2, 2.55]),
                      np.array([1.1, 1.45, 2.65]))
    assert h.row.tolist() == [10, 12]
    assert h.seconds.tolist() == pytest.approx([0.1, 0.05])
    assert h.start.tolist() == pytest.approx([0.5, 2.55])


@settings(max_examples=40, deadline=None)
@given(freq=st.floats(1.0, 100.0), frac=st.floats(0.01, 0.5), a=st.floats(0.0, 3.0), length=st.floats(0.0, 3.0))
def test_hits_sum_to_the_measure(freq: float, frac: float, a: float, length: float) -> None:
    """The per-detour hits of an interval add up to the detour measure of that interval."""
    p = nz.PeriodicNoise(freq, frac / freq, phase="random").pattern(1, rng(5))
    h = nh.noise_hits(p, np.array([0]), np.array([0]), np.array([0]), np.array([a]), np.array([a + length]))
    m = nh.detour_measure(p, np.array([0]), np.array([a]), np.array([a + length]))[0]
    assert h.total() == pytest.approx(m, abs=1e-12)


def test_jitter_is_non_negative_and_seeded() -> None:

    b = OpBuilder(2)
    b.add("compute", [0, 1], value=[1.0, 2.0], region="w")
    b.add("barrier", [0, 1])
    ops = b.build()
    rows, extra = nz.GaussianJitter(0.1).extra(ops, rng(9))
    assert rows.tolist() == [0, 2] and (extra >= 0).all()
    assert np.array_equal(extra, nz.GaussianJitter(0.1).extra(ops, rng(9))[1])
    assert nz.GaussianJitter(0.0, mean=0.5).extra(ops, rng())[1].tolist() == [0.5, 1.0]
    assert not nz.GaussianJitter(0.0).active


# ---- [noise] section errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(("table", "key", "words"), [
    ({"model": "poisson", "rate": -1.0, "duration": 1e-5}, "noise.rate", "must be >= 0"),
    ({"model": "poisson", "rate": 10.0, "duration": -1e-5}, "noise.duration", "must be >= 0"),
    ({"model": "periodic", "frequency": -5.0, "duration": 1e-5}, "noise.frequency", "must be >= 0"),
    ({"model": "periodic", "frequency": 1000.0, "duration": 0.002}, "noise.duration", "no time to compute"),
    ({"model": "periodic", "frequency": 1000.0}, "noise.duration", "is required"),
    ({"model": "gaussian"}, "noise.model", "unknown value"),
    ({"model": "periodic", "frequency": 10.0, "duration": 1e-3, "rate": 3.0}, "noise.rate", "is not used"),
    ({"model": "poisson", "rate": 10.0, "duration": 1e-3, "law": "lognormal"}, "noise.law", "unknown value"),
    ({"model": "poisson", "rate": 10.0, "duration": 1e-3, "law": "pareto", "pareto_shape": 1.0},
     "noise.pareto_shape", "must be > 1"),
    ({"jitter_std": -0.1}, "noise.jitter_std", "must be >= 0"),
    ({"model": "periodic", "frequency": 10.0, "duration": 1e-3, "phase": "late"}, "noise.phase", "unknown value"),
    ({"scope": "rack"}, "noise.scope", "unknown value"),
    ({"colour": "blue"}, "noise.colour", "unknown key"),
])  # fmt: skip
def test_bad_noise_sections(table: dict[str, object], key: str, words: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_perturbation({"noise": table}, "s.toml")
    assert exc.value.file == "s.toml" and exc.value.field == key and words in exc.value.problem
    assert exc.value.fix


@pytest.mark.parametrize(("text", "line", "words"), [
    ("0.0 0.001\nabc 0.1\n", "line 2", "not numbers"),
    ("0.0 0.001 7\n", "line 1", "expected 'START DURATION'"),
    ("0.5 -0.001\n", "line 1", "duration must be >= 0"),
    ("0.5 0.001\n0.2 0.001\n", "line 2", "must not decrease"),
    ("0.0 0.5\n0.2 0.001\n", "line 2", "before the previous one ends"),
    ("# only a comment\n\n", "(content)", "no detour lines"),
])  # fmt: skip
def test_bad_noise_files(tmp_path: Path, text: str, line: str, words: str) -> None:
    f = tmp_path / "noise.txt"
    f.write_text(text)
    with pytest.raises(InputError) as exc:
        parse_perturbation({"noise": {"model": "signature", "file": "noise.txt"}}, str(tmp_path / "s.toml"))
    assert exc.value.file == str(f) and exc.value.field == line and words in exc.value.problem


def test_missing_noise_file_and_short_period(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        parse_perturbation({"noise": {"model": "signature", "file": "nope.txt"}}, str(tmp_path / "s.toml"))
    (tmp_path / "n.txt").write_text("0.0 0.001\n0.5 0.002\n")
    with pytest.raises(InputError, match="shorter than the signature"):
        parse_perturbation({"noise": {"model": "signature", "file": "n.txt", "period": 0.4}},
                           str(tmp_path / "s.toml"))
    cfg = parse_perturbation({"noise": {"model": "signature", "file": "n.txt", "offset": 0.0}},
                             str(tmp_path / "s.toml"))
    assert cfg.noise.model.period == pytest.approx(0.502)


def _facts(n: int, rpn: int, split: bool) -> PlatformFacts:
    hosts = tuple(f"node-{r // rpn}-core-{r % rpn}" if split else f"node-{r // rpn}" for r in range(n))
    return PlatformFacts(n_ranks=n, ranks_per_node=rpn, core_speed=1e9, host_of_rank=hosts,
                         node_of_rank=np.arange(n) // rpn, node_memory=1e9, disk_bandwidth=1e8, disk_latency=0.0)


def test_noise_setup_scopes() -> None:
    cfg = parse_perturbation({"noise": {"model": "periodic", "frequency": 100.0, "duration": 1e-4,
                                        "scope": "node"}}).noise
    s = noise_setup(cfg, _facts(8, 4, split=True), seed=1, horizon=1.0)
    # per node: the four core hosts of a node share one profile
    assert len(s.speed_profiles) == 8
    assert s.speed_profiles["node-0-core-0"] == s.speed_profiles["node-0-core-3"]
    assert s.pattern_host_of_rank.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    core = parse_perturbation({"noise": {"model": "periodic", "frequency": 100.0, "duration": 1e-4,
                                         "scope": "core"}}).noise
    s2 = noise_setup(core, _facts(8, 4, split=True), seed=1, horizon=1.0)
    assert len(set(s2.speed_profiles.values())) == 8
    with pytest.raises(InputError, match="split_cores"):
        noise_setup(core, _facts(8, 4, split=False), seed=1, horizon=1.0)
    off = parse_perturbation({"noise": {"model": "poisson", "rate": 0.0, "duration": 1e-3}}).noise
    assert noise_setup(off, _facts(8, 4, split=False), seed=1, horizon=1.0).speed_profiles == {}


def test_example_scenario_validates() -> None:

    sc = load_scenario(Path(__file__).resolve().parents[1] / "examples" / "perturbed_stencil.toml")
    cfg = perturbation_config(sc)
    assert cfg is not None
    sig = cfg.noise.model
    assert isinstance(sig, nz.SignatureNoise) and len(sig.start) == 11 and sig.period == 0.010
    # 10 ticks of 25 us and one 200 us wake-up every 10 ms: 4.5 % of the time
    assert nz.SignatureNoise(sig.start, sig.duration, sig.period, 0.0).pattern(1, rng()).fraction()[0] == \
        pytest.approx(0.045)
    assert cfg.tracing is not None and cfg.tracing.policy == "predictive_sync"


def test_noise_on_selected_nodes_only() -> None:
    # 8 ranks, 2 per node; detours 0.1 s at 0.5 s every 1 s (phase given); only node 1 (ranks 2, 3) is hit

    table = {"model": "periodic", "frequency": 1.0, "duration": 0.1, "phase": 0.5, "nodes": [1]}
    cfg = parse_perturbation({"noise": table}).noise
    assert cfg.nodes == (1,)
    facts = _facts(8, 2, split=False)
    s = noise_setup(cfg, facts, seed=1, horizon=1.0)
    assert sorted(s.speed_profiles) == ["node-1"]  # the hosts of the other nodes get no profile
    every = noise_setup(parse_perturbation({"noise": {**table, "nodes": None}}).noise, facts, seed=1, horizon=1.0)
    assert s.speed_profiles["node-1"] == every.speed_profiles["node-1"]  # the same detours as without selector
    b = OpBuilder(n_ranks=8)
    b.add("compute", range(8), value=1.0, region="solve")  # 1 s at 1 Gflop/s; ranks 2, 3 stall 0.1 s in it
    ops = b.build()
    t_exit = np.where(np.isin(np.arange(8), [2, 3]), 1.1, 1.0)
    led, _ = noise_ledger(ops, np.zeros(8), t_exit, s, core_speed=1e9)
    assert led.rank.tolist() == [2, 3]
    assert led.seconds.tolist() == pytest.approx([0.1, 0.1])
    with pytest.raises(InputError, match=r"noise\.nodes: node 4 does not exist: the ranks run on 4 node"):
        noise_setup(parse_perturbation({"noise": {**table, "nodes": [0, 4]}}).noise, facts, seed=1, horizon=1.0)


def test_noise_nodes_core_scope_keeps_the_cores_of_the_node() -> None:
    table = {"model": "periodic", "frequency": 100.0, "duration": 1e-4, "scope": "core", "nodes": [0]}
    s = noise_setup(parse_perturbation({"noise": table}).noise, _facts(4, 2, split=True), seed=1, horizon=1.0)
    assert sorted(s.speed_profiles) == ["node-0-core-0", "node-0-core-1"]
