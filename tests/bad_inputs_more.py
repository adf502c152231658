"""More of the bad-input corpus (issue 23): the holes an independent corpus found, and the new surfaces.

- sweep grids: a million points, keys that do not exist, a mix of valid and invalid values, values SimGrid would
  crash on, a device or FIFO as the sweep or its base;
- scenarios: pingpong with an odd rank count, a process grid that does not hold the ranks, ``[simulation]
  config`` values smpirun would split, sizes and seconds beyond SimGrid's limits, devices and FIFOs;
- results folders that were edited after their run (a valid but different ``scenario.toml``, tables with rows
  dropped), read by diagnose, compare, export and check-c;
- sweep folders for plot (empty, binary ``sweep.csv``) and command-line values (NaN thresholds, negative
  tolerances, a picture named ``x.exe``, a 300-character output name).

Every case must give exit status 2 and one line naming the file and the field (``tests/test_bad_inputs.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from bad_inputs_corpus import CASES, GOOD, Built, Case, run_argv, write
from bad_inputs_files import GOOD_RUN

FFT = GOOD.replace('kind = "stencil"', 'kind = "fft"\nbytes_per_peer = 1024')


# ----------------------------------------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------------------------------------

def _scenario(text: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return run_argv(d, write(d / "s.toml", text)), "s.toml", field
    return build


SPLIT = '"maxmin/precision" = "1e-4 smpi/simulate-computation:no"'
SCENARIOS: list[tuple[str, str, str]] = [
    ("pingpong-1-rank", GOOD.replace("ranks = 4", "ranks = 1").replace("stencil", "pingpong"), "scenario.ranks"),
    ("pingpong-3-ranks", GOOD.replace("ranks = 4", "ranks = 3").replace("stencil", "pingpong"), "scenario.ranks"),
    ("pingpong-5-ranks", GOOD.replace("ranks = 4", "ranks = 5").replace("stencil", "pingpong"), "scenario.ranks"),
    ("stencil-grid-3x3", GOOD.replace("steps = 3", "steps = 3\ngrid = [3, 3]"), "application.grid"),
    ("stencil-grid-1x5", GOOD.replace("steps = 3", "steps = 3\ngrid = [1, 5]"), "application.grid"),
    ("wavefront-grid", GOOD.replace("stencil", "wavefront").replace("steps = 3", "steps = 3\ngrid = [8, 8]"),
     "application.grid"),
    ("config-split", f"{GOOD}\n[simulation.config]\n{SPLIT}\n", "maxmin/precision"),
    ("config-tab", f'{GOOD}\n[simulation.config]\n"maxmin/precision" = "1e-4\\t2"\n', "maxmin/precision"),
    ("config-newline", f'{GOOD}\n[simulation.config]\n"maxmin/precision" = "1e-4\\nx"\n', "maxmin/precision"),
    ("config-glob", f'{GOOD}\n[simulation.config]\n"smpi/host-speed" = "1*"\n', "smpi/host-speed"),
    ("config-bracket", f'{GOOD}\n[simulation.config]\n"smpi/host-speed" = "[1]"\n', "smpi/host-speed"),
    ("config-empty-value", f'{GOOD}\n[simulation.config]\n"smpi/host-speed" = ""\n', "smpi/host-speed"),
    ("config-key-space", f'{GOOD}\n[simulation.config]\n"smpi/host speed" = "1"\n', "smpi/host speed"),
    ("fft-bytes-1e11", FFT.replace("bytes_per_peer = 1024", "bytes_per_peer = 100000000000"),
     "application.bytes_per_peer"),
    ("fft-bytes-3e9", FFT.replace("bytes_per_peer = 1024", "bytes_per_peer = 3000000000"),
     "application.bytes_per_peer"),
    ("fft-compute-1e300", FFT.replace("bytes_per_peer = 1024", "bytes_per_peer = 1024\ncompute_seconds = 1e300"),
     "application.compute_seconds"),
    ("stencil-compute-1e10", GOOD.replace("steps = 3", "steps = 3\ncompute_seconds = 1e10"),
     "application.compute_seconds"),
    ("stencil-halo-3e9", GOOD.replace("steps = 3", "steps = 3\nhalo_bytes = 3000000000"), "application.halo_bytes"),
    ("matmul-1e10", GOOD.replace('kind = "stencil"\nsteps = 3', 'kind = "matmul"\nmatrix_size = 10000000000\n'
                                 'block_columns = 1'), "application.matrix_size"),
    # a collective's buffers beyond the node: 8 ranks on one node, 2 x 8 x (2^31 - 1) B each (128 GiB), and a
    # gather root of 32 ranks on a node of 16 (48 x (2^31 - 1) B); a typo next to a missing key is named (issue r22)
    ("fft-alltoall-buffers", FFT.replace("ranks = 4", "ranks = 8").replace("bytes_per_peer = 1024",
                                                                           "bytes_per_peer = 2147483647"),
     "application.bytes_per_peer"),
    ("stencil-gather-buffers", GOOD.replace("ranks = 4", "ranks = 32").replace(
        "steps = 3", 'steps = 3\ncollective = "gather"\nallreduce_bytes = 2147483647'), "application.allreduce_bytes"),
    ("platform-name-typo", GOOD.replace('name = "dawning_5000a"', 'nme = "dawning_5000a"'), "platform.nme"),
    ("imbalance-region-typo", GOOD + '\n[[application.imbalance]]\nregoin = "Stencil"\nranks = [1]\n'
     "magnitude = 0.1\n", "application.imbalance[0].regoin"),
    ("matmul-broadcast-too-big", GOOD.replace('kind = "stencil"\nsteps = 3', 'kind = "matmul"\nsteps = 1\n'
                                              'matrix_size = 65536\nblock_columns = 8192'), "application.matrix_size"),
]
for _id, _text, _field in SCENARIOS:
    CASES.append(Case("scenario", f"scenario-{_id}", _scenario(_text, _field)))


def _special(kind: str, make: Callable[[Path], Path]) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        path = make(d)
        if kind == "sweep":
            return ["sweep", str(path), "-o", str(d / "out")], path.name, "(file)"
        return run_argv(d, path), path.name, "(file)"
    return build


def _fifo(name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        os.mkfifo(d / name)
        return d / name
    return make


CASES.append(Case("scenario", "scenario-dev-zero", _special("scenario", lambda d: Path("/dev/zero"))))
CASES.append(Case("scenario", "scenario-fifo", _special("scenario", _fifo("s.toml"))))
CASES.append(Case("sweep", "sweep-dev-zero", _special("sweep", lambda d: Path("/dev/zero"))))
CASES.append(Case("sweep", "sweep-fifo", _special("sweep", _fifo("sw.toml"))))


def _noise_device(d: Path) -> Built:
    s = write(d / "s.toml", GOOD + '\n[noise]\nmodel = "signature"\nfile = "/dev/zero"\nperiod = 0.01\n')
    return run_argv(d, s), "zero", "(file)"


CASES.append(Case("noise", "noise-dev-zero", _noise_device))


# ----------------------------------------------------------------------------------------------------------------
# Sweep grids
# ----------------------------------------------------------------------------------------------------------------

def _sweep(text: str, field: str, base: str = GOOD) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        write(d / "base.toml", base)
        return ["sweep", str(write(d / "sw.toml", text)), "-o", str(d / "out")], "sw.toml", field
    return build


def _values(n: int) -> str:
    return ", ".join(str(i) for i in range(1, n + 1))


HEAD = 'base = "base.toml"\n[grid]\n'
SWEEPS: list[tuple[str, str, str]] = [
    ("million-points", f'{HEAD}"application.steps" = [{_values(1000)}]\n"scenario.seed" = [{_values(1000)}]\n',
     "grid"),
    ("ten-thousand-and-one", f'{HEAD}"application.steps" = [{_values(10001)}]\n', "grid"),
    ("three-keys-too-many", f'{HEAD}"application.steps" = [{_values(30)}]\n"scenario.seed" = [{_values(30)}]\n'
     f'"simulation.timeout" = [{_values(30)}]\n', "grid"),
    ("key-unknown-app", f'{HEAD}"application.nonsense" = [1]\n', "application.nonsense"),
    ("key-unknown-section", f'{HEAD}"nonsense.x" = [1]\n', "nonsense.x"),
    ("key-unknown-simulation", f'{HEAD}"simulation.speed" = [1]\n', "simulation.speed"),
    ("mixed-valid-invalid-steps", f'{HEAD}"application.steps" = [3, -1]\n', "application.steps=-1"),
    ("mixed-valid-invalid-type", f'{HEAD}"scenario.ranks" = [4, "eight"]\n', "scenario.ranks=eight"),
    ("mixed-valid-invalid-platform", f'{HEAD}"platform.name" = ["dawning_5000a", "nowhere"]\n',
     "platform.name=nowhere"),
    ("grid-mismatch", f'{HEAD}"application.grid" = [[2, 2], [3, 3]]\n', "application.grid=[3, 3]"),
    ("config-split", f'{HEAD}"simulation.config" = [{{}}, {{ {SPLIT} }}]\n', "grid (simulation.config="),
    ("bytes-too-big", f'{HEAD}"application.halo_bytes" = [1024, 100000000000]\n', "application.halo_bytes"),
    ("seconds-too-big", f'{HEAD}"application.compute_seconds" = [0.01, 1e300]\n', "application.compute_seconds"),
    ("pingpong-odd", f'{HEAD}"scenario.ranks" = [3]\n', "scenario.ranks=3"),
    ("ranks-nan", f'{HEAD}"simulation.timeout" = [nan]\n', "simulation.timeout=nan"),
    ("base-dev-zero", 'base = "/dev/zero"\n[grid]\n"scenario.ranks" = [4]\n', "base"),
]
for _id, _text, _field in SWEEPS:
    _base = GOOD.replace("stencil", "pingpong") if _id == "pingpong-odd" else GOOD
    CASES.append(Case("sweep", f"sweep-{_id}", _sweep(_text, _field, _base)))


# ----------------------------------------------------------------------------------------------------------------
# Results folders edited after their run (valid files, different content): never trusted
# ----------------------------------------------------------------------------------------------------------------

def _edit_text(name: str, old: str, new: str) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        (run / name).write_text((run / name).read_text().replace(old, new, 1))
    return go


def _drop_rows(name: str) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        df = pd.read_parquet(run / name)
        df.iloc[: max(1, len(df) // 2)].to_parquet(run / name)
    return go


def _scale(name: str, column: str) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        df = pd.read_parquet(run / name)
        df[column] = df[column] * 2
        df.to_parquet(run / name)
    return go


def _run_json_edit(run: Path) -> None:
    meta = json.loads((run / "run.json").read_text())
    meta["ranks"] = 8
    (run / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _marker_damaged(run: Path) -> None:
    (run / ".waitlab").write_text("{not json")


def _marker_sums_list(run: Path) -> None:
    data = json.loads((run / ".waitlab").read_text())
    data["sha256"] = ["x"]
    (run / ".waitlab").write_text(json.dumps(data))


def _copy(d: Path, damage: Callable[[Path], object]) -> Path:
    run = d / "run"
    shutil.copytree(GOOD_RUN[0], run)
    damage(run)
    return run


def _diagnose(damage: Callable[[Path], object], file: str, field: str = "(file)") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy(d, damage)
        return ["diagnose", str(run), "--no-truth", "--no-png", "-o", str(d / "out")], file, field
    return build


def _compare(damage: Callable[[Path], object], file: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy(d, damage)
        return ["compare", str(GOOD_RUN[0]), str(run)], file, "(file)"
    return build


def _export(damage: Callable[[Path], object], file: str, fmt: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy(d, damage)
        return ["export", str(run), f"--{fmt}", "-o", str(d / "out")], file, "(file)"
    return build


def _check_c(damage: Callable[[Path], object], file: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy(d, damage)
        return ["check-c", str(run)], file, "(file)"
    return build


EDITS: list[tuple[str, Callable[[Path], object], str]] = [
    ("scenario-ranks", _edit_text("scenario.toml", "ranks = 4", "ranks = 8"), "scenario.toml"),
    ("scenario-seed", _edit_text("scenario.toml", "seed = 7", "seed = 8"), "scenario.toml"),
    ("scenario-comment", _edit_text("scenario.toml", "# resolved", "# edited resolved"), "scenario.toml"),
    ("run-json-ranks", _run_json_edit, "run.json"),
    ("events-half", _drop_rows("events.parquet"), "events.parquet"),
    ("events-scaled", _scale("events.parquet", "exit"), "events.parquet"),
    ("waits-half", _drop_rows("waits.parquet"), "waits.parquet"),
    ("waits-scaled", _scale("waits.parquet", "wait"), "waits.parquet"),
    ("ledger-scaled", _scale("ledger.parquet", "seconds"), "ledger.parquet"),
]
for _id, _damage, _file in EDITS:
    CASES.append(Case("run folder", f"edited-diagnose-{_id}", _diagnose(_damage, _file)))
for _id, _damage, _file in EDITS[:4] + EDITS[4:5]:
    CASES.append(Case("run folder", f"edited-compare-{_id}", _compare(_damage, _file)))
for _id, _damage, _file in (EDITS[0], EDITS[4], EDITS[6]):
    CASES.append(Case("run folder", f"edited-export-otf2-{_id}", _export(_damage, _file, "otf2")))
    CASES.append(Case("run folder", f"edited-export-chrome-{_id}", _export(_damage, _file, "chrome")))
CASES.append(Case("run folder", "edited-check-c-events", _check_c(_scale("events.parquet", "exit"),
                                                                  "events.parquet")))
CASES.append(Case("run folder", "edited-marker-damaged", _diagnose(_marker_damaged, ".waitlab", "(integrity record)")))
CASES.append(Case("run folder", "edited-marker-sums-list", _diagnose(_marker_sums_list, ".waitlab",
                                                                     "(integrity record)")))
CASES.append(Case("run folder", "edited-compare-deleted-events", _compare(lambda r: (r / "events.parquet").unlink(),
                                                                          "events.parquet")))


# ----------------------------------------------------------------------------------------------------------------
# Sweep folders for plot, and values of the command line
# ----------------------------------------------------------------------------------------------------------------

def _plot(content: bytes | None, field: str, *extra: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        folder = d / "sw"
        folder.mkdir()
        if content is not None:
            (folder / "sweep.csv").write_bytes(content)
        return ["plot", str(folder), *extra], "sweep.csv" if "-o" not in extra else "(command line)", field
    return build


TABLE = b"application.steps,scenario_hash,makespan,total_wait,max_rank_wait\n3,aaaa,1.0,0.5,0.1\n"
CASES.append(Case("sweep folder", "plot-empty-csv", _plot(b"", "(file)")))
CASES.append(Case("sweep folder", "plot-binary-csv", _plot(bytes(range(256)) * 8, "(file)")))
CASES.append(Case("sweep folder", "plot-header-only", _plot(TABLE.split(b"\n")[0] + b"\n", "scenario_hash")))
CASES.append(Case("sweep folder", "plot-no-hash", _plot(b"a,b\n1,2\n", "scenario_hash")))
CASES.append(Case("sweep folder", "plot-missing-csv", _plot(None, "sweep.csv")))
CASES.append(Case("sweep folder", "plot-exe", _plot(TABLE, "-o", "-o", "x.exe")))
CASES.append(Case("sweep folder", "plot-no-suffix", _plot(TABLE, "-o", "-o", "picture")))


def _cli(args: Callable[[Path], list[str]], field: str, file: str = "(command line)") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return args(d), file, field
    return build


def _good_scenario(d: Path) -> str:
    return str(write(d / "s.toml", GOOD))


COMMAND_LINE: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("diagnose-threshold-nan", lambda d: ["diagnose", str(GOOD_RUN[0]), "--threshold", "nan", "--no-truth"],
     "--threshold"),
    ("diagnose-threshold-negative", lambda d: ["diagnose", str(GOOD_RUN[0]), "--threshold", "-0.5", "--no-truth"],
     "--threshold"),
    ("diagnose-threshold-one", lambda d: ["diagnose", str(GOOD_RUN[0]), "--threshold", "1", "--no-truth"],
     "--threshold"),
    ("diagnose-threshold-inf", lambda d: ["diagnose", str(GOOD_RUN[0]), "--threshold", "inf", "--no-truth"],
     "--threshold"),
    ("diagnose-top-k-zero", lambda d: ["diagnose", str(GOOD_RUN[0]), "--top-k", "0", "--no-truth"], "--top-k"),
    ("diagnose-candidates-negative", lambda d: ["diagnose", str(GOOD_RUN[0]), "--candidates", "-1", "--no-truth"],
     "--candidates"),
    ("diagnose-workers-zero", lambda d: ["diagnose", str(GOOD_RUN[0]), "--workers", "0"], "--workers"),
    ("check-c-atol-negative", lambda d: ["check-c", str(GOOD_RUN[0]), "--atol", "-1"], "--atol"),
    ("check-c-atol-nan", lambda d: ["check-c", str(GOOD_RUN[0]), "--atol", "nan"], "--atol"),
    ("check-c-atol-inf", lambda d: ["check-c", str(GOOD_RUN[0]), "--atol", "inf"], "--atol"),
    ("compare-png-exe", lambda d: ["compare", str(GOOD_RUN[0]), str(GOOD_RUN[0]), "--png", str(d / "x.exe")],
     "--png"),
    ("compare-png-folder", lambda d: ["compare", str(GOOD_RUN[0]), str(GOOD_RUN[0]), "--png", str(d)], "--png"),
]
for _id, _args, _field in COMMAND_LINE:
    CASES.append(Case("run folder", f"cli-{_id}", _cli(_args, _field)))


def _long_output(d: Path) -> list[str]:
    return ["run", _good_scenario(d), "-o", str(d / ("a" * 300)), "--no-png"]


CASES.append(Case("output folder", "output-300-characters", _cli(_long_output, "File name too long", "aaaa")))
