"""The diagnosis-model protocol: what a model reads and what it must return (issue 24).

A diagnosis model is a plain function (networkx style)::

    def model(run: RunData, **options) -> pandas.DataFrame

``run`` holds what a measured trace of the run holds (:class:`RunData`: ``events`` with the columns
:data:`~waitlab.models.analysis.measured.EVENT_COLUMNS`, ``waits`` with
:data:`~waitlab.models.analysis.measured.WAIT_COLUMNS` (``wait`` in seconds), ``placement``, ``regions``, ``callpaths``,
``n_ranks``).  What only the simulator knows (the injected cause of each activity, the cause ledger, the kind of
an inserted perturbation) is not in it: that is the answer the scores compare with
(:mod:`waitlab.models.analysis.measured`).  The returned table has one row per
blamed item with at least the columns

* ``rank`` (int): the rank blamed;
* ``region`` (str): the region (or call path's region) blamed, ``"(top level)"`` outside every region (``""``,
  as the event table names it, is read as ``"(top level)"``);
* ``seconds`` (float, >= 0): wait blamed on that (rank, region);

and optionally ``callpath`` (str), ``kind`` (the cause kind the model names: ``imbalance``, ``noise``,
...) and ``improvement`` (seconds the model predicts removing this item saves).  ``DataFrame.attrs`` may
say which wait the model explains (``attrs["explains"]``: ``"total_wait"``, the default, or
``"considered_wait:OP+OP"``), how much of it (``attrs["explains_wait"]``) and how much it left
unexplained (``attrs["unexplained"]``).

:func:`blame_problems` lists what is wrong with a model's output (what
:func:`waitlab.check_model` reports and what ``waitlab diagnose`` refuses).

Examples
--------
>>> import pandas as pd
>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 2.0], exit=[2.0, 2.0], match=[0, 0])
>>> run = RunData(ev, wait_states(ev))
>>> run.n_ranks, run.total_wait
(2, 2.0)
>>> blame_problems(pd.DataFrame({"rank": [5], "region": ["A"], "seconds": [3.0]}), run)
['blames rank 5, which does not exist (the run has ranks 0..1)', "blames 3 s, more than the run's 2 s of wait"]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import pandas as pd

from waitlab.models.analysis.callpaths import CallPaths, call_paths
from waitlab.models.analysis.measured import WAIT_COLUMNS, measured_tables
from waitlab.models.analysis.syncpoints import EventIndex, event_index
from waitlab.models.analysis.ties import TieCandidates, tie_candidates
from waitlab.models.vocabulary import MPI_ACTIONS

#: Columns every model output must have.
REQUIRED_COLUMNS = ("rank", "region", "seconds")
#: Columns a model output may have besides them.
OPTIONAL_COLUMNS = ("callpath", "kind", "improvement")
#: Relative slack of the "more blame than wait" check (float sums of many shares).
BLAME_SLACK = 1e-6
#: Longest region, call path or kind name a model may give (unless the run has it): longer names would flood the
#: reports (a 10 MB region name printed whole).
MAX_NAME_CHARS = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

@dataclass(frozen=True)
class RunData:
    """What a diagnosis model reads: one run's tables, as a measured trace holds them.

    The tables given are reduced to what a trace holds
    (:func:`~waitlab.models.analysis.measured.measured_tables`): a model never sees the injected causes the scores
    compare with.

    Attributes
    ----------
    events : DataFrame
        The event table (:mod:`waitlab.models.analysis.waitstates`), columns
        :data:`~waitlab.models.analysis.measured.EVENT_COLUMNS`.
    waits : DataFrame
        Its wait states (``wait`` in seconds, ``rank``, ``event``, ``peer_event``, ``pattern``, ``op``, ...).
    placement : DataFrame, optional
        ``rank, node, supernode, host`` of every rank.
    """

    events: pd.DataFrame
    waits: pd.DataFrame
    placement: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        waits = self.waits[[c for c in WAIT_COLUMNS if c in self.waits.columns]]
        events, waits = measured_tables(self.events, waits)
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "waits", waits)

    def copy(self) -> RunData:
        """The run with tables of its own (deep copies of :attr:`events`, :attr:`waits` and :attr:`placement`, the
        columns a model is given): what a model changes in it stays in it.  What the built-in models derive
        (:attr:`index`, :attr:`ties`, :attr:`callpaths`) is not shared with the copy.

        Every in-process model but the built-in ones gets one
        (:func:`~waitlab.experiments.diagnosis.registry.run_model`; a user's model in its own process gets the tables
        pickled).  A shallow copy would not do: pandas writes
        through ``Series.array`` into the shared arrays even with copy-on-write, and before pandas 3 through
        ``to_numpy()`` as well.  Cost: about 80 ms and the tables' size (83 MiB) per million events.

        >>> import pandas as pd
        >>> run = RunData(pd.DataFrame({"rank": [0, 1]}), pd.DataFrame({"rank": [1], "wait": [2.0]}))
        >>> mine = run.copy()
        >>> mine.waits["wait"] = 1e-3
        >>> run.total_wait, mine.total_wait
        (2.0, 0.001)
        """
        out = object.__new__(RunData)  # the tables are already reduced to what a model reads: no __post_init__
        object.__setattr__(out, "events", self.events.copy(deep=True))
        object.__setattr__(out, "waits", self.waits.copy(deep=True))
        object.__setattr__(out, "placement", self.placement.copy(deep=True) if self.placement is not None else None)
        return out

    @cached_property
    def callpaths(self) -> CallPaths:
        """Call paths of the event table (computed once, shared by the models)."""
        return call_paths(self.events)

    @cached_property
    def index(self) -> EventIndex:
        """What the synchronization points derive from the event table alone (built once, shared by the
        built-in models: :func:`~waitlab.models.analysis.syncpoints.event_index`)."""
        return event_index(self.events, self.callpaths, self.ties)

    @cached_property
    def ties(self) -> TieCandidates:
        """The events that can be tied culprits (:func:`~waitlab.models.analysis.ties.tie_candidates`; built
        once)."""
        return tie_candidates(self.events)

    @property
    def regions(self) -> list[str]:
        """Names of the regions of the run."""
        ev = self.events
        if "region" not in ev or not len(ev):
            return []
        return sorted({str(r) for r in ev["region"].astype(str).unique() if r})

    @property
    def n_ranks(self) -> int:
        """Number of ranks (``max rank + 1`` of the event table)."""
        return int(self.events["rank"].max()) + 1 if len(self.events) else 0

    @property
    def total_wait(self) -> float:
        """Total wait of the run (seconds)."""
        return float(self.waits["wait"].sum()) if len(self.waits) else 0.0


class DiagnosisModel(Protocol):
    """A diagnosis model: ``model(run, **options) -> DataFrame`` (see the module docstring)."""

    def __call__(self, run: RunData, **options: Any) -> pd.DataFrame: ...  # pragma: no cover


#: The region a model's output names for code outside every region (the event table's ``""``).
TOP_LEVEL = "(top level)"


def blame_problems(frame: Any, run: RunData, wait: float | None = None) -> list[str]:
    """What is wrong with a model's output (empty list: nothing).

    Checks: a DataFrame; the columns ``rank, region, seconds``; numeric, finite, non-negative seconds;
    integer ranks (not True or False) that exist in the run; names (region, call path, kind) without control
    characters and at most :data:`MAX_NAME_CHARS` long, unless the run has them; no region ``"(top)"`` the run does
    not have (:func:`top_level_problem`); no more blame than ``wait`` (default: the run's total wait); predicted
    improvements that are finite and physically possible (:func:`improvement_problem`).

    A region the run's event table does not name is allowed: a model that reads the platform may blame the region
    ``"network"`` of a degraded link, which is where the truth puts it and in no event.
    """
    if not isinstance(frame, pd.DataFrame):
        return [f"returned {type(frame).__name__}, not a pandas DataFrame"]
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        return [f"has no column {', '.join(missing)} (needs {', '.join(REQUIRED_COLUMNS)})"]
    out: list[str] = []
    if not len(frame):
        return out
    try:
        sec = pd.to_numeric(frame["seconds"], errors="raise").to_numpy(float)
    except (TypeError, ValueError):
        return ["column seconds is not numeric"]
    try:
        rank_f = pd.to_numeric(frame["rank"], errors="raise").to_numpy(float)
    except (TypeError, ValueError):
        return ["column rank is not numeric"]
    if not pd.api.types.is_numeric_dtype(frame["seconds"]) or pd.api.types.is_bool_dtype(frame["seconds"]):
        # (its sum, read as numbers, would say nothing true: text "1.0" is no second)
        return [f"has a seconds column of {frame['seconds'].dtype} values, not numbers"]
    if _has_bools(frame["rank"]):
        out.append("has ranks that are True or False, not integers")
    for col in ("region", "callpath"):
        if col in frame.columns and _not_strings(frame[col]):
            out.append(f"has {col} values that are not strings (None, NaN or a number): name every one, "
                       "\"(top level)\" for code outside every region")
    out += _name_problems(frame, run)
    top = top_level_problem(frame, run)
    if top:
        out.append(top)
    if not np.isfinite(sec).all():
        out.append("has seconds that are NaN or infinite")
    elif (sec < 0).any():
        out.append(f"has negative blame ({float(sec.min()):.3g} s)")
    if not np.isfinite(rank_f).all() or (rank_f != np.round(rank_f)).any():
        out.append("has ranks that are not integers")
    else:
        bad = rank_f[(rank_f < 0) | (rank_f >= run.n_ranks)]
        if bad.size:
            out.append(f"blames rank {int(bad[0])}, which does not exist (the run has ranks 0..{run.n_ranks - 1})")
    total = run.total_wait if wait is None else wait
    if "improvement" in frame.columns:
        improvement = improvement_problem(frame, run, total)
        if improvement:
            out.append(improvement)
    explains = explains_problem(frame.attrs, run.waits["op"].astype(str).unique() if "op" in run.waits else ())
    if explains:
        out.append(explains)
    blamed = float(sec[np.isfinite(sec)].sum())
    if blamed > total * (1 + BLAME_SLACK) + 1e-12:
        out.append(f"blames {blamed:.4g} s, more than the run's {total:.4g} s of wait")
    return out


def improvement_problem(frame: pd.DataFrame, run: RunData, wait: float) -> str:
    """'' unless a model's ``improvement`` column is not a finite number in every row, or predicts what no run can do.

    ``improvement`` is the wait a model predicts removing an item saves (in the measure it explains, at most the run's
    total wait ``wait`` = W); the leaderboard sums it per region.  Removing work saves W - W', W' being the wait left.
    W' >= 0, so no item and no region (the sum of its rows) can save more than W.  W' is at most every one of the
    n ranks waiting for the whole run, n * makespan', and removing work does not lengthen the run (every event ends
    no later: makespan' <= makespan), so none can save less than W - n * makespan, hence the bound checked,
    -n * makespan, in any measure of wait: removing work can add wait (a rank freed early now waits), never more
    than that.  The lower bound needs the events' ``enter`` and ``exit``; without them only the upper bound is
    checked.

    >>> import pandas as pd
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 2.0], exit=[2.0, 2.0], match=[0, 0])
    >>> run = RunData(ev, wait_states(ev))
    >>> blame = pd.DataFrame({"rank": [1, 1], "region": ["A", "A"], "seconds": [1.0, 1.0], "improvement": [1.5, 1.5]})
    >>> improvement_problem(blame, run, run.total_wait)
    "predicts 3 s of improvement for the region 'A' (the sum of its rows), more than the run's 2 s of wait: \
removing work cannot save more wait than the run has"
    """
    imp = pd.to_numeric(frame["improvement"], errors="coerce").to_numpy(float)
    if not np.isfinite(imp).all():
        return "has an improvement column that is not a finite number in every row"
    high = wait * (1 + BLAME_SLACK) + 1e-12
    ev = run.events
    if {"enter", "exit"} <= set(ev.columns) and len(ev):
        makespan = float(ev["exit"].max() - ev["enter"].min())
        low = -run.n_ranks * makespan * (1 + BLAME_SLACK) - 1e-12
    else:
        makespan, low = math.nan, -math.inf
    region = frame["region"].astype(str).replace("", TOP_LEVEL).to_numpy()  # the regions the scores sum over
    bad = np.flatnonzero((imp > high) | (imp < low))  # each row (an item) first: then the sums are finite
    if bad.size:
        v, where = float(imp[bad[0]]), f"for an item of the region {region[bad[0]][:80]!r}"
    else:
        sums = pd.Series(imp).groupby(region, sort=True).sum()
        bad = np.flatnonzero((sums.to_numpy() > high) | (sums.to_numpy() < low))
        if not bad.size:
            return ""
        v, where = float(sums.iloc[bad[0]]), f"for the region {str(sums.index[bad[0]])[:80]!r} (the sum of its rows)"
    if v > high:
        return (f"predicts {v:.4g} s of improvement {where}, more than the run's {wait:.4g} s of wait: removing work "
                "cannot save more wait than the run has")
    return (f"predicts {v:.4g} s of improvement {where}, below -{run.n_ranks} ranks x the {makespan:.4g} s "
            "makespan: removing work cannot add more wait than every rank waiting for the whole run")


def top_level_problem(frame: Any, run: RunData) -> str:
    """'' unless a model's output names the region ``"(top)"`` (and the run has none): time outside every region is
    ``"(top level)"`` in the built-in models and the truth, so blame on ``"(top)"`` never matches it.

    >>> import pandas as pd
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1], op=["barrier"] * 2, enter=[0.0, 2.0], exit=[2.0, 2.0], match=[0, 0])
    >>> blame = pd.DataFrame({"rank": [1], "region": ["(top)"], "seconds": [1.0]})
    >>> top_level_problem(blame, RunData(ev, wait_states(ev)))
    'names the region "(top)", which the run does not have: time outside every region is "(top level)"'
    """
    if not isinstance(frame, pd.DataFrame) or "region" not in frame.columns or not len(frame):
        return ""
    col = frame["region"]
    names = col.cat.categories if isinstance(col.dtype, pd.CategoricalDtype) else col.unique()  # a few: cheap
    if "(top)" in {str(v) for v in names} and "(top)" not in run.regions:
        return 'names the region "(top)", which the run does not have: time outside every region is "(top level)"'
    return ""


def _has_bools(col: pd.Series) -> bool:
    """Whether a column holds True or False (a bool column, or bools among the objects of one)."""
    if pd.api.types.is_bool_dtype(col):
        return True
    if col.dtype != object:
        return False
    return any(isinstance(v, bool | np.bool_) for v in col.to_numpy())


def _control_free(name: str) -> bool:
    return not _CONTROL.search(name)


def _name_problems(frame: pd.DataFrame, run: RunData) -> list[str]:
    """Names (``region``, ``callpath``, ``kind``) with control characters (a line break, a tab, NUL), or longer than
    :data:`MAX_NAME_CHARS`, that are not names of the run: they would break the reports' lines and tables."""
    out: list[str] = []
    known: set[str] | None = None
    for col in ("region", "callpath", "kind"):
        if col not in frame.columns:
            continue
        c = frame[col]
        try:
            values = c.cat.categories if isinstance(c.dtype, pd.CategoricalDtype) else pd.unique(c.to_numpy())
        except TypeError:  # unhashable cells: said above (not strings), or a kind the output keeps as text
            continue
        names = [v for v in values if isinstance(v, str) and (len(v) > MAX_NAME_CHARS or not _control_free(v))]
        if names and known is None:
            known = _run_names(run)
        names = [v for v in names if v not in (known or set())]
        ctrl = next((v for v in names if not _control_free(v)), None)
        if ctrl is not None:
            shown = repr(ctrl[:40]) + ("..." if len(ctrl) > 40 else "")
            out.append(f"has {col} names with control characters (a line break, a tab, NUL, ...): {shown}")
        long = next((v for v in names if len(v) > MAX_NAME_CHARS), None)
        if long is not None:
            out.append(f"has a {col} name of {len(long)} characters, more than {MAX_NAME_CHARS}")
    return out


def _run_names(run: RunData) -> set[str]:
    """The run's region and call-path names (those of a run whose table has what call paths need)."""
    names = set(run.regions)
    try:
        names.update(run.callpaths.names)
        names.update(run.callpaths.region)
    except Exception:  # an event table without the columns call paths need (the checks' copy of a run)
        pass
    return names


def _not_strings(col: pd.Series) -> bool:
    """Whether a column holds anything but strings (a categorical: its categories, and no missing value)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return bool(col.isna().any()) or pd.api.types.infer_dtype(col.cat.categories, skipna=False) not in (
            "string", "empty")
    return pd.api.types.infer_dtype(col, skipna=False) not in ("string", "empty")


def explains_problem(attrs: dict[Any, Any], waited_in: Iterable[str] = ()) -> str:
    """What is wrong with the wait a model's output says it explains (``attrs``; '' when nothing).

    ``explains`` is ``"total_wait"`` (the default) or ``"considered_wait:OP+OP"`` naming MPI operations (of the event
    table's vocabulary, or ``waited_in``: the ``op`` column of the run's wait table, which names a program's calls as
    it made them, ``sendrecv_replace``); ``explains_wait``, when given, a finite number of seconds >= 0.

    >>> explains_problem({"explains": "considered_wait:allreduce+waitall", "explains_wait": 2.0})
    ''
    >>> explains_problem({"explains": "considered_wait:nosuchop"})
    "says it explains 'considered_wait:nosuchop', naming nosuchop, which is no MPI operation of the event table"
    """
    explains = attrs.get("explains", "total_wait")
    if explains != "total_wait":
        ops = explains.split(":", 1)[1].split("+") if isinstance(explains, str) and \
            explains.startswith("considered_wait:") else None
        if ops is None:
            return (f"says it explains {explains!r}: attrs['explains'] is 'total_wait' (the default) or "
                    "'considered_wait:OP+OP' (MPI operations of the event table, e.g. considered_wait:allreduce)")
        known = set(MPI_ACTIONS) | set(waited_in) | {""}  # "considered_wait:" (no operation): a run without waits
        unknown = [o for o in ops if o not in known]
        if unknown:
            return (f"says it explains {explains!r}, naming {', '.join(repr(o) if not o else o for o in unknown)}, "
                    "which is no MPI operation of the event table")
    wait = attrs.get("explains_wait")
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float) or not math.isfinite(wait)
                             or wait < 0):
        return f"says it explains_wait {wait!r}: give the seconds of wait it explains, a finite number >= 0"
    return ""


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """A valid model output in canonical form: ``rank`` int, ``region``/``callpath`` str, ``seconds`` float.

    ``callpath`` defaults to the region.  An empty region or call path (``""``, how the event table names code
    outside every region) is ``"(top level)"``, the name the built-in models and the truth give it.  Rows keep their
    order; ``attrs`` are kept.
    """
    region = frame["region"].astype(str).replace("", TOP_LEVEL)
    out = pd.DataFrame({
        "rank": frame["rank"].to_numpy().astype(np.int64),
        "region": region.to_numpy(),
        "callpath": (frame["callpath"].astype(str).replace("", TOP_LEVEL) if "callpath" in frame
                     else region).to_numpy(),
        "seconds": frame["seconds"].to_numpy(float),
    })  # fmt: skip
    for c in ("kind", "improvement"):
        if c in frame:
            out[c] = frame[c].to_numpy()
    out.attrs = {k: v for k, v in frame.attrs.items() if isinstance(v, str | int | float)}
    return out


def as_blame(frame: pd.DataFrame) -> pd.DataFrame:
    """A model output as the scoring interface's blame table (``rank, region, callpath, cost``)."""
    return pd.DataFrame({"rank": frame["rank"].to_numpy(), "region": frame["region"].to_numpy(),
                         "callpath": frame["callpath"].to_numpy(), "cost": frame["seconds"].to_numpy(float)})


def from_costs(costs: pd.DataFrame, **attrs: Any) -> pd.DataFrame:
    """A model output from a ``rank, region, callpath, cost`` table (CWP-DM's and H-CWP-DM's ``costs``)."""
    out = pd.DataFrame({"rank": costs["rank"].to_numpy().astype(np.int64),
                        "region": costs["region"].astype(str).to_numpy(),
                        "callpath": costs["callpath"].astype(str).to_numpy(),
                        "seconds": costs["cost"].to_numpy(float)})
    out.attrs = {k: (float(v) if isinstance(v, float) and math.isfinite(v) else v) for k, v in attrs.items()}
    return out


__all__ = ["OPTIONAL_COLUMNS", "REQUIRED_COLUMNS",
           "DiagnosisModel", "RunData", "as_blame", "blame_problems", "from_costs", "improvement_problem",
           "normalise", "top_level_problem"]
