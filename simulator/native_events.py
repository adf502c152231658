"""ctypes bindings of ``native/waitlab_events.c``: every column of the event table, and the region structure, from C
passes over the operation table (issue 25: waitlab's own work around a program run).

:func:`event_columns` returns exactly what :func:`waitlab.simulator.timeline.event_columns_numpy` returns (that numpy
version stays the reference, ``tests/test_events_native.py``), or ``None`` for a table the C pass does not take
(columns of other types than :class:`~waitlab.models.ops.OpTable` documents, codes, communicators or ranks out of
range): the caller then runs the numpy version.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import OpTable, comm_members, local_ranks, ref_dtype
from waitlab.models.regions import region_structure
from waitlab.models.vocabulary import BYTE_RULES, CODE, VOCABULARY
from waitlab.simulator.build import NATIVE_DIR, build_native
from waitlab.simulator.native_matching import Links
from waitlab.simulator.native_tables import PAIRS_HEADER, call_path_names, ptr

EVENTS_SOURCE = NATIVE_DIR / "waitlab_events.c"

#: The byte rules in the order ``native/waitlab_events.c`` numbers them (its enum); checked against the vocabulary's.
C_BYTE_RULES = ("none", "p2p_send", "p2p_recv", "one_to_all", "all_to_one", "one_to_all_v", "all_to_one_v",
                "all_to_all", "all_to_all_v", "reduce_scatter", "scan", "exscan")
#: What the pass returns when out of memory (``ERR_MEMORY_PAIRS`` of ``native/waitlab_pairs.h``).
ERR_MEMORY = -2
_RULE_OF_CODE = np.array([BYTE_RULES.index(a.byte_rule) for a in VOCABULARY], np.int8)

#: The operation table's columns the pass reads, with the types it reads them as.
_OP_TYPES: tuple[tuple[str, type[np.generic]], ...] = (
    ("code", np.int8), ("rank", np.int32), ("seq", np.int32), ("step", np.int32), ("name", np.int32),
    ("value", np.float64), ("value2", np.float64), ("peer", np.int32), ("tag", np.int32), ("cause", np.int64),
    ("excess", np.float64), ("comm", np.int32))


@lru_cache(maxsize=1)
def events_library() -> ctypes.CDLL:
    """``native/waitlab_events.c``, built (and cached) on first use."""
    dll = ctypes.CDLL(str(build_native(EVENTS_SOURCE, "waitlab-events.so", compiler="cc",
                                       flags=("-O2", "-ffp-contract=off", "-shared", "-fPIC"),
                                       key_files=(PAIRS_HEADER,))))
    p, i64, i32, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int
    dll.wl_event_table.restype = i64
    dll.wl_event_table.argtypes = [i64, *([p] * 21), i32, p, p, p, i32, i32, p, p, ctypes.c_int8, ctypes.c_int16, i32,
                                   c_int, *([p] * 20)]
    dll.wl_rename.restype = None
    dll.wl_rename.argtypes = [p, i64, p]
    return dll


def event_columns(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64], links: Links,
                  kind_of_code: npt.NDArray[np.int8], has_peer: npt.NDArray[np.bool_], region_kind: int,
                  region_op: int) -> tuple[dict[str, npt.NDArray[Any]], list[str]] | None:
    """The event table's columns and call paths (as :func:`waitlab.simulator.timeline.event_columns_numpy` with the
    region structure of :func:`waitlab.simulator.native_tables.regions`), or ``None`` for a table the C pass does not
    take.  A malformed region structure gets the message of :func:`waitlab.models.regions.region_structure`.

    The arrays of ``links`` are the pass's working memory: once the pass has started (a table it takes), their match
    and instance arrays are overwritten.

    Parameters
    ----------
    ops, t_enter, t_exit
        The operations and their times.
    links
        Their links (:func:`waitlab.simulator.native_matching.links`).
    kind_of_code, has_peer
        Per action code: its event kind (category code), whether the event keeps its peer.
    region_kind, region_op
        Kind and op category codes of region rows.
    """
    n = len(ops)
    if tuple(BYTE_RULES) != C_BYTE_RULES or any(getattr(ops, c).dtype != t for c, t in _OP_TYPES):
        return None
    col = {c: np.ascontiguousarray(getattr(ops, c)) for c, _ in _OP_TYPES}
    te, tx = np.ascontiguousarray(t_enter, np.float64), np.ascontiguousarray(t_exit, np.float64)
    if te.shape != (n,) or tx.shape != (n,):
        return None
    match_op, done_op, inst = (np.ascontiguousarray(x, np.int64) for x in links)  # overwritten (see the C comment)
    n_enter = int(np.count_nonzero(col["code"] == CODE["enter"]))
    m = n - int(np.count_nonzero(col["code"] == CODE["leave"]))
    ref = ref_dtype(max(m, len(ops.ledger)))
    local = local_ranks(ops)
    size = np.array([members.size for members in comm_members(ops)], np.int64)
    luts = (np.ascontiguousarray(kind_of_code, np.int8), np.ascontiguousarray(has_peer, np.uint8), _RULE_OF_CODE)
    # comm and excess zeroed (np.zeros: calloc), the pass writes their non-zero values only: mostly zero columns
    # are then never faulted in
    out: dict[str, npt.NDArray[Any]] = {c: (np.zeros if c in ("comm", "excess") else np.empty)(m, t) for c, t in (
        ("rank", np.int32), ("seq", np.int32), ("kind", np.int8), ("op", np.int16), ("region", np.int32),
        ("path", np.int64), ("step", np.int32), ("enter", np.float64), ("exit", np.float64), ("peer", np.int32),
        ("tag", np.int32), ("comm", np.int32), ("bytes", np.int64), ("recv_bytes", np.int64), ("match", ref),
        ("done", ref), ("parent", ref), ("depth", np.int16), ("cause", ref), ("excess", np.float64))}
    stack = np.empty(3 * (n // 2 + 1), np.int64)  # only the pages of the deepest nesting are touched
    path_parent, path_name = np.empty(n_enter, np.int32), np.empty(n_enter, np.int32)
    n_paths = ctypes.c_int64(0)
    lib = events_library()
    got = lib.wl_event_table(
        n, *(ptr(col[c]) for c in ("code", "rank", "seq", "step", "name", "value", "value2", "peer", "tag", "cause",
                                   "excess", "comm")),
        ptr(te), ptr(tx), ptr(match_op), ptr(done_op), ptr(inst), ptr(stack), ptr(path_parent), ptr(path_name),
        ctypes.byref(n_paths), len(VOCABULARY), *(ptr(x) for x in luts), ops.n_ranks, size.size, ptr(local),
        ptr(size), region_kind, region_op, len(ops.names), int(ref is np.int32), *(ptr(a) for a in out.values()))
    del stack
    if got == -1:
        return None
    if got == ERR_MEMORY:
        raise SimulationError(f"the event table of {n} operations could not be built (out of memory)")
    if got < 0:  # -3 - row: a problem in the region structure at that row
        region_structure(ops)  # raises the message that names the problem
        return None
    path_index, path_names = call_path_names(ops.names, path_parent[:n_paths.value], path_name[:n_paths.value])
    lib.wl_rename(ptr(out["path"]), m, ptr(path_index))
    return out, path_names
