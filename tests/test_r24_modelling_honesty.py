"""Honest presentation of fit inputs (audit t6): calibration targets and circular comparisons are labelled as such.

`waitlab calibrate` says its rows are the figures the SMPI factors were fitted to and shows Sunway's sourced figures
that no fit used as held-out checks; `reproduce he-sunway`, `okita-spilling` and `wu-lared-s` mark the cells and rows
that are model inputs or calibration targets; Rao et al.'s pooled statement 10 says where it is contradicted; and
`waitlab platforms show NAME` works as `waitlab platforms NAME`.  No number of any model changes here: the tests
check labels, and that the labelled inputs are the very figures the platform files hold.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pandas as pd
import pytest

from waitlab import api
from waitlab.cli import main
from waitlab.experiments.reproduce import he_put, he_sunway, okita_spilling, rao_statements, wu_lared_s
from waitlab.platforms import load_platform
from waitlab.platforms.calibration import FIT_TARGET, HELD_OUT, HELD_OUT_CHECK, MODEL_INPUT, calibration_table

needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")


def _fit_rows(role: str = FIT_TARGET, held: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    table = pd.DataFrame([{"path": "inter_node", "size": s, "kind": k, "figure": 1.6e-6, "provenance": "Rao et al.",
                           "source_s": 1.6e-6, "simulated_s": 1.6e-6, "rel_error": 0.0, "default_s": 3.2e-6,
                           "default_rel_error": 1.0, "role": role}
                          for s, k in ((8, "latency"), (1048576, "bandwidth"))])
    if held is not None:
        table.attrs["held_out"] = held
    return table


def test_calibration_text_says_its_rows_are_fit_targets_and_lists_held_out_checks() -> None:
    held = [{"path": "inter_node", "size": 65536, "kind": "latency", "figure": 9.83e-6, "label": "table 2: 64 KB put",
             "provenance": "He et al. 2017 table 2", "source_s": 9.83e-6, "simulated_s": 1.472e-5,
             "rel_error": 0.498, "role": HELD_OUT_CHECK}]
    text = api.calibration_text(_fit_rows(held=held))
    lines = text.splitlines()
    assert lines[0].startswith("fit check, not a validation") and '"fit target"' in lines[0]
    assert lines[1].split() == list(api.CALIBRATION_COLUMNS) and lines[1].split()[-1] == "role"
    assert lines[2].rstrip().endswith("fit target") and lines[3].rstrip().endswith("fit target")
    assert "held-out checks" in text and "+49.8%" in text and "table 2: 64 KB put" in text
    assert "no held-out check" not in text
    assert max(map(len, lines)) <= 120
    # no held-out figure: said in one line; a platform without fitted factors: its rows are model inputs
    plain = api.calibration_text(_fit_rows())
    assert "no held-out check: the platform has no sourced MPI-level figure outside the fit" in plain
    inputs = api.calibration_text(_fit_rows(MODEL_INPUT)).splitlines()
    assert '"model input"' in inputs[0] and inputs[2].rstrip().endswith("model input")


def test_held_out_figures_are_he_et_al_figures_the_fit_did_not_use() -> None:
    model = load_platform("sunway_taihulight")
    assert model.mpi is not None
    fitted = {(p.size, p.kind, p.value) for p in model.mpi.inter_node}
    held = HELD_OUT["sunway_taihulight"]
    assert [(h.size, h.kind) for h in held] == [(65536, "latency"), (1024, "bandwidth"), (65536, "bandwidth"),
                                                (65536, "bandwidth")]
    assert not fitted & {(h.size, h.kind, h.value) for h in held}
    # the values are the paper's, as the he-sunway reproduction quotes them (us, MB/s)
    assert held[0].value == pytest.approx(he_put.PAPER_TABLE2[65536][0] * 1e-6)
    assert held[1].value == pytest.approx(he_put.PAPER_TABLE3[1024][0] * 1e6)
    assert held[2].value == pytest.approx(he_put.PAPER_TABLE3[65536][0] * 1e6)
    assert held[3].value == pytest.approx(he_put.PAPER_TABLE3[65536][1] * 1e6)
    assert set(HELD_OUT) == {"sunway_taihulight"}  # Rao et al. give Dawning/DeepComp nothing to hold out


@needs_simgrid
@pytest.mark.simgrid
def test_calibrate_sunway_marks_fit_targets_and_simulates_the_held_out_figures(
        capsys: pytest.CaptureFixture[str]) -> None:
    table = calibration_table("sunway_taihulight")
    assert (table["role"] == FIT_TARGET).all()
    held = table.attrs["held_out"]
    assert [h["role"] for h in held] == [HELD_OUT_CHECK] * 4
    # a 64 KB message on the calibrated platform: the 1 KB-4 MB line, 14.7 us, far from the 9.83 us put
    assert held[0]["simulated_s"] == pytest.approx(1.472e-5, rel=0.01)
    assert held[0]["rel_error"] == pytest.approx(0.498, abs=0.01)
    assert main(["calibrate", "sunway_taihulight", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["role"] for r in rows] == [FIT_TARGET] * 5 + [HELD_OUT_CHECK] * 4
    okita = calibration_table("okita_myrinet")  # smpi_factors = false: nothing fitted
    assert (okita["role"] == MODEL_INPUT).all() and okita.attrs["held_out"] == []


def test_he_sunway_marks_the_calibration_cells() -> None:
    model = load_platform("sunway_taihulight")
    assert model.mpi is not None
    pts = model.mpi.inter_node
    # the marked cells are exactly the platform's [mpi] points, with the paper's values
    assert pts[0].value == pytest.approx(he_put.PAPER_TABLE2[4][0] * 1e-6)
    assert pts[1].value == pytest.approx(he_put.PAPER_TABLE2[1024][0] * 1e-6)
    assert pts[2].value == pytest.approx(he_put.PAPER_TABLE3[4194304][0] * 1e6)
    assert he_put.role(2, 4, "Parallel C") == he_put.role(3, 4194304, "Parallel C") == "calibration target"
    assert he_put.role(2, 65536, "Parallel C") == he_put.role(3, 4194304, "MPI active") == "check"
    t2 = pd.DataFrame([{"size": s, "column": c, "paper_us": 1.0, "simulated_us": 5.668 if s == 1024 else 1.0,
                        "error": 0.0, "role": he_put.role(2, s, c)} for s in he_put.SIZES
                       for c in ("Parallel C", "MPI active", "MPI passive")])
    t3 = pd.DataFrame([{"size": 4194304, "column": "MPI active", "paper_MBps": 1.0, "simulated_MBps": 1.0,
                        "error": 0.0, "role": "check"}])
    a2a = pd.DataFrame([{"placement": str(i), "chosen": "ring" if g == 0 else "two_level_ring", "gain": g}
                        for i, g in enumerate([0.0] * 9 + [0.43580, 0.45349, 0.0251])])
    text = he_sunway.markdown(he_sunway.HeSunway(t2, t3, a2a, he_sunway.table4(), 128, 1, 1.0))
    assert "`calibration target` marks a cell" in text and "| role |" in text
    assert "| 4 | Parallel C | 1 | 1 | +0.0% | calibration target |" in text
    assert "read two ways" in text and "(5.668 us)" in text
    assert "Not a reproduction of the +8.1%" in text and "9 of 12 gain exactly 0" in text
    assert "2 with a gain of 10% or more (+43.6%, +45.3%)" in text


def test_okita_marks_input_cells_and_keeps_circular_comparisons_out_of_the_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    paper = okita_spilling.PAPER_TABLE1

    def cell(_full: Any, round_trips: int, variant: str) -> tuple[float, dict[str, Any]]:
        r = round_trips // okita_spilling.ROUND_TRIPS_PER_MB
        return paper[r][("S", "S_i", "S_f").index(variant)], {}

    monkeypatch.setattr(okita_spilling, "run_cell", cell)
    res = okita_spilling.reproduce()
    assert set(res.checks) == {"times_within_10pct", "si_sf_ratio_within_10pct"}
    assert set(res.circular) == {"kink_near_1920", "swap_ratio_within_10pct"}
    text = res.markdown()
    rows = [line for line in text.splitlines() if line.startswith("| 1920 |")]
    assert rows == ["| 1920 | 39.06 | 39.06 (input) | 45.36 | 45.36 (input) | 49.41 | 49.41 | 0.0% | 0.0% |"]
    assert "| 128 | 2.65 | 2.65 | 3.11 | 3.11 (input) | 3.09 | 3.09 |" in text
    assert "circular, not a check: the swap factor is set to the paper's 74.8" in text
    assert set(okita_spilling.INPUT_CELLS) == {(1920, "S"), (128, "S_i"), (1920, "S_i"), (2304, "S_i")}


def test_wu_lared_s_table_marks_calibration_targets() -> None:
    nan = float("nan")
    figures = {"steps": 3, "communication_share": 0.494, "computation_share": 0.506, "allreduce_wait_share": 0.99,
               "max_allreduce_wait_per_step": 40.9,
               "hcwpdm": {"eos_per_step": 28.0, "eos_share": 0.686, "eos_share_each": 0.775, "top2": ["a", "b"],
                          "seconds": 0.01, "peak_mib": 0.1},
               "cwpdm": {"eos_share": 0.763, "top2": ["a", "b"], "seconds": 0.01, "peak_mib": 0.7},
               "truth": {"eos_per_step_largest": 19.8, "realized_largest": 0.484, "realized_total": 0.627,
                         "speedup": 0.356, "top2": ["a", "b"], "eos_true_cost_total": nan}}
    rep = wu_lared_s.LaredS(wu_lared_s.lared_s_scenario(16, 3), None, figures, 1.0)  # type: ignore[arg-type]
    roles = {r[0]: r[-1] for r in rep.table()}
    assert set(roles) == set(wu_lared_s.ROLES)
    targets = {q for q, role in roles.items() if role == "calibration target"}
    assert targets == {"communication share of run time", "MPI_Allreduce share of all wait",
                       "largest allreduce wait per step", "EOS_Match segments' cost per step (largest allreduce wait)",
                       "EOS_Match share of the largest allreduce wait"}
    text = rep.markdown()
    assert "| communication share of run time | 49.4% | 49.4% |  |  |  | calibration target |" in text
    assert "| computation share of run time | 42.6% | 50.6% |  |  |  | check (no other time) |" in text
    assert "not a reproduction" in text


def test_rao_statement_10_says_where_the_pooled_verdict_is_contradicted() -> None:
    rows = []
    for ranks in (64, 128):
        for size in rao_statements.SIZES:
            pair_wins = ranks == 128 and size >= 16384
            for alg, t in (("ring", 2.0 if pair_wins else 1.0), ("pair", 1.5)):
                rows.append({"platform": "dawning_5000a", "algorithm": alg, "ranks": ranks, "size": size,
                             "seconds": t, "status": "ok"})
    st = next(s for s in rao_statements.STATEMENTS if s.key == "dawning-ring-beats-pair")
    verdict = rao_statements.judge(pd.DataFrame(rows), [st]).iloc[0]
    assert verdict["verdict"] == "holds"  # pooled, 11 of 16: unchanged
    assert verdict["numbers"].startswith("ring faster than pair at 11 of 16 points (64, 128 ranks)")
    assert "64 ranks 8/8; 128 ranks 3/8 (pair faster at 16 KB, 64 KB, 128 KB, 256 KB, 512 KB)" in verdict["numbers"]
    assert "at 128 ranks pair beats ring at most sizes, against Rao et al. 5.2" in verdict["numbers"]


def test_platforms_show_is_an_alias_and_wrong_forms_say_the_right_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platforms", "dawning_5000a"]) == 0
    plain = capsys.readouterr().out
    assert main(["platforms", "show", "dawning_5000a"]) == 0
    assert capsys.readouterr().out == plain
    assert main(["platforms", "show"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "waitlab platforms NAME" in err
    assert main(["platforms", "dawning_5000a", "deepcomp_7000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "waitlab platforms dawning_5000a" in err
