"""A results folder's life: written into a hidden sibling and renamed only when complete, marked as waitlab's
(``.waitlab`` lists what it wrote and the SHA-256 of the files later commands read), replaced only when it is
waitlab's own, and refused when edited after the run."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from waitlab.errors import PATH_CAUSES, WRITE_CAUSES, InputError, WriteError, note_removed, write_error
from waitlab.experiments.leftovers import clean_stale_inside, clean_stale_partials, partial_name, stale_partial
from waitlab.experiments.writer import remove_path
from waitlab.readers import parse_json, read_text
from waitlab.simulator.build import cache_dir

#: The writers of ``report.html`` and ``timeline.png``, which :mod:`waitlab.experiments.results` imports when it first
#: uses them (:class:`waitlab.lazy.Deferred`): they bring Bokeh and matplotlib (1-1.5 s of imports), which the way
#: to a run's SMPI stage does not need.
PICTURE_MODULES = {"report.html": "waitlab.experiments.report.html", "timeline.png": "waitlab.experiments.report.plots"}


MARKER = ".waitlab"
#: Written next to a sweep's ``sweep.csv`` when the sweep was interrupted: that table then lists only the finished
#: points.
INCOMPLETE = "incomplete.txt"
#: What only a sweep makes in its folder (which has no ``.waitlab`` record): ``.sweep.lock`` (there while a sweep runs,
#: and after one was killed), a point's results folder in ``runs/`` (named by its scenario hash, 16 hex digits, with
#: waitlab's record), or a ``sweep.csv`` whose header names ``scenario_hash`` (a sweep whose points all failed, or
#: that was stopped before one finished, leaves its tables beside an empty ``runs/``).  A folder holding one of them
#: is a sweep's (:func:`sweep_started`), resumed whatever else is there (a sweep writes only its own names); any other
#: existing folder must hold nothing (:func:`check_output_folder`): a ``runs/`` alone is a common name, and a user's
#: ``sweep.csv`` or ``failed.csv`` beside it is never replaced.
SWEEP_STARTED = (".sweep.lock", "runs", "sweep.csv")
#: A sweep point's folder name in ``runs/``: its scenario hash (:meth:`waitlab.experiments.scenario.Scenario.hash`).
POINT_NAME = re.compile(r"[0-9a-f]{16}")
#: Folder default outputs go under (``results/<scenario name>``).
RESULTS_ROOT = Path("results")
#: Files of a results folder that later commands read back; their SHA-256 goes into the marker (the folder's
#: integrity record) when the folder is written, and :func:`verify_folder` refuses a folder where one of them
#: changed, or whose record does not hold it.  Every run writes the first six; the others when present.
CHECKED_FILES = ("run.json", "scenario.toml", "ops.parquet", "ledger.parquet", "events.parquet", "waits.parquet",
                 "summary.json", "ranks.parquet", "placement.csv", "noise_detours.parquet")
REQUIRED_SUMS = CHECKED_FILES[:6]
#: Largest integrity record read (bytes); a record lists a few dozen names and sums.
MAX_MARKER_BYTES = 1 << 20
#: Said by every refusal of an unverifiable folder: how to rebuild it, or read it anyway.
REBUILD = ("re-run `waitlab run` to rewrite the folder (copy results folders whole: `cp -a RUN DEST`), or pass "
           "--trust-edited to read it anyway, every output then marked as read from an edited folder")


def default_output(name: str, suffix: str = "", root: Path = RESULTS_ROOT) -> Path:
    """``results/<name><suffix>``; names are checked plain by the schema, so this never leaves ``root``."""
    out = root / f"{name}{suffix}"
    if out.resolve().parent != root.resolve():
        raise InputError("(command line)", "-o", f"the default output for {name!r} would leave {root}/",
                         "pass -o FOLDER")
    return out


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def seal(folder: Path, kind: str = "run", sums_of: tuple[str, ...] = CHECKED_FILES, **more: Any) -> None:
    """Write ``folder``'s integrity record: what waitlab wrote there and the SHA-256 of the files read back
    (``more``: further keys, e.g. the run a diagnosis belongs to).  A sub-folder holding a run of its own
    (``unperturbed/``) gets its own record."""
    for sub in sorted(p.name for p in folder.iterdir() if p.name != MARKER):
        if (folder / sub / "run.json").is_file() and not (folder / sub / MARKER).exists():
            seal(folder / sub, kind)
    (folder / MARKER).write_text(record_text(folder, kind, sums_of, **more))


def record_text(folder: Path, kind: str, sums_of: Sequence[str] = CHECKED_FILES,
                staged: Mapping[str, Path] | None = None, dropped: Collection[str] = (), **more: Any) -> str:
    """The text of ``folder``'s integrity record (:func:`seal`).  ``staged``: files about to replace the folder's
    (final name -> the temporary file written for it, :func:`waitlab.experiments.writer.replaced_files`), listed
    and summed as if already in place, so that the record can be replaced together with them; ``dropped``: files
    about to be removed, not listed."""
    staged = dict(staged or {})
    clean_stale_partials(folder)  # files of a rewrite killed earlier are not the folder's, nor those being written
    files = sorted({p.name for p in folder.iterdir()  # (these, or another export's into the same folder)
                    if p.name != MARKER and not partial_name(p.name) and p.name not in dropped}
                   | (set(staged) - {MARKER}))
    where = {n: staged.get(n, folder / n) for n in sums_of}
    sums = {n: file_digest(path) for n, path in where.items() if path.is_file()}
    return json.dumps({"kind": kind, "files": files, "sha256": sums, **more}, indent=1) + "\n"


def read_record(folder: Path, what: str = "results folder", fix: str = REBUILD) -> dict[str, Any]:
    """The integrity record of ``folder`` (``.waitlab``, a JSON object with ``sha256``), or one
    :class:`InputError` saying what is missing and how to rebuild it."""
    marker = folder / MARKER
    why = ""
    if marker.is_symlink():
        why = "is a symbolic link, not waitlab's record"
    elif not marker.exists():
        why = ("is missing (a copy such as `cp RUN/* DEST/` leaves this hidden file behind), so waitlab cannot "
               f"tell whether the {what} was edited after waitlab wrote it")
    if why:
        raise InputError(str(marker), "(integrity record)", why, fix)
    try:
        data = parse_json(read_text(marker, "integrity record", MAX_MARKER_BYTES), str(marker), "integrity record",
                          quiet=True)
    except InputError as exc:
        raise InputError(str(marker), "(integrity record)", exc.problem, fix) from None
    sums = data.get("sha256") if isinstance(data, dict) else None
    if not isinstance(sums, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sums.items()):
        raise InputError(str(marker), "(integrity record)", "is damaged or empty: it holds no SHA-256 sums "
                         "(key sha256) of the folder's files", fix)
    assert isinstance(data, dict)
    return data


def verify_folder(folder: Path, trust_edited: bool = False, checked: Sequence[str] | None = CHECKED_FILES,
                  required: Sequence[str] = REQUIRED_SUMS) -> str:
    """Refuse a results folder whose integrity record is missing or damaged, or whose checked files differ from
    the SHA-256 sums its run recorded; ``""`` when it is intact.

    ``checked``: the files compared (``None``: every file the record lists), ``required`` those the record must
    list.  With ``trust_edited`` nothing is refused: the reason it would have been is returned, for the outputs to
    say they were made from an edited folder.
    """
    try:
        sums = read_record(folder)["sha256"]
        for name in sorted(sums) if checked is None else checked:
            path = folder / name
            if name not in sums:
                if name in required or path.exists():
                    raise InputError(str(path), "(integrity record)", f"has no SHA-256 in {MARKER}: it was added "
                                     "after the run, or the record was edited", REBUILD)
                continue
            if not path.is_file():
                raise InputError(str(path), "(file)", "was deleted after the run wrote the folder", REBUILD)
            if file_digest(path) != sums[name]:
                raise InputError(str(path), "(file)", "was changed after the run wrote it (its SHA-256 differs "
                                 f"from the one recorded in {MARKER}); an edited results folder is not trusted",
                                 REBUILD)
    except InputError as exc:
        if not trust_edited:
            raise
        return str(exc).split(" (fix: ")[0]
    return ""


def foreign_entries(folder: Path, whole: bool = False) -> list[str]:
    """Entries of ``folder`` that waitlab's marker does not list (all of them when there is no marker); waitlab's
    hidden partial files (:data:`PARTIAL_NAMES`) are not counted: those processes that no longer run left
    (:func:`stale_partial`) and, unless the folder is to be replaced ``whole`` (``run --force``, which would lose
    them), those a running waitlab is writing (a second export into the same folder writes beside them).  Nor is,
    in a folder holding waitlab's record, a folder holding nothing else (``diagnosis/`` of a first ``diagnose``
    stopped)."""
    entries = sorted(p.name for p in folder.iterdir() if not (stale_partial(p) if whole else partial_name(p.name)))
    try:
        listed = set(read_record(folder)["files"])
    except (InputError, KeyError, TypeError):
        return entries
    return [e for e in entries if e != MARKER and e not in listed and not _own_folder(folder / e, whole)
            and not _empty_folder(folder / e)]


def _empty_folder(path: Path) -> bool:
    """A folder holding nothing, or only partial files of waitlab's processes that no longer run (``diagnosis/`` of
    a first ``diagnose`` that was killed)."""
    try:
        return path.is_dir() and not path.is_symlink() and all(stale_partial(p) for p in path.iterdir())
    except OSError:
        return False


def _own_folder(path: Path, whole: bool = False) -> bool:
    """A folder waitlab wrote into a results folder later (``diagnose``'s ``diagnosis/``): it holds its own record
    and nothing that record does not list."""
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file() and not foreign_entries(path, whole)


def sweep_started(out: Path) -> bool:
    """Whether ``out`` is a sweep's folder: it holds what only a sweep makes (:data:`SWEEP_STARTED`)."""
    lock, runs, table = (Path(out) / name for name in SWEEP_STARTED)
    try:
        if lock.exists() or (runs.is_dir() and any(POINT_NAME.fullmatch(p.name) and (p / MARKER).is_file()
                                                   for p in runs.iterdir())):
            return True
        with open(table, encoding="utf-8", errors="replace") as fh:
            return "scenario_hash" in fh.readline(1 << 16).rstrip("\r\n").split(",")
    except OSError:
        return False


def not_a_folder(out: Path, what: str) -> InputError:
    """The refusal of an output folder ``out`` that exists and is not a folder: a symbolic link (to a folder or not)
    is said to be one, with the folder it points to."""
    if out.is_symlink():
        return InputError(str(out), f"({what})", f"is a symbolic link (to {os.readlink(out)}), not a folder",
                          f"give -o the folder itself ({out.resolve()}), or choose another -o")
    return InputError(str(out), f"({what})", "exists and is not a folder", "choose another -o")


def check_output_folder(out: Path, what: str = "output folder", *, inputs: tuple[Path, ...] = (),
                        own: tuple[str, ...] = (), why: str = "", kind: str | None = None,
                        whole: bool = False) -> None:
    """The one check of every command's output folder: refuse the root or home folder, a folder holding the
    current one (``.``), a folder that is, holds or lies inside one of the command's ``inputs`` folders, an
    existing folder with entries waitlab did not write (not in its ``.waitlab`` record, nor among ``own``: names
    the command writes, or patterns of them such as ``*``), and, given the ``kind`` of record the command writes
    (``export``, ``diagnosis``; ``sweep`` for one that writes none), a folder whose record is of another kind
    (another run's results folder, whose files and record the command would replace).

    ``why`` is said after the foreign entries (e.g. what ``--force`` replaces); ``whole``: the command replaces the
    folder whole, so a file a running waitlab is writing there counts too (:func:`foreign_entries`).
    """
    out = Path(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise not_a_folder(out, what)
    real = out.resolve()
    if real in (Path("/"), Path.home().resolve()) or Path.cwd().resolve().is_relative_to(real):
        raise InputError(str(out), f"({what})", "is the current, home or root folder (or holds the "
                         "current folder)", "write results into a folder of their own")
    for inp in inputs:
        if Path(inp).resolve().is_relative_to(real) or real.is_relative_to(Path(inp).resolve()):
            raise InputError(str(out), f"({what})", f"is, holds or lies inside an input folder of the command ({inp})",
                             "write results into a folder of their own")
    if not out.exists():
        return
    if kind is not None:
        try:
            theirs = str(read_record(out).get("kind", "run"))
        except InputError:  # no record (or a damaged one): every entry is the user's, refused below
            theirs = kind
        if theirs != kind:
            raise InputError(str(out), f"({what})", f"is a waitlab {theirs} folder (its {MARKER} record says so), "
                             f"not {'an' if what[0] in 'aeiou' else 'a'} {what}",
                             "choose another -o: a new folder, or one this command wrote before")
    if (out / MARKER).is_file():
        clean_stale_inside(out)  # waitlab's own hidden files of a report or diagnosis that was killed
    foreign = [e for e in foreign_entries(out, whole) if not any(fnmatch.fnmatchcase(e, p) for p in own)]
    if foreign:
        raise InputError(str(out), f"({what})", f"holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'}"
                         f" waitlab did not write (e.g. {foreign[0]!r}){why}", "choose another -o, or move those "
                         "files away")


def check_replaceable(out: Path, force: bool) -> None:
    """Refuse to overwrite ``out`` unless it is waitlab's own folder (or empty) and ``force`` is given."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise not_a_folder(out, "output folder")
    if not force:
        raise InputError(str(out), "(output folder)", "already exists", "replace it with --force (from Python: "
                         "force=True), or write elsewhere with -o NEW (from Python: another out)")
    check_output_folder(out, why="; --force replaces only a waitlab results folder", whole=True)


@contextmanager
def results_folder(out: Path, force: bool = False, kind: str = "run") -> Iterator[Path]:
    """Yield a hidden sibling folder to fill; rename it to ``out`` only if the block completes.

    A failure or interruption removes it, so no folder is ever left that looks complete.  An existing ``out``
    (``force``) is replaced by two renames: it is first renamed to a hidden sibling (``.NAME.old-PID``), then the
    new folder to ``out``, and only then is the previous one removed; a signal arriving over the renames is acted
    on once they are done, and a process killed between them (``kill -9``) leaves what the next command's
    :func:`clean_stale_partials` finishes or undoes.  So ``out`` is always the previous folder whole or the new one
    whole, and an interruption's account says which.
    """
    out = Path(out)
    clean_stale_partials(out.parent, out.name)  # a replacement of out a killed process left: finished or undone
    check_replaceable(out, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, out.parent) from None
    pid = os.getpid()
    partial = out.parent / f".{out.name}.partial-{pid}"
    old, gone = (out.parent / f".{out.name}.{stage}-{pid}" for stage in ("old", "replaced"))
    if partial.exists():
        shutil.rmtree(partial)
    try:
        partial.mkdir()
    except OSError as exc:
        raise write_error(exc, out.parent) from None
    placed = replaced = False
    try:
        yield partial
        seal(partial, kind)
        if os.path.lexists(out):
            check_replaceable(out, force)
        remove_path(gone)
        with _signals_deferred():  # no Python code runs a signal's handler between these renames
            if os.path.lexists(out):
                os.replace(out, old)
                try:
                    os.replace(partial, out)
                except OSError:
                    if not os.path.lexists(out):
                        os.replace(old, out)
                    raise
                replaced = True
                try:
                    os.replace(old, gone)  # from here on, the previous folder is only to be removed
                except OSError:
                    pass
            else:
                os.replace(partial, out)
            placed = True
        remove_path(gone)
        remove_path(old)
    except BaseException as exc:
        if placed:  # interrupted once the new folder was in place: it is complete (the previous one goes)
            remove_path(gone)
            remove_path(old)
            _account(exc, f"interrupted; {out} was {'replaced' if replaced else 'written'}: the new results are "
                          "complete" + (" (the previous folder was removed)" if replaced else ""))
            raise
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _write_failure(exc, out, partial) from None
        if os.path.lexists(out):
            note_removed(exc, f"the new {out}")
            _account(exc, f"interrupted; {out} was not replaced: the previous folder is kept (the new results, "
                          "being written, were removed)")
        else:
            note_removed(exc, out)  # an interruption's account names the folder it removed
        raise


def _account(exc: BaseException, text: str) -> None:
    """Say what an interruption (a :class:`KeyboardInterrupt` with no account yet) left of a results folder."""
    if isinstance(exc, KeyboardInterrupt) and not str(exc):
        exc.args = (text,)


#: The signals that stop a command (:mod:`waitlab.interrupts`), held over the renames of :func:`results_folder`.
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP over a few renames: one that arrives meanwhile is acted on (its handler
    runs, or its default action) right after them.  Only the main thread runs signal handlers: in another thread
    there is nothing to hold."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: object) -> None:
        caught.append(signum)

    previous = {}
    for s in HELD_SIGNALS:
        handler = signal.getsignal(s)
        if handler is not None and handler != signal.SIG_IGN:  # an ignored signal (nohup) stays ignored
            previous[s] = signal.signal(s, hold)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


def _write_failure(exc: OSError, out: Path, partial: Path) -> WriteError:
    """The error of a failed write while a results folder was made: about ``out`` when the operating system names
    a path of the output folder (or none), else about the path it names (waitlab's cache, ``TMPDIR``, ...), with a
    fix that fits it."""
    named = os.fsdecode(exc.filename) if isinstance(exc.filename, str | bytes) else _file_being_written(exc)
    number = exc.errno or 0
    if named is None and number in (errno.ENOSPC, errno.EDQUOT):  # a full disk, no path said: the output's or TMPDIR's
        tmp = _user_tmp()
        if _free(tmp) < FULL <= _free(out.parent):
            named = str(tmp)
    own = (out, partial, out.parent / f".{out.name}.old-{os.getpid()}")
    if named is None or _inside(Path(named), own) or os.path.abspath(named) == os.path.abspath(out.parent):
        return write_error(exc, out)
    path = Path(named)
    meaning = (WRITE_CAUSES.get(number) or PATH_CAUSES.get(number) or ("",))[0]
    space = number in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    cache = _cache_root()
    if cache is not None and (_inside(path, (cache,)) or _inside(cache, (path,))):
        what = "cache folder"
        value = os.environ.get("WAITLAB_CACHE")
        fix = ("free disk space there, or " if space else "") + (
            f"set WAITLAB_CACHE (now {value!r}) to a folder you can write" if value else
            f"make {cache} writable, or set WAITLAB_CACHE to a folder you can write")
    elif _inside(path, (_user_tmp(),)):
        what = "temporary folder, TMPDIR"
        fix = ("free disk space there, or " if space else "") + ("set TMPDIR to a folder with room that you can "
                                                                 "write")
    else:
        what = "folder" if path.is_dir() else "file"
        fix = ("free disk space there, or " if space else "") + f"make {path} writable, or move what is in the way"
    words = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(named, f"({what})", f"writing failed: {words}" + (f": {meaning}" if meaning else ""), fix,
                      number)


#: Free bytes below which a disk counts as full (:func:`_write_failure`).
FULL = 1 << 20


def _file_being_written(exc: BaseException) -> str | None:
    """The path of the open file the code that raised ``exc`` was writing (``fh.write(...)`` fails with the
    operating system's error but no file name), None when none is seen."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames[-2:]):  # the failing call, then its caller
        for value in list(frame.f_locals.values()):
            name = getattr(value, "name", None)
            if isinstance(name, str) and callable(getattr(value, "write", None)) and hasattr(value, "mode"):
                return name
    return None


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies inside one (as written, and with links resolved)."""
    for f in folders:
        for p, q in ((os.path.abspath(path), os.path.abspath(f)), (os.path.realpath(path), os.path.realpath(f))):
            if Path(p).is_relative_to(q):
                return True
    return False


def _free(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return FULL


def _user_tmp() -> Path:
    """The user's temporary folder (``TMPDIR``): the one holding a command's ``waitlab-scratch-PID``."""
    tmp = Path(tempfile.gettempdir())
    return tmp.parent if tmp.name.startswith("waitlab-scratch-") else tmp


def _cache_root() -> Path | None:
    """waitlab's cache folder (:func:`waitlab.simulator.build.cache_dir`), None when there is none."""
    try:
        return cache_dir()
    except Exception:  # no cache folder can be named (no home folder): the error is not about it
        return None
