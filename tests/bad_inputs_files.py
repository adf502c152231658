"""Bad-input corpus, part 2: noise signatures, TI traces, program sources and results folders.

Adds its cases to :data:`tests.bad_inputs_corpus.CASES`.  Results-folder cases copy a good folder made once per
session (``GOOD_RUN[0]``, set by the test module's fixture) and damage it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from bad_inputs_corpus import CASES, GOOD, Built, Case, run_argv, unreadable, write

#: The good results folder the run-folder cases damage (set by a session fixture).
GOOD_RUN: list[Path] = []

# ----------------------------------------------------------------------------------------------------------------
# Noise signatures (START DURATION per line)
# ----------------------------------------------------------------------------------------------------------------

NOISE_SCENARIO = GOOD + '\n[noise]\nmodel = "signature"\nfile = "n.txt"\nperiod = 0.01\n'
SIGNATURE = "# start duration\n0.000 0.000025\n0.001 0.000025\n0.0045 0.0002\n"


def _noise(content: str | bytes | None, field: str, scenario: str = NOISE_SCENARIO) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        p = d / "n.txt"
        if content == b"\0folder":
            p.mkdir()
        elif content == b"\0unreadable":
            unreadable(write(p, SIGNATURE))
        elif content == b"\0huge":
            with p.open("wb") as fh:
                fh.truncate(65 << 20)
        elif content is not None:
            write(p, content)
        s = write(d / "s.toml", scenario)
        return run_argv(d, s), "n.txt" if field != "noise.period" else "s.toml", field
    return build


NOISE_CASES: list[tuple[str, str | bytes | None, str]] = [
    ("missing", None, "noise.file"),
    ("folder", b"\0folder", "noise.file"),
    ("not-utf8", b"0.0 0.001\n# \xff\xfe\n", "(encoding)"),
    ("binary", bytes(range(256)), "(encoding)"),
    ("absurdly-large", b"\0huge", "(file)"),
    ("one-column", "0.0\n", "line 1"),
    ("three-columns", "0.0 0.001 7\n", "line 1"),
    ("comma-separated", "0.0,0.001\n", "line 1"),
    ("not-numbers", "start duration\n", "line 1"),
    ("negative-start", "-1 0.001\n", "line 1"),
    ("negative-duration", "0.0 -0.001\n", "line 1"),
    ("inf", "0.0 inf\n", "line 1"),
    ("nan", "nan 0.001\n", "line 1"),
    ("decreasing", "0.002 0.0001\n0.001 0.0001\n", "line 2"),
    ("overlap", "0.000 0.002\n0.001 0.0001\n", "line 2"),
    ("truncated", "0.000 0.000025\n0.001", "line 2"),
    ("longer-than-period", "0.000 0.02\n", "noise.period"),
    ("hex-floats", "0x1p-3 0x1p-10\n", "line 1"),
]
for _id, _content, _field in NOISE_CASES:
    CASES.append(Case("noise", f"noise-{_id}", _noise(_content, _field)))
CASES.append(Case("noise", "noise-unreadable", _noise(b"\0unreadable", "(file)"), needs_nonroot=True))


# ----------------------------------------------------------------------------------------------------------------
# Time-independent traces
# ----------------------------------------------------------------------------------------------------------------

TRACE_SCENARIO = GOOD.replace("ranks = 4", "ranks = 2").replace(
    'kind = "stencil"\nsteps = 3', 'kind = "trace"\ntrace = "t/trace.txt"\nflops_per_second = 1e9')
TRACE = ("0 init\n1 init\n0 compute 1e6\n1 compute 2e6\n0 send 1 0 100\n1 recv 0 0 100\n"
         "0 barrier\n1 barrier\n0 allreduce 8 8\n1 allreduce 8 8\n0 finalize\n1 finalize\n")


def _trace(content: str | bytes | None, field: str, *, file: str = "trace.txt",
           scenario: str = TRACE_SCENARIO) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        p = d / "t" / "trace.txt"
        p.parent.mkdir()
        if content == b"\0folder":
            p.mkdir()
        elif content == b"\0unreadable":
            unreadable(write(p, TRACE))
        elif content is not None:
            write(p, content)
        s = write(d / "s.toml", scenario)
        return run_argv(d, s), file, field
    return build


def _line(old: str, new: str) -> str:
    assert old in TRACE, old
    return TRACE.replace(old, new, 1)


TRACE_CASES: list[tuple[str, str | bytes | None, str, str]] = [
    # id, content, file in the message, field in the message
    ("missing", None, "s.toml", "application.trace"),
    ("folder", b"\0folder", "s.toml", "application.trace"),
    ("not-utf8", _line("0 barrier", "0 barri\xe9r").encode("latin-1"), "trace.txt", "line 7"),
    ("binary", bytes(range(1, 256)), "trace.txt", ""),
    ("empty", "", "trace.txt", "(file)"),
    ("comments-only", "# nothing\n\n", "trace.txt", "(file)"),
    ("index-missing-file", "t/rank0.txt\nt/rank1.txt\n", "trace.txt", "line 1"),
    ("rank-outside", _line("1 barrier", "2 barrier"), "trace.txt", "line 8"),
    ("rank-negative", _line("1 barrier", "-1 barrier"), "trace.txt", "line 8"),
    ("no-action", _line("1 barrier", "1"), "trace.txt", "line 8"),
    ("unknown-action", _line("1 barrier", "1 barier"), "trace.txt", "line 8"),
    ("send-missing-count", _line("0 send 1 0 100", "0 send 1 0"), "trace.txt", "line 5"),
    ("send-count-word", _line("0 send 1 0 100", "0 send 1 0 lots"), "trace.txt", "line 5"),
    ("send-count-negative", _line("0 send 1 0 100", "0 send 1 0 -100"), "trace.txt", "line 5"),
    ("send-count-inf", _line("0 send 1 0 100", "0 send 1 0 inf"), "trace.txt", "line 5"),
    ("send-count-nan", _line("0 send 1 0 100", "0 send 1 0 nan"), "trace.txt", "line 5"),
    ("send-count-fraction", _line("0 send 1 0 100", "0 send 1 0 1.5"), "trace.txt", "line 5"),
    # larger than any node's memory, but a count a double holds exactly: refused once the trace is read
    ("send-count-absurd", _line("0 send 1 0 100", "0 send 1 0 1e15").replace("1 recv 0 0 100", "1 recv 0 0 1e15"),
     "trace.txt", "rank 0, operation"),
    # beyond 2**53: refused at its line
    ("send-count-beyond-2**53", _line("0 send 1 0 100", "0 send 1 0 1e30").replace("1 recv 0 0 100",
                                                                                    "1 recv 0 0 1e30"),
     "trace.txt", "line 5"),
    ("send-extra-fields", _line("0 send 1 0 100", "0 send 1 0 100 6 99 oops"), "trace.txt", "line 5"),
    ("send-peer-outside", _line("0 send 1 0 100", "0 send 7 0 100"), "trace.txt", "line 5"),
    ("send-any-source", _line("1 recv 0 0 100", "1 recv -333 0 100"), "trace.txt", "line 6"),
    ("send-bad-datatype", _line("0 send 1 0 100", "0 send 1 0 100 999"), "trace.txt", "line 5"),
    ("compute-nan", _line("0 compute 1e6", "0 compute nan"), "trace.txt", "line 3"),
    ("compute-negative", _line("0 compute 1e6", "0 compute -5"), "trace.txt", "line 3"),
    ("compute-missing", _line("0 compute 1e6", "0 compute"), "trace.txt", "line 3"),
    ("truncated-last-line", TRACE[:-len("1 finalize\n")] + "1 allred", "trace.txt", "line 12"),
    ("unmatched-send", _line("1 recv 0 0 100", "1 compute 5"), "trace.txt", "rank 0"),
    ("tag-mismatch", _line("1 recv 0 0 100", "1 recv 0 5 100"), "trace.txt", "rank 0"),
    ("size-mismatch", _line("1 recv 0 0 100", "1 recv 0 0 50"), "trace.txt", "rank 0"),
    ("collective-order", _line("1 barrier", "1 allreduce 8 8").replace("1 allreduce 8 8\n0 finalize",
                                                                      "1 barrier\n0 finalize"),
     "trace.txt", "barrier"),
    ("collective-missing", _line("1 allreduce 8 8\n", ""), "trace.txt", "allreduce"),
    ("collective-root", _line("0 barrier\n1 barrier", "0 bcast 8 0\n1 bcast 8 1"), "trace.txt", "bcast"),
    ("self-deadlock", _line("0 send 1 0 100\n1 recv 0 0 100", "0 recv 1 0 100\n1 recv 0 0 100"), "trace.txt",
     "rank 0"),
]
for _id, _content, _file, _field in TRACE_CASES:
    CASES.append(Case("trace", f"trace-{_id}", _trace(_content, _field, file=_file)))
CASES.append(Case("trace", "trace-unreadable", _trace(b"\0unreadable", "(file)"), needs_nonroot=True))
CASES.append(Case("trace", "trace-ranks-disagree",
                  _trace(TRACE, "(ranks)", scenario=TRACE_SCENARIO.replace("ranks = 2", "ranks = 3"))))
CASES.append(Case("trace", "trace-fps-zero", _trace(TRACE, "flops_per_second", file="s.toml", scenario=(
    TRACE_SCENARIO.replace("flops_per_second = 1e9", "flops_per_second = 0.0")))))
CASES.append(Case("trace", "trace-fps-inf", _trace(TRACE, "flops_per_second", file="s.toml", scenario=(
    TRACE_SCENARIO.replace("flops_per_second = 1e9", "flops_per_second = inf")))))
CASES.append(Case("trace", "trace-path-empty", _trace(TRACE, "application.trace", file="s.toml", scenario=(
    TRACE_SCENARIO.replace('trace = "t/trace.txt"', 'trace = ""')))))


# ----------------------------------------------------------------------------------------------------------------
# Program sources
# ----------------------------------------------------------------------------------------------------------------

PROGRAM_SCENARIO = GOOD.replace("ranks = 4", "ranks = 2").replace('kind = "stencil"\nsteps = 3',
                                                                   'kind = "program"\nsources = ["m.c"]')
PROGRAM = "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n"


def _program(content: str | bytes | None, field: str, scenario: str = PROGRAM_SCENARIO,
             name: str = "m.c") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        p = d / name
        if content == b"\0folder":
            p.mkdir()
        elif content == b"\0unreadable":
            unreadable(write(p, PROGRAM))
        elif content == b"\0huge":
            with p.open("wb") as fh:
                fh.truncate(65 << 20)
        elif content is not None:
            write(p, content)
        s = write(d / "s.toml", scenario)
        return run_argv(d, s), "s.toml" if "application" in field else name, field
    return build


def _prog_edit(old: str, new: str) -> str:
    assert old in PROGRAM_SCENARIO, old
    return PROGRAM_SCENARIO.replace(old, new, 1)


PROGRAM_CASES: list[tuple[str, str | bytes | None, str, str]] = [
    ("missing", None, "application.sources", PROGRAM_SCENARIO),
    ("folder", b"\0folder", "application.sources", PROGRAM_SCENARIO),
    ("absurdly-large", b"\0huge", "(file)", PROGRAM_SCENARIO),
    ("binary-not-source", bytes(range(256)), "(compile)", PROGRAM_SCENARIO),
    ("unknown-suffix", PROGRAM, "(suffix)", _prog_edit('["m.c"]', '["m.txt"]')),
    ("no-sources", PROGRAM, "application", _prog_edit('sources = ["m.c"]', "sources = []")),
    ("sources-string", PROGRAM, "application.sources", _prog_edit('["m.c"]', '"m.c"')),
    ("source-and-binary", PROGRAM, "application", _prog_edit('["m.c"]', '["m.c"]\nbinary = "a.out"')),
    ("binary-missing", PROGRAM, "application.binary", _prog_edit('sources = ["m.c"]', 'binary = "a.out"')),
    ("language-bad", PROGRAM, "application.language", _prog_edit('["m.c"]', '["m.c"]\nlanguage = "rust"')),
    ("exit-code-range", PROGRAM, "application", _prog_edit('["m.c"]', '["m.c"]\nexit_codes = [300]')),
    ("args-not-strings", PROGRAM, "application.args", _prog_edit('["m.c"]', '["m.c"]\nargs = [1, 2]')),
    ("computation-bad", PROGRAM, "application.computation", _prog_edit('["m.c"]', '["m.c"]\ncomputation = "real"')),
    ("unknown-key", PROGRAM, "application.flags", _prog_edit('["m.c"]', '["m.c"]\nflags = ["-O2"]')),
]
for _id, _content, _field, _scen in PROGRAM_CASES:
    _name = "m.txt" if _id == "unknown-suffix" else "m.c"
    CASES.append(Case("program", f"program-{_id}", _program(_content, _field, _scen, _name)))
CASES.append(Case("program", "program-unreadable", _program(b"\0unreadable", "(file)"), needs_nonroot=True))


# ----------------------------------------------------------------------------------------------------------------
# Results folders (read back by diagnose)
# ----------------------------------------------------------------------------------------------------------------

def _folder(damage: Callable[[Path], object], file: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        run = d / "run"
        shutil.copytree(GOOD_RUN[0], run)
        damage(run)
        return ["diagnose", str(run), "--no-truth", "--no-png", "-o", str(d / "out")], file, field
    return build


def _truncate(name: str, keep: float = 0.5) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        raw = (run / name).read_bytes()
        (run / name).write_bytes(raw[: int(len(raw) * keep)])
    return go


def _replace(name: str, content: str | bytes) -> Callable[[Path], object]:
    return lambda run: write(run / name, content)


def _remove(name: str) -> Callable[[Path], object]:
    return lambda run: (run / name).unlink()


def _json_edit(key: str, value: object) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        meta = json.loads((run / "run.json").read_text())
        meta[key] = value
        (run / "run.json").write_text(json.dumps(meta))
    return go


def _as_folder(name: str) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        (run / name).unlink()
        (run / name).mkdir()
    return go


def _drop_column(name: str, column: str) -> Callable[[Path], object]:
    def go(run: Path) -> None:
        df = pd.read_parquet(run / name)
        df.drop(columns=[column]).to_parquet(run / name)
    return go


FOLDER_CASES: list[tuple[str, Callable[[Path], object], str, str]] = [
    ("no-run-json", _remove("run.json"), "run", "(folder)"),
    ("run-json-truncated", _truncate("run.json"), "run.json", "(file)"),
    ("run-json-not-json", _replace("run.json", "schema_version = 3\n"), "run.json", "(file)"),
    ("run-json-not-utf8", _replace("run.json", b'{"a": "\xff"}'), "run.json", "(encoding)"),
    ("run-json-list", _replace("run.json", "[1, 2]"), "run.json", "schema_version"),
    ("run-json-folder", _as_folder("run.json"), "run", "(folder)"),
    ("schema-version-old", _json_edit("schema_version", 0), "run.json", "schema_version"),
    ("schema-version-string", _json_edit("schema_version", "x"), "run.json", "schema_version"),
    ("scenario-missing", _remove("scenario.toml"), "scenario.toml", "(file)"),
    ("scenario-bad", _replace("scenario.toml", "[scenario\n"), "scenario.toml", "(syntax)"),
    ("scenario-invalid", _replace("scenario.toml", "[scenario]\nranks = 0\n[platform]\nname = \"x\"\n"
                                  "[application]\nkind = \"stencil\"\n"), "scenario.toml", "scenario.ranks"),
    ("ops-missing", _remove("ops.parquet"), "ops.parquet", "(file)"),
    ("ops-truncated", _truncate("ops.parquet"), "ops.parquet", "(file)"),
    ("ops-text", _replace("ops.parquet", "not parquet\n"), "ops.parquet", "(file)"),
    ("ops-empty", _replace("ops.parquet", b""), "ops.parquet", "(file)"),
    ("ops-folder", _as_folder("ops.parquet"), "ops.parquet", "(file)"),
    ("events-missing", _remove("events.parquet"), "events.parquet", "(file)"),
    ("events-truncated", _truncate("events.parquet"), "events.parquet", "(file)"),
    ("events-head-only", _truncate("events.parquet", 0.05), "events.parquet", "(file)"),
    ("events-text", _replace("events.parquet", "rank,seq\n0,1\n"), "events.parquet", "(file)"),
    ("events-no-enter", _drop_column("events.parquet", "enter"), "events.parquet", "enter"),
    ("waits-missing", _remove("waits.parquet"), "waits.parquet", "(file)"),
    ("waits-truncated", _truncate("waits.parquet"), "waits.parquet", "(file)"),
    ("ledger-missing", _remove("ledger.parquet"), "ledger.parquet", "(file)"),
    ("ledger-truncated", _truncate("ledger.parquet"), "ledger.parquet", "(file)"),
    ("ledger-no-kind", _drop_column("ledger.parquet", "kind"), "ledger.parquet", "kind"),
]
for _id, _damage, _file, _field in FOLDER_CASES:
    CASES.append(Case("run folder", f"folder-{_id}", _folder(_damage, _file, _field)))
CASES.append(Case("run folder", "folder-missing", lambda d: (
    ["diagnose", str(d / "nope"), "--no-truth", "--no-png", "-o", str(d / "out")], "nope", ""
)))
CASES.append(Case("run folder", "folder-unreadable-events", _folder(lambda r: unreadable(r / "events.parquet"),
                                                                    "events.parquet", "(file)"), needs_nonroot=True))


# ----------------------------------------------------------------------------------------------------------------
# Output folders (-o): never destroy what waitlab did not write, never leave a partial folder
# ----------------------------------------------------------------------------------------------------------------

def _output(make: Callable[[Path], Path], field: str = "(output folder)", force: bool = False
            ) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        s = write(d / "s.toml", GOOD)
        target = make(d)
        return ["run", str(s), "-o", str(target), "--no-png", *(["--force"] if force else [])], target.name, field
    return build


def _foreign(d: Path) -> Path:
    write(d / "victim" / "keep" / "file.txt", "not waitlab's")
    return d / "victim"


def _symlink(d: Path) -> Path:
    (d / "real").mkdir()
    (d / "link").symlink_to(d / "real")
    return d / "link"


def _readonly(d: Path) -> Path:
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    return d / "ro" / "out"


OUTPUT_CASES: list[tuple[str, Callable[[Path], Path], bool]] = [
    ("is-a-file", lambda d: write(d / "result.txt", "x"), False),
    ("is-a-file-forced", lambda d: write(d / "result.txt", "x"), True),
    ("under-a-file", lambda d: write(d / "plain", "x") / "out", False),
    ("foreign-folder", _foreign, False),
    ("foreign-folder-forced", _foreign, True),
    ("symlink", _symlink, True),
    ("current-folder-forced", lambda d: d, True),
]
for _id, _make, _force in OUTPUT_CASES:
    CASES.append(Case("output folder", f"output-{_id}", _output(_make, force=_force)))
CASES.append(Case("output folder", "output-read-only", _output(_readonly), needs_nonroot=True))


def _capture_foreign(d: Path) -> Built:
    write(d / "m.c", PROGRAM)
    s = write(d / "s.toml", PROGRAM_SCENARIO)
    return ["capture", str(s), "-o", str(_foreign(d)), "--force"], "victim", "(output folder)"


CASES.append(Case("output folder", "output-capture-foreign-forced", _capture_foreign))
