"""``waitlab.check_model``: does a diagnosis model keep the protocol? (in the spirit of scikit-learn's
``check_estimator``).

The model runs on tiny hand-made runs (:func:`tiny_cases`: a barrier one rank is late to, a chain of
late senders, a run without any wait, an exact tie, a barrier on a sub-communicator, one-sided fence and lock
waits) and every output is checked with :func:`~waitlab.models.analysis.protocol.blame_problems`, the check
``waitlab diagnose`` and ``evaluate`` apply: a DataFrame, the columns ``rank, region, seconds``, finite non-negative
blame, ranks that exist, no more blame than wait, no region named ``"(top)"`` where the protocol says
``"(top level)"``, improvements a run can have.  The model gets a copy of each case's tables and its output is checked
against the case as it was given, so a model that changes its input (inflating the waits it then blames) is caught.
Exceptions, ``sys.exit`` included, are reported, not raised (only Ctrl-C goes through).  The cases' event tables
carry the simulator's truth columns (``cause``, ``excess``) as a run's do; the model gets them as a measured trace
holds them (:class:`~waitlab.models.analysis.protocol.RunData`), so a model that reads the truth is reported.
A model named by a spec, or a function, runs in a child process (:mod:`~waitlab.experiments.diagnosis.sandbox`;
a function in a forked one), as in ``waitlab diagnose``: one that loops is stopped after ``model_timeout`` seconds
(default 600) and the check ends there, in one line.

Examples
--------
>>> import pandas as pd
>>> def blame_zero(run, **options):
...     return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})
>>> check_model(blame_zero)
[]
>>> def negative(run, **options):
...     return pd.DataFrame({"rank": [0], "region": ["A"], "seconds": [-1.0]})
>>> check_model(negative)[0]
'barrier, one late rank: returned a table the protocol does not allow: has negative blame (-1 s)'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.diagnosis.registry import ModelSpec, hint, model_input, resolve
from waitlab.experiments.diagnosis.sandbox import DEFAULT_TIMEOUT, SandboxError, describe_exception
from waitlab.models.analysis.protocol import RunData, blame_problems
from waitlab.models.analysis.waitstates import make_events, wait_states

#: How a :class:`~waitlab.experiments.diagnosis.sandbox.SandboxError` of a model stopped at its time limit (or
#: stuck importing) begins: :func:`check_model` ends there.
_TIMED_OUT = ("did not return within", "was still being imported after")


def tiny_cases() -> dict[str, RunData]:
    """Small runs every model must handle (name -> run)."""
    barrier = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                          enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)
    chain = make_events(rank=[0, 0, 1, 1, 1, 2, 2],
                        op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                        enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
                        done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
    balanced = make_events(rank=[0, 0, 1, 1], op=["compute", "allreduce"] * 2, enter=[0, 1, 0, 1],
                           exit=[1, 1, 1, 1], match=[-1, 0] * 2)
    tie = make_events(rank=[0, 0, 1, 1, 2, 2, 3, 3], op=["compute", "allreduce"] * 4,
                      enter=[0, 1, 0, 3, 0, 1, 0, 3], exit=[1, 3, 3, 3, 1, 3, 3, 3], match=[-1, 0] * 4)
    # ranks 0, 1 and 2, 3 each in a sub-communicator barrier (the events' match: one instance per group); rank 3 late
    subcomm = make_events(rank=[0, 0, 1, 1, 2, 2, 3, 3], op=["compute", "barrier"] * 4,
                          enter=[0, 1, 0, 1, 0, 1, 0, 3], exit=[1, 1, 1, 1, 1, 3, 3, 3],
                          match=[-1, 0, -1, 0, -1, 1, -1, 1])
    # fences on window 0: rank 2 computes 3 s, the others 1 s: ranks 0 and 1 wait 2 s at the closing fence
    fence = _window(make_events(rank=[0, 0, 0, 1, 1, 1, 2, 2, 2], op=["win_fence", "compute", "win_fence"] * 3,
                                enter=[0, 1, 2, 0, 1, 2, 0, 1, 4], exit=[1, 2, 4.5, 1, 2, 4.5, 1, 4, 4.5]))
    # exclusive locks on rank 0's window: rank 1 holds it 3 s, rank 2 asks at 1 s and waits 2.1 s (Lock Contention)
    lock = _window(make_events(rank=[0, 1, 1, 1, 1, 2, 2, 2],
                               op=["compute", "win_lock", "compute", "put", "win_unlock", "win_lock", "put",
                                   "win_unlock"],
                               enter=[0, 0, 0, 3, 3.1, 1, 3.1, 3.2], exit=[3.3, 0, 3, 3.1, 3.2, 3.1, 3.2, 3.3],
                               peer=[-1, 0, -1, 0, 0, 0, 0, 0]))
    return {name: RunData(_with_truth(ev), wait_states(ev)) for name, ev in (
        ("barrier, one late rank", barrier), ("late-sender chain", chain), ("no wait", balanced),
        ("exact tie at an allreduce", tie), ("barrier on two sub-communicators", subcomm),
        ("one-sided fence, one late rank", fence), ("one-sided lock contention", lock))}


def _with_truth(ev: pd.DataFrame) -> pd.DataFrame:
    """``ev`` with the truth columns of a simulated run (no injected cause), which the model must not get."""
    return ev.assign(cause=np.full(len(ev), -1, np.int64), excess=np.zeros(len(ev)))


def _window(ev: pd.DataFrame) -> pd.DataFrame:
    """``ev`` with its one-sided calls on window 0 (``tag``) and program order per rank (``seq``)."""
    ev["tag"] = np.zeros(len(ev), np.int32)
    ev["seq"] = ev.groupby("rank").cumcount().to_numpy(np.int32)
    return ev


def check_model(model: str | Callable[..., pd.DataFrame] | ModelSpec, *, model_timeout: float = DEFAULT_TIMEOUT,
                **options: Any) -> list[str]:
    """Everything wrong with a model's outputs on :func:`tiny_cases` (empty: it keeps the protocol).

    Parameters
    ----------
    model : callable, str or ModelSpec
        The model function, or a spec (``package.module:function``, a built-in key, a plug-in name).
    model_timeout : float
        Seconds the model may take on one tiny case (a user's model runs in a child process, stopped past them);
        the first case it runs past them ends the check, with one line saying so (every case is tiny: a model
        that loops on one would on the others).  Not passed to the model.
    **options
        Keyword options passed to the model.

    Returns
    -------
    list of str
        One line per problem, each naming the case: ``"<case>: <problem>"``.
    """
    spec = resolve(model, timeout=model_timeout, python_name="model")
    out: list[str] = []
    cases = tiny_cases()
    for i, (name, run) in enumerate(cases.items()):
        try:  # the model gets tables of its own; its output is checked against the untouched case
            frame = spec.fn(model_input(spec, run), **{**spec.options, **options})
        except SandboxError as exc:  # a user's model in its process: it failed, said in one line
            if str(exc).startswith(_TIMED_OUT):  # a tiny case: the model loops or hangs, stop here
                left = len(cases) - i - 1
                out.append(f"{name}: {hint(str(exc))}; the check stopped here"
                           + (f" ({left} more case{'s' if left != 1 else ''} not run)" if left else ""))
                break
            out.append(f"{name}: {hint(str(exc))}")
            continue
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # any exception (sys.exit too) is a finding, not the end of the checker
            out.append(f"{name}: {hint(describe_exception(exc))}")
            continue
        out += [f"{name}: {p}" for p in blame_problems(frame, run)]  # the check diagnose and evaluate apply
    return out


__all__ = ["check_model", "tiny_cases"]
