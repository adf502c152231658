"""A user's diagnosis model in a process of its own (issue 40).

A model named on the command line or in a sweep file (``package.module:function``, ``path/file.py:function``,
an installed plug-in) is the user's code: it may call ``sys.exit``, ``os._exit``, crash in an extension, loop
forever, mutate its inputs, print, or write any file it can (the answer it is expected to send too).
:class:`IsolatedModel` runs it in a fresh ``python -P -m waitlab.experiments.diagnosis.sandbox`` child, in a process
group of its own:

- the child gets a copy of the run's tables (pickled by waitlab; what it changes stays in the child) and imports the
  model's module itself, after waitlab's own modules (``-P`` keeps the current folder off the child's path until
  then; a model file named like a module waitlab uses, ``pandas.py`` or ``waitlab.py``, is refused: it would stand in
  for that module): waitlab's process never runs the user's code, not even at import;
- a time limit per call (:data:`DEFAULT_TIMEOUT`, ``--model-timeout``), counted on waitlab's clock from the byte the
  child sends on a pipe when it calls the model (what is sent cannot be taken back, as a file could be deleted); past
  it the child's group is killed;
- once the child has written its answer it ends at once (``os._exit``: a thread the model left running cannot hold
  it), and what it left in its process group (a ``subprocess.Popen`` it did not wait for) is killed too;
- what the model prints (``stdout``, ``stderr``, even from C) goes to a file, relayed to waitlab's stderr
  with the model's name (never into ``--json`` output; control characters shown escaped);
- every way it can fail is one :class:`SandboxError` line saying what happened and where (file, line);
- the answer is data only, never a pickle: ``meta.json`` (status, error text, attrs, seconds, peak bytes) and, for a
  table, ``table.bin`` (each column a little-endian int64 or float64 array, the strings as codes into NUL-separated
  UTF-8 names).  waitlab reads it with :mod:`json` and :func:`numpy.frombuffer`, so nothing in it can run code in
  waitlab's process, even an answer the model forged in its folder.  It reads regular files only (no link, FIFO or
  device), of bounded size, checks the answer's shape (types, the protocol's column names, lengths, codes in range,
  at most as many rows as the run has events: :func:`row_cap`) and then the protocol
  (:func:`~waitlab.models.analysis.protocol.blame_problems`) on the table it rebuilt, against its own run: a forged
  answer is one more table refused in one line.  What a forged answer can still do is what the model's own table
  could, and state its own cost (``seconds``, peak bytes) wrongly;
- a table with more rows than :func:`row_cap` allows is refused in the child, before anything is written.

A Python function handed to the API (``waitlab.diagnose(RUN, models=[fn])``, ``waitlab.evaluate``,
``waitlab.check_model``) is run the same way in a forked copy of the caller's process (nothing to import), with the
same time limit, output relay, answer checks and one-line errors; being a copy, it can see all the caller holds, the
truth included.  Only a model given as a file runs in a fresh interpreter that receives nothing but the events, waits
and placement (there is no filesystem sandbox: it can read any file the user can, a run folder's ``ledger.parquet``
too).  Built-in models stay in waitlab's process (their speed matters and they are waitlab's code).

What the child can still do, as a process of the user's (docs/workbench.md, "Known gaps"): signal waitlab (a
Python signal handler is not told the sender, so a SIGTERM from the model reads as the user's), leave a process that
called ``setsid()`` running after waitlab ends, and use any amount of memory (no limit is set: a fixed one would
refuse honest models of large runs).
"""

from __future__ import annotations

import copy
import ctypes
import importlib
import importlib.metadata
import importlib.util
import inspect
import io
import json
import math
import os
import pickle
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from waitlab.models.analysis.protocol import RunData, blame_problems, normalise
from waitlab.simulator.smpi import die_with_parent

#: Seconds a user's model gets per call (one run) before it is stopped; ``--model-timeout`` changes it.
DEFAULT_TIMEOUT = 600.0
#: Seconds the child gets to start and import the model's module (a module that loops at import is stopped).
IMPORT_TIMEOUT = 120.0
#: Entry-point group third-party packages register their models in.
ENTRY_POINT_GROUP = "waitlab.diagnosis_models"
#: Lines of a model's printed output relayed to stderr (the rest is counted).
MAX_RELAYED_LINES = 20
#: Largest file a model's process may write (its printed output, its result): a model printing in an endless
#: loop is stopped there, not when the disk is full.
MAX_FILE_BYTES = 256 << 20
#: Characters of an error message kept (a model's exception text can be anything).
MAX_MESSAGE = 300
#: Characters kept of a line the child sends (an error naming a file and a line, a list of protocol problems).
MAX_ANSWER_LINE = 2000
#: Largest ``meta.json`` of an answer (its attrs are a few short values).
MAX_META_BYTES = 1 << 20
#: Rows a model's table may have however few events the run has (:func:`row_cap`).
MIN_ROW_CAP = 10_000
#: The columns of a table's answer, each with its type in ``table.bin`` (``names``: codes into the names).
ANSWER_COLUMNS = {"rank": "<i8", "region": "names", "callpath": "names", "seconds": "<f8", "kind": "names",
                  "improvement": "<f8"}
_REQUIRED = ("rank", "region", "callpath", "seconds")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class SandboxError(Exception):
    """What went wrong with a user's model, in one line (without the model's name: the caller adds it), and, when
    known, how to fix it (``fix``)."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


def measure(fn: Callable[[], Any], memory: bool) -> tuple[Any, float, int]:
    """``fn()``, its wall seconds and, with ``memory``, the peak bytes of a second call under tracemalloc."""
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    peak = 0
    if memory:
        tracemalloc.start()
        try:
            fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return out, seconds, peak


def row_cap(n_events: int) -> int:
    """Most rows a model's table may have on a run of ``n_events`` events: a blame table has at most one row per rank
    and call path, so never more than the run has events (at least :data:`MIN_ROW_CAP`, for the smallest runs)."""
    return max(int(n_events), MIN_ROW_CAP)


def _one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line (runs of blanks and line breaks as one space, other control characters escaped), cut to
    ``limit`` characters.

    >>> _one_line("a\\n b\\x00c" + "x" * 20, 12)
    'a b\\\\x00cx...'
    """
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------ the parent's side


@dataclass(frozen=True)
class IsolatedModel:
    """A user's model, called like a protocol function but run in a child process (module doc).

    Attributes
    ----------
    spec : str
        ``package.module:function`` (an installed plug-in's entry point too) or ``path/file.py:function``; for a
        Python function (``fn``), its ``module:name``.
    source : str or None
        The file defining the function (found by :func:`probe`; its bytes key the evaluate cache).
    timeout : float
        Seconds per call.
    sys_path : tuple of str
        The Python path the child imports the model with (waitlab's, at resolve time).
    version : str
        An installed plug-in's entry point and package version (what keys its cached scores).
    fn : callable or None
        A Python function handed to the API: run in a forked child instead of being imported.
    """

    spec: str
    source: str | None
    timeout: float = DEFAULT_TIMEOUT
    sys_path: tuple[str, ...] = ()
    version: str = ""
    fn: Callable[..., Any] | None = None

    def __call__(self, run: Any, **options: Any) -> Any:
        return self.measure(run, options, memory=False)[0]

    def measure(self, run: Any, options: dict[str, Any], memory: bool) -> tuple[Any, float, int]:
        """The model's table on ``run`` (a :class:`~waitlab.models.analysis.protocol.RunData`), its seconds and peak
        bytes (measured in the child); :class:`SandboxError` when it fails, or when its table (rebuilt here from the
        answer's data) breaks the protocol on ``run``."""
        cap = row_cap(len(run.events))
        # what a spec's module printed at import was relayed by its probe (an installed plug-in is not probed)
        payload = {"op": "run", "spec": self.spec, "sys_path": list(self.sys_path), "events": run.events,
                   "waits": run.waits, "placement": run.placement, "options": options, "memory": memory,
                   "import_shown": not self.version, "source": self.source, "max_rows": cap,
                   "n_events": len(run.events)}
        cols, attrs, seconds, peak = _call(payload, self.timeout, self.spec, self.fn, max_rows=cap)
        frame = pd.DataFrame(cols)
        frame.attrs = attrs
        problems = blame_problems(frame, run)  # the child checked it too, but its answer may be forged
        if problems:
            raise SandboxError("returned a table the protocol does not allow: " + "; ".join(problems))
        return frame, seconds, peak


def probe(spec: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[str | None, str]:
    """Import a user's model in a child process: its source file and display name, or :class:`SandboxError`
    (one line: the file, the line and the error)."""
    out = _call({"op": "probe", "spec": spec, "sys_path": list(sys.path)}, timeout, spec)  # (no call: no limit)
    return out[0], out[1]


def _call(payload: dict[str, Any], timeout: float, spec: str, fn: Callable[..., Any] | None = None,
          max_rows: int = 0) -> Any:
    """Run one request in a fresh child (``fn``: in a forked one); its answer (checked: :func:`_read_answer`), or
    :class:`SandboxError`."""
    folder = Path(tempfile.mkdtemp(prefix="waitlab-model-"))
    try:
        read_end, write_end = os.pipe()  # the child sends b"S" on it when it calls the model
        try:
            if fn is None:
                with open(folder / "in.pkl", "wb") as fh:
                    pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
                # -P: not the current folder first on the child's path (a waitlab.py there would be imported)
                proc = subprocess.Popen([sys.executable, "-P", "-m", "waitlab.experiments.diagnosis.sandbox",
                                         str(folder), str(write_end)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write_end,),
                                        start_new_session=True, preexec_fn=die_with_parent)
                pid = proc.pid
                reap: Callable[[], object] = proc.wait
            else:
                for stream in (sys.stdout, sys.stderr):  # what waitlab wrote is not written again by the child
                    stream.flush()
                pid = os.fork()
                if pid == 0:  # the child: never returns
                    try:
                        os.close(read_end)
                        os.setsid()
                        die_with_parent()
                        _redirect(folder)
                        _serve(folder, fn, payload["source"], payload, write_end)
                    finally:
                        os._exit(0)
                reap = partial(os.waitpid, pid, 0)
            os.close(write_end)
            write_end = -1
            try:
                code = _wait(pid, read_end, timeout)
                _kill(pid, reap)  # the model's process has ended: what it left behind in its group goes with it
            except SandboxError:
                _kill(pid, reap)
                _relay(folder, spec)
                raise
            except BaseException:  # Ctrl-C, SIGTERM: the model goes with waitlab
                _kill(pid, reap)
                raise
        finally:
            for fd in (read_end, write_end):
                if fd >= 0:
                    os.close(fd)
        _relay(folder, spec)
        answer = _read_answer(folder, payload["op"], max_rows)
        if answer is not None:
            return answer
        if code < 0:
            name = signal.Signals(-code).name
            why = {"SIGSEGV": " (a crash in compiled code)", "SIGXFSZ": f" (it wrote more than "
                   f"{MAX_FILE_BYTES >> 20} MiB)", "SIGKILL": " (out of memory?)"}.get(name, "")
            raise SandboxError(f"ended its process: killed by {name}{why}")
        raise SandboxError(f"ended its process with exit status {code} before returning a table "
                           "(os._exit, or an extension that exited)")
    finally:
        _remove(folder)


def _remove(folder: Path) -> None:
    """Remove the child's folder (the model may have replaced it with a link, or left files it cannot delete)."""
    try:
        if folder.is_symlink():
            folder.unlink()
            return
        os.chmod(folder, 0o700)  # (a model may have taken its rights away)
    except OSError:
        pass
    shutil.rmtree(folder, ignore_errors=True)


def _wait(pid: int, started: int, timeout: float) -> int:
    """Wait for the child: :data:`IMPORT_TIMEOUT` seconds to import, then ``timeout`` for the model's call, from
    when waitlab reads the child's byte on the pipe ``started`` (sent when it calls the model)."""
    t0 = time.monotonic()
    called: float | None = None
    listening = True
    poll = select.poll()
    poll.register(started, select.POLLIN)
    while True:
        code = _ended(pid)
        if code is not None:
            return code
        if listening:
            if poll.poll(50):  # readable, or closed (POLLHUP)
                data = os.read(started, 4096)
                if not data:
                    listening = False  # the child closed its end (after its byte, or the model did)
                elif called is None and b"S" in data:
                    called = time.monotonic()
        else:
            time.sleep(0.05)
        now = time.monotonic()
        if called is None and now - t0 > IMPORT_TIMEOUT:
            raise SandboxError(f"was still being imported after {IMPORT_TIMEOUT:g} s: stopped")
        if called is not None and now - called > timeout:
            raise SandboxError(f"did not return within {timeout:g} s (the time limit per run, --model-timeout or "
                               "model_timeout=): stopped")


def _ended(pid: int) -> int | None:
    """The child's exit status (negative: the signal that ended it) once it has ended, else None; the child is left
    a zombie (not reaped), so its process group id stays its own until :func:`_kill` has killed the group."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _kill(pid: int, reap: Callable[[], object]) -> None:
    """Kill the child's process group (the child, if alive, and every process it left in the group), then reap the
    child (``reap``)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    reap()


def _read_plain(folder: Path, name: str, limit: int, head: bool = False) -> tuple[bytes, int] | None:
    """The bytes of the file ``name`` in the child's ``folder`` and its size; None when there is none.

    Only a regular file is read, through no link (the folder's own name included: the model may have replaced
    either with a link to ``/dev/zero``, a FIFO that would block, or any file); larger than ``limit`` bytes it is
    refused (:class:`SandboxError`), or, with ``head``, its first ``limit`` bytes are read.
    """
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise SandboxError("replaced the folder waitlab gave it (a link, or removed): waitlab reads nothing of "
                           "it") from None
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SandboxError(f"left a {name} waitlab cannot open ({_one_line(exc)})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SandboxError(f"left a {name} that is not a file: waitlab reads nothing of it")
            if st.st_size > limit and not head:
                raise SandboxError(f"sent an answer waitlab does not read: its {name} has {st.st_size} bytes, more "
                                   f"than {limit}")
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(limit)
            return data, st.st_size
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _relay(folder: Path, spec: str) -> None:
    """Relay what the model printed to waitlab's stderr (at most :data:`MAX_RELAYED_LINES` lines)."""
    try:
        got = _read_plain(folder, "printed", 64 << 10, head=True)
    except (SandboxError, OSError):
        return
    if got is None or not got[0]:
        return
    head, size = got
    lines = head.decode("utf-8", "replace").splitlines()
    shown = lines[:MAX_RELAYED_LINES]
    for line in shown:
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line[:500])
        print(f"model {spec!r} printed: {text}", file=sys.stderr)
    if len(lines) > len(shown) or size > len(head):
        print(f"model {spec!r} printed {size} bytes in all (only the first {len(shown)} lines are shown)",
              file=sys.stderr)


class _BadAnswer(Exception):
    """What is wrong with the shape of a child's answer (:func:`_read_answer` makes it a :class:`SandboxError`)."""


def _read_answer(folder: Path, op: str, max_rows: int) -> Any:
    """The child's answer (None when it wrote none): for ``probe``, the model's source file and display name; for
    ``run``, its table's columns, attrs, seconds and peak bytes.  An error it sent is raised as a
    :class:`SandboxError`; an answer of the wrong shape (forged by the model: module doc) is one too."""
    got = _read_plain(folder, "meta.json", MAX_META_BYTES)
    if got is None:
        return None
    try:
        try:
            meta = json.loads(got[0].decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise _BadAnswer(f"meta.json is not JSON: {exc}") from None
        if not isinstance(meta, dict) or meta.get("status") not in ("ok", "error"):
            raise _BadAnswer("meta.json has no status 'ok' or 'error'")
        if meta["status"] == "error":
            err = meta.get("error")
            if isinstance(err, str):
                raise SandboxError(_one_line(err, MAX_ANSWER_LINE))
            if isinstance(err, list) and len(err) == 2 and all(isinstance(e, str) for e in err):
                raise SandboxError(_one_line(err[0], MAX_ANSWER_LINE), _one_line(err[1], MAX_ANSWER_LINE))
            raise _BadAnswer("its error is not a line of text")
        if op == "probe":
            source, name = meta.get("source"), meta.get("name")
            if not (source is None or isinstance(source, str)) or not isinstance(name, str):
                raise _BadAnswer("its source file and name are not text")
            if source is not None and not _regular_file(source):
                source = None  # (a FIFO or a device would hang whoever reads it to key a cache)
            return source, _one_line(name, 200)
        return _table_answer(folder, meta, max_rows)
    except _BadAnswer as exc:
        raise SandboxError(f"sent an answer waitlab cannot read ({_one_line(exc)})") from None


def _regular_file(path: str) -> bool:
    try:
        return os.path.isabs(path) and stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _number(value: Any, kind: type) -> bool:
    """Whether a JSON value is a finite number >= 0 of ``kind`` (``int``, or ``float``: an int too), not a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        return False
    return math.isfinite(value) and value >= 0


def _table_answer(folder: Path, meta: dict[str, Any], max_rows: int) -> tuple[dict[str, Any], dict[str, Any],
                                                                               float, int]:
    """A table's answer (``meta.json`` read, ``table.bin`` to read), its shape checked: the columns of the protocol
    with ``rows`` values each, ranks int64, seconds and improvement float64, strings codes into the names."""

    got: list[Any] = [meta.get(k) for k in ("rows", "columns", "names", "attrs", "seconds", "peak")]
    rows, columns, n_names, attrs, seconds, peak = got
    if not _number(rows, int) or not _number(n_names, int):
        raise _BadAnswer("its rows and names are not counts")
    if rows > max_rows:
        raise _BadAnswer(f"a table of {rows} rows, more than the {max_rows} a table of this run may have: one per "
                         "rank and call path at most")
    if (not isinstance(columns, list) or not all(isinstance(c, str) and c in ANSWER_COLUMNS for c in columns)
            or len(set(columns)) != len(columns) or not set(_REQUIRED) <= set(columns)):
        raise _BadAnswer(f"its columns are not {', '.join(_REQUIRED)} (and kind, improvement)")
    if n_names > 3 * rows:
        raise _BadAnswer(f"{n_names} names for {rows} rows")
    if not isinstance(attrs, dict) or not all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                              for v in attrs.values()):
        raise _BadAnswer("its attrs are not str, int and float values")
    if not _number(seconds, float) or not _number(peak, int):
        raise _BadAnswer("its seconds and peak bytes are not numbers >= 0")
    read = _read_plain(folder, "table.bin", MAX_FILE_BYTES)
    if read is None:
        raise _BadAnswer("it has no table.bin")
    data = read[0]
    body = 8 * rows * len(columns)
    if len(data) < body:
        raise _BadAnswer(f"its table.bin has {len(data)} bytes, not the {body} of {rows} rows")
    try:
        names = data[body:].decode("utf-8").split("\0") if n_names else []
    except UnicodeDecodeError:
        raise _BadAnswer("its names are not UTF-8") from None
    if len(names) != n_names or (not n_names and len(data) != body):
        raise _BadAnswer(f"its table.bin does not hold {n_names} names")
    pool = np.array(names, dtype=object)
    cols: dict[str, Any] = {}
    for i, c in enumerate(columns):
        kind = ANSWER_COLUMNS[c]
        arr = np.frombuffer(data, "<i8" if kind == "names" else kind, count=rows, offset=8 * rows * i)
        if kind == "names":
            if rows and (arr.min() < 0 or arr.max() >= n_names):
                raise _BadAnswer(f"its {c} codes are not names")
            cols[c] = pool[arr]
        else:
            cols[c] = arr.astype(kind[1:])  # native byte order, an array of its own (frombuffer's is read-only)
    return ({c: cols[c] for c in ANSWER_COLUMNS if c in cols}, {str(k): v for k, v in attrs.items()}, float(seconds),
            int(peak))


# ------------------------------------------------------------------------------------------ the child's side

#: Modules the child had imported before the model's (waitlab's own, pandas, numpy, what they import): a model file
#: of one of these names would stand in for it (:func:`child_main` fills it).
_PRELOADED: frozenset[str] = frozenset()


def load(spec: str) -> tuple[Callable[..., Any], str | None]:
    """The function a spec names and the file defining it (imports the user's module: the child does this)."""
    if ":" not in spec:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=spec)
        if not eps:
            raise SandboxError(f"no installed plug-in {spec!r} in the entry-point group {ENTRY_POINT_GROUP}")
        fn = next(iter(eps)).load()
    else:
        module, _, attr = spec.rpartition(":")
        _shadowing(module)
        mod = fn = _import(module)
        for part in attr.split("."):  # an entry point may name module:object.attribute
            fn = getattr(fn, part, None)
        if not callable(fn):
            names = [n for n, v in vars(mod).items() if inspect.isfunction(v) and not n.startswith("_")
                     and v.__module__ == mod.__name__]  # its own functions, not those it imports
            listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise SandboxError(f"{module} has no function {attr!r}",
                               f"name one of the functions it defines: {listed}" if names else
                               f"{module} defines no function: add the model to it, or name the file that has it")
    try:
        src = inspect.getsourcefile(fn)
    except TypeError:
        src = None
    return fn, (str(Path(src).resolve()) if src else None)


def _shadowing(module: str) -> None:
    """:class:`SandboxError` when the model's file is named like a module waitlab has imported (``pandas.py``,
    ``waitlab.py``): importing it would replace that module, or import the real one instead of the user's file."""
    if module.endswith(".py") or os.sep in module:
        path = Path(module)
        top, mine = path.stem, [path]
    else:  # (found in the current folder, were it not imported already)
        top = module.split(".")[0]
        mine = [p for p in (Path.cwd() / f"{top}.py", Path.cwd() / top) if p.exists()]
    loaded: Any = sys.modules.get(top)
    places = {Path(p).resolve() for p in getattr(loaded, "__path__", None) or ()}
    if getattr(loaded, "__file__", None):
        places.add(Path(loaded.__file__).resolve())
    others = [p for p in mine if p.resolve() not in places]  # not the module waitlab imported itself
    if top in _PRELOADED and others:
        raise SandboxError(f"the model's file {others[0]} has the name of the module {top}, which waitlab uses",
                           f"rename it (e.g. my_{others[0].name}) and name it so in the model spec")


def _import(module: str) -> Any:
    if module.endswith(".py") or os.sep in module:
        path = Path(module)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SandboxError(f"cannot import {module}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        return mod
    while True:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:  # the module itself (or its package), or something it imports?
            if exc.name is None or not (module + ".").startswith(exc.name + "."):
                raise
        if os.getcwd() in sys.path:
            tried = Path.cwd() / (module.replace(".", os.sep) + ".py")
            raise SandboxError(f"no module {module}: no file {tried} and no installed module of that name",
                               "give the model's file as path/to/file.py:function, or run waitlab in its folder")
        sys.path.insert(0, os.getcwd())  # a model file in the current folder, as `python -m` would find it


def _where(exc: BaseException, source: str | None) -> str:
    """`` (file F, line N)``: where ``exc`` arose, in the model's own file when the traceback passes through it."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}, line {exc.lineno})"
    frames = list(traceback.extract_tb(exc.__traceback__))
    if source is not None:
        mine = [f for f in frames if f.filename and Path(f.filename).resolve() == Path(source)]
        if mine:
            frames = mine
    frames = [f for f in frames if f.filename and "importlib._bootstrap" not in f.filename
              and not f.filename.endswith("/sandbox.py")]
    if not frames:
        return ""
    f = frames[-1]
    return f" ({f.filename}, line {f.lineno})"


def describe_exception(exc: BaseException) -> str:
    """What a model did, in one line: ``called sys.exit(0)``, ``raised ValueError: ...``.

    >>> describe_exception(SystemExit(3)), describe_exception(KeyError("excess"))
    ('called sys.exit(3)', "raised KeyError: 'excess'")
    """
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    if isinstance(exc, RecursionError):
        return "raised RecursionError (unbounded recursion)"
    text = _one_line(exc.msg if isinstance(exc, SyntaxError) else exc)
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def _finish(folder: Path, meta: dict[str, Any], table: bytes | None = None) -> NoReturn:
    """Write the answer (``table.bin``, then ``meta.json``, which says it is complete) and end the child at once: no
    interpreter shutdown, which would wait for the threads the model left running."""
    try:
        if table is not None:
            with open(folder / "table.bin", "wb") as fh:
                fh.write(table)
        text = json.dumps(meta)
        if len(text) > MAX_META_BYTES:
            text = json.dumps({"status": "error", "error": "returned a table whose attrs are too large (more than "
                               f"{MAX_META_BYTES >> 20} MiB): keep a few short str, int and float values in attrs"})
        with open(folder / "meta.json.part", "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(folder / "meta.json.part", folder / "meta.json")
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # a stream the model replaced: what it held is lost, the answer is not
                pass
        try:
            ctypes.CDLL(None).fflush(None)  # what C code printed through stdio
        except BaseException:
            pass
        os._exit(0)


def _error(folder: Path, message: str, fix: str = "") -> NoReturn:
    _finish(folder, {"status": "error", "error": [message, fix] if fix else message})


def _plain_table(frame: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid model table as plain columns (numpy arrays of numbers, lists of str) and plain attrs."""


    out = normalise(frame)
    cols: dict[str, Any] = {"rank": out["rank"].to_numpy(np.int64), "region": [str(v) for v in out["region"]],
                            "callpath": [str(v) for v in out["callpath"]], "seconds": out["seconds"].to_numpy(float)}
    if "kind" in out:
        cols["kind"] = [str(v) for v in out["kind"]]
    if "improvement" in out:
        cols["improvement"] = pd.to_numeric(out["improvement"], errors="coerce").to_numpy(float)
    attrs = {str(k): v for k, v in out.attrs.items() if type(v) in (str, int, float)}
    return cols, attrs


def _pack(cols: dict[str, Any]) -> tuple[int, list[str], int, bytes]:
    """``table.bin`` of plain columns (:func:`_plain_table`): rows, column names, number of names, bytes."""

    rows = len(cols["rank"])
    names: dict[str, int] = {}
    parts: list[bytes] = []
    columns = [c for c in ANSWER_COLUMNS if c in cols]
    for c in columns:
        if ANSWER_COLUMNS[c] == "names":
            codes, uniq = pd.factorize(np.array(cols[c], dtype=object), sort=False)
            remap = np.array([names.setdefault(str(u), len(names)) for u in uniq] or [0], np.int64)
            parts.append(remap[codes].astype("<i8").tobytes())
        else:
            parts.append(np.asarray(cols[c]).astype(ANSWER_COLUMNS[c]).tobytes())
    if any("\0" in n for n in names):  # (the protocol refuses control characters in names; kind is free text)
        raise ValueError("a name holds a NUL character")
    parts.append("\0".join(names).encode("utf-8"))
    return rows, columns, len(names), b"".join(parts)


def _redirect(folder: Path) -> None:
    """The child's output (``stdout``, ``stderr``, from C too) into ``printed``, its files at most
    :data:`MAX_FILE_BYTES`."""
    log = os.open(folder / "printed", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    sys.stderr = sys.stdout
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))


def child_main(folder: Path, started: int) -> NoReturn:
    """The child: read the request, import the model, run it, write the answer (:func:`_finish`); ``started``: the
    pipe its call's start is sent on."""
    global _PRELOADED
    _redirect(folder)
    sys.dont_write_bytecode = True  # no __pycache__ left beside the user's model file
    # numpy, pandas and waitlab's modules are imported (at the top of this module) before the user's: a file of
    # theirs cannot stand in for one
    _PRELOADED = frozenset(m.split(".")[0] for m in sys.modules)
    with open(folder / "in.pkl", "rb") as fh:
        req = pickle.load(fh)
    sys.path[:0] = [p for p in req["sys_path"] if p not in sys.path]
    try:
        fn, source = load(req["spec"])
    except SandboxError as exc:
        _error(folder, str(exc), exc.fix)
    except BaseException as exc:  # SyntaxError, an exception at import, a missing dependency, NUL bytes, ...
        _error(folder, f"cannot be imported: {describe_exception(exc)}{_where(exc, None)}")
    if req["op"] == "probe":
        try:
            name = str(getattr(fn, "waitlab_name", req["spec"]))
        except BaseException as exc:
            _error(folder, f"has a waitlab_name that is no text: {describe_exception(exc)}")
        _finish(folder, {"status": "ok", "source": source, "name": name})
    if req.get("import_shown"):  # its probe relayed what the import printed: not again
        os.ftruncate(1, 0)
        os.lseek(1, 0, os.SEEK_SET)  # stdout and stderr share this file position
    _serve(folder, fn, source, req, started)


def _serve(folder: Path, fn: Callable[..., Any], source: str | None, req: dict[str, Any], started: int) -> NoReturn:
    """Run the model on the request's run and write the answer (the child's side, spawned or forked)."""


    run = RunData(req["events"], req["waits"], req["placement"])
    # the checks see the run as it was given (a model may change its copy)
    before = RunData(run.events[[c for c in ("rank", "region", "enter", "exit") if c in run.events]].copy(),
                     run.waits[["wait"]].copy())
    options = req["options"]
    try:  # the time limit starts now (waitlab's clock); the model cannot take this back
        os.write(started, b"S")
        os.close(started)
    except OSError:  # (closed by the model's module at import: then the import limit stays)
        pass
    try:
        frame, seconds, peak = measure(lambda: fn(run, **options), req["memory"])
    except BaseException as exc:  # anything of the model's, sys.exit included
        _error(folder, describe_exception(exc) + _where(exc, source))
    try:  # a DataFrame subclass's methods, attrs that cannot be copied: the model's code still
        if isinstance(frame, pd.DataFrame) and len(frame) > req["max_rows"]:
            _error(folder, f"returned a table of {len(frame)} rows, more than the {req['max_rows']} a table of this "
                   f"run may have (one per event of the run, {req['n_events']} events, and at least {MIN_ROW_CAP}): a "
                   "blame table has at most one row per rank and call path")
        if isinstance(frame, pd.DataFrame):
            try:
                copy.deepcopy(frame.attrs)
            except Exception as exc:
                _error(folder, f"returned a table whose attrs cannot be copied ({describe_exception(exc)}): keep str, "
                       "int and float values in DataFrame.attrs")
        problems = blame_problems(frame, before)
        if problems:
            _error(folder, "returned a table the protocol does not allow: " + "; ".join(problems))
        cols, attrs = _plain_table(frame)
        rows, columns, n_names, table = _pack(cols)
    except BaseException as exc:  # a table whose cells are objects of the user's that do not convert
        _error(folder, f"returned a table waitlab cannot read: {describe_exception(exc)}")
    _finish(folder, {"status": "ok", "rows": rows, "columns": columns, "names": n_names, "attrs": attrs,
                     "seconds": float(seconds), "peak": int(peak)}, table)


if __name__ == "__main__":
    try:
        child_main(Path(sys.argv[1]), int(sys.argv[2]))
    finally:
        os._exit(1)  # (child_main ends the process itself once it has written an answer)
