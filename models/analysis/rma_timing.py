"""When one-sided data arrives: per RMA operation, timed where the transfer is known to be complete.

SimGrid 3.32's ``MPI_Put`` returns at once and its ``MPI_Win_complete`` does not wait for the data (the
origin's send requests of RMA are detached, ``smpi_request.cpp``), so an origin-side timing of an active-target
epoch reports any bandwidth (8 TB/s at 4 MiB on the Dawning platform, docs/rma.md).  The data is known to be
delivered when the *target's* closing call returns (``win_wait`` for post/start/complete/wait, the next
``win_fence`` for fences), and for passive target when the origin's ``win_unlock`` returns (SMPI's unlock
waits for the target's receive requests of this origin).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from waitlab.models.analysis.rma_epochs import IS_RMA_OP, MODES, rma_epochs


def delivery_times(events: pd.DataFrame) -> pd.DataFrame:
    """One row per RMA operation: when it started, when the origin's epoch closed and when the data arrived.

    Returns
    -------
    DataFrame
        Columns ``event, rank, target, op, bytes, mode, enter, origin_done, delivered``: ``origin_done`` is the
        exit of the call closing the operation's epoch at the origin, ``delivered`` the exit of the target's
        closing call (active target) or of the origin's unlock (passive target); NaN when the epoch never closed.
    """
    t = rma_epochs(events)
    code = t["code"].to_numpy().astype(np.int64)
    is_op = IS_RMA_OP[code]
    ev, closer, te = t["event"].to_numpy(), t["closer"].to_numpy(), t["target_epoch"].to_numpy()
    exit_ = events["exit"].to_numpy()
    n = len(events)
    closer_of = np.full(n + 1, -1, np.int64)
    closer_of[ev] = closer
    mode = t["mode"].cat.codes.to_numpy()
    passive = np.isin(mode, (MODES.index("lock"), MODES.index("lock_all")))

    def at(rows: np.ndarray) -> np.ndarray:
        return np.where(rows >= 0, exit_[np.maximum(rows, 0)], np.nan)

    target_close = np.where(te >= 0, closer_of[np.where(te >= 0, te, n)], -1)
    delivered = np.where(passive, at(closer), at(target_close))
    nbytes = (events["bytes"].to_numpy() + events["recv_bytes"].to_numpy()
              if "recv_bytes" in events else events["bytes"].to_numpy())
    sel = np.flatnonzero(is_op)
    rows = ev[sel]
    return pd.DataFrame({
        "event": rows, "rank": t["rank"].to_numpy()[sel], "target": t["target"].to_numpy()[sel],
        "op": t["op"].to_numpy()[sel], "bytes": nbytes[rows], "mode": t["mode"].to_numpy()[sel],
        "enter": events["enter"].to_numpy()[rows], "origin_done": at(closer[sel]), "delivered": delivered[sel],
    })  # fmt: skip
