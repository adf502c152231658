"""The estimate learns from measured runs (issue 23): history file, nearest run, corrected prediction."""

from __future__ import annotations

from pathlib import Path

import pytest

from waitlab.experiments import estimate as estimate_module
from waitlab.experiments.estimate import estimate, learn, preflight, remember
from waitlab.experiments.estimate_history import HISTORY_LIMIT, MODEL_VERSION, learned_factor, read_history, record_run
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.scenario import from_mapping


def _rec(kind: str, ranks: int, predicted: float, measured: float, platform: str = "sunway_taihulight") -> dict:
    return {"kind": kind, "platform": platform, "ranks": ranks, "predicted": predicted, "measured": measured,
            "model": MODEL_VERSION}


def test_the_nearest_run_below_decides_else_the_nearest_above() -> None:
    recs = [_rec("stencil", 4096, 2.0, 64.0), _rec("stencil", 16384, 10.0, 500.0), _rec("fft", 4096, 1.0, 3.0)]
    assert learned_factor(recs, "stencil", "sunway_taihulight", 20480)[0] == 50.0  # 16,384 <= 20,480
    assert learned_factor(recs, "stencil", "sunway_taihulight", 8192)[0] == 32.0  # 4,096 <= 8,192 < 16,384
    assert learned_factor(recs, "stencil", "sunway_taihulight", 2048)[0] == 32.0  # none below: 4,096 above
    assert learned_factor(recs, "stencil", "dawning_5000a", 8192) == (1.0, "")  # another platform: no correction
    assert learned_factor(recs, "lared_s", "sunway_taihulight", 8192) == (1.0, "")
    factor, note = learned_factor(recs, "fft", "sunway_taihulight", 4096)
    assert factor == 3.0 and "at least" not in note  # the same rank count: no extrapolation


def test_history_round_trip_skips_bad_lines_and_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    record_run("stencil", "sunway_taihulight", 4096, 113664, 2.5, 64.4, path=path)
    record_run("stencil", "sunway_taihulight", 4096, 113664, float("nan"), 64.4, path=path)  # refused
    with path.open("a", encoding="utf-8") as f:
        f.write("not json\n{\"kind\": 1}\n")
    recs = read_history(path)
    assert recs == [{"events": 113664, "kind": "stencil", "measured": 64.4, "platform": "sunway_taihulight",
                     "predicted": 2.5, "ranks": 4096, "model": MODEL_VERSION}]
    for i in range(HISTORY_LIMIT + 5):
        record_run("fft", "dawning_5000a", 4096 + i, 1, 1.0, 2.0, path=path)
    assert len(path.read_text().splitlines()) == HISTORY_LIMIT
    assert read_history(tmp_path / "missing.jsonl") == []


def test_a_learned_factor_scales_only_the_smpi_part() -> None:
    sc = from_mapping({"scenario": {"name": "big", "ranks": 4096}, "platform": {"name": "sunway_taihulight"},
                       "application": {"kind": "stencil", "steps": 2}}, "big.toml")
    prep = prepare(sc)
    est = estimate(prep)
    assert est.replay_seconds > 0 and est.learned == ""
    learned = learn(est, prep, [_rec("stencil", 4096, 1.0, 25.0)])
    # seconds = SMPI part x 25 + waitlab's own part (unchanged)
    assert learned.seconds == pytest.approx(est.seconds + 24 * est.replay_seconds)
    assert "x25 from a measured run of stencil on sunway_taihulight at 4,096 ranks" in learned.describe()
    assert learn(est, prep, [_rec("fft", 4096, 1.0, 25.0)]) == est


def test_a_measured_run_is_remembered_and_used_by_the_next_preflight(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path))
    sc = from_mapping({"scenario": {"name": "big", "ranks": 4096}, "platform": {"name": "sunway_taihulight"},
                       "application": {"kind": "stencil", "steps": 2}}, "big.toml")
    prep = prepare(sc)
    est = preflight(prep, check=False)
    assert est is not None and est.learned == ""
    remember(est, prep, 20 * est.replay_seconds)  # SMPI took 20 times the model's prediction
    said: list[str] = []
    again = preflight(prep, say=said.append, check=False)
    assert again is not None and again.seconds == pytest.approx(est.seconds + 19 * est.replay_seconds)
    assert "x20 from a measured run" in said[0]
    remember(None, prep, 1.0)  # a run that was not estimated is not recorded
    assert len(read_history(tmp_path / "estimate_history.jsonl")) == 1


def test_records_of_an_older_time_model_are_not_used() -> None:
    old = {k: v for k, v in _rec("stencil", 4096, 2.0, 64.0).items() if k != "model"}  # written before version 2
    assert learned_factor([old], "stencil", "sunway_taihulight", 4096) == (1.0, "")
    assert learned_factor([old, _rec("stencil", 4096, 100.0, 50.0)], "stencil", "sunway_taihulight", 4096)[0] == 0.5


@pytest.mark.parametrize(("ranks", "steps", "law_seconds"), [
    (20480, 2, 79.8 * 5 ** 1.71),       # 1,251 s: one step after the first at 5 x 4,096 ranks
    (4096, 3, 2 * 79.8),                # two steps after the first at 4,096 ranks
    (16384, 1, 0.0),                    # the first step alone: the event model only
])
def test_the_measured_step_law_adds_each_step_after_the_first(ranks: int, steps: int, law_seconds: float,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    sc = from_mapping({"scenario": {"name": "big", "ranks": ranks}, "platform": {"name": "sunway_taihulight"},
                       "application": {"kind": "stencil", "steps": steps}}, "big.toml")
    prep = prepare(sc)
    with_law = estimate(prep)
    monkeypatch.setattr(estimate_module, "MEASURED_STEP_LAWS", {})
    without = estimate(prep)
    assert with_law.replay_seconds - without.replay_seconds == pytest.approx(law_seconds, rel=1e-9)
    assert with_law.seconds - without.seconds == pytest.approx(law_seconds, rel=1e-9)


def test_the_step_law_is_only_for_its_application_and_platform() -> None:
    for app, platform in (("stencil", "dawning_5000a"), ("lared_s", "sunway_taihulight")):
        sc = from_mapping({"scenario": {"name": "big", "ranks": 4096}, "platform": {"name": platform},
                           "application": {"kind": app, "steps": 2}}, "big.toml")
        assert (app, platform) not in estimate_module.MEASURED_STEP_LAWS
        assert estimate(prepare(sc)).replay_seconds < 10  # the event model alone: seconds, not minutes
