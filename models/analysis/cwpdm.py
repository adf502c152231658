"""CWP-DM: delay costs of call paths with wait propagation (Boehme et al.; Wu et al. formula 2).

For every synchronization interval ``zeta = ((p,i',i),(q,k',k))`` of a wait state
(:mod:`waitlab.models.analysis.syncpoints`):

* ``delta(q,c) = max(0, T_q(k',k)[c] - T_p(i',i)[c])`` -- the delay of call path ``c`` on ``q``;
  ``delta_hat = sum_c delta(q,c)``; ``omega_hat`` = the waits of ``q`` strictly inside ``(k',k)``;
* ``s = min(1, omega(p,i) / (delta_hat + omega_hat))`` (no cap for collectives) and
  ``g = phi(p,i) / (delta_hat + omega_hat)``;
* ``short(q,c) += s * delta(q,c)`` and ``long(q,c) += g * delta(q,c)`` (formula 2);
* each wait ``l`` of ``q`` inside the interval inherits ``phi(q,l) += (s + g) * omega(q,l)``;
  ``indirect(p,i) = s * omega_hat``, ``direct = omega - indirect``.

Wait states are processed in reverse dependency order so that ``phi(p,i)`` is
final before it is used: a wait is processed once every interval that contains
it has been processed.  The propagation runs in *rounds*; each round handles all
ready wait states at once with numpy (one round per link of the longest
propagation chain, so a BSP program with collectives needs one or two rounds).

Long-term costs are also kept per *wait type*: the pattern of the wait state
whose time the cost accounts for (``long_late_sender``, ``long_wait_at_nxn``, ...).
A wait is *propagating* for the share of it that later waits inherited as
indirect wait, *terminal* for the rest.

Exact ties: a collective wait for ``m`` ranks that arrived at exactly the same, latest
time is split into ``m`` equal shares, one synchronization interval each
(:mod:`waitlab.models.analysis.ties`); the per-wait table sums the shares (``tied`` = m).

Examples
--------
A 3-hop chain 0 -> 1 -> 2 -> 3 where only rank 0 computes X = 2 s more: rank 0's
compute gets short-term cost X (rank 1's wait) and long-term cost 2X (the waits of
ranks 2 and 3 it caused through the chain).

>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(
...     rank=[0, 0, 1, 1, 1, 2, 2, 2, 3, 3],
...     op=["compute", "send", "compute", "recv", "send", "compute", "recv", "send", "compute", "recv"],
...     enter=[0, 3, 0, 1, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3, 3, 1, 3],
...     match=[-1, 0, -1, 0, 1, -1, 1, 2, -1, 2], done=[-1, 1, -1, 3, 4, -1, 6, 7, -1, 9],
...     peer=[-1, 1, -1, 0, 2, -1, 1, 3, -1, 2])
>>> res = cwpdm(ev, wait_states(ev))
>>> res.costs[["rank", "callpath", "short", "long"]].to_dict("records")
[{'rank': 0, 'callpath': '(top level)', 'short': 2.0, 'long': 4.0}]
>>> res.waits[["direct", "indirect", "propagating"]].values.tolist()   # ranks 1, 2, 3
[[2.0, 0.0, 2.0], [0.0, 2.0, 2.0], [0.0, 2.0, 0.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.callpaths import group_codes
from waitlab.models.analysis.syncpoints import EventIndex, SyncPoints, sync_points, wait_table
from waitlab.models.analysis.waitstates import PATTERNS


@dataclass(frozen=True)
class CwpdmResult:
    """Result of :func:`cwpdm`.

    Attributes
    ----------
    costs : DataFrame
        One row per blamed (rank, call path): ``rank, callpath, region, delay`` (sum of
        delta over the intervals), ``short``, ``long``, ``cost`` (= short + long) and
        ``long_<pattern>`` per wait type present.
    waits : DataFrame
        The input wait states (same row order) with ``direct, indirect, propagating,
        terminal, phi`` (wait inherited from later waits), ``short, long`` (cost this wait
        assigned to delays), ``capped`` (wait left over because the cap on s bound) and
        ``unexplained`` (wait + phi of intervals with no delay and no inner wait).
    total_wait : float
    rounds : int
        Propagation rounds (length of the longest propagation chain + 1).
    """

    costs: pd.DataFrame
    waits: pd.DataFrame
    total_wait: float
    rounds: int

    @property
    def short_total(self) -> float:
        return float(self.costs["short"].sum())

    @property
    def long_total(self) -> float:
        return float(self.costs["long"].sum())

    @property
    def attributed(self) -> float:
        """Wait attributed to call paths (short + long)."""
        return float(self.costs["cost"].sum())

    @property
    def unexplained(self) -> float:
        """Wait not attributed: capped remainders plus intervals without delay."""
        return float(self.waits["capped"].sum() + self.waits["unexplained"].sum())

    def blame(self) -> pd.DataFrame:
        """``rank, region, callpath, cost`` of every blamed call path (the scoring interface)."""
        return self.costs[["rank", "region", "callpath", "cost"]]


def cwpdm(events: pd.DataFrame, waits: pd.DataFrame, *, sync: SyncPoints | None = None,
          tie_relative: float = 0.0, index: EventIndex | None = None) -> CwpdmResult:
    """Run CWP-DM on an event table and its wait states.

    Parameters
    ----------
    events, waits : DataFrame
        The event table and :func:`~waitlab.models.analysis.waitstates.wait_states` of it.
    sync : SyncPoints, optional
        Precomputed :func:`~waitlab.models.analysis.syncpoints.sync_points` for all wait states (default:
        computed with ``split_ties=True``: a wait for several exactly tied ranks is split equally among them).
    tie_relative : float
        The relative tie rule (:mod:`~waitlab.models.analysis.ties`): culprits within this fraction of a wait of
        its latest culprit share it (0: off, the default).
    index : EventIndex, optional
        :func:`~waitlab.models.analysis.syncpoints.event_index` of ``events``, when already built.

    Returns
    -------
    CwpdmResult
    """
    sp = sync if sync is not None else sync_points(events, waits, split_ties=True, tie_relative=tie_relative,
                                                   index=index)
    if (sp.q_interval < 0).any():
        raise ValueError("cwpdm needs the synchronization intervals of every wait state (sync_points without select)")
    n = len(sp)
    omega = sp.wait
    rows = np.arange(n, dtype=np.int64)
    w_of, cp, delta = sp.deltas(rows) if n else (rows, rows, np.zeros(0))
    sp = sp.without_times()  # the interval times (up to 16 bytes per event) are not read again
    dhat = np.bincount(w_of, weights=delta, minlength=n)  # delta_hat = sum_c delta(q,c)
    csum = np.concatenate(([0.0], np.cumsum(omega)))
    ohat = csum[sp.inner_hi] - csum[sp.inner_lo]  # omega_hat: waits of q strictly inside (k',k)
    denom = dhat + ohat
    ok = denom > 0
    safe = np.where(ok, denom, 1.0)
    s = np.where(ok, omega / safe, 0.0)  # formula (2), short-term weight omega(p,i) / (delta_hat + omega_hat)
    s = np.where(sp.collective, s, np.minimum(s, 1.0))  # cap on s for point-to-point only

    present = np.bincount(sp.pattern, minlength=len(PATTERNS)) > 0
    types = np.flatnonzero(present)
    remap = np.cumsum(present) - 1
    tix = remap[sp.pattern].astype(np.int64)
    n_t = max(types.size, 1)
    phi = _propagate(sp, omega, s, safe, ok, tix, n_t)
    phi_tot, ps, rounds = phi.phi.sum(axis=1), phi.received_s, phi.rounds
    g = np.where(ok[:, None], phi.phi / safe[:, None], 0.0)  # formula (2), long-term weight phi(p,i) / (...)

    # Costs per (rank q, call path c).
    n_cp = max(len(sp.callpaths), 1)
    key = sp.peer_rank[w_of] * n_cp + cp
    uniq, codes = group_codes(key, int(sp.peer_rank.max() + 1) * n_cp if len(sp) else 1)
    m = uniq.size
    short = np.bincount(codes, weights=s[w_of] * delta, minlength=m)
    long_t = {PATTERNS[t]: np.bincount(codes, weights=g[w_of, j] * delta, minlength=m)
              for j, t in enumerate(types.tolist())}
    long = np.sum(list(long_t.values()), axis=0) if long_t else np.zeros(m)
    cp_of = uniq % n_cp
    costs = pd.DataFrame({
        "rank": (uniq // n_cp).astype(np.int32),
        "callpath": pd.Categorical.from_codes(cp_of, categories=list(sp.callpaths.names) or ["(top level)"]),
        "region": np.asarray(sp.callpaths.region or ("(top level)",), dtype=object)[cp_of],
        "delay": np.bincount(codes, weights=delta, minlength=m),
        "short": short,
        "long": long,
        "cost": short + long,
        **{f"long_{t}": v for t, v in long_t.items()},
    })  # fmt: skip
    costs = costs[costs["cost"] > 0].sort_values(["cost", "rank"], ascending=[False, True], kind="stable")
    costs = costs.reset_index(drop=True)
    gsum = g.sum(axis=1)
    del w_of, cp, delta, key, codes, g, phi  # one entry per (wait state, call path): freed before the wait table

    indirect = s * ohat
    propagating = np.minimum(ps, 1.0) * omega
    table = wait_table(
        sp, direct=omega - indirect, indirect=indirect, propagating=propagating, terminal=omega - propagating,
        phi=phi_tot, short=s * dhat, long=gsum * dhat, capped=np.where(ok, omega - s * denom, 0.0),
        unexplained=np.where(ok, 0.0, omega + phi_tot),
    )
    return CwpdmResult(costs=costs, waits=table, total_wait=float(omega.sum()), rounds=rounds)


@dataclass(frozen=True)
class _Propagation:
    phi: npt.NDArray[np.float64]  # [wait, type]
    received_s: npt.NDArray[np.float64]
    rounds: int


def _propagate(sp: SyncPoints, omega: npt.NDArray[np.float64], s: npt.NDArray[np.float64],
               safe: npt.NDArray[np.float64], ok: npt.NDArray[np.bool_], tix: npt.NDArray[np.int64],
               n_t: int) -> _Propagation:
    """phi per wait state and wait type, in rounds of ready wait states (reverse dependency order)."""
    n = omega.size
    phi = np.zeros((n, n_t))
    ps = np.zeros(n)
    if n == 0:
        return _Propagation(phi, ps, 0)
    iq = sp.q_interval
    n_iv = int(iq.max()) + 1
    # Inner range of each interval (the same for all wait states sharing it).
    iv_lo = np.zeros(n_iv, np.int64)
    iv_hi = np.zeros(n_iv, np.int64)
    iv_lo[iq] = sp.inner_lo
    iv_hi[iq] = sp.inner_hi
    remaining = np.bincount(iq, minlength=n_iv)
    used = np.flatnonzero((remaining > 0) & (iv_hi > iv_lo))
    diff = np.zeros(n + 1, np.int64)
    np.add.at(diff, iv_lo[used], 1)
    np.add.at(diff, iv_hi[used], -1)
    indeg = np.cumsum(diff[:-1])  # how many intervals (with wait states) contain each wait state
    A = np.zeros((n_iv, n_t))  # sum over users of (s one-hot + g) per interval
    S = np.zeros(n_iv)
    done = np.zeros(n, bool)
    ready = np.flatnonzero(indeg == 0)
    rounds = 0
    while True:
        if ready.size == 0:
            left = np.flatnonzero(~done)
            if left.size == 0:
                break
            ready = left  # a dependency cycle (only with zero-length activities): break it
        rounds += 1
        done[ready] = True
        gr = np.where(ok[ready, None], phi[ready] / safe[ready, None], 0.0)
        np.add.at(A, iq[ready], gr)
        np.add.at(A, (iq[ready], tix[ready]), s[ready])
        np.add.at(S, iq[ready], s[ready])
        u, c = np.unique(iq[ready], return_counts=True)
        remaining[u] -= c
        fired = u[(remaining[u] == 0) & (iv_hi[u] > iv_lo[u])]
        if fired.size == 0:
            ready = np.zeros(0, np.int64)
            continue
        lens = iv_hi[fired] - iv_lo[fired]
        total = int(lens.sum())
        base = np.repeat(iv_lo[fired] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        ls = base + np.arange(total)
        ivr = np.repeat(fired, lens)
        np.add.at(phi, ls, A[ivr] * omega[ls, None])  # phi(q,l) += (s + g) * omega(q,l)
        np.add.at(ps, ls, S[ivr])
        np.subtract.at(indeg, ls, 1)
        cand = np.unique(ls)
        ready = cand[(indeg[cand] == 0) & ~done[cand]]
    return _Propagation(phi, ps, rounds)
