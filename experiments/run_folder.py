"""A results folder's life: written into a hidden sibling and renamed only when complete, marked as waitlab's
(``.waitlab`` lists what it wrote and the SHA-256 of the files later commands read), replaced only when it is
waitlab's own, and refused when edited after the run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from waitlab.errors import InputError, write_error

#: The writers of ``report.html`` and ``timeline.png``, which :mod:`waitlab.experiments.results` imports when it first
#: uses them (:class:`waitlab.lazy.Deferred`): they bring Bokeh and matplotlib (1-1.5 s of imports), which the way
#: to a run's SMPI stage does not need.  :func:`waitlab.api.run` imports them on a thread while SMPI runs
#: (:mod:`waitlab.experiments.preload`).
PICTURE_MODULES = {"report.html": "waitlab.experiments.report.html", "timeline.png": "waitlab.experiments.report.plots"}


def picture_modules(png: bool) -> list[str]:
    """The modules :func:`waitlab.experiments.results.write_run` imports for its pictures (``png``: for
    ``timeline.png`` too).

    >>> picture_modules(False)
    ['waitlab.experiments.report.html']
    """
    return [module for file, module in PICTURE_MODULES.items() if png or file != "timeline.png"]


MARKER = ".waitlab"
#: Folder default outputs go under (``results/<scenario name>``).
RESULTS_ROOT = Path("results")
#: Files of a results folder that later commands read back; their SHA-256 goes into the marker when the folder
#: is written, and :func:`load_run` refuses a folder where one of them changed.
CHECKED_FILES = ("run.json", "scenario.toml", "ops.parquet", "ledger.parquet", "events.parquet", "waits.parquet")


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


def verify_folder(folder: Path) -> None:
    """Refuse a results folder whose checked files differ from the SHA-256 sums its run recorded.

    Folders written before the sums were recorded (no ``sha256`` in the marker) are read as they are.
    """
    marker = folder / MARKER
    if not marker.is_file():
        return
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
        sums = data.get("sha256", {}) if isinstance(data, dict) else None
    except (OSError, ValueError):
        sums = None
    if not isinstance(sums, dict):
        raise InputError(str(marker), "(file)", "is damaged: waitlab's record of the folder cannot be read",
                         "re-run `waitlab run` to rewrite the folder")
    for name, digest in sorted(sums.items()):
        path = folder / str(name)
        if not path.is_file():
            raise InputError(str(path), "(file)", "was deleted after the run wrote the folder",
                             "re-run `waitlab run` to rewrite the folder")
        if file_digest(path) != digest:
            raise InputError(str(path), "(file)", "was changed after the run wrote it (its SHA-256 differs from "
                             f"the one recorded in {MARKER}); an edited results folder is not trusted",
                             "restore the file or re-run `waitlab run` to rewrite the folder")


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
    marker = folder / MARKER
    if not marker.is_file():
        return entries
    try:
        listed = set(json.loads(marker.read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return entries
    return [e for e in entries if e != MARKER and e not in listed]


def check_replaceable(out: Path, force: bool) -> None:
    """Refuse to overwrite ``out`` unless it is waitlab's own folder (or empty) and ``force`` is given."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise InputError(str(out), "(output folder)", "exists and is not a folder", "choose another -o")
    if not force:
        raise InputError(str(out), "(output folder)", "already exists", "pass --force to replace it, or use -o NEW")
    home = Path.home().resolve()
    real = out.resolve()
    if real in (Path("/"), home) or Path.cwd().resolve().is_relative_to(real):
        raise InputError(str(out), "(output folder)", "is the current, home or root folder (or holds the "
                         "current folder)", "write results into a folder of their own")
    foreign = foreign_entries(out)
    if foreign:
        raise InputError(str(out), "(output folder)", f"holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'}"
                         f" waitlab did not write (e.g. {foreign[0]!r}); --force replaces only a waitlab results "
                         "folder", "choose another -o, or move those files away")


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
        files = sorted(p.name for p in partial.iterdir())
        sums = {n: file_digest(partial / n) for n in CHECKED_FILES if (partial / n).is_file()}
        (partial / MARKER).write_text(json.dumps({"kind": kind, "files": files, "sha256": sums}, indent=1) + "\n")
        if out.exists():
            check_replaceable(out, force)
            shutil.rmtree(out)
        os.replace(partial, out)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise write_error(exc, out) from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
