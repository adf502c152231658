"""The bad-input corpus, part 5 (issue 40): what an independent corpus of 1,240 hostile inputs still found.

Every case gives exit status 2 and one line naming the file and the field, leaving nothing behind
(``tests/test_bad_inputs.py``).  The classes of the issue, each with its own test in
``tests/test_bad_inputs_issue40.py``:

- ``INTEGRITY``: results folders and diagnoses whose integrity record (``.waitlab``) is missing, empty, without
  sums or not a file (``cp r/* dest/`` leaves it behind), read by diagnose, export, report, compare and check-c;
  ``report --diagnosis`` given ``{}``, ``[1,2,3]``, a 100 MB file, another run's diagnosis or an edited one;
- ``TRACEBACKS``: deeply nested run.json, ``.waitlab``, suite.toml and scenario (a 10,000-deep dotted key), a
  noise signature of 2 million detours, a C source that is not UTF-8, a program naming a region in Latin-1, an
  OTF2 archive whose names are not UTF-8;
- ``ACCEPTED``: a Latin-1 region in a TI trace, ``compare --top -3``, ``diagnose --cache FILE``,
  ``platforms --xml 0``, a random per-location ``.def`` of an OTF2 archive;
- ``HANGS``: a FIFO among an OTF2 archive's files;
- ``NOISY``: SimGrid setting values SimGrid cannot read (a double, a model, an SMPI-only key), a binary trace.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from bad_inputs_corpus import CASES, GOOD, Built, Case, run_argv, write
from bad_inputs_files import GOOD_RUN, PROGRAM_SCENARIO, TRACE, TRACE_SCENARIO

from waitlab import api
from waitlab.experiments.run_folder import seal

SCOREP = Path(__file__).parent / "data" / "scorep_ping_pong"
DEEP = 10_000
#: Diagnoses of the good run, made once (``diagnosis/`` with its record) for the report cases.
GOOD_DIAGNOSIS: list[Path] = []

INTEGRITY: list[str] = []
TRACEBACKS: list[str] = []
ACCEPTED: list[str] = []
HANGS: list[str] = []
NOISY: list[str] = []


def _add(group: list[str], kind: str, id: str, build: Callable[[Path], Built]) -> None:
    group.append(id)
    CASES.append(Case(kind, id, build))


def _copy_run(d: Path) -> Path:
    run = d / "run"
    shutil.copytree(GOOD_RUN[0], run, symlinks=True)
    return run


def good_diagnosis() -> Path:
    """``diagnosis.json`` of the good run, written (with its folder's record) by ``waitlab diagnose`` once."""
    if not GOOD_DIAGNOSIS:
        folder = GOOD_RUN[0].parent / "diagnosis"
        api.write_report(api.diagnose(GOOD_RUN[0], truth=False), folder, png=False)
        GOOD_DIAGNOSIS.append(folder / "diagnosis.json")
    return GOOD_DIAGNOSIS[0]


# ----------------------------------------------------------------------------------------------------------------
# Integrity records
# ----------------------------------------------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "diagnose": lambda run, d: ["diagnose", str(run), "--no-truth", "--no-png", "-o", str(d / "out")],
    "export": lambda run, d: ["export", str(run), "--chrome", "-o", str(d / "out")],
    "report": lambda run, d: ["report", str(run)],
    "compare": lambda run, d: ["compare", str(GOOD_RUN[0]), str(run)],
    "check-c": lambda run, d: ["check-c", str(run)],
}


def _marker(damage: Callable[[Path], object], command: str = "diagnose") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy_run(d)
        damage(run / ".waitlab")
        return COMMANDS[command](run, d), ".waitlab", "(integrity record)"
    return build


def _no_sums(marker: Path) -> None:
    data = json.loads(marker.read_text())
    del data["sha256"]
    marker.write_text(json.dumps(data))


def _dev_zero(marker: Path) -> None:
    marker.unlink()
    marker.symlink_to("/dev/zero")


def _deep_json(marker: Path) -> None:
    marker.write_text("[" * DEEP + "]" * DEEP)


MARKERS: dict[str, Callable[[Path], object]] = {
    "missing": Path.unlink,
    "empty": lambda m: m.write_text(""),
    "no-sha256": _no_sums,
    "sha256-empty-object": lambda m: m.write_text(json.dumps({**json.loads(m.read_text()), "sha256": {}})),
    "symlink-dev-zero": _dev_zero,
    "a-folder": lambda m: (m.unlink(), m.mkdir()),
    "deeply-nested": _deep_json,
}
for _id, _damage in MARKERS.items():
    _add(INTEGRITY, "run folder", f"integrity-marker-{_id}", _marker(_damage))
for _cmd in COMMANDS:  # deleting the record switches nothing off, whichever command reads the folder
    _add(INTEGRITY, "run folder", f"integrity-marker-missing-{_cmd}", _marker(Path.unlink, _cmd))


def _cp_star(command: str) -> Callable[[Path], Built]:
    """``cp run/* dest/``: every file but the hidden record."""
    def build(d: Path) -> Built:
        dest = d / "dest"
        dest.mkdir()
        for p in GOOD_RUN[0].iterdir():
            if not p.name.startswith(".") and p.is_file():
                shutil.copy(p, dest / p.name)
        return COMMANDS[command](dest, d), ".waitlab", "cp RUN/* DEST/"
    return build


for _cmd in ("diagnose", "compare"):
    _add(INTEGRITY, "run folder", f"integrity-cp-star-{_cmd}", _cp_star(_cmd))


def _unsummed(d: Path) -> Built:
    """A table of the run the record holds no sum of (an old record, or one edited to drop it)."""
    run = _copy_run(d)
    data = json.loads((run / ".waitlab").read_text())
    del data["sha256"]["summary.json"]
    (run / ".waitlab").write_text(json.dumps(data))
    return ["report", str(run)], "summary.json", "(integrity record)"


_add(INTEGRITY, "run folder", "integrity-table-not-summed", _unsummed)


def _report_diagnosis(content: Callable[[Path], Path], file: str, field: str,
                      trust: bool = False) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = _copy_run(d)
        diag = content(d)
        return (["report", str(run), "--diagnosis", str(diag), *(["--trust-edited"] if trust else [])], file,
                field)
    return build


def _sealed(name: str, data: str | bytes) -> Callable[[Path], Path]:
    """A diagnosis file in a folder whose record holds its sum: only its content can be wrong."""
    def make(d: Path) -> Path:
        folder = d / "diag"
        write(folder / name, data)
        seal(folder, "diagnosis", (name,))
        return folder / name
    return make


def _copied_diagnosis(d: Path) -> Path:
    return Path(shutil.copy(good_diagnosis(), write(d / "elsewhere" / "x", "").parent / "diagnosis.json"))


def _edited_diagnosis(d: Path) -> Path:
    folder = d / "diag"
    shutil.copytree(good_diagnosis().parent, folder)
    data = json.loads((folder / "diagnosis.json").read_text())
    data["baseline"] = {}
    (folder / "diagnosis.json").write_text(json.dumps(data))
    return folder / "diagnosis.json"


def _other_run(d: Path) -> Path:
    data = json.loads(good_diagnosis().read_text())
    data["run"]["ranks"] = 8  # the diagnosis of an 8-rank run
    return _sealed("diagnosis.json", json.dumps(data))(d)


def _huge(d: Path) -> Path:
    path = write(d / "diag" / "diagnosis.json", "[")
    with path.open("r+b") as fh:
        fh.truncate(100 << 20)  # 100 MB on one line (sparse: nothing is written)
    return path


REPORTS: list[tuple[str, Callable[[Path], Path], str, str, bool]] = [
    ("empty-object", _sealed("diagnosis.json", "{}"), "diagnosis.json", "models", False),
    ("list", _sealed("diagnosis.json", "[1, 2, 3]"), "diagnosis.json", "models", False),
    ("empty-object-trusted", lambda d: write(d / "diagnosis.json", "{}"), "diagnosis.json", "models", True),
    ("100-mb-one-line", _huge, "diagnosis.json", "(file)", True),
    ("deeply-nested", _sealed("diagnosis.json", "[" * DEEP + "]" * DEEP), "diagnosis.json", "(file)", False),
    ("other-run", _other_run, "diagnosis.json", "run.ranks", False),
    ("copied-without-record", _copied_diagnosis, ".waitlab", "(integrity record)", False),
    ("edited", _edited_diagnosis, "diagnosis.json", "(file)", False),
]
for _id, _make, _file, _field, _trust in REPORTS:
    _add(INTEGRITY, "run folder", f"integrity-report-diagnosis-{_id}", _report_diagnosis(_make, _file, _field,
                                                                                        _trust))


# ----------------------------------------------------------------------------------------------------------------
# Tracebacks that were left
# ----------------------------------------------------------------------------------------------------------------

def _run_json_deep(d: Path) -> Built:
    run = _copy_run(d)
    (run / "run.json").write_text("{\"a\": " * DEEP + "1" + "}" * DEEP)
    return ["diagnose", str(run), "--no-truth", "--no-png", "-o", str(d / "out")], "run.json", "(file)"


def _scenario_deep_key(d: Path) -> Built:
    s = write(d / "s.toml", GOOD + "\n[simulation]\n" + ".".join(["k"] * DEEP) + " = 1\n")
    return run_argv(d, s), "s.toml", "line 14"


def _suite_deep(d: Path) -> Built:
    write(d / "suite" / "a.toml", GOOD)
    write(d / "suite" / "suite.toml", "[[case]]\nfile = \"a.toml\"\ncause = \"x\"\n" + ".".join(["k"] * DEEP)
          + " = 1\n")
    return ["evaluate", str(d / "suite"), "-o", str(d / "out")], "suite.toml", "line 4"


def _noise_millions(d: Path) -> Built:
    write(d / "n.txt", b"0.001 0.000001\n" * 2_000_000)  # 2 million detours: refused before they are parsed
    s = write(d / "s.toml", GOOD + '\n[noise]\nmodel = "signature"\nfile = "n.txt"\nperiod = 10.0\n')
    return run_argv(d, s), "n.txt", "detours"


def _c_not_utf8(d: Path) -> Built:
    write(d / "m.c", b"#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); caf\xe9 = 1; "
          b"MPI_Finalize(); return 0; }\n")
    return run_argv(d, write(d / "s.toml", PROGRAM_SCENARIO)), "m.c", "(compile)"


def _region_not_utf8(d: Path) -> Built:
    write(d / "m.c", b'#include <mpi.h>\n#include "waitlab.h"\nint main(int c, char **v) { MPI_Init(&c, &v); '
          b'WAITLAB_REGION_BEGIN("R\xe9gion"); MPI_Barrier(MPI_COMM_WORLD); WAITLAB_REGION_END("R\xe9gion"); '
          b"MPI_Finalize(); return 0; }\n")
    return run_argv(d, write(d / "s.toml", PROGRAM_SCENARIO)), "m.c", "(region name)"


def _archive(d: Path, damage: Callable[[Path], object]) -> Path:
    shutil.copytree(SCOREP, d / "exp")
    damage(d / "exp")
    return d / "exp" / "traces.otf2"


def _otf2(damage: Callable[[Path], object], file: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return ["import-otf2", str(_archive(d, damage)), "-o", str(d / "out")], file, field
    return build


def _latin1_region(exp: Path) -> None:
    defs = exp / "traces.def"
    raw = defs.read_bytes()
    assert raw.count(b"int main(int, char**)") == 1
    defs.write_bytes(raw.replace(b"int main(int, char**)", b"int m\xe9in(int, char**)"))


def _fifo_events(exp: Path) -> None:
    (exp / "traces" / "1.evt").unlink()
    os.mkfifo(exp / "traces" / "1.evt")


def _random_def(exp: Path) -> None:
    (exp / "traces" / "1.def").write_bytes(bytes(range(7, 256, 3)))


_add(TRACEBACKS, "run folder", "deep-run-json", _run_json_deep)
_add(TRACEBACKS, "scenario", "scenario-deep-dotted-key", _scenario_deep_key)
_add(TRACEBACKS, "sweep", "suite-deep-dotted-key", _suite_deep)
_add(TRACEBACKS, "noise", "noise-2-million-detours", _noise_millions)
_add(TRACEBACKS, "program", "program-not-utf8", _c_not_utf8)
_add(TRACEBACKS, "program", "program-region-not-utf8", _region_not_utf8)
try:
    import otf2  # noqa: F401

    HAVE_OTF2 = shutil.which("cc") is not None
except ImportError:
    HAVE_OTF2 = False
if HAVE_OTF2:
    _add(TRACEBACKS, "trace", "otf2-name-not-utf8", _otf2(_latin1_region, "traces.def", "(definitions)"))


# ----------------------------------------------------------------------------------------------------------------
# Accepted silently before
# ----------------------------------------------------------------------------------------------------------------

def _trace_latin1(d: Path) -> Built:
    text = TRACE.replace("0 compute 1e6\n", "0 compute 1e6\n0 enter R\xe9gion\n0 leave R\xe9gion\n")
    write(d / "t" / "trace.txt", text.encode("latin-1"))
    return run_argv(d, write(d / "s.toml", TRACE_SCENARIO)), "trace.txt", "line 4"


def _cli(args: Callable[[Path], list[str]], file: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        return args(d), file, field
    return build


_add(ACCEPTED, "trace", "trace-latin1-region", _trace_latin1)
_add(ACCEPTED, "run folder", "cli-compare-top-negative",
     _cli(lambda d: ["compare", str(GOOD_RUN[0]), str(GOOD_RUN[0]), "--top", "-3"], "(command line)", "--top"))
_add(ACCEPTED, "run folder", "cli-diagnose-cache-file",
     _cli(lambda d: ["diagnose", str(GOOD_RUN[0]), "--cache", str(write(d / "cachefile", "x")), "-o",
                     str(d / "out")], "cachefile", "--cache"))
_add(ACCEPTED, "platform", "platforms-xml-zero",
     _cli(lambda d: ["platforms", "dawning_5000a", "--xml", "0"], "(command line)", "--xml"))
_add(ACCEPTED, "platform", "platforms-xml-without-name",
     _cli(lambda d: ["platforms", "--xml", "4"], "(command line)", "--xml"))
if HAVE_OTF2:
    _add(ACCEPTED, "trace", "otf2-random-location-def", _otf2(_random_def, "1.def", "(file)"))
    _add(HANGS, "trace", "otf2-fifo-events", _otf2(_fifo_events, "1.evt", "(file)"))


# ----------------------------------------------------------------------------------------------------------------
# Noisy errors
# ----------------------------------------------------------------------------------------------------------------

def _config(key: str, value: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        s = write(d / "s.toml", f'{GOOD}\n[simulation.config]\n"{key}" = "{value}"\n')
        return run_argv(d, s), "s.toml", field
    return build


def _binary_trace(d: Path) -> Built:
    write(d / "t" / "trace.txt", bytes(range(1, 128)) * 4)  # ASCII control characters: no UTF-8 error first
    return run_argv(d, write(d / "s.toml", TRACE_SCENARIO)), "trace.txt", "control character"


_add(NOISY, "scenario", "config-precision-banana", _config("maxmin/precision", "banana",
                                                           "simulation.config.maxmin/precision"))
_add(NOISY, "scenario", "config-unknown-network-model", _config("network/model", "Nonsense",
                                                                "simulation.config.network/model"))
_add(NOISY, "scenario", "config-smpi-key-bad-value", _config("smpi/os", "banana", "simulation.config"))
_add(NOISY, "trace", "trace-binary-control-characters", _binary_trace)
