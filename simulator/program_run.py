"""Running a real MPI program under SMPI with waitlab's measurement layer, and its injection schedule.

:func:`run_program` runs it with ``smpirun`` (privatization on: real programs have global variables) and turns every
failure (crash, ``MPI_Abort``, a deadlock SMPI detected, a time-out, a rank that never reached ``MPI_Finalize``)
into one :class:`~waitlab.errors.SimulationError` quoting SimGrid and the last lines of the program's output.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.vocabulary import ACTIONS, LOCAL_ACTIONS
from waitlab.simulator.smpi import SmpiResult, run_smpirun

ITEM_DTYPE = np.dtype([("anchor", "<i8"), ("code", "<i4"), ("phase", "<i4"), ("value", "<f8"), ("value2", "<f8")])

#: Actions the layer can inject (``WAITLAB_SCHEDULE``).
INJECTABLE = tuple(sorted(a for a in ACTIONS if a in LOCAL_ACTIONS))


_KNOWN_FAILURES = (
    ("MPI_Abort was called", "the program called MPI_Abort"),
    ("Segmentation fault", "the program crashed (segmentation fault)"),
    ("did not return 0", "a rank ended with a non-zero exit status"),
    ("Deadlock detected", "the program deadlocked: SMPI found ranks waiting for communications that will never "
                          "complete"),
    ("Stalling SMPI instance", "not every rank reached MPI_Finalize"),
)


def _tail(text: str, n: int = 30) -> str:
    lines = [ln for ln in text.splitlines() if "Configuration change" not in ln and "You did not set the power"
             not in ln]
    return "\n".join(lines[-n:])


def _diagnose(output: str) -> str:
    for needle, meaning in _KNOWN_FAILURES:
        if needle in output:
            return meaning
    return "the program stopped early"


def write_schedule(folder: Path, n_ranks: int, anchor: npt.NDArray[np.int64], rank: npt.NDArray[np.int32],
                   code: npt.NDArray[np.int8], value: npt.NDArray[np.float64], value2: npt.NDArray[np.float64],
                   phase: npt.NDArray[np.int32]) -> None:
    """Write the layer's injection schedule, one file per rank (``s<rank>.bin``), in the given order.

    ``phase`` 0 runs an item just before anchor ``anchor`` (the anchor-th MPI call
    or region marker of its rank), 1 right after anchor ``anchor - 1`` returns.
    Items must be in execution order within each rank.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        sel = np.flatnonzero(rank == r)
        items = np.zeros(sel.size, ITEM_DTYPE)
        items["anchor"], items["code"], items["phase"] = anchor[sel], code[sel], phase[sel]
        items["value"], items["value2"] = value[sel], value2[sel]
        items.tofile(folder / f"s{r}.bin")


def run_program(binary: Path, n_ranks: int, platform_xml: Path, hostfile: Path, out_dir: Path, *,
                args: Sequence[str] = (), config: Mapping[str, str] | None = None,
                schedule_dir: Path | None = None, extra_flags: Sequence[str] = (), timeout: float | None = None,
                exit_codes: Sequence[int] = (0,), cwd: Path | None = None, what: str = "program",
                env: Mapping[str, str] | None = None, measured: bool = False) -> SmpiResult:
    """Run a program built by :func:`build_program` under SMPI with the layer recording into ``out_dir``.

    ``config`` is every SimGrid setting of the run (:func:`waitlab.platforms.machine.program_settings` and the
    platform's); ``env`` adds environment variables for the layer (e.g. the platform's ``program_env``: its one-sided
    protocol); ``measured``: SimGrid benchmarks the program's computation (the layer books it before each call).

    Raises
    ------
    SimulationError
        The program crashed, aborted, deadlocked, exceeded ``timeout``, returned an
        exit status not in ``exit_codes``, or some rank never reached ``MPI_Finalize``.
        The message quotes SimGrid and the last lines of the program's output.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("r*.*"):
        stale.unlink()
    cfg = dict(config or {})
    env = {**layer_env(env, schedule_dir, measured), "WAITLAB_OUT": str(out_dir.resolve())}
    try:
        res = run_smpirun(binary, n_ranks, platform_xml, hostfile, args=[*args, "--log=ker_engine.thres:info"],
                          config=cfg, extra_flags=extra_flags, env=env, cwd=cwd, timeout=timeout, what=what,
                          privatize=True, accept_returncodes=tuple(exit_codes))
    except SimulationError as exc:
        text = str(exc)
        if "exceeded the time limit" in text:
            raise
        raise SimulationError(f"{what} failed: {_diagnose(text)}{_missing(out_dir, n_ranks)}. {text}") from None
    missing = _missing(out_dir, n_ranks)
    if missing:
        raise SimulationError(f"{what} failed: {_diagnose(res.output)}{missing}; no results were kept. "
                              f"Last output of SimGrid and the program:\n{_tail(res.output)}")
    return res


def layer_env(env: Mapping[str, str] | None, schedule_dir: Path | None, measured: bool) -> dict[str, str]:
    """Environment of the measurement layer besides its output folder: the platform's, the schedule, the mode."""
    out = dict(env or {})
    if schedule_dir is not None:
        out["WAITLAB_SCHEDULE"] = str(schedule_dir.resolve())
    if measured:  # the layer books measured computation before each call
        out["WAITLAB_MEASURED"] = "1"
    return out


def rerun_files(command: Sequence[str], binary: Path, platform_xml: Path, hostfile: Path, env: Mapping[str, str],
                schedule_dir: Path | None) -> dict[str, bytes]:
    """What re-runs a program run with stock SimGrid, no Python: ``platform.xml``, ``hostfile``, the program,
    its injection schedule (if any) and ``smpirun.sh``, the exact smpirun command line (every ``--cfg``) with
    those files' names; arguments given to the script are appended (e.g. ``--cfg=smpi/display-timing:yes``).
    The layer linked into the program records nothing without ``WAITLAB_OUT``."""
    files = {"platform.xml": platform_xml.read_bytes(), "hostfile": hostfile.read_bytes(),
             "program": binary.read_bytes()}
    rename = {str(platform_xml): "platform.xml", str(hostfile): "hostfile", str(binary): "./program"}
    cmd = list(command)
    if "-wrapper" in cmd:  # waitlab's own guard that kills the simulator with smpirun: not needed by hand
        i = cmd.index("-wrapper")
        del cmd[i:i + 2]
    cmd = ["smpirun" if i == 0 else rename.get(c, c) for i, c in enumerate(cmd)]
    lines = ["#!/bin/sh", "# The exact smpirun command of this run (waitlab's measurement layer, linked into the",
             "# program, records nothing when WAITLAB_OUT is unset). Extra arguments are appended, e.g.",
             "#   sh smpirun.sh --cfg=smpi/display-timing:yes", 'cd "$(dirname "$0")" || exit 1']
    if schedule_dir is not None:
        for f in sorted(schedule_dir.glob("s*.bin")):
            files[f"schedule/{f.name}"] = f.read_bytes()
    for key, value in sorted(env.items()):
        shown = '"$(pwd)/schedule"' if key == "WAITLAB_SCHEDULE" else shlex.quote(value)
        lines.append(f"export {key}={shown}")
    lines.append("exec " + " ".join(shlex.quote(c) for c in cmd) + ' "$@"')
    files["smpirun.sh"] = ("\n".join(lines) + "\n").encode()
    return files


def _missing(out_dir: Path, n_ranks: int) -> str:
    missing = [r for r in range(n_ranks) if not (out_dir / f"r{r}.done").exists()]
    if not missing:
        return ""
    shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    return f" (rank{'s' if len(missing) > 1 else ''} {shown} did not reach MPI_Finalize)"
