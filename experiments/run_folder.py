"""A results folder's life: written into a hidden sibling and renamed only when complete, marked as waitlab's
(``.waitlab`` lists what it wrote and the SHA-256 of the files later commands read), replaced only when it is
waitlab's own, and refused when edited after the run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from waitlab.errors import InputError, note_removed, write_error
from waitlab.readers import parse_json, read_text

#: The writers of ``report.html`` and ``timeline.png``, which :mod:`waitlab.experiments.results` imports when it first
#: uses them (:class:`waitlab.lazy.Deferred`): they bring Bokeh and matplotlib (1-1.5 s of imports), which the way
#: to a run's SMPI stage does not need.
PICTURE_MODULES = {"report.html": "waitlab.experiments.report.html", "timeline.png": "waitlab.experiments.report.plots"}


MARKER = ".waitlab"
#: Written next to a sweep's ``sweep.csv`` when the sweep was interrupted: that table then lists only the finished
#: points.
INCOMPLETE = "incomplete.txt"
#: Folder default outputs go under (``results/<scenario name>``).
RESULTS_ROOT = Path("results")
#: Files of a results folder that later commands read back; their SHA-256 goes into the marker (the folder's
#: integrity record) when the folder is written, and :func:`verify_folder` refuses a folder where one of them
#: changed, or whose record does not hold it.  Every run writes the first six; the others when present.
CHECKED_FILES = ("run.json", "scenario.toml", "ops.parquet", "ledger.parquet", "events.parquet", "waits.parquet",
                 "summary.json", "ranks.parquet", "placement.csv")
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
                staged: Mapping[str, Path] | None = None, **more: Any) -> str:
    """The text of ``folder``'s integrity record (:func:`seal`).  ``staged``: files about to replace the folder's
    (final name -> the temporary file written for it, :func:`waitlab.experiments.writer.replaced_files`), listed
    and summed as if already in place, so that the record can be replaced together with them."""
    staged = dict(staged or {})
    temporary = {p.name for p in staged.values()}
    files = sorted({p.name for p in folder.iterdir() if p.name != MARKER and p.name not in temporary}
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


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_partials(parent: Path) -> list[Path]:
    """Remove ``.NAME.partial-PID`` folders of processes that no longer run; return what was removed."""
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for p in parent.glob(".*.partial-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def foreign_entries(folder: Path) -> list[str]:
    """Entries of ``folder`` that waitlab's marker does not list (all of them when there is no marker)."""
    entries = sorted(p.name for p in folder.iterdir())
    try:
        listed = set(read_record(folder)["files"])
    except (InputError, KeyError, TypeError):
        return entries
    return [e for e in entries if e != MARKER and e not in listed and not _own_folder(folder / e)]


def _own_folder(path: Path) -> bool:
    """A folder waitlab wrote into a results folder later (``diagnose``'s ``diagnosis/``): it holds its own record
    and nothing that record does not list."""
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file() and not foreign_entries(path)


def check_output_folder(out: Path, what: str = "output folder", *, inputs: tuple[Path, ...] = (),
                        own: tuple[str, ...] = (), why: str = "") -> None:
    """The one check of every command's output folder: refuse the root or home folder, a folder holding the
    current one (``.``), a folder that is, holds or lies inside one of the command's ``inputs`` folders, and an
    existing folder with entries waitlab did not write (not in its ``.waitlab`` record, nor among ``own``: names
    the command writes).

    ``why`` is said after the foreign entries (e.g. what ``--force`` replaces).
    """
    out = Path(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(str(out), f"({what})", "exists and is not a folder", "choose another -o")
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
    foreign = [e for e in foreign_entries(out) if e not in own]
    if foreign:
        raise InputError(str(out), f"({what})", f"holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'}"
                         f" waitlab did not write (e.g. {foreign[0]!r}){why}", "choose another -o, or move those "
                         "files away")


def check_replaceable(out: Path, force: bool) -> None:
    """Refuse to overwrite ``out`` unless it is waitlab's own folder (or empty) and ``force`` is given."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise InputError(str(out), "(output folder)", "exists and is not a folder", "choose another -o")
    if not force:
        raise InputError(str(out), "(output folder)", "already exists", "replace it with --force (from Python: "
                         "force=True), or write elsewhere with -o NEW (from Python: another out)")
    check_output_folder(out, why="; --force replaces only a waitlab results folder")


@contextmanager
def results_folder(out: Path, force: bool = False, kind: str = "run") -> Iterator[Path]:
    """Yield a hidden sibling folder to fill; rename it to ``out`` only if the block completes.

    A failure or interruption removes it, so no folder is ever left that looks complete.
    """
    out = Path(out)
    check_replaceable(out, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, out.parent) from None
    clean_stale_partials(out.parent)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    if partial.exists():
        shutil.rmtree(partial)
    try:
        partial.mkdir()
    except OSError as exc:
        raise write_error(exc, out.parent) from None
    try:
        yield partial
        seal(partial, kind)
        if out.exists():
            check_replaceable(out, force)
            shutil.rmtree(out)
        os.replace(partial, out)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise write_error(exc, out) from None
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        note_removed(exc, out)  # an interruption's account names the folder it removed
        raise
