"""Acceptance of the diagnosis workbench on real SMPI runs (issue 24), on a reduced suite so it stays fast:
a model in a file outside the package is scored by ``waitlab diagnose`` and ``waitlab evaluate``, appears
in the leaderboard and scores worse than CWP-DM; a second evaluate simulates nothing and writes the same
bytes; a sweep with ``diagnose`` gets score columns and ``waitlab plot`` draws them."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from waitlab.cli import main
from waitlab.experiments.diagnosis.suite import BUILTIN_SUITE

pytestmark = [pytest.mark.simgrid, pytest.mark.slow]

BLAME_ZERO = textwrap.dedent('''
    """A user's model: every wait blamed on rank 0, in the waiter's region."""
    import pandas as pd

    def blame_zero(run, **options):
        w = run.waits
        region = run.events["region"].astype(str).to_numpy()[w["event"].to_numpy()]
        return pd.DataFrame({"rank": 0, "region": [r or "(top level)" for r in region],
                             "seconds": w["wait"].to_numpy()})

    def broken(run, **options):
        raise RuntimeError("not written yet")
''')
CASES = ("imbalance-one-late-16", "tie-near-16")


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "user"
    d.mkdir()
    (d / "mymodels.py").write_text(BLAME_ZERO)
    monkeypatch.chdir(d)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return d


def test_evaluate_scores_a_user_model_below_cwpdm(user_dir: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    args = ["evaluate", "--case", CASES[0], "--case", CASES[1], "--model", "mymodels:blame_zero",
            "--model", "mymodels:broken", "--cache", str(tmp_path / "cache"), "--no-png", "-q"]
    assert main([*args, "-o", str(tmp_path / "lb1")]) == 1  # the broken model is an error ...
    err = capsys.readouterr().err
    assert "model 'mymodels:broken' raised RuntimeError: not written yet" in err and "Traceback" not in err
    rows = pd.read_csv(tmp_path / "lb1" / "leaderboard.csv")
    assert set(rows["case"]) == set(CASES) and rows["model"].nunique() == 9  # 7 built-in + 2 of the user's
    ok = rows[rows["error"].isna()]  # ... and the others are scored
    mean = ok.groupby("model")[["top1", "blame_error", "rank_error"]].mean()
    assert mean.loc["mymodels:blame_zero", "top1"] < mean.loc["cwpdm", "top1"]
    assert mean.loc["mymodels:blame_zero", "blame_error"] > mean.loc["cwpdm", "blame_error"]
    # near ties (4 ms and 4 ms + 1 ns): the truth scores the tied set, CWP-DM splits the wait between the two
    tie = ok[(ok["case"] == "tie-near-16") & (ok["model"] == "cwpdm")].iloc[0]
    assert tie["top1"] == 1.0 and tie["rank_error"] < 0.1
    # a second evaluate: nothing simulated, the same bytes
    assert main([*args, "-o", str(tmp_path / "lb2"), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["runs_simulated"] == 0 and out["reruns_simulated"] == 0
    for f in ("leaderboard.md", "leaderboard.csv", "leaderboard.json"):
        assert (tmp_path / "lb1" / f).read_bytes() == (tmp_path / "lb2" / f).read_bytes(), f


def test_diagnose_runs_a_user_model(user_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["run", str(BUILTIN_SUITE / f"{CASES[0]}.toml"), "-o", str(run), "-q"]) == 0
    assert main(["diagnose", str(run), "--model", "mymodels:blame_zero", "--no-png", "--json",
                 "--cache", str(tmp_path / "cache")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["models"]) == {"cwpdm", "hcwpdm", "hcwpdm_each", "mymodels:blame_zero"}
    zero, cw = d["models"]["mymodels:blame_zero"], d["models"]["cwpdm"]
    assert {r["rank"] for r in zero["top_rank_region"]} == {0}
    assert zero["scores"]["top_k_rank_region"] < cw["scores"]["top_k_rank_region"]


def test_sweep_with_diagnose_adds_score_columns(user_dir: Path, tmp_path: Path) -> None:
    shutil.copy(BUILTIN_SUITE / f"{CASES[0]}.toml", user_dir / "base.toml")
    (user_dir / "sw.toml").write_text(textwrap.dedent('''
        base = "base.toml"
        [grid]
        "application.imbalance[0].magnitude" = [0.002, 0.008]
        [sweep]
        workers = 2
        diagnose = ["cwpdm", "profile"]
    '''))
    out = tmp_path / "sw"
    assert main(["sweep", str(user_dir / "sw.toml"), "-o", str(out), "--model", "mymodels:blame_zero", "-q"]) == 0
    table = pd.read_csv(out / "sweep.csv")
    for m in ("cwpdm", "profile", "mymodels:blame_zero"):
        assert {f"{m}.top1", f"{m}.blame_error"} <= set(table.columns)
    assert (table["cwpdm.top1"] == 1.0).all() and (table["profile.top1"] == 0.0).all()
    assert main(["plot", str(out), "-q"]) == 0
    assert (out / "sweep.png").stat().st_size > 0
    assert not (out / "model_failures.csv").exists()
    # a model that fails at every point: its scores are empty, each failure is a row, the command exits 1
    assert main(["sweep", str(user_dir / "sw.toml"), "-o", str(out), "--model", "mymodels:broken", "-q"]) == 1
    failed = pd.read_csv(out / "model_failures.csv")
    assert failed["model"].tolist() == ["mymodels:broken"] * 2
    assert failed["error"].str.contains("raised RuntimeError: not written yet").all()
    assert pd.read_csv(out / "sweep.csv")["mymodels:broken.top1"].isna().all()
