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
    Relative names in an index are relative to the index's folder or, when not found there and the name has a
    folder part, to the first folder above it that holds them (SMPI writes them relative to the folder smpirun ran
    in: ``t.txt_files/rank-0.txt``).  A bare file name is looked for beside the index only.
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
    return [_listed_file(path, n, name) for n, name in entries]


def _find_listed(index: Path, name: str) -> Path | None:
    """The file an index's line ``name`` names: relative to the index's folder, else, for a name with a folder part,
    relative to the first of that folder's ancestors where it exists (SMPI writes the paths relative to the folder
    smpirun ran in, so ``--cfg=tracing/filename:deep/dir/t.txt`` lists ``deep/dir/t.txt_files/...``); None when
    none holds it.  A bare file name (no folder part: no smpirun path) is looked for beside the index only: a
    same-named file above it is another trace's."""
    p = Path(name)
    if p.is_absolute():
        return p if p.is_file() else None
    folder = index.parent
    bases = (folder, *folder.resolve().parents) if len(p.parts) > 1 else (folder,)
    for base in bases:
        if (base / p).is_file():
            return base / p
    return None


def _listed_file(index: Path, n: int, name: str) -> Path:
    """The file line ``n`` of ``index`` names (:func:`_find_listed`), else an :class:`InputError` saying where it was
    looked for."""
    found = _find_listed(index, name)
    if found is not None:
        return found
    p, folder = Path(name), index.parent
    if p.is_absolute():
        raise InputError(str(index), f"line {n}", f"trace file {name} {not_a_file(p)}",
                         "give the per-rank file's path, or keep the per-rank files next to the index")
    if len(p.parts) == 1:  # a bare name: beside the index only (_find_listed)
        raise InputError(str(index), f"line {n}", f"trace file {name} {not_a_file(folder / p)} next to the index "
                         f"({folder / p})", "keep the per-rank files next to the index (copy the missing file "
                         "there), or give its path on this line")
    raise InputError(str(index), f"line {n}", f"trace file {name} {not_a_file(folder / p)} next to the index "
                     f"({folder / p}), and no folder above it holds {name} (SMPI writes the paths relative to the "
                     "folder smpirun ran in)",
                     "keep the per-rank files where the index's lines point: relative to the index's folder or to "
                     "the folder smpirun ran in")


_TI_LINE = re.compile(r"\d+\s+[A-Za-z_]\w*(\s.*)?")


def _head_lines(path: Path, size: int = 1 << 16) -> list[str]:
    """The non-blank, non-comment lines in the first ``size`` bytes of ``path`` ([] when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(size)
    except OSError:
        return []
    lines = head.decode(errors="replace").split("\n")
    if len(head) == size:
        lines.pop()  # cut short
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def ti_kind(path: Path) -> str | None:
    """``"trace"`` when ``path`` looks like a time-independent trace file ('<rank> <action> <arguments>' lines),
    ``"index"`` when it looks like an index of them (its first line names such a file), else None."""
    lines = _head_lines(path, 4096)
    if not lines:
        return None
    if _TI_LINE.fullmatch(lines[0]):
        return "trace"
    listed = _find_listed(path, lines[0])
    first = _head_lines(listed, 4096) if listed is not None else []
    return "index" if first and _TI_LINE.fullmatch(first[0]) else None


def ti_replay_hint(path: Path) -> tuple[str, str] | None:
    """What ``path`` is and how to replay it, when it looks like a time-independent trace (:func:`ti_kind`: SMPI's
    ``-trace-ti`` index, or a trace file), else None: for a command given one instead of the file it reads (a
    scenario, an OTF2 archive)."""
    kind = ti_kind(path)
    if kind is None:
        return None
    index, what = path.resolve(), "a SimGrid time-independent trace index (one trace file per line)"
    if kind == "trace":
        what = "a SimGrid time-independent trace file ('<rank> <action> <arguments>' lines)"
        owner = index.parent.with_name(index.parent.name.removesuffix("_files"))
        if index.parent.name.endswith("_files") and owner.is_file():  # one rank's file of smpirun's index
            what, index = f"one rank's file of the time-independent trace indexed by {owner}", owner
    n = len(_head_lines(index)) if ti_kind(index) == "index" else 0
    ranks = f"{n}" if 1 < n < 1000 else "<number of ranks>"  # one line: one file all ranks share
    return what, (f"replay it with a scenario of these lines ('|' a new line): [scenario] | name = "
                  f'"{index.name.split(".")[0] or "trace"}" | ranks = {ranks} | [platform] | name = "dawning_5000a" '
                  f'| [application] | kind = "trace" | trace = "{index}" (any platform will do), then waitlab run '
                  "SCENARIO.toml")


def iter_lines(files: list[Path]) -> Iterator[tuple[int, Path, int, list[str]]]:
    """(file index, file, line number, fields) of every non-blank, non-comment line."""
    for fi, f in enumerate(files):
        for first, lines in text_blocks(f):
            for n, raw in enumerate(lines, first):
                line = raw.strip()
                if line and not line.startswith("#"):
                    yield fi, f, n, line.split()
