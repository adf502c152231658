"""Run ``smpirun`` safely: own process group, time limit, SimGrid's words on failure."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from waitlab.errors import SimulationError
from waitlab.simulator.build import require_tool


@dataclass(frozen=True)
class SmpiResult:
    """What one smpirun invocation produced."""

    command: tuple[str, ...]
    returncode: int
    output: str
    wall_seconds: float


#: SimGrid failures caused by a machine limit, and what to do about them.
_LIMIT_HINTS = {
    "Cannot read replay file": "too many open files? a trace with one file per rank needs one descriptor per rank: "
                               "raise 'ulimit -n' or replay one shared trace file (a one-line index)",
    "Failed to protect stack": "vm.max_map_count is too low for the stack guard pages of this many ranks: "
                               "pass --cfg=contexts/guard-size:0 or 'sudo sysctl -w vm.max_map_count=262144'",
}


def limit_hint(output: str) -> str:
    """A sentence naming the machine limit behind a SimGrid failure ('' when none is recognised)."""
    return "".join(f"\nLikely cause: {hint}" for key, hint in _LIMIT_HINTS.items() if key in output)


def _tail(text: str, n: int = 25) -> str:
    lines = [ln for ln in text.splitlines() if "Configuration change" not in ln]
    return "\n".join(lines[-n:])


def run_smpirun(
    binary: Path,
    n_ranks: int,
    platform_xml: Path,
    hostfile: Path,
    *,
    replay_index: Path | None = None,
    args: Sequence[str] = (),
    config: Mapping[str, str] | None = None,
    extra_flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    what: str = "simulation",
    privatize: bool = False,
    accept_returncodes: Sequence[int] = (0,),
) -> SmpiResult:
    """Run ``smpirun -no-privatize`` on ``binary`` and return its output.

    A non-zero exit, a crash or a time-out raises :class:`SimulationError`
    quoting the last lines SimGrid printed.  On time-out the whole process group
    is killed (smpirun starts children of its own).  ``privatize=True`` omits
    ``-no-privatize`` (real programs with global variables need SMPI's
    privatization); ``accept_returncodes`` lists exit statuses that are not failures.
    """
    smpirun = require_tool("smpirun")
    cmd = [smpirun, *([] if privatize else ["-no-privatize"]), "-np", str(n_ranks), "-platform", str(platform_xml),
           "-hostfile", str(hostfile)]
    cmd += list(extra_flags)
    if replay_index is not None:
        cmd += ["-replay", str(replay_index)]
    cmd.append(str(binary))
    cmd += list(args)
    for key, value in (config or {}).items():
        cmd.append(f"--cfg={key}:{value}")
    cmd.append("--log=root.thres:warning")
    full_env = dict(os.environ)
    full_env.update(env or {})
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                            cwd=cwd, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise SimulationError(f"{what} exceeded the time limit of {timeout:g} s and was stopped. "
                              f"Last output of SimGrid:\n{_tail(out or '')}") from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    wall = time.perf_counter() - t0
    if proc.returncode not in accept_returncodes:
        reason = f"exit status {proc.returncode}"
        if proc.returncode < 0:
            reason = f"killed by signal {signal.Signals(-proc.returncode).name}"
        raise SimulationError(f"{what} failed in SimGrid ({reason}). SimGrid said:\n{_tail(out)}{limit_hint(out)}")
    return SmpiResult(tuple(cmd), proc.returncode, out, wall)
