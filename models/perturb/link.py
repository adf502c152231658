"""The cause ledger of degraded network links (cause kind ``link``, region ``"network"``).

A degraded link (``[[platform.degraded_link]]``, :mod:`waitlab.platforms.degraded`) is a property of the
platform, not of an operation: its ledger rows point to no operation, like the noise of speed profiles.  The
ledger's granularity is (rank, region, step): a link is charged to the ranks on its node, region ``"network"``,
one row per rank and step, with *nominal* seconds

    s(r, k) = b(r, k) * (1 / (f * B) - 1 / B)                                   (link-1)

where ``b(r, k)`` is the bytes rank ``r`` sends and receives in step ``k`` (Score-P's accounting,
:mod:`waitlab.models.byte_accounting`) in messages to or from another node: a message between two ranks of the
same node never crosses the node's link, ``B`` the link's bandwidth and ``f`` its bandwidth factor: the time
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
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable, local_ranks
from waitlab.models.vocabulary import VOCABULARY

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
    if ops.comms:  # ranks, roots and sizes within each operation's communicator (as the event table counts them)
        local = local_ranks(ops)
        size = np.array([ops.n_ranks, *(len(c) for c in ops.comms)], np.int64)[ops.comm]
        root = np.where(ops.peer >= 0, local[ops.comm, np.maximum(ops.peer, 0)], -1)
        sent, recv = bytes_moved(ops.code, ops.value, ops.value2, local[ops.comm, ops.rank], root, size)
    else:
        sent, recv = bytes_moved(ops.code, ops.value, ops.value2, ops.rank, ops.peer, ops.n_ranks)
    share_sent, share_recv = _off_node_shares(ops, node)  # on-node messages never use the node's link
    crossing = sent * share_sent + recv * share_recv
    hit = (factor_of_rank[ops.rank] < 1) & (crossing > 0)
    rank, step = ops.rank[hit].astype(np.int64), ops.step[hit].astype(np.int64)
    b = crossing[hit]
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


def _off_node_shares(ops: OpTable, node: npt.NDArray[np.int64]
                     ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Shares of each operation's sent and received bytes in messages between its rank's node and another node.

    A point-to-point operation is one message to or from its peer (1 if the peer is on another node, else 0; an
    unknown peer counts as off-node).  A rooted collective's other ranks exchange one message with the root.  The
    root sends (one-to-all) or receives (all-to-one) one message per member of the communicator, itself included,
    and the rest of its bytes are its message to itself; every rank of an unrooted collective exchanges one message
    with each member.  A message per member carries the fraction of members on other nodes.
    """
    rule = _RULE[ops.code]
    own = node[ops.rank]
    out = np.zeros(ops.rank.size), np.zeros(ops.rank.size)
    p2p = np.isin(rule, ("p2p_send", "p2p_recv"))
    peer = ops.peer[p2p]
    for share in out:
        share[p2p] = np.where(peer < 0, 1.0, node[np.maximum(peer, 0)] != own[p2p])
    coll = ~p2p & (rule != "none")
    for c in np.unique(ops.comm[coll]).tolist():
        members = np.arange(ops.n_ranks) if c == 0 else np.asarray(ops.comms[c - 1], np.int64)
        on_node = np.bincount(node[members], minlength=int(node.max()) + 1)
        these = np.flatnonzero(coll & (ops.comm == c))
        frac = 1.0 - on_node[own[these]] / members.size
        root = np.where(np.isin(rule[these], _ROOTED) & (ops.peer[these] >= 0), ops.peer[these], -1)
        is_root = (root >= 0) & (root == ops.rank[these])  # a root is a world rank (models/ops.py), on any comm
        to_root = (root >= 0) & ~is_root
        root_off = node[np.maximum(root, 0)] != own[these]
        for share, alone in zip(out, ("all_to_one", "one_to_all"), strict=True):  # the root's own message
            share[these] = np.where(to_root, root_off, np.where(is_root & np.char.startswith(rule[these], alone),
                                                                0.0, frac))
    return out


#: Byte rule of each action code, and the rules of rooted collectives (:mod:`waitlab.models.byte_accounting`).
_RULE = np.array([a.byte_rule for a in VOCABULARY])
_ROOTED = ("one_to_all", "all_to_one", "one_to_all_v", "all_to_one_v")


def link_rows(kind: npt.NDArray[np.int8], rank: npt.NDArray[np.integer], node_of_rank: npt.NDArray[np.integer],
              node: int) -> npt.NDArray[np.bool_]:
    """Mask of the ledger rows of node ``node``'s degraded link."""
    return (np.asarray(kind) == CAUSE_KINDS.index("link")) & (np.asarray(node_of_rank)[np.asarray(rank)] == node)
