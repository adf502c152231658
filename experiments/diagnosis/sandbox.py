"""A user's diagnosis model in a process of its own (issue 40).

A model named on the command line or in a sweep file (``package.module:function``, ``path/file.py:function``,
an installed plug-in) is the user's code: it may call ``sys.exit``, ``os._exit``, crash in an extension, loop
forever, mutate its inputs or print.  :class:`IsolatedModel` runs it in a fresh ``python -m
waitlab.experiments.diagnosis.sandbox`` child, in a process group of its own:

- the child gets a copy of the run's tables (pickled; what it changes stays in the child) and imports the
  model's module itself: waitlab's process never runs the user's code, not even at import;
- a time limit per call (:data:`DEFAULT_TIMEOUT`, ``--model-timeout``): past it the child's group is killed;
- when the child ends, what it left in its process group (a ``subprocess.Popen`` it did not wait for) is killed too;
- what the model prints (``stdout``, ``stderr``, even from C) goes to a file, relayed to waitlab's stderr
  with the model's name (never into ``--json`` output);
- every way it can fail is one :class:`SandboxError` line saying what happened and where (file, line);
- its result comes back as plain arrays and strings (read with an unpickler that builds nothing else), so no
  object of the user's is ever rebuilt in waitlab's process.

A Python function handed to the API (``waitlab.diagnose(RUN, models=[fn])``, ``waitlab.evaluate``,
``waitlab.check_model``) is run the same way in a forked copy of the caller's process (nothing to import), with the
same time limit, output relay and one-line errors; being a copy, it can see all the caller holds, the truth included.
Only a model given as a file runs in a fresh interpreter that receives nothing but the events, waits and placement
(there is no filesystem sandbox: it can read any file the user can, a run folder's ``ledger.parquet`` too).
Built-in models stay in waitlab's process (their speed matters and they are waitlab's code).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import io
import os
import pickle
import resource
import signal
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
from typing import Any

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


def _one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(str(text).split())
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
        bytes (measured in the child); :class:`SandboxError` when it fails."""
        import pandas as pd

        # what a spec's module printed at import was relayed by its probe (an installed plug-in is not probed)
        payload = {"op": "run", "spec": self.spec, "sys_path": list(self.sys_path), "events": run.events,
                   "waits": run.waits, "placement": run.placement, "options": options, "memory": memory,
                   "import_shown": not self.version, "source": self.source}
        cols, attrs, seconds, peak = _call(payload, self.timeout, self.spec, self.fn)
        frame = pd.DataFrame(cols)
        frame.attrs = attrs
        return frame, seconds, peak


def probe(spec: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[str | None, str]:
    """Import a user's model in a child process: its source file and display name, or :class:`SandboxError`
    (one line: the file, the line and the error)."""
    out = _call({"op": "probe", "spec": spec, "sys_path": list(sys.path)}, timeout, spec)  # (no call: no limit)
    return out[0], out[1]


class _PlainUnpickler(pickle.Unpickler):
    """Builds only numpy arrays and Python's plain types: the child's answer can rebuild nothing of the user's."""

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] == "numpy" or (module == "builtins" and name in ("list", "dict", "str", "int",
                                                                                 "float", "tuple", "bool")):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a model's answer")


def _call(payload: dict[str, Any], timeout: float, spec: str, fn: Callable[..., Any] | None = None) -> Any:
    """Run one request in a fresh child (``fn``: in a forked one); its answer, or :class:`SandboxError`."""
    from waitlab.simulator.smpi import die_with_parent

    with tempfile.TemporaryDirectory(prefix="waitlab-model-") as tmp:
        folder = Path(tmp)
        if fn is None:
            with open(folder / "in.pkl", "wb") as fh:
                pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
            proc = subprocess.Popen([sys.executable, "-m", "waitlab.experiments.diagnosis.sandbox", tmp],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=die_with_parent)
            pid = proc.pid
            reap: Callable[[], object] = proc.wait
        else:
            for stream in (sys.stdout, sys.stderr):  # what waitlab wrote is not written again by the child
                stream.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                try:
                    os.setsid()
                    die_with_parent()
                    _redirect(folder)
                    _serve(folder, fn, payload["source"], payload)
                finally:
                    os._exit(0)
            reap = partial(os.waitpid, pid, 0)
        try:
            code = _wait(pid, folder / "started", timeout)
            _kill(pid, reap)  # the model's process has ended: what it left behind in its group goes with it
        except SandboxError:
            _kill(pid, reap)
            _relay(folder, spec)
            raise
        except BaseException:  # Ctrl-C, SIGTERM: the model goes with waitlab
            _kill(pid, reap)
            raise
        _relay(folder, spec)
        answer = folder / "out.pkl"
        if answer.is_file():
            try:
                with open(answer, "rb") as fh:
                    status, value = _PlainUnpickler(fh).load()
            except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
                raise SandboxError(f"sent an answer waitlab cannot read ({_one_line(exc)})") from None
            if status == "ok":
                return value
            raise SandboxError(*value) if isinstance(value, tuple) else SandboxError(str(value))
        if code < 0:
            name = signal.Signals(-code).name
            why = {"SIGSEGV": " (a crash in compiled code)", "SIGXFSZ": f" (it wrote more than "
                   f"{MAX_FILE_BYTES >> 20} MiB)", "SIGKILL": " (out of memory?)"}.get(name, "")
            raise SandboxError(f"ended its process: killed by {name}{why}")
        raise SandboxError(f"ended its process with exit status {code} before returning a table "
                           "(os._exit, or an extension that exited)")


def _wait(pid: int, started: Path, timeout: float) -> int:
    """Wait for the child: :data:`IMPORT_TIMEOUT` seconds to import, then ``timeout`` for the model's call
    (the child creates ``started`` when it calls the model)."""
    t0 = time.monotonic()
    called: float | None = None
    while True:
        code = _ended(pid)
        if code is not None:
            return code
        time.sleep(0.05)
        now = time.monotonic()
        if called is None and started.exists():
            called = now
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


def _relay(folder: Path, spec: str) -> None:
    """Relay what the model printed to waitlab's stderr (at most :data:`MAX_RELAYED_LINES` lines)."""
    path = folder / "printed"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 << 10)
        size = path.stat().st_size
    except OSError:
        return
    if not head:
        return
    lines = head.decode("utf-8", "replace").splitlines()
    shown = lines[:MAX_RELAYED_LINES]
    for line in shown:
        print(f"model {spec!r} printed: {line[:500]}", file=sys.stderr)
    if len(lines) > len(shown) or size > len(head):
        print(f"model {spec!r} printed {size} bytes in all (only the first {len(shown)} lines are shown)",
              file=sys.stderr)


# ------------------------------------------------------------------------------------------ the child's side


def load(spec: str) -> tuple[Callable[..., Any], str | None]:
    """The function a spec names and the file defining it (imports the user's module: the child does this)."""
    if ":" not in spec:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=spec)
        if not eps:
            raise SandboxError(f"no installed plug-in {spec!r} in the entry-point group {ENTRY_POINT_GROUP}")
        fn = next(iter(eps)).load()
    else:
        module, _, attr = spec.rpartition(":")
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


def _answer(folder: Path, status: str, value: Any) -> None:
    tmp = folder / "out.pkl.part"
    with open(tmp, "wb") as fh:
        pickle.dump((status, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, folder / "out.pkl")


def _plain_table(frame: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid model table as plain columns (numpy arrays of numbers, lists of str) and plain attrs."""
    import numpy as np
    import pandas as pd

    from waitlab.models.analysis.protocol import normalise

    out = normalise(frame)
    cols: dict[str, Any] = {"rank": out["rank"].to_numpy(np.int64), "region": [str(v) for v in out["region"]],
                            "callpath": [str(v) for v in out["callpath"]], "seconds": out["seconds"].to_numpy(float)}
    if "kind" in out:
        cols["kind"] = [str(v) for v in out["kind"]]
    if "improvement" in out:
        cols["improvement"] = pd.to_numeric(out["improvement"], errors="coerce").to_numpy(float)
    attrs = {str(k): v for k, v in out.attrs.items() if type(v) in (str, int, float)}
    return cols, attrs


def _redirect(folder: Path) -> None:
    """The child's output (``stdout``, ``stderr``, from C too) into ``printed``, its files at most
    :data:`MAX_FILE_BYTES`."""
    log = os.open(folder / "printed", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    sys.stderr = sys.stdout
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))


def child_main(folder: Path) -> int:
    """The child: read the request, import the model, run it, write the answer (``out.pkl``)."""
    _redirect(folder)
    sys.dont_write_bytecode = True  # no __pycache__ left beside the user's model file
    with open(folder / "in.pkl", "rb") as fh:
        req = pickle.load(fh)
    sys.path[:0] = [p for p in req["sys_path"] if p not in sys.path]
    try:
        fn, source = load(req["spec"])
    except SandboxError as exc:
        _answer(folder, "error", (str(exc), exc.fix))
        return 0
    except BaseException as exc:  # SyntaxError, an exception at import, a missing dependency, NUL bytes, ...
        what = f"cannot be imported: {describe_exception(exc)}{_where(exc, None)}"
        _answer(folder, "error", what)
        return 0
    if req["op"] == "probe":
        _answer(folder, "ok", (source, str(getattr(fn, "waitlab_name", req["spec"]))))
        return 0
    if req.get("import_shown"):  # its probe relayed what the import printed: not again
        os.ftruncate(1, 0)
        os.lseek(1, 0, os.SEEK_SET)  # stdout and stderr share this file position
    _serve(folder, fn, source, req)
    return 0


def _serve(folder: Path, fn: Callable[..., Any], source: str | None, req: dict[str, Any]) -> None:
    """Run the model on the request's run and write the answer (the child's side, spawned or forked)."""
    from waitlab.models.analysis.protocol import RunData, blame_problems

    run = RunData(req["events"], req["waits"], req["placement"])
    # the checks see the run as it was given (a model may change its copy)
    before = RunData(run.events[["rank"]].copy(), run.waits[["wait"]].copy())
    options = req["options"]
    os.close(os.open(folder / "started", os.O_WRONLY | os.O_CREAT, 0o600))  # the time limit starts now
    try:
        frame, seconds, peak = measure(lambda: fn(run, **options), req["memory"])
    except BaseException as exc:  # anything of the model's, sys.exit included
        _answer(folder, "error", describe_exception(exc) + _where(exc, source))
        return
    problems = blame_problems(frame, before)
    if problems:
        _answer(folder, "error", "returned a table the protocol does not allow: " + "; ".join(problems))
        return
    try:
        cols, attrs = _plain_table(frame)
    except Exception as exc:  # a table whose cells are objects of the user's that do not convert
        _answer(folder, "error", f"returned a table waitlab cannot read: {describe_exception(exc)}")
        return
    _answer(folder, "ok", (cols, attrs, float(seconds), int(peak)))


if __name__ == "__main__":
    raise SystemExit(child_main(Path(sys.argv[1])))
