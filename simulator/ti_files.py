"""The files of a time-independent trace: the index (one line per rank, or one line for a shared file) and
the action lines of each file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from waitlab.errors import InputError
from waitlab.readers import not_a_file

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_BYTES = bytes([*range(0, 9), 11, 12, *range(14, 32), 127])  # the same characters (found 3x faster)
_FIX = "save the trace as UTF-8 text (e.g. iconv -f latin1 -t utf-8 FILE); region names are kept as written"


def text_blocks(path: Path, block: int = 16 << 20) -> Iterator[tuple[int, list[str]]]:
    """(line number, text) of a trace file, decoded as UTF-8 explicitly: a line in another encoding (a Latin-1
    region name) or with control characters (a binary file) is one :class:`InputError` naming the line and the
    byte, never a silent U+FFFD nor the raw bytes echoed.  Read and checked a block of whole lines at a time:
    yields (number of the first line, the lines)."""
    first = 1  # line number of the block's first line
    rest = b""
    with path.open("rb") as fh:
        while True:
            data = fh.read(block)
            chunk = rest + data
            if not chunk:
                return
            cut = chunk.rfind(b"\n") + 1 if data else len(chunk)
            if cut == 0:  # no newline yet: a longer line, read on
                rest = chunk
                continue
            chunk, rest = chunk[:cut], chunk[cut:]
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                line_start = chunk.rfind(b"\n", 0, exc.start) + 1
                where = first + chunk.count(b"\n", 0, exc.start)
                raise InputError(str(path), f"line {where}",
                                 f"is not UTF-8 text (byte 0x{chunk[exc.start]:02x} at column "
                                 f"{exc.start - line_start + 1})", _FIX) from None
            bad = _CONTROL.search(text) if len(chunk.translate(None, _CONTROL_BYTES)) != len(chunk) else None
            if bad:
                line_start = text.rfind("\n", 0, bad.start()) + 1
                raise InputError(str(path), f"line {first + text.count(chr(10), 0, bad.start())}",
                                 f"holds the control character 0x{ord(bad.group()):02x} at column "
                                 f"{bad.start() - line_start + 1}: a binary file, not a text trace",
                                 "give the trace index or a trace file written by 'waitlab capture' or "
                                 "'smpirun -trace-ti'")
            lines = text.split("\n")  # not splitlines(): U+2028 or U+0085 inside a name ends no line
            if text.endswith("\n"):
                lines.pop()
            yield first, lines
            first += len(lines)
            if not data:
                return


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
        raise InputError(str(path), "(file)", f"trace index {not_a_file(path)}", "give the index written by "
                         "'waitlab capture' or 'smpirun -trace-ti' (-trace-file NAME)")
    entries: list[tuple[int, str]] = []
    for first, lines in text_blocks(path):
        for n, raw in enumerate(lines, first):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if _is_trace_line(line):
                return [path]  # a trace file, not an index
            entries.append((n, line))
    if not entries:
        raise InputError(str(path), "(file)", "is empty (no line but blanks and # comments): neither a trace nor a "
                         "trace index", "give the index written by 'waitlab capture' or 'smpirun -trace-ti' (one "
                         "trace file per line), or a trace file of '<rank> <action> <arguments>' lines")
    files = []
    for n, name in entries:
        p = Path(name)
        if not p.is_absolute():
            p = path.parent / p
        if not p.is_file():
            raise InputError(str(path), f"line {n}", f"trace file {name} {not_a_file(p)}",
                             "keep the per-rank files next to the index (paths are relative to it)")
        files.append(p)
    return files


def iter_lines(files: list[Path]) -> Iterator[tuple[int, Path, int, list[str]]]:
    """(file index, file, line number, fields) of every non-blank, non-comment line."""
    for fi, f in enumerate(files):
        for first, lines in text_blocks(f):
            for n, raw in enumerate(lines, first):
                line = raw.strip()
                if line and not line.startswith("#"):
                    yield fi, f, n, line.split()
