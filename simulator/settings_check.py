"""A scenario's own SimGrid settings (``[simulation.config]``) checked against SimGrid's option types before a run.

SimGrid reads ``--cfg=KEY:VALUE`` when the simulation starts and aborts on a value its option cannot parse
(``maxmin/precision:banana``: an uncaught ``std::range_error``, exit status 134) or a model it does not have
(``network/model:Nonsense``).  Here each setting is handed to SimGrid's own configuration (the python3-simgrid
bindings' ``Engine.set_config``, in a child process, since a bad model ends the process) and the first one
refused is one :class:`~waitlab.errors.InputError` naming the key, the value and SimGrid's words.

Keys SimGrid registers only when SMPI starts (``smpi/os``, ``smpi/allreduce``, ...) are unknown to a bare
engine: those are left to SMPI, whose refusal :func:`waitlab.simulator.smpi.failure` turns into one line.
Without the bindings nothing is checked here either.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from functools import lru_cache

from waitlab.errors import InputError

#: Run in a child process: one line per setting, ``KEY\t<key>`` then ``OK``, ``UNKNOWN`` or ``BAD\t<words>``.
_CHECK = r"""
import json, sys
try:
    import simgrid
except ImportError:
    print("NOBINDINGS", flush=True)
    raise SystemExit(0)
simgrid.Engine(["waitlab-settings-check", "--log=root.thres:critical", "--log=xbt_cfg.thres:critical"])
for key, value in json.loads(sys.argv[1]):
    print("KEY\t" + key, flush=True)
    try:
        simgrid.Engine.set_config(key + ":" + value)
    except IndexError as exc:
        print("UNKNOWN" if "Bad config key" in str(exc) else "BAD\t" + str(exc).splitlines()[0], flush=True)
    except Exception as exc:
        print("BAD\t" + (str(exc).splitlines() or [type(exc).__name__])[0], flush=True)
    else:
        print("OK", flush=True)
"""

#: SimGrid's words for a value its option type cannot parse -> what the type is, in the user's terms.
_TYPES = {"invalid double": "a number", "invalid integer": "an integer", "not a boolean": "yes or no"}


@lru_cache(maxsize=64)
def refusals(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``(key, SimGrid's words)`` of the settings SimGrid refuses (keys it does not know at all are left out)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(pairs)], capture_output=True, text=True,
                              errors="replace", timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    lines = proc.stdout.splitlines()
    if "NOBINDINGS" in lines:
        return ()
    out: list[tuple[str, str]] = []
    key = ""
    answered = True
    for line in lines:
        if line.startswith("KEY\t"):
            key, answered = line[4:], False
        elif line.startswith("BAD\t"):
            out.append((key, line[4:]))
            answered = True
        elif line in ("OK", "UNKNOWN"):
            answered = True
    if not answered:  # SimGrid ended the process on this setting (an unknown model): its CRITICAL line says why
        said = [ln.split("CRITICAL]", 1)[1].strip() for ln in proc.stderr.splitlines() if "CRITICAL]" in ln]
        out.append((key, said[-1] if said else f"SimGrid stopped (exit status {proc.returncode})"))
    return tuple(out)


def check_settings(settings: Mapping[str, str], file: str) -> None:
    """Refuse the first of a scenario's SimGrid ``settings`` that SimGrid's option types refuse (one line)."""
    if not settings:
        return
    pairs = tuple(sorted((str(k), str(v)) for k, v in settings.items()))
    for key, words in refusals(pairs):
        value = dict(pairs)[key]
        kind = _TYPES.get(words.strip().lower())
        problem = (f"SimGrid reads {key} as {kind}; {value!r} is not one" if kind else
                   f"SimGrid refuses {value!r}: {words[:300]}")
        raise InputError(file, f"simulation.config.{key}", problem, "give a value of the type SimGrid expects, "
                         "or remove the setting (a SimGrid program run with --help-cfg lists every key with its "
                         "type)")
