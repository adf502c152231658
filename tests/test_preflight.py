"""The estimate printed and checked before a large run (issues 10 and 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.errors import EnvironmentProblem
from waitlab.experiments.estimate import (
    EAGER_TRANSFER_KEY,
    EXACT_UP_TO,
    PREFLIGHT_RANKS,
    PYTHON_BASE_BYTES,
    PYTHON_DURING_SMPI_EVENT_BYTES,
    PYTHON_DURING_SMPI_SPILLED_EVENT_BYTES,
    PYTHON_EVENT_BYTES,
    SMPI_SECONDS_PER_EVENT_EAGER,
    SMPI_SECONDS_PER_EVENT_RANK_EAGER,
    WAITLAB_SECONDS_PER_EVENT,
    Estimate,
    estimate,
    memory_available,
    preflight,
)
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.scenario import from_mapping


def _scenario(ranks: int, steps: int = 2):
    return from_mapping({"scenario": {"name": "big", "ranks": ranks}, "platform": {"name": "sunway_taihulight"},
                         "application": {"kind": "stencil", "steps": steps}}, "big.toml")


def test_small_runs_are_not_estimated() -> None:
    assert preflight(prepare(_scenario(PREFLIGHT_RANKS - 1))) is None


def test_large_run_is_estimated_and_said() -> None:
    said: list[str] = []
    est = preflight(prepare(_scenario(PREFLIGHT_RANKS)), say=said.append, check=False)
    assert est is not None and est.ranks == PREFLIGHT_RANKS and est.exact_events
    # a 2-D stencil step: at least enter/compute/leave + 4 halo isend/irecv + waitall + allreduce per rank
    assert est.events >= PREFLIGHT_RANKS * 2 * 7
    assert len(said) == 1 and said[0].startswith("estimate: 4,096 ranks")


def test_a_run_that_cannot_fit_is_refused_before_any_work() -> None:
    avail = memory_available()
    if avail is None:
        pytest.skip("no /proc/meminfo")
    # 65,536 ranks x 200 steps of a 2-D stencil: over 65,536 * 200 * 14 events, at PYTHON_EVENT_BYTES each
    events = 65_536 * 200 * 14
    if events * PYTHON_EVENT_BYTES <= avail:
        pytest.skip("this machine has more memory than the scenario needs")
    with pytest.raises(EnvironmentProblem, match="would not fit"):
        preflight(prepare(_scenario(65_536, steps=200)))


def test_beyond_exact_counting_the_eager_transfer_hint_is_given_once_and_only_without_the_setting() -> None:
    said: list[str] = []
    preflight(prepare(_scenario(EXACT_UP_TO + 4)), say=said.append, check=False)
    assert len(said) == 2 and said[1].startswith("hint:") and EAGER_TRANSFER_KEY in said[1]
    said.clear()
    with_setting = _scenario(EXACT_UP_TO + 4).with_values({"simulation.config": {EAGER_TRANSFER_KEY: "65536"}})
    preflight(prepare(with_setting), say=said.append, check=False)
    assert len(said) == 1 and said[0].startswith("estimate:")
    said.clear()
    preflight(prepare(_scenario(EXACT_UP_TO)), say=said.append, check=False)
    assert len(said) == 1


def test_memory_is_smpi_with_what_python_holds_beside_it_or_pythons_own_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    # by hand: SMPI 10 GiB with 1 GiB beside it -> 11 GiB; Python's own peak 12 GiB -> 12 GiB
    gib = 1 << 30
    e = Estimate(1, 1, True, 10 * gib, 12 * gib, 0, 0.0, 1 * gib)
    assert e.memory_bytes == 12 * gib
    assert Estimate(1, 1, True, 10 * gib, 2 * gib, 0, 0.0, 1 * gib).memory_bytes == 11 * gib
    # while SMPI runs, a table of SPILL_MIN_OPS operations or more is memory-mapped: fewer bytes held beside it
    sc = _scenario(PREFLIGHT_RANKS, steps=1)
    kept = estimate(prepare(sc))
    ops = kept.events - 2 * kept.ranks
    assert kept.python_during_smpi_bytes == PYTHON_BASE_BYTES + kept.events * PYTHON_DURING_SMPI_EVENT_BYTES
    monkeypatch.setattr("waitlab.experiments.estimate.SPILL_MIN_OPS", ops)
    mapped = estimate(prepare(sc))
    assert mapped.python_during_smpi_bytes == PYTHON_BASE_BYTES + kept.events * PYTHON_DURING_SMPI_SPILLED_EVENT_BYTES


def test_eager_small_messages_have_their_own_time_model() -> None:
    sc = _scenario(PREFLIGHT_RANKS, steps=1).with_values({"simulation.config": {EAGER_TRANSFER_KEY: "65536"}})
    e = estimate(prepare(sc))
    per_event = SMPI_SECONDS_PER_EVENT_EAGER + SMPI_SECONDS_PER_EVENT_RANK_EAGER * PREFLIGHT_RANKS
    assert e.seconds == pytest.approx(e.events * (per_event + WAITLAB_SECONDS_PER_EVENT))


def test_a_run_predicted_past_its_timeout_is_refused() -> None:
    sc = _scenario(PREFLIGHT_RANKS)
    est = preflight(prepare(sc), check=False)
    assert est is not None
    smpi = est.seconds - WAITLAB_SECONDS_PER_EVENT * est.events  # the SMPI stage, which [simulation] timeout limits
    tight = sc.with_values({"simulation.timeout": smpi / 2})
    with pytest.raises(EnvironmentProblem, match=r"over \[simulation\] timeout = .* s \(raise \[simulation\] timeout"):
        preflight(prepare(tight))
    assert preflight(prepare(sc.with_values({"simulation.timeout": smpi * 2}))) is not None  # within it: runs


def test_running_out_of_memory_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    def no_memory(*a: object, **k: object) -> None:
        raise MemoryError("Unable to allocate 96.0 GiB for an array with shape (12884901888,) and data type float64")

    monkeypatch.setattr(api, "run", no_memory)
    (tmp_path / "s.toml").write_text('[scenario]\nname = "m"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                                     '[application]\nkind = "stencil"\n')
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("waitlab: error: out of memory (MemoryError: Unable to allocate 96.0 GiB") and \
        err.count("\n") == 1 and "fewer ranks or steps" in err
