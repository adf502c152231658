"""He et al.'s Parallel C one-sided put (section 5.4.1, figure 15) as a synthetic operation, and its cost.

Protocol (He et al. section 5.4.1): a put of ``n`` bytes below the message threshold ``L_m`` is one
InfiniBand send/recv packet carrying header and data (an active message); the target's polling thread
copies the data and adds 1 to the reply word.  Above ``L_m`` the data go by one RDMA write and a header
packet follows by send/recv; the target then adds 1 to the reply word.  The reply word is optional
("修改远程回答字不是必须的动作"): without it, a put above ``L_m`` is the RDMA write alone.

As operations (:func:`emit_put`): the origin ``isend``s the data (tag :data:`PUT_TAG`) and, when there is
a reply word and ``n > L_m``, a ``header_bytes`` header (tag :data:`REPLY_TAG`); the target receives
them (its polling thread, in the replay the target rank itself).  Cost (:func:`put_seconds`), with the
network's one-way time ``T(n) = latency + n / bandwidth`` (MPI-level figures of the platform file):

- ``n <= L_m``: ``T(n + header)``  (one active message; the reply-word update is local to the target);
- ``n > L_m``, with reply: ``T(n) + T(header)`` (RDMA write, then the header message: He et al. order
  them, the header follows the data);
- ``n > L_m``, without reply: ``T(n)``.

A stream of ``k`` puts (table 3: 32 in a row, :func:`stream_seconds`): the target's polling thread
handles the messages one at a time (He et al. figure 16), so every message of the stream occupies the
path for ``g(m) = max(latency, m / bandwidth)`` (a gap of one latency for small messages, the wire time
for large ones): ``latency + k g(n + header)`` below ``L_m``; above it ``latency + k g(n)`` plus, with
reply words, ``k g(header)``.

Examples
--------
>>> round(put_seconds(4, latency=2.74e-6, bandwidth=5.78e9, threshold=2048) * 1e6, 3)
2.752
"""

from __future__ import annotations

import numpy as np

from waitlab.models.ops import OpBuilder

__all__ = ["HEADER_BYTES", "PUT_TAG", "REPLY_TAG", "emit_put", "put_seconds", "stream_seconds"]

#: Bytes of the control header of a put (an assumption: a few words of protocol fields).
HEADER_BYTES = 64
PUT_TAG = 7101
REPLY_TAG = 7102


def _t(n: float, latency: float, bandwidth: float) -> float:
    return latency + n / bandwidth


def put_seconds(nbytes: float, *, latency: float, bandwidth: float, threshold: float, reply: bool = True,
                header: float = HEADER_BYTES) -> float:
    """One-way time of one Parallel C put of ``nbytes`` (see the module docstring)."""
    if nbytes <= threshold:
        return _t(nbytes + header, latency, bandwidth)
    if reply:
        return _t(nbytes, latency, bandwidth) + _t(header, latency, bandwidth)
    return _t(nbytes, latency, bandwidth)


def stream_seconds(nbytes: float, count: int, *, latency: float, bandwidth: float, threshold: float,
                   reply: bool = True, header: float = HEADER_BYTES) -> float:
    """Time of ``count`` back-to-back puts of ``nbytes`` to one target, until the last is delivered."""
    def gap(m: float) -> float:
        return max(latency, m / bandwidth)

    if nbytes <= threshold:
        return latency + count * gap(nbytes + header)
    return latency + count * gap(nbytes) + (count * gap(header) if reply else 0.0)


def emit_put(builder: OpBuilder, origin: int, target: int, nbytes: float, *, threshold: float,
             reply: bool = True, header: float = HEADER_BYTES, step: int = -1) -> None:
    """Append one put as point-to-point operations: data (+ header) from ``origin``, received by ``target``."""
    o = np.array([origin], dtype=np.int32)
    t = np.array([target], dtype=np.int32)
    small = nbytes <= threshold
    first = nbytes + header if small else nbytes
    builder.add("isend", o, step=step, value=first, peer=t, tag=PUT_TAG)
    builder.add("irecv", t, step=step, value=first, peer=o, tag=PUT_TAG)
    if reply and not small:
        builder.add("isend", o, step=step, value=header, peer=t, tag=REPLY_TAG)
        builder.add("irecv", t, step=step, value=header, peer=o, tag=REPLY_TAG)
    builder.add("waitall", o, step=step)
    builder.add("waitall", t, step=step)
