"""Pingpong: Okita et al., section 4.1 -- two processes sending a message back and forth.

"Process p sends the data with MPI_Send and q receives it with MPI_Recv; q
then immediately sends the received data back to p, which receives it; this
is one pingpong, repeated" (Okita et al. 4.1).  The paper used 128 KB messages and
1024 to 18432 round trips; 1024 round trips is its smallest point
(R = 128 MB of recorded message data per process).

Ranks are paired (0, 1), (2, 3), ...; the even rank of a pair is ``p``.  One
step is one round trip, preceded on both ranks by the ``Work`` region
(``compute_seconds``, 0 in the paper's program; imbalance goes there)::

    p: enter Work; compute; leave Work; send(q); recv(q)
    q: enter Work; compute; leave Work; recv(p); send(p)

Examples
--------
>>> ops = generate(PingpongParams(steps=3), n_ranks=2)
>>> ops.per_rank_counts().tolist()
[15, 15]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from waitlab.models.apps.common import (
    AppParams,
    WorkTerm,
    check_imbalance_regions,
    check_ranks,
    emit_region,
    region_excess,
    uniform_work,
)
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.validation import num, params

PINGPONG_TAG = 0


@params
class PingpongParams(AppParams):
    """Parameters of :func:`generate` (kind ``"pingpong"``).

    Attributes
    ----------
    steps : int
        Round trips (Okita et al.: 1024 .. 18432).
    message_bytes : int
        Message size (Okita et al.: 128 KB).
    compute_seconds : float
        Balanced ``Work`` time per rank before each round trip.
    """

    KIND: ClassVar[str] = "pingpong"
    REGIONS: ClassVar[tuple[str, ...]] = ("Work",)

    steps: int = num(1024, ge=1, doc="round trips")
    message_bytes: int = num(131072, ge=0)
    compute_seconds: float = num(0.0, ge=0.0)

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        return [uniform_work(n_ranks, "compute_seconds", f"compute_seconds = {self.compute_seconds:g} s",
                             self.compute_seconds)]


def generate(params: PingpongParams, n_ranks: int = 2, seed: int = 0) -> OpTable:
    """Operations of all ranks; ``n_ranks`` must be even (independent pairs)."""
    check_ranks(n_ranks, params.KIND, minimum=2)
    if n_ranks % 2:
        raise ValueError(f"application 'pingpong' pairs ranks (0, 1), (2, 3), ...: needs an even rank count, "
                         f"got {n_ranks}")
    check_imbalance_regions(params)
    excess = region_excess(params, "Work", n_ranks, seed)
    p = np.arange(0, n_ranks, 2, dtype=np.int32)
    q = p + 1
    nbytes = params.message_bytes
    b = OpBuilder(n_ranks=n_ranks)
    for s in range(params.steps):
        emit_region(b, "Work", step=s, seconds=params.compute_seconds + excess[s], excess=excess[s])
        b.add("send", p, step=s, value=nbytes, peer=q, tag=PINGPONG_TAG)
        b.add("recv", q, step=s, value=nbytes, peer=p, tag=PINGPONG_TAG)
        b.add("send", q, step=s, value=nbytes, peer=p, tag=PINGPONG_TAG)
        b.add("recv", p, step=s, value=nbytes, peer=q, tag=PINGPONG_TAG)
    return b.build()
