"""``waitlab analyze`` (issue 38, part 4): a measured OTF2 trace diagnosed as it was recorded.

Expected wait states come from outside waitlab: Scalasca 2.6's published values for the Score-P ping-pong
(``../shared/tools/README.md``: Late Sender 4.5123e-05 s, Late Receiver 6.2056e-04 s), Scalasca itself on the CASITA
trace when it is installed (:mod:`waitlab.simulator.scalasca`), and a hand count over ``otf2-print``'s text (OTF2's own
reader, not waitlab's C reader nor its conversion) with Scalasca's definitions (``src/scout/generator/MPI.pattern``):
Late Sender = E_send - E_recv when positive; Late Receiver = E_recv - E_send when the send left after the receive was
entered; Wait at Barrier = last entry - own entry.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import subprocess
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from otf2_archives import two_rank_archive

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping
from waitlab.models.vocabulary import ACTIONS

try:
    import otf2  # noqa: F401  (the bindings: the archives below are written with them)

    from waitlab.models.otf2_ops import records_to_timed_ops
    from waitlab.simulator.otf2_import import read_otf2
    HAVE_OTF2 = shutil.which("otf2-print") is not None and shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
pytestmark = pytest.mark.skipif(not HAVE_OTF2, reason="python3-otf2 / otf2-tools / a C compiler not installed")

DATA = Path(__file__).parent / "data"
PINGPONG = DATA / "scorep_ping_pong" / "traces.otf2"
CASITA = DATA / "casita_ls_barr" / "traces.otf2"
#: Scalasca 2.6 on the Score-P ping-pong (../shared/tools/README.md), seconds.
SCALASCA_PINGPONG = {"late_sender": 4.5123e-05, "late_receiver": 6.2056e-04}
REL = 1e-3  # the 0.1%


def _by_hand(anchor: Path) -> dict[tuple[str, int], float]:
    """Wait per (pattern, rank) counted from otf2-print's text with Scalasca's definitions (module docstring)."""
    defs = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    rank_of = {int(ln.split()[1]): int(ln.split('Group: "MPI Rank ')[1].split('"')[0])
               for ln in defs.splitlines() if ln.startswith("LOCATION ") and "MPI Rank" in ln}
    out = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True).stdout
    call: dict[int, list[Any]] = {}  # rank -> [enter tick, records of the open MPI call]
    sends: dict[tuple[int, int, int], list[list[int]]] = defaultdict(list)  # (src, dst, tag) -> [enter, leave]
    recvs: dict[tuple[int, int, int], list[list[int]]] = defaultdict(list)
    barriers: dict[int, list[int]] = defaultdict(list)  # rank -> enter ticks of its barriers
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) < 3 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        rec, rank, t, rest = parts[0], rank_of[int(parts[1])], int(parts[2]), parts[3] if len(parts) > 3 else ""
        if rec == "ENTER" and 'Region: "MPI_' in rest:
            call[rank] = [t, []]
            if 'Region: "MPI_Barrier"' in rest:
                barriers[rank].append(t)
        elif rec in ("MPI_SEND", "MPI_RECV"):
            peer = int(rest.split(":")[1].split()[0])
            tag = int(rest.split("Tag: ")[1].split(",")[0])
            key = (rank, peer, tag) if rec == "MPI_SEND" else (peer, rank, tag)
            times = [call[rank][0], -1]
            (sends if rec == "MPI_SEND" else recvs)[key].append(times)
            call[rank][1].append(times)
        elif rec == "LEAVE" and 'Region: "MPI_' in rest:
            for times in call.pop(rank)[1]:
                times[1] = t
    res = float(defs.split("Ticks per Seconds:")[1].split(",")[0])
    waits: dict[tuple[str, int], float] = defaultdict(float)
    for (src, dst, _), ss in sends.items():
        for (e_s, x_s), (e_r, _x_r) in zip(ss, recvs[(src, dst, _)], strict=True):  # k-th send <-> k-th receive
            waits[("late_sender", dst)] += max(0, e_s - e_r) / res
            if x_s > e_r:
                waits[("late_receiver", src)] += max(0, e_r - e_s) / res
    for i in range(len(next(iter(barriers.values()), []))):
        last = max(b[i] for b in barriers.values())
        for rank, b in barriers.items():
            waits[("wait_at_barrier", rank)] += (last - b[i]) / res
    return {k: v for k, v in waits.items() if v > 0}


def _waits(folder: Path) -> dict[tuple[str, int], float]:
    w = pd.read_parquet(folder / "waits.parquet")
    g = w.groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return {(str(p), int(r)): float(v) for (p, r), v in g.items() if v > 0}


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``waitlab analyze`` of both Score-P traces (each copied, so nothing is written next to tests/data)."""
    root = tmp_path_factory.mktemp("analyze")
    out = {}
    for name, anchor in (("pingpong", PINGPONG), ("casita", CASITA)):
        shutil.copytree(anchor.parent, root / name)
        assert main(["analyze", str(root / name / "traces.otf2"), "-o", str(root / f"{name}-out"), "--no-png",
                     "-q"]) == 0
        out[name] = root / f"{name}-out"
    return out


def test_pingpong_waits_equal_scalasca_published_values(analyzed: dict[str, Path]) -> None:
    waits = _waits(analyzed["pingpong"])
    for pattern, seconds in SCALASCA_PINGPONG.items():
        total = sum(v for (p, _), v in waits.items() if p == pattern)
        assert total == pytest.approx(seconds, rel=REL), pattern
    assert {p for p, _ in waits} == set(SCALASCA_PINGPONG)


@pytest.mark.parametrize("name", ["pingpong", "casita"])
def test_waits_equal_a_hand_count_over_otf2_print(analyzed: dict[str, Path], name: str) -> None:
    hand = _by_hand(PINGPONG if name == "pingpong" else CASITA)
    waits = _waits(analyzed[name])
    assert set(waits) == set(hand)
    for key, seconds in hand.items():
        assert waits[key] == pytest.approx(seconds, rel=REL), key
    if name == "casita":  # the trace's story: ranks 1-3 wait for their sender in turn, then at the barrier
        assert {r for p, r in hand if p == "late_sender"} == {1, 2, 3}
        # otf2-print: rank 0 enters MPI_Send at tick 106116946908054, rank 1 MPI_Recv at 106107922094015 (1 ns ticks)
        assert hand[("late_sender", 1)] == pytest.approx((106116946908054 - 106107922094015) * 1e-9, rel=1e-12)


def test_casita_waits_equal_scalasca(analyzed: dict[str, Path], tmp_path: Path) -> None:
    """Scalasca itself, when found (:func:`waitlab.simulator.scalasca.find_scalasca`)."""
    try:
        sca = importlib.import_module("waitlab.simulator.scalasca")
    except ImportError:
        pytest.skip("waitlab.simulator.scalasca (the Scalasca runner) is not in this tree")
    prefix, reason = sca.find_scalasca()
    if prefix is None:
        pytest.skip(reason)
    try:
        importlib.import_module("pycubexr")
    except ImportError:
        pytest.skip("pycubexr is not installed (pip install 'waitlab[scalasca]')")
    for name, anchor in (("pingpong", PINGPONG), ("casita", CASITA)):
        shutil.copytree(anchor.parent, tmp_path / name)
        cubex = sca.run_scout(tmp_path / name / "traces.otf2", 4 if name == "casita" else 2, prefix=prefix)
        theirs = sca.scalasca_waits(sca.read_cubex(cubex))
        theirs = {(str(p), int(r)): float(s) for p, r, s in theirs.itertuples(index=False) if s > 0}
        mine = _waits(analyzed[name])
        assert set(mine) == set(theirs), name
        for key, seconds in theirs.items():
            assert mine[key] == pytest.approx(seconds, rel=REL), (name, key)


def test_results_folder_says_what_was_read(analyzed: dict[str, Path]) -> None:
    out = analyzed["casita"]
    meta = json.loads((out / "run.json").read_text())
    anchor = out.parent / "casita" / "traces.otf2"
    assert meta["source"] == meta["application_kind"] == "recorded" and meta["simulated"] is False
    assert meta["platform"] == "recorded" and meta["simgrid_version"] is None and meta["contention"] is None
    assert meta["eager_threshold"] == 0 and meta["archive"]["hosts"] == ["zih"] and meta["ranks"] == 4
    sums = meta["archive"]["sha256"]
    assert len(sums) == 10  # anchor, traces.def, traces/{0..3}.def and .evt
    for rel, digest in sums.items():
        assert hashlib.sha256((anchor.parent / rel).read_bytes()).hexdigest() == digest
    assert pd.read_csv(out / "placement.csv")["host"].tolist() == ["zih"] * 4
    scenario = tomllib.loads((out / "scenario.toml").read_text())
    assert set(scenario) == {"scenario", "application"}  # no platform, nothing simulated
    assert scenario["application"]["kind"] == "recorded"
    # every built-in model ran, with no truth; report.html carries them
    diag = json.loads((out / "diagnosis" / "diagnosis.json").read_text())
    assert set(diag["models"]) == set(api.diagnosis_models()) and diag["truth"] is None
    assert "no simulation" in (out / "report.html").read_text() and "CWP-DM" in (out / "report.html").read_text()


def test_diagnose_report_export_and_rerun_work_on_it(analyzed: dict[str, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = analyzed["pingpong"]
    assert main(["diagnose", str(out), "--no-truth", "-o", str(tmp_path / "d"), "--no-png", "-q"]) == 0
    assert main(["diagnose", str(out), "-o", str(tmp_path / "t"), "--no-png"]) == 0  # truth asked: none to compute
    assert "nothing was injected" in capsys.readouterr().out
    assert main(["report", str(out), "-q"]) == 0
    assert main(["export", str(out), "-o", str(tmp_path / "x"), "-q"]) == 0
    assert (tmp_path / "x" / "otf2" / "traces.otf2").is_file()
    # the folder's scenario is valid input: `waitlab run` of it reads the same trace into the same waits
    again = api.run(out / "scenario.toml", tmp_path / "again", png=False).result
    mine = pd.read_parquet(out / "waits.parquet")
    np.testing.assert_array_equal(again.waits["wait"].to_numpy(), mine["wait"].to_numpy())


def test_timed_operations_of_one_call_do_not_overlap(tmp_path: Path) -> None:
    """A sendrecv (both records in one MPI call) is isend, irecv, two waits: only the last spans the call."""
    def body(ws: list[Any], reg: dict[str, Any], world: Any) -> None:
        for me, w in enumerate(ws):
            w.enter(100, reg["MPI_Comm_rank"])  # a call with no operation: its time is in none
            w.leave(105, reg["MPI_Comm_rank"])
            w.enter(110 + 40 * me, reg["MPI_Sendrecv"])
            w.mpi_send(111 + 40 * me, 1 - me, world, 7, 32)
            w.mpi_recv(190, 1 - me, world, 7, 32)
            w.leave(200, reg["MPI_Sendrecv"])

    ops, t0, t1 = records_to_timed_ops(read_otf2(two_rank_archive(tmp_path / "sr", body)))
    for r in (0, 1):
        rows = np.flatnonzero(ops.rank == r)
        assert [ACTIONS[c] for c in ops.code[rows]] == ["compute", "isend", "irecv", "wait", "wait"]
        start = (110 + 40 * r - 100) * 1e-9  # seconds since the trace's first record (tick 100)
        np.testing.assert_allclose(t0[rows], [5e-9, start, start, start, start], atol=1e-15)
        np.testing.assert_allclose(t1[rows], [start, start, start, start, 100e-9], atol=1e-15)
    # the recorded wait states: rank 0 waits in its receive's wait for rank 1 to enter (40 ns, Late Sender)
    sc = api.recorded_scenario(tmp_path / "sr" / "traces.otf2")
    waits = api.run(sc).result.waits
    assert waits.groupby("pattern", observed=True)["wait"].sum().to_dict() == pytest.approx({"late_sender": 40e-9})
    assert api.run(sc).result.placement["host"].tolist() == ["node7", "node7"]


def test_bad_archives_and_scenarios_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.otf2").write_text("not an archive\n")
    shutil.copytree(PINGPONG.parent, tmp_path / "cut")
    (tmp_path / "cut" / "traces" / "1.evt").write_bytes((PINGPONG.parent / "traces" / "1.evt").read_bytes()[:200])
    for archive, needle in ((tmp_path / "missing.otf2", "does not exist"),
                            (tmp_path / "cut", f"is a folder (fix: give {tmp_path / 'cut' / 'traces.otf2'}, the"),
                            (tmp_path, "is a folder (fix: give the anchor file of the archive"),
                            (tmp_path / "junk.otf2", "cannot be read as OTF2"),
                            (tmp_path / "cut" / "traces.otf2", "traces.otf2")):
        for command in (["analyze", str(archive), "-o", str(tmp_path / "out")],
                        ["import-otf2", str(archive), "-o", str(tmp_path / "out")]):
            code = main(command)
            err = capsys.readouterr().err.strip()
            assert code != 0 and needle in err and "\n" not in err and "Traceback" not in err, (command, err)
            assert not (tmp_path / "out").exists()
    base = {"scenario": {"name": "r", "ranks": 2}, "application": {"kind": "recorded", "trace": str(PINGPONG)}}
    for extra, field in (({"platform": {"name": "dawning_5000a"}}, "platform"),
                         ({"noise": {"model": "periodic"}}, "noise"),
                         ({"simulation": {"timeout": 5.0}}, "simulation")):
        with pytest.raises(InputError) as exc:
            from_mapping({**base, **extra}, "s.toml")
        assert exc.value.field == field and "\n" not in str(exc.value)
    with pytest.raises(InputError, match="platform of a recorded run only"):
        from_mapping({"scenario": {"name": "s", "ranks": 2}, "platform": {"name": "recorded"},
                      "application": {"kind": "stencil"}}, "s.toml")
    with pytest.raises(InputError, match="holds 2 MPI ranks"):
        api.run(from_mapping({**base, "scenario": {"name": "r", "ranks": 3}}, "s.toml"))


def test_force_replaces_an_analyzed_folder_but_not_a_foreign_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The folder holds diagnosis/ with its own record: --force replaces the whole folder, unless a file waitlab did
    not write is in it."""
    argv = ["analyze", str(PINGPONG), "-o", str(tmp_path / "a"), "--no-png", "-q"]
    assert main(argv) == 0 and (tmp_path / "a" / "diagnosis" / "diagnosis.json").is_file()
    assert main(argv) == 2 and "already exists" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    (tmp_path / "a" / "diagnosis" / "mine.txt").write_text("a user's note\n")
    assert main([*argv, "--force"]) == 2 and "did not write" in capsys.readouterr().err
    assert (tmp_path / "a" / "diagnosis" / "mine.txt").is_file()


@pytest.mark.simgrid
@pytest.mark.parametrize("app", [
    {"kind": "wavefront", "steps": 2, "blocks": 2, "compute_seconds": 0.01},  # late senders that travel
    {"kind": "stencil", "dims": 2, "steps": 2, "compute_seconds": 0.01},  # wait at the allreduce (NxN)
])
def test_a_simulated_runs_export_reads_back_as_recorded(tmp_path: Path, app: dict[str, Any]) -> None:
    """waitlab's own OTF2 export of a simulated run, analyzed as recorded, has the run's waits per (pattern, rank)
    to the export's nanosecond rounding: the recorded path's times are the simulated ones."""
    region = "Sweep" if app["kind"] == "wavefront" else "Stencil"
    sc = from_mapping({"scenario": {"name": "rt", "ranks": 4}, "platform": {"name": "dawning_5000a"},
                       "application": {**app, "imbalance": [{"region": region, "ranks": [1], "magnitude": 0.02,
                                                             "distribution": "constant"}]}}, "rt.toml")
    api.run(sc, tmp_path / "run", png=False)
    api.export(tmp_path / "run", ("otf2",), tmp_path / "exp")
    assert main(["analyze", str(tmp_path / "exp" / "otf2" / "traces.otf2"), "-o", str(tmp_path / "an"),
                 "--no-png", "-q"]) == 0
    simulated, recorded = _waits(tmp_path / "run"), _waits(tmp_path / "an")
    assert set(recorded) == set(simulated) and sum(simulated.values()) > 0.01
    for key, seconds in simulated.items():
        assert recorded[key] == pytest.approx(seconds, abs=2e-8), key  # a few ns per wait state


def test_analyze_interrupted_in_its_diagnosis_keeps_the_run_folder_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(CASITA.parent, tmp_path / "casita")

    def stopped(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "diagnose", stopped)
    out = tmp_path / "out"
    assert main(["analyze", str(tmp_path / "casita" / "traces.otf2"), "-o", str(out), "--no-png", "-q"]) == 130
    err = capsys.readouterr().err
    assert "during the diagnosis" in err and f"waitlab diagnose {out} --no-truth" in err
    assert "nothing partial was kept" not in err
    assert (out / "events.parquet").is_file() and (out / "run.json").is_file() and not (out / "diagnosis").exists()
