"""What processes that no longer run (``kill -9``, a crash, a closed terminal) leave behind, and how waitlab finds
and removes it: hidden partial results folders and files (``.NAME.partial-PID``), the previous folder of a swap
cut short (``.NAME.old-PID``, ``.NAME.replaced-PID``: finished or undone), and cache entries being written
(``NAME.tmpPID-HOST``).  Every name carries the writer's process id, so a live writer's files are never touched."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from waitlab.experiments.writer import remove_path


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # no process has such a number
        return False
    return True


#: Hidden names of what waitlab writes before renaming it into place, all ending in the writer's process id:
#: a results folder being written (``.NAME.partial-PID``, also a sweep's ``.attempt-HEX.partial-PID``) and a file
#: (or folder) of a rewrite (:class:`waitlab.experiments.writer.Replacement`: ``.STEM.HEX8.partial-PID.SUFFIX``, e.g.
#: ``.report.97092e08.partial-32554.html``).
PARTIAL_NAMES = (re.compile(r"\..+\.partial-(?P<pid>\d+)"),
                 re.compile(r"\..+\.[0-9a-f]{8}\.partial-(?P<pid>\d+)\.[^./]+"))
#: The hidden names of a results folder being replaced (:func:`~waitlab.experiments.run_folder.results_folder`): the
#: previous folder, renamed aside before the new one is renamed in (``old``), and once the new one is in place
#: (``replaced``).
SWAP_NAME = re.compile(r"\.(?P<name>.+)\.(?P<stage>old|replaced)-(?P<pid>\d+)")


def partial_name(name: str) -> bool:
    """Whether ``name`` is one of waitlab's hidden partial names (:data:`PARTIAL_NAMES`), of a live process or not."""
    return any(p.fullmatch(name) for p in PARTIAL_NAMES)


def temporary_name(name: str) -> str:
    """``NAME.tmpPID-HOST``: the name of a cache entry being written by this process (:func:`clean_stale_tmp`).

    The host is part of it because a cache may be shared with processes of other machines (Dask workers), whose
    process ids say nothing here."""
    return f"{name}.tmp{os.getpid()}-{_host()}"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"


TMP_NAME = re.compile(r".+\.tmp(?P<pid>\d+)(?:-(?P<host>[A-Za-z0-9_.-]+))?")


def clean_stale_tmp(folder: Path) -> list[Path]:
    """Remove the entries of ``folder`` that a process of this machine that no longer runs was writing
    (:func:`temporary_name`; ``NAME.tmpPID`` of older waitlabs too, e.g. a suite run whose ``evaluate`` was killed);
    return what was removed."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for p in entries:
        m = TMP_NAME.fullmatch(p.name)
        if m and m["host"] in (None, _host()) and not pid_alive(int(m["pid"])):
            remove_path(p)
            removed.append(p)
    return removed


def stale_partial(path: Path) -> bool:
    """Whether ``path`` is a hidden partial file or folder of waitlab's (:data:`PARTIAL_NAMES`) whose process no
    longer runs."""
    if SWAP_NAME.fullmatch(path.name):  # a previous results folder: finished or put back, never just removed
        return False
    m = next((m for p in PARTIAL_NAMES if (m := p.fullmatch(path.name))), None)
    return m is not None and not pid_alive(int(m["pid"]))


def finish_swap(aside: Path) -> Path | None:
    """Finish or undo the replacement of a results folder that a process stopped (``kill -9``, a crash) between
    its renames (:func:`~waitlab.experiments.run_folder.results_folder`); ``aside`` is the previous folder's hidden
    name, its process no longer runs.

    When the new folder is in place (it is renamed in complete, with its record), the previous one is removed;
    when it is not, the previous folder is renamed back and the new one, never put in place, removed.  Returns
    what was removed (``None``: the previous folder was put back).
    """
    m = SWAP_NAME.fullmatch(aside.name)
    assert m is not None
    out = aside.parent / m["name"]
    if m["stage"] == "old" and not os.path.lexists(out):
        os.replace(aside, out)  # the previous folder goes back, whole: the new one was never renamed in
        partial = aside.parent / f".{m['name']}.partial-{m['pid']}"
        remove_path(partial)
        return None
    remove_path(aside)
    return aside


def clean_stale_partials(parent: Path, name: str | None = None) -> list[Path]:
    """Remove what processes that no longer run (``kill -9``, a crash, a closed terminal) left in ``parent``: hidden
    partial results folders (``.NAME.partial-PID``) and files of rewrites (``.report.HEX.partial-PID.html``), and
    finish or undo an interrupted replacement of a results folder (:func:`finish_swap`: the previous folder is
    put back unless the new one is in place, complete).  Returns what was removed.

    ``name``: only what belongs to the results folder ``parent / name`` (its partial folder and the previous folder
    of a swap), for a ``parent`` that is not waitlab's own (a user's folder holds hidden files of its own whose
    names may look alike: ``.notes.old-2023``); without it, everything of that kind (a folder waitlab made: a
    sweep's ``runs/``, a results folder)."""
    removed: list[Path] = []
    try:
        entries = sorted(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return removed
    if name is not None:
        mine = {f".{name}.partial-", f".{name}.old-", f".{name}.replaced-"}
        entries = [p for p in entries if any(p.name.startswith(m) and p.name[len(m):].isdigit() for m in mine)]
    for p in entries:  # the swaps first: a previous folder goes back before the new one is removed
        m = SWAP_NAME.fullmatch(p.name)
        if m and not pid_alive(int(m["pid"])):
            try:
                gone = finish_swap(p)
            except OSError:  # e.g. a folder created under the old name since: the previous one stays, hidden
                continue
            removed += [gone] if gone is not None else []
    for p in entries:
        if os.path.lexists(p) and stale_partial(p):
            remove_path(p)
            removed.append(p)
    return removed


def clean_stale_inside(folder: Path) -> list[Path]:
    """:func:`clean_stale_partials` in a results folder and its sub-folders (``diagnosis/``); a sub-folder that held
    nothing but such partial files (a first ``diagnose`` killed while writing) is removed as well."""
    removed = clean_stale_partials(folder)
    try:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for sub in subs:
        gone = clean_stale_partials(sub)
        removed += gone
        try:
            if gone and not any(sub.iterdir()):
                sub.rmdir()
                removed.append(sub)
        except OSError:
            pass
    return removed
