"""``waitlab.check_model``: does a diagnosis model keep the protocol? (in the spirit of scikit-learn's
``check_estimator``).

The model runs on tiny hand-made runs (:func:`tiny_cases`: a barrier one rank is late to, a chain of
late senders, a run without any wait, an exact tie) and every output is checked with
:func:`~waitlab.models.analysis.protocol.blame_problems`: a DataFrame, the columns ``rank, region,
seconds``, finite non-negative blame, ranks that exist, no more blame than wait.  Exceptions are
reported, not raised.

Examples
--------
>>> import pandas as pd
>>> def blame_zero(run, **options):
...     return pd.DataFrame({"rank": [0], "region": ["(top)"], "seconds": [run.total_wait]})
>>> check_model(blame_zero)
[]
>>> def negative(run, **options):
...     return pd.DataFrame({"rank": [0], "region": ["A"], "seconds": [-1.0]})
>>> check_model(negative)[0]
'barrier, one late rank: has negative blame (-1 s)'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from waitlab.experiments.diagnosis.registry import ModelSpec, resolve
from waitlab.models.analysis.protocol import RunData, blame_problems
from waitlab.models.analysis.waitstates import make_events, wait_states


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
    return {name: RunData(ev, wait_states(ev)) for name, ev in (
        ("barrier, one late rank", barrier), ("late-sender chain", chain), ("no wait", balanced),
        ("exact tie at an allreduce", tie))}


def check_model(model: str | Callable[..., pd.DataFrame] | ModelSpec, **options: Any) -> list[str]:
    """Everything wrong with a model's outputs on :func:`tiny_cases` (empty: it keeps the protocol).

    Parameters
    ----------
    model : callable, str or ModelSpec
        The model function, or a spec (``package.module:function``, a built-in key, a plug-in name).
    **options
        Keyword options passed to the model.

    Returns
    -------
    list of str
        One line per problem, each naming the case: ``"<case>: <problem>"``.
    """
    spec = resolve(model)
    out: list[str] = []
    for name, run in tiny_cases().items():
        try:
            frame = spec.fn(run, **{**spec.options, **options})
        except Exception as exc:  # any exception of a model is a finding, not a crash of the checker
            out.append(f"{name}: raised {type(exc).__name__}: {exc}")
            continue
        out += [f"{name}: {p}" for p in blame_problems(frame, run)]
    return out


__all__ = ["check_model", "tiny_cases"]
