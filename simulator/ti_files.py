"""The files of a time-independent trace: the index (one line per rank, or one line for a shared file) and
the action lines of each file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from waitlab.errors import InputError


def _is_trace_line(line: str) -> bool:
    parts = line.split()
    return len(parts) >= 2 and parts[0].lstrip("-").isdigit() and not Path(line.strip()).exists()


def trace_files(path: Path) -> list[Path]:
    """The trace files named by an index (one line per rank, or one line for a shared file).

    ``path`` may also be a trace file itself (its lines start with a rank number).
    Relative names in an index are relative to the index's folder.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "(file)", "trace index does not exist", "give the index written by "
                         "'waitlab capture' or 'smpirun -trace-ti' (-trace-file NAME)")
    entries: list[tuple[int, str]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if _is_trace_line(line):
                return [path]  # a trace file, not an index
            entries.append((n, line))
    if not entries:
        raise InputError(str(path), "(file)", "the trace index lists no trace file", "one path per line")
    files = []
    for n, name in entries:
        p = Path(name)
        if not p.is_absolute():
            p = path.parent / p
        if not p.is_file():
            raise InputError(str(path), f"line {n}", f"trace file {name} does not exist",
                             "keep the per-rank files next to the index (paths are relative to it)")
        files.append(p)
    return files


def iter_lines(files: list[Path]) -> Iterator[tuple[int, Path, int, list[str]]]:
    """(file index, file, line number, fields) of every non-blank, non-comment line."""
    for fi, f in enumerate(files):
        with f.open(encoding="utf-8", errors="replace") as fh:
            for n, raw in enumerate(fh, 1):
                line = raw.strip()
                if line and not line.startswith("#"):
                    yield fi, f, n, line.split()
