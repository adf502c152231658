"""The cause ledger of degraded network links (cause kind ``link``, region ``"network"``).

A degraded link (``[[platform.degraded_link]]``, :mod:`waitlab.platforms.degraded`) is a property of the
platform, not of an operation: its ledger rows point to no operation, like the noise of speed profiles.  The
ledger's granularity is (rank, region, step): a link is charged to the ranks on its node, region ``"network"``,
one row per rank and step, with *nominal* seconds

    s(r, k) = b(r, k) * (1 / (f * B) - 1 / B)                                   (link-1)

where ``b(r, k)`` is the bytes rank ``r`` sends and receives in step ``k`` (Score-P's accounting,
:mod:`waitlab.models.byte_accounting`), ``B`` the link's bandwidth and ``f`` its bandwidth factor: the time
the rank's bytes would lose if each crossed the slower link alone, at full bandwidth otherwise.  It ranks the
rows (which pairs the truth costs first); the true cost of the link is its counterfactual (the re-run with the
link restored), never this figure.  A set holding only some of a node's rows cannot restore part of a link: it
keeps it, as a set holding part of the profile noise keeps that (:mod:`waitlab.experiments.diagnosis.groundtruth`).

Examples
--------
>>> from waitlab.models.ops import OpBuilder
>>> b = OpBuilder(n_ranks=2)
>>> b.add("send", 0, peer=1, value=1000.0, step=0)
>>> b.add("recv", 1, peer=0, value=1000.0, step=0)
>>> ops = link_ledger(b.build(), node_of_rank=[0, 1], factors={1: 0.5}, bandwidth=1e6)
>>> i = ops.names.index("network")
>>> ops.ledger.rank.tolist(), ops.ledger.step.tolist(), ops.ledger.seconds.tolist(), ops.ledger.region.tolist() == [i]
([1], [0], [0.001], True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from waitlab.models.byte_accounting import bytes_moved
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable

__all__ = ["NETWORK_REGION", "link_ledger", "link_rows"]

#: Region of the ledger rows of a degraded link.
NETWORK_REGION = "network"


def link_ledger(ops: OpTable, node_of_rank: Sequence[int] | npt.NDArray[np.integer], factors: Mapping[int, float],
                bandwidth: float) -> OpTable:
    """``ops`` with one ``link`` ledger row per (rank on a degraded node, step) that moves bytes, formula (link-1)."""
    if not factors:
        return ops
    if bandwidth <= 0:
        raise ValueError(f"link bandwidth must be > 0, got {bandwidth}")
    node = np.asarray(node_of_rank, np.int64)
    factor_of_rank = np.ones(ops.n_ranks)
    for n, f in factors.items():
        if not 0 < f < 1:
            raise ValueError(f"bandwidth factor of node {n} must be in (0, 1), got {f}")
        factor_of_rank[node == n] = f
    sent, recv = bytes_moved(ops.code, ops.value, ops.value2, ops.rank, ops.peer, ops.n_ranks)
    hit = (factor_of_rank[ops.rank] < 1) & ((sent + recv) > 0)
    rank, step = ops.rank[hit].astype(np.int64), ops.step[hit].astype(np.int64)
    b = (sent + recv)[hit].astype(np.float64)
    n_steps = int(step.max()) + 2 if step.size else 1
    key = rank * n_steps + (step + 1)  # step -1 (outside steps) is a step of its own
    uniq, inv = np.unique(key, return_inverse=True)
    nbytes = np.bincount(inv, weights=b, minlength=uniq.size)
    u_rank, u_step = uniq // n_steps, uniq % n_steps - 1
    f = factor_of_rank[u_rank]
    seconds = nbytes * (1.0 / (f * bandwidth) - 1.0 / bandwidth)  # (link-1)
    names = ops.names if NETWORK_REGION in ops.names else (*ops.names, NETWORK_REGION)
    led = ops.ledger
    extra = {"rank": u_rank.astype(np.int32), "region": np.full(uniq.size, names.index(NETWORK_REGION), np.int32),
             "step": u_step.astype(np.int32), "seconds": seconds.astype(np.float64),
             "kind": np.full(uniq.size, CAUSE_KINDS.index("link"), np.int8)}
    merged = Ledger(**{k: np.concatenate((getattr(led, k), v)) for k, v in extra.items()})
    return dataclasses.replace(ops, names=names, ledger=merged)


def link_rows(kind: npt.NDArray[np.int8], rank: npt.NDArray[np.integer], node_of_rank: npt.NDArray[np.integer],
              node: int) -> npt.NDArray[np.bool_]:
    """Mask of the ledger rows of node ``node``'s degraded link."""
    return (np.asarray(kind) == CAUSE_KINDS.index("link")) & (np.asarray(node_of_rank)[np.asarray(rank)] == node)
