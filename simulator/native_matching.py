"""ctypes bindings of ``native/waitlab_matching.c``: message matching, request completions and collective instances of
an operation table in two linear C passes (issue 25: waitlab's own work around a program run).

:func:`links` returns exactly what :func:`waitlab.simulator.matching.match_messages`,
:func:`waitlab.simulator.matching.completions` and :func:`waitlab.simulator.timeline.collective_instances` return
(those numpy versions stay the reference, ``tests/test_matching_native.py`` and ``tests/test_wait_matching.py``).  A
table the C pass does not take (malformed, ordered in a way whose numpy result it does not reproduce, with ``test`` rows
naming a request, or with a ``wait`` named after a call whose requests it completes) goes to the numpy versions, which
raise their own message when the table is malformed.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import (
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    RECV_ACTIONS,
    SEND_ACTIONS,
    VOCABULARY,
    lut,
    names_where,
)
from waitlab.simulator.build import NATIVE_DIR, build_native
from waitlab.simulator.matching import channel_tags, completions, match_messages
from waitlab.simulator.native_tables import ptr

MATCHING_SOURCE = NATIVE_DIR / "waitlab_matching.c"

_LUTS = tuple(np.pad(x.astype(np.uint8), (0, 256 - x.size)) for x in (
    lut(SEND_ACTIONS), lut(RECV_ACTIONS),
    lut(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking),
    lut(names_where(blocking=True)), lut(COLLECTIVE_ACTIONS)))
_IS_REQUEST = _LUTS[2].astype(bool)
_OK, _FALLBACK = 0, 1

Links = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


@lru_cache(maxsize=1)
def matching_library() -> ctypes.CDLL:
    """``native/waitlab_matching.c``, built (and cached) on first use."""
    dll = ctypes.CDLL(str(build_native(MATCHING_SOURCE, "waitlab-matching.so", compiler="cc",
                                       flags=("-O2", "-shared", "-fPIC"))))
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    dll.wl_links.restype = i64
    dll.wl_links.argtypes = [*([p] * 8), i64, i32, i32, i32, *([p] * 5), i32, i32, i32, *([p] * 4)]
    dll.wl_instances.restype = i64
    dll.wl_instances.argtypes = [p, p, i64, p, p, i64, p]
    return dll


def links(ops: OpTable, numpy_instances: Callable[[OpTable], npt.NDArray[np.int64]]) -> Links:
    """(message id, completing row, collective instance) per operation: ``match_messages(ops)``,
    ``completions(ops, match)`` and ``numpy_instances(ops)`` (:func:`waitlab.simulator.timeline.
    collective_instances`, passed in by its module), in one C pass; the numpy versions for a table it does not take."""
    n = len(ops)
    if _any_stock_test(ops) or _named_waits(ops):  # the numpy version only
        m = match_messages(ops)
        return m, completions(ops, m), numpy_instances(ops)
    n_comms = 1 + len(ops.comms)
    col = {c: np.ascontiguousarray(getattr(ops, c), t) for c, t in (
        ("code", np.int8), ("rank", np.int32), ("seq", np.int32), ("peer", np.int32), ("tag", np.int32),
        ("value2", np.float64), ("comm", np.int32), ("name", np.int32))}
    if ops.comms or ops.comm.any():  # the communicator is part of a channel's key
        col["tag"] = np.ascontiguousarray(channel_tags(ops), np.int32)  # (else channel_tags gives ops.tag)
    match, done, inst = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    counts = np.empty((n_comms, ops.n_ranks), np.int64)
    lib = matching_library()
    rc = lib.wl_links(*(ptr(col[c]) for c in ("code", "rank", "seq", "peer", "tag", "value2", "comm", "name")), n,
                      ops.n_ranks, n_comms, len(ACTIONS), *(ptr(x) for x in _LUTS), CODE["wait"], CODE["waitall"],
                      CODE["irecv"], ptr(match), ptr(done), ptr(inst), ptr(counts))
    if rc == _OK:
        per_comm = _instances_per_comm(ops, counts)
        if per_comm is not None:
            offset = np.ascontiguousarray(np.concatenate(([0], np.cumsum(per_comm)[:-1])), np.int64)
            rc = lib.wl_instances(ptr(col["code"]), ptr(col["comm"]), n, ptr(_LUTS[4]), ptr(offset),
                                  int(per_comm.sum()), ptr(inst))
        else:
            rc = _FALLBACK
    if rc == _OK:
        return match, done, inst
    if rc != _FALLBACK:
        raise SimulationError(f"the message matching of {n} operations could not be built (out of memory)")
    del match, done, inst
    m = match_messages(ops)
    return m, completions(ops, m), numpy_instances(ops)


def _any_stock_test(ops: OpTable) -> bool:
    """``stock_tests(ops).any()``, looking at the peers of the ``test`` rows only (most tables have none)."""
    is_test = ops.code == CODE["test"]
    return bool(is_test.any()) and bool((ops.peer[is_test] >= 0).any())


def _named_waits(ops: OpTable) -> bool:
    """Whether a ``wait`` is named after a call that also names requests (the waits :func:`waitlab.simulator.
    replayable.replayable_ops` writes for a sendrecv's waitall): it completes those requests, which the C pass keeps
    apart from the waits."""
    is_wait = ops.code == CODE["wait"]
    if not is_wait.any():
        return False
    named = ops.name[is_wait & (ops.name >= 0)]
    return bool(named.size) and bool(np.isin(named, ops.name[_IS_REQUEST[ops.code] & (ops.name >= 0)]).any())


def _instances_per_comm(ops: OpTable, counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
    """Collectives per communicator (every member calls the same number), or None when the members differ."""
    members = [np.arange(ops.n_ranks, dtype=np.int64), *(np.asarray(c, np.int64) for c in ops.comms)]
    per_comm = np.zeros(len(members), np.int64)
    for c, m in enumerate(members):
        got = counts[c]
        if m.size == 0 or not np.all(got[m] == got[m[0]]) or got.sum() != got[m[0]] * m.size:
            return None
        per_comm[c] = got[m[0]]
    return per_comm
