"""Event-table helpers shared by the analyses: categorical codes, grouping, call paths and exclusive times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.waitstates import PATTERNS

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def category_codes(col: pd.Series) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Integer codes and category names of a column (categorical or not)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(np.int64), [str(c) for c in col.cat.categories]
    codes, uniq = pd.factorize(col.astype(str), sort=False)
    return np.asarray(codes, np.int64), [str(u) for u in uniq]


def native_codes(col: pd.Series) -> tuple[npt.NDArray[np.integer], list[str]]:
    """:func:`category_codes` without widening a categorical's codes to int64 (int8 for a few categories, no copy):
    for look-ups (:func:`isin_names`, indexing), not for arithmetic that may overflow their type."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), [str(c) for c in col.cat.categories]
    return category_codes(col)


def lookup_codes(names: list[str], wanted: tuple[str, ...] | list[str]) -> npt.NDArray[np.int64]:
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[w] for w in wanted if w in pos], np.int64)


def isin_names(codes: npt.NDArray[np.integer], names: list[str],
               wanted: tuple[str, ...] | list[str]) -> npt.NDArray[np.bool_]:
    """``codes`` (of categories ``names``) is one of ``wanted`` -- a table lookup, faster than np.isin."""
    table = np.zeros(len(names) + 1, bool)
    table[lookup_codes(names, wanted)] = True
    return table[codes]  # code -1 (missing) maps to the last entry, False


def unique_inverse(key: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(key, return_inverse=True)`` by one sort (numpy's hash-based unique is slower here).

    >>> [a.tolist() for a in unique_inverse(np.array([5, 3, 5, 9]))]
    [[3, 5, 9], [1, 0, 1, 2]]
    """
    if key.size == 0:
        return key.astype(np.int64), np.zeros(0, np.int64)
    order = np.argsort(key)
    sk = key[order]
    new = np.empty(sk.size, bool)
    new[0] = True
    np.not_equal(sk[1:], sk[:-1], out=new[1:])
    inv = np.empty(sk.size, np.int64)
    inv[order] = np.cumsum(new) - 1
    return sk[new].astype(np.int64), inv


def searchsorted_many(a: npt.NDArray[np.generic], v: npt.NDArray[np.generic], side: str = "left") -> IntArray:
    """``np.searchsorted(a, v, side)`` with ``v`` sorted first: numpy starts each search where the previous key's
    ended, so many unsorted keys are found faster (the same positions).

    >>> searchsorted_many(np.array([1, 3, 5]), np.array([4, 0, 5])).tolist()
    [2, 0, 2]
    """
    order = np.argsort(v, kind="stable")
    out = np.empty(v.shape, np.int64)
    out[order] = np.searchsorted(a, v[order], side=side)  # type: ignore[call-overload]
    return out


def group_codes(key: IntArray, size: int) -> tuple[IntArray, IntArray]:
    """Sorted distinct values of ``key`` (all in ``[0, size)``) and each key's group number.

    A bincount when ``size`` is moderate, a hash factorisation otherwise.

    >>> [a.tolist() for a in group_codes(np.array([7, 2, 7]), 10)]
    [[2, 7], [1, 0, 1]]
    """
    if size <= max(4 * key.size, 1 << 20):
        present = np.bincount(key, minlength=size) > 0
        uniq = np.flatnonzero(present)
        remap = np.cumsum(present) - 1
        return uniq.astype(np.int64), remap[key].astype(np.int64)
    codes, uniq = pd.factorize(key, sort=True)
    return np.asarray(uniq, np.int64), np.asarray(codes, np.int64)


def mpi_call_codes(events: pd.DataFrame) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The MPI call of each row, as the program made it: ``(codes, names)``, ``names[codes[i]]`` the call of row
    ``i`` (meaningful on MPI rows): the ``call`` column where it names one (``MPI_Sendrecv``, which waitlab runs
    as isend, irecv and waitall), else ``MPI_<Op>`` (``MPI_Recv``, as the critical path and MPI spell it).

    >>> ev = pd.DataFrame({"op": ["isend", "waitall", "recv"], "call": ["MPI_Sendrecv", "MPI_Sendrecv", ""]})
    >>> codes, names = mpi_call_codes(ev)
    >>> [names[c] for c in codes]
    ['MPI_Sendrecv', 'MPI_Sendrecv', 'MPI_Recv']
    """
    op, op_names = category_codes(events["op"])
    names = [f"MPI_{o.capitalize()}" for o in op_names]
    if "call" not in events.columns:
        return op, names
    call, call_names = category_codes(events["call"])
    named = np.array([bool(c) for c in call_names] + [False])[call]
    return np.where(named, len(names) + call, op), names + call_names


def pattern_codes(waits: pd.DataFrame) -> npt.NDArray[np.int8]:
    """Index into :data:`~waitlab.models.analysis.waitstates.PATTERNS` of each wait state's pattern."""
    codes, names = category_codes(waits["pattern"])
    table = np.array([PATTERNS.index(n) if n in PATTERNS else -1 for n in names] or [-1], np.int8)
    return table[codes] if codes.size else np.zeros(0, np.int8)


@dataclass(frozen=True)
class CallPaths:
    """The call paths of an event table.

    Attributes
    ----------
    code : int32 array
        Call path of each event row; -1 for region rows.
    names : tuple of str
        Call path names (``outer>inner``, ``outer>MPI_Allreduce``, ``(top level)``).
    region : tuple of str
        The region each call path is blamed as: the innermost enclosing region for
        non-MPI activities (``"(top level)"`` outside regions), the MPI call for MPI operations
        (:func:`mpi_call_codes`: ``MPI_<Op>``, or the program's own call such as ``MPI_Sendrecv``).
    is_mpi : bool array
        Whether the call path is an MPI operation.
    """

    code: npt.NDArray[np.int32]
    names: tuple[str, ...]
    region: tuple[str, ...]
    is_mpi: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.names)


def call_paths(events: pd.DataFrame) -> CallPaths:
    """Call path of every leaf activity (see the module docstring).

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events
    >>> ev = make_events(rank=[0, 0], op=["compute", "barrier"], enter=[0.0, 1.0], exit=[1.0, 1.0], match=[-1, 0])
    >>> cp = call_paths(ev)
    >>> [cp.names[c] for c in cp.code], [cp.region[c] for c in cp.code]
    (['(top level)', 'MPI_Barrier'], ['(top level)', 'MPI_Barrier'])
    """
    n = len(events)
    kind, kind_names = native_codes(events["kind"])
    op, op_names = mpi_call_codes(events)
    path, path_names = category_codes(events["path"])
    region, region_names = native_codes(events["region"])
    is_leaf = ~isin_names(kind, kind_names, ("region",))
    is_mpi = isin_names(kind, kind_names, ("mpi",))
    n_ops = len(op_names) + 1
    key = path * n_ops + np.where(is_mpi, op, n_ops - 1)
    key = key[is_leaf]
    present = np.zeros(max(len(path_names), 1) * n_ops, bool)
    present[key] = True
    keys = np.flatnonzero(present)
    remap = np.full(present.size, -1, np.int64)
    remap[keys] = np.arange(keys.size)
    code = np.full(n, -1, np.int32)
    code[is_leaf] = remap[key]
    del key
    # Region label of each call path: any row's region (all rows of one non-MPI call path share it).
    region_of = np.full(keys.size, -1, np.int64)
    region_of[code[is_leaf]] = region[is_leaf]
    names: list[str] = []
    labels: list[str] = []
    mpi_flags = np.zeros(keys.size, bool)
    for j, k in enumerate(keys.tolist()):
        p, o = divmod(k, n_ops)
        pname = path_names[p] if p < len(path_names) else ""
        if o == n_ops - 1:
            names.append(pname or "(top level)")
            r = int(region_of[j])
            rname = region_names[r] if 0 <= r < len(region_names) else ""
            labels.append(rname or "(top level)")
        else:
            mpi = op_names[o]  # as the program called it (MPI_Recv, MPI_Sendrecv), as the critical path does
            names.append(f"{pname}>{mpi}" if pname else mpi)
            labels.append(mpi)
            mpi_flags[j] = True
    return CallPaths(code=code, names=tuple(names), region=tuple(labels), is_mpi=mpi_flags)


@dataclass(frozen=True)
class ExclusiveTimes:
    """Exclusive seconds of event rows with their own wait removed (region rows: 0), made for the rows asked
    (``times[rows]``): no event-sized array is kept, only the rows that wait and their summed wait.

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1], op=["barrier", "barrier"], enter=[1.0, 3.0], exit=[3.5, 3.5], match=[0, 0])
    >>> exclusive_times(ev, wait_states(ev))[np.array([1, 0])].tolist()
    [0.5, 0.5]
    """

    enter: FloatArray
    exit: FloatArray
    is_region: npt.NDArray[np.bool_]  # per kind code (the last entry: a missing kind)
    kind: npt.NDArray[np.integer]
    waits: npt.NDArray[np.bool_]  # per row: it waits (1 byte per event)
    wait_rows: IntArray  # sorted rows that wait
    wait_sum: FloatArray  # their wait, summed per row in table order

    def __getitem__(self, rows: IntArray) -> FloatArray:
        t = self.exit[rows]
        t -= self.enter[rows]
        t[self.is_region[self.kind[rows]]] = 0.0
        hit = np.flatnonzero(self.waits[rows])
        t[hit] -= self.wait_sum[np.searchsorted(self.wait_rows, rows[hit])]
        return t


def exclusive_times(events: pd.DataFrame, waits: pd.DataFrame) -> ExclusiveTimes:
    """The :class:`ExclusiveTimes` of an event table and its wait states."""
    kind, kind_names = native_codes(events["kind"])
    table = np.zeros(len(kind_names) + 1, bool)
    table[lookup_codes(kind_names, ("region",))] = True
    rows, at = unique_inverse(waits["event"].to_numpy().astype(np.int64)) if len(waits) else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64))
    waiting = np.zeros(len(events), bool)
    waiting[rows] = True
    return ExclusiveTimes(events["enter"].to_numpy(), events["exit"].to_numpy(), table, kind, waiting, rows,
                          np.bincount(at, weights=waits["wait"].to_numpy(), minlength=rows.size).astype(np.float64))
