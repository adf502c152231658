"""The ``waitlab`` command's entry point (the ``waitlab`` script and ``python -m waitlab``): :func:`waitlab.cli.main`,
with pydantic's plugin search off unless the environment says otherwise.

Before it builds its first model, pydantic looks for plugins among the entry points of every installed distribution:
8-15 ms of every command's start here (``importlib.metadata.entry_points(group="pydantic")`` over 148
distributions, five fresh processes), before a run's SMPI stage can start.  The command line uses no pydantic
plugin, so it sets pydantic's documented switch ``PYDANTIC_DISABLE_PLUGINS=__all__`` when the variable is unset
(set it to an empty string to keep a plugin, such as an observability one).  ``import waitlab`` in a user's program
leaves the environment alone.

Before and after a command's session (:func:`waitlab.interrupts.session`: its first Ctrl-C stops the command cleanly),
a SIGINT, SIGTERM or SIGHUP (the terminal closed, the ssh connection dropped) ends the process at once with status
128 + signal: there is nothing to clean up then, and a second Ctrl-C while the command ends after its first one is not
turned into a traceback or a death by the signal.  This holds from the moment this module is imported, before the
command's own modules (0.3 s of imports, where a Ctrl-C printed a 45-line traceback).  A SIGHUP the command was
started ignoring (``nohup``) stays ignored.

A command that cannot even import its modules for lack of memory (the loader cannot map an extension module under a
tight ``ulimit -v``: ``failed to map segment from shared object``) says so in the one line of an out-of-memory error
(status 4), not with a traceback.

A command whose output's reader went away (``waitlab ... | head``) ends quietly with 128 + SIGPIPE, as shell tools
do, not with a traceback.  A command that returns ends the process without the interpreter's teardown: the exit
handlers run (``atexit``, logging's flush), the output is flushed, then ``os._exit``.  The teardown frees every module
and object one by one: 0.20-0.22 s after a ping-pong program's run (pandas and pyarrow alone 0.11 s), a sixth of that
command's time, for memory the operating system takes back whole.  An exception or ``SystemExit`` (``--help``, a
usage error) leaves as usual.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from types import FrameType

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # before waitlab.cli imports pydantic

#: The signals that end a command: its session (:func:`waitlab.interrupts.session`) handles the same ones.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _exit_at_once(signum: int, frame: FrameType | None) -> None:
    os._exit(128 + signum)


def _end_on_stop_signals() -> None:
    """Make a stop signal end the process at once (see the module doc), but a SIGHUP ignored since the start."""
    for s in STOP_SIGNALS:
        if s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN:  # started by nohup: it stays ignored
            continue
        signal.signal(s, _exit_at_once)


if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
    _end_on_stop_signals()  # before the imports below: a Ctrl-C during them ends the command without a traceback

from waitlab.errors import EnvironmentProblem, out_of_memory, out_of_memory_text  # noqa: E402 (after the handlers)

_IMPORT_FAILURE: ImportError | MemoryError | None = None
try:
    from waitlab import cli  # after the environment above
except (ImportError, MemoryError) as exc:  # an extension module the loader could not map, or no memory left for the
    # modules themselves: said by main() in one line
    if not out_of_memory(exc):
        raise
    _IMPORT_FAILURE = exc

__all__ = ["main"]


def main() -> int:
    """The command: :func:`waitlab.cli.main`, then the exit described above (returns only if the output cannot be
    flushed, to let the interpreter report it)."""
    _end_on_stop_signals()
    if _IMPORT_FAILURE is not None:
        print(f"waitlab: error: {out_of_memory_text(_IMPORT_FAILURE)}", file=sys.stderr)
        return EnvironmentProblem.exit_code
    try:
        code = cli.main()
    except BrokenPipeError:  # the reader of the output went away (`waitlab ... | head`): end as a shell tool does
        os._exit(128 + signal.SIGPIPE)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        os._exit(128 + signal.SIGPIPE)
    except OSError:  # the output cannot be written (a full disk): the interpreter's usual account of it
        return code
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
