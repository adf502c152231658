"""Bytes each MPI operation's rank sends and receives, by the byte rule of its action.

Bytes sent and received per rank follow Score-P's accounting of MPI
collectives (``scorep_mpi_coll_bytes_*``, non in-place): a collective is a set
of logical messages, the rank's message to itself included.  With ``N`` ranks,
``v``/``v2`` the ``value``/``value2`` columns and ``me`` the rank:

================  ========================  ==================================
rule              sent                      received
================  ========================  ==================================
p2p_send          v                         0
p2p_recv          0                         v
one_to_all        root: N*v, else 0         v2 (bcast: v)
all_to_one        v                         root: N*v2 (reduce: N*v), else 0
one_to_all_v      root: v, else 0           v2
all_to_one_v      v                         root: v2, else 0
all_to_all        N*v                       N*v2 (allreduce: N*v)
all_to_all_v      v (allgatherv: N*v)       v2
reduce_scatter    v                         v (exact for equal counts)
scan              (N-me)*v                  (me+1)*v
exscan            (N-me-1)*v                me*v
================  ========================  ==================================
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.models.vocabulary import BYTE_RULES, CODE, VOCABULARY

_RULE_OF_CODE = np.array([BYTE_RULES.index(a.byte_rule) for a in VOCABULARY], np.int8)


def bytes_moved(code: npt.NDArray[np.integer], value: npt.NDArray[np.float64], value2: npt.NDArray[np.float64],
                rank: npt.NDArray[np.integer], root: npt.NDArray[np.integer], n_ranks: int | npt.NDArray[np.integer]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Bytes each operation's rank sends and receives (Score-P's collective accounting, module docstring).

    ``rank`` and ``root`` are ranks within the operation's communicator of ``n_ranks`` ranks.

    >>> c = np.array([CODE["gatherv"]] * 3)
    >>> s, r = bytes_moved(c, np.array([4.0, 8, 12]), np.array([0.0, 0, 24]), np.arange(3), np.full(3, 2), 3)
    >>> s.tolist(), r.tolist()
    ([4, 8, 12], [0, 0, 24])
    """
    code_ = np.asarray(code)  # any integer type indexes (no int64 copy of a long table)
    rule = _RULE_OF_CODE[code_]
    v, v2 = np.asarray(value, np.float64), np.asarray(value2, np.float64)
    n_all = np.broadcast_to(np.asarray(n_ranks, np.float64), v.shape)
    rank_all, root_all = np.broadcast_to(np.asarray(rank), v.shape), np.broadcast_to(np.asarray(root), v.shape)
    sent, recv = np.zeros(v.shape, np.int64), np.zeros(v.shape, np.int64)
    # Rule by rule over its own rows only (most rows of an event table move no bytes).
    for k in np.flatnonzero(np.bincount(rule.ravel(), minlength=len(BYTE_RULES))).tolist():
        name = BYTE_RULES[k]
        if name == "none":
            continue
        idx = np.flatnonzero(rule == k)
        s_k, r_k = _rule_bytes(name, code_[idx].astype(np.int64), v[idx], v2[idx], n_all[idx],
                               rank_all[idx].astype(np.float64), rank_all[idx] == root_all[idx])
        sent[idx], recv[idx] = np.rint(s_k).astype(np.int64), np.rint(r_k).astype(np.int64)
    return sent, recv


def _rule_bytes(name: str, code: npt.NDArray[np.int64], v: npt.NDArray[np.float64], v2: npt.NDArray[np.float64],
                n: npt.NDArray[np.float64], me: npt.NDArray[np.float64], is_root: npt.NDArray[np.bool_]
                ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Sent and received bytes of rows that share one byte rule (see :func:`bytes_moved`)."""
    zero = np.zeros_like(v)
    if name == "p2p_send":
        return v, zero
    if name == "p2p_recv":
        return zero, v
    if name == "one_to_all":
        return np.where(is_root, n * v, 0.0), np.where(code == CODE["bcast"], v, v2)
    if name == "all_to_one":
        return v, np.where(is_root, n * np.where(code == CODE["reduce"], v, v2), 0.0)
    if name == "one_to_all_v":
        return np.where(is_root, v, 0.0), v2
    if name == "all_to_one_v":
        return v, np.where(is_root, v2, 0.0)
    if name == "all_to_all":
        return n * v, n * np.where(code == CODE["allreduce"], v, v2)
    if name == "all_to_all_v":
        return np.where(code == CODE["allgatherv"], n * v, v), v2
    if name == "reduce_scatter":
        return v, v
    if name == "scan":
        return (n - me) * v, (me + 1) * v
    return (n - me - 1) * v, me * v  # exscan
