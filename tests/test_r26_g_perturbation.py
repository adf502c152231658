"""Round 26 perturbation fixes (tester t6): condition C counts the tracer's own time, not OS noise inside its rows;
a detour that crosses its period is one hit; the detour bound holds for the stretched run and says exact numbers;
``only`` naming an MPI call the application never makes is refused; the report's detour share and small byte counts.

Every expected value is computed by hand in the comments (none is read back from waitlab's own output).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.report.perturbation_report import mib
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb.condition_c import check_condition_c
from waitlab.models.perturb.instrumentation import Instrumentation, OnlySelectsNothing, select_records
from waitlab.models.perturb.noise_hits import noise_hits
from waitlab.models.perturb.stage import NoiseConfig, PerturbationConfig, PlatformFacts, check_detour_count, perturb_ops

DOC = Path(__file__).resolve().parents[1] / "docs" / "perturbation.md"

#: tester t6's s12.toml: 4 ranks, 2 per node, a barrier stencil of 2 steps of 1 s compute; every rank writes one 1 s
#: record after each barrier; one 0.2 s detour on node 0 at ``{at}`` s (period 100 s)
S12 = """[scenario]
name = "s12"
ranks = 4
seed = 1

[platform]
name = "dawning_5000a"
ranks_per_node = 2

[application]
kind = "stencil"
dims = 1
steps = 2
halo_every = 0
collective = "barrier"
compute_seconds = 1.0

[noise]
model = "signature"
file = "n.txt"
period = 100.0
offset = 0.0
nodes = [0]

[instrumentation]
events = "mpi"
fixed_cost = 1.0
"""

#: tester t6's s14.toml: per_rank flushes of 250 B at 100 B/s + 0.5 s latency (2.5 s) and a 0.2 s write-back on
#: every rank, and one 0.1 s detour on node 0 at 5.55 s, inside rank 0's write-back (5.5 .. 5.7 s)
S14 = """[scenario]
name = "s14"
ranks = 4
seed = 1

[platform]
name = "dawning_5000a"
ranks_per_node = 1

[application]
kind = "stencil"
dims = 1
steps = 4
halo_every = 0
collective = "barrier"
compute_seconds = 1.0

[instrumentation]
events = "mpi"
record_bytes = 100

[tracing]
policy = "per_rank"
buffer_bytes = 250
disk_bandwidth = 100.0
disk_latency = 0.5
writeback_cost = 0.001

[noise]
model = "signature"
file = "n.txt"
period = 1000.0
offset = 0.0
nodes = [0]
"""


def _run(tmp_path: Path, name: str, text: str, signature: str) -> waitlab.Run:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "n.txt").write_text(signature)
    (folder / "s.toml").write_text(text)
    return waitlab.run(folder / "s.toml", folder / "out")


# ---- 1. condition C: a detour inside a tracer row is noise, not overhead ------------------------------------------


def test_noise_inside_a_record_is_not_overhead() -> None:
    # rank 0's 1 s record is stretched to 1.2 s by a 0.2 s detour, rank 1's is 1 s; both then enter the barrier.
    # The tracer's own time is 1 s on both ranks: C holds once the 0.2 s of noise is taken off (total 2 s).
    ev = make_events(rank=[0, 0, 1, 1], op=["overhead", "barrier", "overhead", "barrier"],
                     enter=[0.0, 1.2, 0.0, 1.0], exit=[1.2, 1.2, 1.0, 1.2], match=[-1, 0, -1, 0],
                     kind=["overhead", "mpi", "overhead", "mpi"])
    raw = check_condition_c(ev)
    assert not raw.holds and raw.max_difference == pytest.approx(0.2)
    rep = check_condition_c(ev, noise=np.array([0.2, 0.0, 0.0, 0.0]))
    assert rep.holds and rep.total_overhead == pytest.approx(2.0)
    with pytest.raises(ValueError, match="noise has 1 values for 4 events"):
        check_condition_c(ev, noise=np.array([0.2]))


@pytest.mark.simgrid
@pytest.mark.parametrize("at", [1.5, 0.5])
def test_where_a_detour_falls_does_not_change_c(tmp_path: Path, at: float) -> None:
    # at 1.5 s the detour lands in the step-0 record of ranks 0 and 1 (1.0 .. 2.2 s), at 0.5 s in their compute.
    # Either way every rank writes 2 records of 1 s: C holds, with 8 x 1 s = 8 s of tracer overhead.
    res = _run(tmp_path, "s12", S12, f"{at} 0.2\n").perturbation
    assert res is not None
    assert res.condition_c.holds and res.condition_c_spill.holds
    assert res.condition_c.total_overhead == pytest.approx(8.0, abs=1e-6)
    assert res.report["noise"]["delayed_work_seconds"] == pytest.approx(0.4, abs=1e-9)  # ranks 0 and 1


@pytest.mark.simgrid
def test_noise_inside_a_write_back_is_not_spilling(tmp_path: Path) -> None:
    # every rank flushes once (2.5 s) with a 0.2 s write-back: 4 x 2.7 = 10.8 s of spilling; the 0.1 s detour in
    # rank 0's write-back is noise
    res = _run(tmp_path, "s14", S14, "5.55 0.1\n").perturbation
    assert res is not None
    assert res.condition_c.holds and res.condition_c_spill.holds
    assert res.condition_c_spill.total_overhead == pytest.approx(10.8, abs=1e-6)
    assert res.noise_hits.total() == pytest.approx(0.1, abs=1e-9)


# ---- 2. a detour that crosses the period boundary is one hit -----------------------------------------------------


def test_a_detour_crossing_the_period_is_one_hit() -> None:
    # 10 Hz x 0.05 s at phase 0.08: detours [0.08 + 0.1k, 0.13 + 0.1k) and the tail [0, 0.03) of the one before 0.
    # A compute over [0, 1.98): the tail, then 19 whole detours (k = 0..18): 20 hits, 0.03 + 19 x 0.05 = 0.98 s
    pat = nz.PeriodicNoise(10.0, 0.05, phase=0.08).pattern(1, np.random.default_rng(0))
    hits = noise_hits(pat, np.array([0]), np.array([0]), np.array([7]), np.array([0.0]), np.array([1.98]))
    assert len(hits) == 20 and hits.total() == pytest.approx(0.98)
    assert hits.start[:3].tolist() == pytest.approx([0.0, 0.08, 0.18])
    assert hits.seconds[:3].tolist() == pytest.approx([0.03, 0.05, 0.05])
    # a detour split between two operations is one hit in each: [0.08, 0.1) in the first, [0.1, 0.13) in the second
    two = noise_hits(pat, np.array([0]), np.array([0, 0]), np.array([1, 2]), np.array([0.05, 0.1]),
                     np.array([0.1, 0.12]))
    assert two.row.tolist() == [1, 2] and two.seconds.tolist() == pytest.approx([0.02, 0.02])


@pytest.mark.simgrid
def test_the_tester_s_phase_gives_one_hit_per_detour(tmp_path: Path) -> None:
    # s13: 2 ranks, 1 s of compute, 10 Hz x 0.05 s at phase 0.08, one node: per rank the tail [0, 0.03) and 19 whole
    # detours (the run ends at 1.98 s): 40 hits of 2 x 0.98 = 1.96 s
    text = S12.replace("ranks = 4", "ranks = 2").replace("steps = 2", "steps = 1").split("[noise]")[0] + (
        '[noise]\nmodel = "periodic"\nfrequency = 10.0\nduration = 0.05\nphase = 0.08\n')
    res = _run(tmp_path, "s13", text, "").perturbation
    assert res is not None
    assert len(res.noise_hits) == 40 and res.noise_hits.total() == pytest.approx(1.96, abs=1e-9)


# ---- 3, 4. the detour bound counts the run the noise stretches, in exact numbers ---------------------------------


def test_the_bound_counts_the_run_the_noise_stretches() -> None:
    # heavy.toml: 1.9e5 Hz x 4.7e-6 s is 89.3 % noise; the 5.000028 s run stretches to 5.000028 / 0.107 = 46.729 s:
    # 1.9e5 x 46.729 = 8,878,554.4 -> 8,878,555 detours per host (the unperturbed 5 s alone gave 950,005: accepted)
    cfg = NoiseConfig(model=nz.PeriodicNoise(1.9e5, 4.7e-6))
    with pytest.raises(InputError) as info:
        check_detour_count(cfg, 4 * 5.000028, "heavy.toml")
    err = info.value
    assert err.field == "noise.frequency" and "give 8,878,555 detours per host" in err.problem
    # f x 5.000028 / (1 - f x 4.7e-6) <= 1e6 for f <= 1e6 / (5.000028 + 4.7) = 103,092.5, said rounded down
    assert "frequency <= 103000 per second" in err.fix
    check_detour_count(NoiseConfig(model=nz.PeriodicNoise(103000.0, 4.7e-6)), 4 * 5.000028)  # the fix passes


def test_the_bound_s_message_has_exact_numbers_and_a_fix_that_passes() -> None:
    # 2e5 Hz x 4.5e-9 s (0.09 %) over 5.000028 s: 5.000028 / 0.9991 = 5.0045320 s, 1,000,906.4 -> 1,000,907 detours,
    # just above 1,000,000 (printed %.3g it read "1e+06"); the limit 1e6 / (5.000028 + 0.0045) = 199,819.0 -> 199800
    with pytest.raises(InputError) as info:
        check_detour_count(NoiseConfig(model=nz.PeriodicNoise(2e5, 4.5e-9)), 4 * 5.000028)
    err = info.value
    assert "give 1,000,907 detours per host" in err.problem and "1e+06" not in err.problem
    assert "frequency <= 199800 per second" in err.fix
    check_detour_count(NoiseConfig(model=nz.PeriodicNoise(199800.0, 4.5e-9)), 4 * 5.000028)
    # Poisson: 1e5 arrivals/s x 5e-6 s (50 %) over 6 s stretches to 12 s: 1.2e6; 1e6 / (6 + 5) = 90,909.1 -> 90900
    with pytest.raises(InputError) as info:
        check_detour_count(NoiseConfig(model=nz.PoissonNoise(1e5, 5e-6)), 4 * 6.0)
    assert info.value.field == "noise.rate" and "give 1,200,000 detours" in info.value.problem
    assert "rate <= 90900 per second" in info.value.fix


# ---- 5. only = an MPI call the application never makes -----------------------------------------------------------


def _barrier_ops() -> OpTable:
    b = OpBuilder(2)
    b.add("enter", [0, 1], step=0, region="Stencil")
    b.add("compute", [0, 1], step=0, value=1.0, region="Stencil")
    b.add("leave", [0, 1], step=0, region="Stencil")
    b.add("barrier", [0, 1], step=0)
    return b.build()


@pytest.mark.parametrize("events", ["mpi", "all"])
def test_only_an_mpi_call_the_application_never_makes_is_refused(events: str) -> None:
    ops = _barrier_ops()
    with pytest.raises(OnlySelectsNothing) as info:
        select_records(ops, Instrumentation(events=events, only=("allreduce",)))
    assert "allreduce: the application never calls it" in info.value.problem and "(barrier)" in info.value.fix
    with pytest.raises(OnlySelectsNothing):  # one entry that matches nothing is enough
        select_records(ops, Instrumentation(events=events, only=("barrier", "allreduce")))
    assert len(select_records(ops, Instrumentation(events=events, only=("barrier",)))) == 2
    facts = PlatformFacts(n_ranks=2, ranks_per_node=1, core_speed=1e9, host_of_rank=("n0", "n1"),
                          node_of_rank=np.arange(2), node_memory=1e9, disk_bandwidth=1e8, disk_latency=0.0)
    cfg = PerturbationConfig(instrumentation=Instrumentation(events=events, only=("allreduce",)), source="i13.toml")
    with pytest.raises(InputError) as err:
        perturb_ops(ops, cfg, facts, seed=1)
    assert err.value.field == "instrumentation.only"


# ---- 6. the report: detour share over the noisy nodes, small byte counts; the docs' example placement ----------


@pytest.mark.simgrid
def test_detour_share_is_over_the_nodes_with_noise(tmp_path: Path) -> None:
    # one 0.2 s detour per 100 s on node 0 of 2: 0.2 % of node 0's time (the mean over both nodes was 0.1 %)
    run = _run(tmp_path, "share", S12, "0.5 0.2\n")
    assert run.perturbation is not None
    assert run.perturbation.report["noise"]["detour_fraction"] == pytest.approx(0.002)
    text = (tmp_path / "share" / "out" / "perturbation.txt").read_text()
    assert "detours take 0.200% of the time on the 1 of 2 nodes with noise" in text
    assert "instrumentation: 8 records, 0.000488 MiB" in text  # 8 x 64 B = 512 B = 0.00048828 MiB


def test_small_byte_counts_do_not_read_as_none() -> None:
    # 300 B = 300 / 1,048,576 MiB = 0.000286102; 0 stays 0.000; 5.5 MiB keeps three decimals
    assert (mib(300), mib(0), mib(5.5 * 2**20)) == ("0.000286", "0.000", "5.500")


def test_docs_example_and_bound_say_their_conditions() -> None:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert "In a periodic 1-D `stencil` of 4 ranks on one node of `dawning_5000a`" in text
    assert "x the unperturbed makespan stretched by the noise" in text
