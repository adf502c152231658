"""waitlab under hostile conditions (round 25, tester t5): interrupted re-exports, no home folder, memory limits,
SIGHUP, and the messages of odd environments.

- F2: ``export --otf2`` / ``--chrome`` and the leaderboard writer over an earlier output keep it whole when they are
  interrupted (never a truncated archive or trace.json that looks complete), and the account names the new output
  that was removed, not the run folder.
- F4: a relative ``WAITLAB_CACHE`` is made absolute (SimGrid runs in another folder); a user without a home folder
  and without ``WAITLAB_CACHE`` is told in one line to set it; Bokeh imports without a home folder.
- F6: an extension module the loader cannot map under ``ulimit -v`` is the one-line out-of-memory error.
- F7: SIGHUP (terminal closed, ssh dropped) stops a command as SIGTERM does (status 129); under ``nohup`` it stays
  ignored.
- F9: smpirun off ``PATH`` but installed is said so; EEXIST/ELOOP/ENOENT/ENAMETOOLONG writes get a fix that fits;
  1e19 flops of an allreduce warn nothing; a program that never called MPI_Init is told so.

Signals go to a real ``waitlab`` process; the rest runs in this process where it can.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import waitlab.experiments.diagnosis.leaderboard as leaderboard
import waitlab.experiments.exports as exports
from waitlab import api
from waitlab.cli import main
from waitlab.errors import EnvironmentProblem, Interrupted, is_write_failure, removed_by, write_error
from waitlab.experiments.diagnosis.evaluate import SCORES
from waitlab.simulator import build
from waitlab.simulator.smpi import failure

WAITLAB = Path(sys.executable).parent / "waitlab"
HAVE_SMPI = shutil.which("smpirun") is not None
ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")

SMALL = ('[scenario]\nname = "small"\nranks = 4\nseed = 1\n\n[platform]\nname = "dawning_5000a"\n\n'
         '[application]\nkind = "stencil"\nsteps = 3\n')
#: 64 ranks x 20 steps: a run (and an OTF2 export) that lasts long enough to be signalled while it writes.
MID = ('[scenario]\nname = "mid"\nranks = 64\nseed = 1\n\n[platform]\nname = "dawning_5000a"\n\n'
       '[application]\nkind = "lared_s"\nsteps = 20\n')


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> its SHA-256: equal when nothing was added, removed or
    changed."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder every user can enter (the no-home-folder cases run as another user)."""
    d = Path(tempfile.mkdtemp(prefix="waitlab-r25-hostile-"))
    d.chmod(0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def small_run(base: Path) -> Path:
    (base / "small.toml").write_text(SMALL)
    (base / "small.toml").chmod(0o644)
    assert main(["run", str(base / "small.toml"), "-o", str(base / "small"), "-q"]) == 0
    return base / "small"


@pytest.fixture(scope="module")
def mid_toml(base: Path) -> Path:
    (base / "mid.toml").write_text(MID)
    return base / "mid.toml"


@pytest.fixture(scope="module")
def cache_copy(base: Path, small_run: Path) -> Path:
    """The built native parts of this machine's cache (the small run built them), copied into a folder of its own,
    without a report skeleton (so a run there imports Bokeh)."""
    copy = base / "cache"
    copy.mkdir()
    for f in build.cache_dir().glob("waitlab-*"):
        if f.is_file():
            shutil.copy2(f, copy / f.name)
    for p in [copy, *copy.iterdir()]:
        p.chmod(0o777 if p.is_dir() else 0o755)
    return copy


def copied(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


def wait_for(pattern: str, proc: subprocess.Popen[str], timeout: float = 60) -> bool:
    """Poll until a path matches ``pattern`` (True) or the process ended (False)."""
    end = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < end:
        if glob.glob(pattern):
            return True
        time.sleep(0.002)
    return False


# ---------------------------------------------------------------------------------------------------- F2


def test_an_interrupted_otf2_re_export_keeps_the_earlier_archive(small_run: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = copied(small_run, tmp_path / "run")
    assert main(["export", str(run), "--otf2", "-q"]) == 0
    before = digests(run)
    real = exports.write_otf2

    def cut_short(*args: object, **kwargs: object) -> Path:
        anchor = real(*args, **kwargs)
        (anchor.parent / "traces.def").write_bytes(b"cut")  # half written when the signal came
        raise Interrupted("", signal.SIGINT)

    monkeypatch.setattr(exports, "write_otf2", cut_short)
    capsys.readouterr()
    assert main(["export", str(run), "--otf2"]) == 130
    err = capsys.readouterr().err
    assert err == (f"waitlab: interrupted; nothing partial was kept (the new {run / 'otf2'}, being written, was "
                   "removed)\n"), err
    assert digests(run) == before  # the archive whole, the record unchanged, nothing hidden left


def test_an_interrupted_chrome_re_export_keeps_the_earlier_trace(small_run: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = copied(small_run, tmp_path / "run")
    assert main(["export", str(run), "--chrome", "-q"]) == 0  # the earlier trace (a run writes none unless asked)
    before = digests(run)
    assert "trace.json" in before

    def cut_short(events: object, waits: object, meta: object, path: Path, *a: object, **k: object) -> bool:
        path.write_bytes(b'{"traceEvents": [{"ph": "X"')
        raise Interrupted("", signal.SIGTERM)

    monkeypatch.setattr(exports, "write_chrome_trace", cut_short)
    capsys.readouterr()
    assert main(["export", str(run), "--chrome"]) == 143
    err = capsys.readouterr().err
    assert f"(the new {run / 'trace.json'}, being written, was removed)" in err and f"({run}," not in err, err
    assert digests(run) == before


def test_an_export_that_completes_replaces_the_archive_and_leaves_nothing_hidden(small_run: Path,
                                                                                tmp_path: Path) -> None:
    run = copied(small_run, tmp_path / "run")
    assert main(["export", str(run), "--otf2", "--chrome", "--graphml", "-q"]) == 0
    (run / "otf2" / "stale-file").write_text("from an older export")
    first = {k: v for k, v in digests(run).items() if k != "otf2/stale-file"}
    assert main(["export", str(run), "--otf2", "--chrome", "--graphml", "-q"]) == 0
    assert digests(run) == first  # the same bytes again; the old archive went whole (its stray file too)
    assert not [p.name for p in run.iterdir() if ".partial-" in p.name]


def leaderboard_rows() -> pd.DataFrame:
    cases = ["a", "b"]
    rows = pd.DataFrame({"model": ["m", "m"], "name": ["M", "M"], "case": cases, "cause": ["x", "y"],
                         "what": cases, "ranks": [4, 4], "platform": ["p", "p"], "error": ["", ""],
                         "seconds": [0.1, 0.2]})
    for i, score in enumerate(SCORES):
        rows[score] = [0.1 * i, 0.2 * i]
    return rows


def test_an_interrupted_leaderboard_rewrite_keeps_the_earlier_files(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "board"
    leaderboard.write_leaderboard(leaderboard_rows(), out, [], png=False)
    before = digests(out)

    def stopped(*a: object, **k: object) -> None:
        raise Interrupted("", signal.SIGINT)

    monkeypatch.setattr(leaderboard, "leaderboard_dict", stopped)  # after leaderboard.md and .csv were written
    rows = leaderboard_rows()
    rows["top1"] = 1.0
    with pytest.raises(Interrupted) as info:
        leaderboard.write_leaderboard(rows, out, [], png=False)
    assert digests(out) == before
    assert removed_by(info.value) == f"the new output in {out} (leaderboard.md, leaderboard.csv)"


def test_sigint_during_an_otf2_re_export_keeps_the_earlier_archive(base: Path, mid_toml: Path,
                                                                   tmp_path: Path) -> None:
    run = tmp_path / "mid"
    assert main(["run", str(mid_toml), "-o", str(run), "-q", "--no-png"]) == 0
    assert main(["export", str(run), "--otf2", "-q"]) == 0
    before = digests(run)
    proc = subprocess.Popen([str(WAITLAB), "export", str(run), "--otf2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert wait_for(str(run / ".otf2.*.partial-*"), proc), "the export ended before it was signalled"
    time.sleep(0.05)  # inside the writing
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().endswith(f"(the new {run / 'otf2'}, being written, was removed)"), \
        (proc.returncode, err)
    assert digests(run) == before


# ---------------------------------------------------------------------------------------------------- F4


def test_a_relative_waitlab_cache_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WAITLAB_CACHE", "rel/cache")
    assert build.cache_dir() == tmp_path / "rel" / "cache"


def _no_passwd_entry(uid: int) -> pwd.struct_passwd:
    raise KeyError(f"getpwuid(): uid not found: {uid}")


def test_without_a_home_folder_the_cache_asks_for_waitlab_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOME", "WAITLAB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", _no_passwd_entry)
    assert os.path.expanduser("~") == "~"
    with pytest.raises(EnvironmentProblem, match=r"cannot determine a cache folder.*set WAITLAB_CACHE"):
        build.cache_dir()


def test_a_run_with_a_relative_waitlab_cache_works(base: Path, small_run: Path, cache_copy: Path,
                                                   tmp_path: Path) -> None:
    shutil.copytree(cache_copy, tmp_path / "relcache")
    shutil.copy(base / "small.toml", tmp_path / "small.toml")
    proc = subprocess.run([str(WAITLAB), "run", "small.toml", "-o", "out", "-q", "--no-png"], cwd=tmp_path,
                          env=dict(os.environ, WAITLAB_CACHE="relcache"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "out" / "report.html").is_file(), proc.stderr


REPORT_WITHOUT_HOME = """
import os, pwd, sys
def no_entry(uid):
    raise KeyError(uid)
pwd.getpwuid = no_entry
for name in ("HOME", "WAITLAB_CACHE", "XDG_CACHE_HOME"):
    os.environ.pop(name, None)
from waitlab.cli import main
code = main(["report", sys.argv[1], "-q"])
assert "HOME" not in os.environ, "HOME outlived the import of Bokeh"
sys.exit(code)
"""


def test_the_report_page_is_made_without_a_home_folder(small_run: Path, tmp_path: Path) -> None:
    """Bokeh reads Path.home() when imported; a user without one still gets the page (made without the cache)."""
    run = copied(small_run, tmp_path / "run")
    (run / "report.html").unlink()
    proc = subprocess.run([sys.executable, "-c", REPORT_WITHOUT_HOME, str(run)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and (run / "report.html").is_file(), proc.stderr
    assert not (tmp_path / "~").exists()


@pytest.mark.skipif(not ROOT or SETPRIV is None, reason="needs root and setpriv to be a user without a passwd entry")
def test_a_user_without_home_folder_or_passwd_entry(base: Path, small_run: Path, cache_copy: Path) -> None:
    work = base / "nohome"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    cmd = [str(SETPRIV), "--reuid=54321", "--regid=54321", "--clear-groups", "env", "-u", "HOME", "-u",
           "XDG_CACHE_HOME", "-u", "WAITLAB_CACHE"]
    run = [str(WAITLAB), "run", str(base / "small.toml"), "-q", "--no-png"]
    no_cache = subprocess.run([*cmd, *run, "-o", "a"], cwd=work, capture_output=True, text=True, timeout=120)
    assert no_cache.returncode == 4 and no_cache.stderr.count("\n") == 1, no_cache.stderr
    assert "set WAITLAB_CACHE" in no_cache.stderr and not (work / "~").exists() and not (work / "a").exists()
    cached = subprocess.run([*cmd, f"WAITLAB_CACHE={cache_copy}", *run, "-o", "b"], cwd=work, capture_output=True,
                            text=True, timeout=120)
    assert cached.returncode == 0 and (work / "b" / "report.html").is_file(), cached.stderr


# ---------------------------------------------------------------------------------------------------- F6


def test_an_extension_that_cannot_be_mapped_is_out_of_memory(base: Path, small_run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    def unmappable(*a: object, **k: object) -> None:
        raise ImportError("/venv/pandas/_libs/join.cpython-311-x86_64-linux-gnu.so: failed to map segment from "
                          "shared object")

    monkeypatch.setattr(api, "run", unmappable)
    capsys.readouterr()
    assert main(["run", str(base / "small.toml"), "-o", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("waitlab: error: out of memory (ImportError: ") and err.count("\n") == 1, err

    def missing(*a: object, **k: object) -> None:
        raise ImportError("No module named 'nothing_of_that_name'")

    monkeypatch.setattr(api, "run", missing)
    with pytest.raises(ImportError):  # not a memory problem: not said to be one
        main(["run", str(base / "small.toml"), "-o", str(tmp_path / "out")])


def test_no_memory_for_the_modules_themselves_is_one_line(tmp_path: Path) -> None:
    """Under a tight 'ulimit -v' the command can run out of memory while it imports its own modules (a MemoryError
    there, as a 120 MB limit gives): one line with status 4, no traceback.  (Where it runs out depends on the limit
    and the machine, and C code such as OpenBLAS's start-up or glibc's thread set-up may end the process itself
    before Python can say anything, a known gap: the failure is injected here, at a fixed place.)"""
    code = ("import builtins, sys\n"
            "real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name == 'waitlab.platforms.render':\n"
            "        raise MemoryError\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp\n"
            "sys.argv = ['waitlab', 'platforms']\n"
            "import waitlab.entry\n"
            "sys.exit(waitlab.entry.main())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 4 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("waitlab: error: out of memory (MemoryError")


# ---------------------------------------------------------------------------------------------------- F7


def test_sighup_stops_a_run_as_sigterm_does(mid_toml: Path, tmp_path: Path) -> None:
    out = tmp_path / "hup"
    proc = subprocess.Popen([str(WAITLAB), "run", str(mid_toml), "-o", str(out), "--no-png"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(str(tmp_path / ".hup.partial-*"), proc), "the run ended before it was signalled"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP, (proc.returncode, err)
    assert err.startswith("waitlab: interrupted; nothing partial was kept") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no results folder, no hidden partial
    assert not Path(tempfile.gettempdir(), f"waitlab-scratch-{proc.pid}").exists()


def _ignore_hup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does


def test_a_run_under_nohup_ignores_sighup(mid_toml: Path, tmp_path: Path) -> None:
    out = tmp_path / "nohup"
    proc = subprocess.Popen([str(WAITLAB), "run", str(mid_toml), "-o", str(out), "--no-png", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ignore_hup)
    assert wait_for(str(tmp_path / ".nohup.partial-*"), proc), "the run ended before it was signalled"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and (out / "run.json").is_file(), err


# ---------------------------------------------------------------------------------------------------- F9


def test_smpirun_installed_but_off_path_is_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not os.access("/usr/bin/smpirun", os.X_OK):
        pytest.skip("SimGrid is not installed in /usr/bin")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem) as info:
        build.require_tool("smpirun")
    text = str(info.value)
    assert "installed as /usr/bin/smpirun" in text and "PATH misses /usr/bin" in text, text
    assert "not installed" not in text


@pytest.mark.parametrize(("code", "words"), [
    (errno.EEXIST, "is not a folder"), (errno.ELOOP, "loop of symbolic links"),
    (errno.ENOENT, "missing, or was removed"), (errno.ENAMETOOLONG, "255 bytes")])
def test_path_errors_get_a_fix_that_fits(code: int, words: str) -> None:
    text = str(write_error(OSError(code, os.strerror(code)), "out/x"))
    assert words in text and "free disk space" not in text, text


def test_a_missing_file_is_not_taken_for_a_failed_write() -> None:
    assert not is_write_failure(FileNotFoundError(errno.ENOENT, "No such file or directory"))


def test_an_export_into_a_symlink_loop_says_so(small_run: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "loop").symlink_to("loop")
    capsys.readouterr()
    assert main(["export", str(small_run), "--graphml", "-o", str(tmp_path / "loop" / "x")]) == 2
    err = capsys.readouterr().err
    assert "loop of symbolic links" in err and "free disk space" not in err, err


def test_1e19_flops_of_an_allreduce_warn_nothing(tmp_path: Path) -> None:
    (tmp_path / "f.toml").write_text(SMALL.replace('kind = "stencil"', 'kind = "stencil"\nallreduce_flops = 1e19'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["run", str(tmp_path / "f.toml"), "-o", str(tmp_path / "out"), "-q", "--no-png"]) == 0
    assert not [w for w in caught if "invalid value encountered in cast" in str(w.message)]


def test_a_program_that_never_called_mpi_init_is_told_so(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "noinit.c").write_text('#include <stdio.h>\nint main(void) { printf("bye\\n"); return 0; }\n')
    (tmp_path / "p.toml").write_text('[scenario]\nname = "noinit"\nranks = 2\n\n[platform]\nname = '
                                     '"dawning_5000a"\n\n[application]\nkind = "program"\nsources = ["noinit.c"]\n')
    capsys.readouterr()
    assert main(["run", str(tmp_path / "p.toml"), "-o", str(tmp_path / "out"), "-q"]) != 0
    err = capsys.readouterr().err
    assert "ranks 0, 1 ended without calling MPI_Init" in err and err.count("\n") == 1, err


def test_simgrid_deaths_under_a_limit_say_which_limit() -> None:
    """SimGrid killed by a limit (tester t5, F6): SimGrid's words are quoted and the limit is named."""
    stack = str(failure("replay", 134, "[root/CRITICAL] Failed to allocate stack."))
    assert "Failed to allocate stack" in stack and "ulimit -v" in stack
    assert "ulimit -t" in str(failure("replay", 137, "Killed"))
    assert "CPU time limit ('ulimit -t') was reached" in str(failure("replay", 152, ""))


@pytest.mark.skipif(not ROOT or SETPRIV is None, reason="needs root and setpriv to build as another user")
def test_an_unwritable_cache_is_named_not_the_linker(base: Path) -> None:
    """A cache folder that exists but that the user cannot write (tester t5, F5): one line naming it and
    WAITLAB_CACHE, not the linker's 'cannot open output file'."""
    work = base / "rocache"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    cache = work / "cache"
    cache.mkdir(mode=0o555)
    cache.chmod(0o555)  # root's, read-only for the user below
    (work / "x.c").write_text("int main(void) { return 0; }\n")
    (work / "x.c").chmod(0o644)
    code = ("import sys; from pathlib import Path; from waitlab.errors import EnvironmentProblem\n"
            "from waitlab.simulator.build import build_native\n"
            "try:\n    build_native(Path(sys.argv[1]), 'x')\n"
            "except EnvironmentProblem as exc:\n    print(exc)\n")
    proc = subprocess.run([str(SETPRIV), "--reuid=54321", "--regid=54321", "--clear-groups", "env",
                           f"WAITLAB_CACHE={cache}", sys.executable, "-c", code, str(work / "x.c")], cwd=work,
                          capture_output=True, text=True, timeout=120)
    assert proc.stderr == "" and proc.stdout.count("\n") == 1, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith(f"{cache}: (cache folder): you may not write there")
    assert "WAITLAB_CACHE" in proc.stdout
