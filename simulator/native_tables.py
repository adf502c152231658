"""ctypes bindings of ``native/waitlab_records.c``: one-pass C loops over the layer's records and operation tables
(issue 25: waitlab's own work around a program run).

The library is built once with the system C compiler (cached like the other native parts,
:func:`waitlab.simulator.build.build_native`).  :func:`region_structure` is
:func:`waitlab.models.regions.region_structure` in one pass; on a malformed table it lets the numpy version raise
its message.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import OpTable
from waitlab.models.regions import region_structure as numpy_region_structure
from waitlab.models.vocabulary import CODE
from waitlab.simulator.build import NATIVE_DIR, build_native

RECORDS_SOURCE = NATIVE_DIR / "waitlab_records.c"
#: The (a, b) -> id table the native parts share (part of their build's cache key).
PAIRS_HEADER = NATIVE_DIR / "waitlab_pairs.h"


@lru_cache(maxsize=1)
def tables_library() -> ctypes.CDLL:
    """``native/waitlab_records.c``, built (and cached) on first use."""
    dll = ctypes.CDLL(str(build_native(RECORDS_SOURCE, "waitlab-records.so", compiler="cc",
                                       flags=("-O2", "-shared", "-fPIC"), key_files=(PAIRS_HEADER,))))
    p, i64, i32, c_int, dbl = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int, ctypes.c_double
    dll.wl_records_count.restype = i64
    dll.wl_records_count.argtypes = [p, p, i64, i32, c_int, dbl, p, p, i64, ctypes.POINTER(i64), p, p, p]
    dll.wl_records_fill.restype = i64
    dll.wl_records_fill.argtypes = [p, p, i64, i64, i64, i64, c_int, dbl, p, p, p, i64, *([p] * 16)]
    dll.wl_records_renumber.restype = i64
    dll.wl_records_renumber.argtypes = [p, p, i32, c_int, p, p, p]
    dll.wl_region_structure.restype = i64
    dll.wl_region_structure.argtypes = [p, p, p, i64, p, p, p, p, p, p, ctypes.POINTER(i64), p]
    return dll


def ptr(a: npt.NDArray[Any]) -> int:
    """Address of a contiguous array's data (for the library's pointer arguments)."""
    assert a.flags.c_contiguous
    return int(a.ctypes.data)


@dataclass(frozen=True)
class Regions:
    """Region structure and call paths of an operation table (:func:`regions`)."""

    #: enter rows (in row order) and the rows of the leaves closing them
    e_rows: npt.NDArray[np.int64]
    l_rows: npt.NDArray[np.int64]
    #: per row: the enter row of the innermost region open before it (-1: none)
    enclosing: npt.NDArray[np.int64]
    #: per row: number of regions open before it
    depth: npt.NDArray[np.int16]
    #: per row: its call path (``path_index[path]`` indexes ``path_names``; regions: their own path)
    path: npt.NDArray[np.int32]
    path_index: npt.NDArray[np.int64]
    #: call paths, sorted ("" first: top level), region names joined by ">"
    path_names: list[str]


def regions(ops: OpTable) -> Regions:
    """Region structure (as :func:`waitlab.models.regions.region_structure`) and call paths, in one pass over the
    table; a malformed table gets the numpy version's message."""
    n = len(ops)
    code = np.ascontiguousarray(ops.code, np.int8)
    rank = np.ascontiguousarray(ops.rank, np.int32)
    name = np.ascontiguousarray(ops.name, np.int32)
    e_rows = np.flatnonzero(code == CODE["enter"])
    enclosing, l_rows = np.empty(n, np.int64), np.empty(e_rows.size, np.int64)
    path, depth = np.empty(n, np.int32), np.empty(n, np.int16)
    path_parent, path_name = np.empty(e_rows.size, np.int32), np.empty(e_rows.size, np.int32)
    n_paths = ctypes.c_int64(0)
    stack = np.empty(3 * (n // 2 + 1), np.int64)
    bad = tables_library().wl_region_structure(ptr(code), ptr(rank), ptr(name), n, ptr(enclosing), ptr(l_rows),
                                                ptr(path), ptr(depth), ptr(path_parent), ptr(path_name),
                                                ctypes.byref(n_paths), ptr(stack))
    del stack
    if bad >= 0:
        numpy_region_structure(ops)  # raises the message that names the problem
    if bad != -1:
        raise SimulationError(f"the region structure of {n} operations could not be built (out of memory)")
    path_index, path_names = call_path_names(ops.names, path_parent[:n_paths.value], path_name[:n_paths.value])
    return Regions(e_rows, l_rows, enclosing, depth, path, path_index, path_names)


def call_path_names(names: tuple[str, ...], path_parent: npt.NDArray[np.int32], path_name: npt.NDArray[np.int32]
                    ) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Call paths 1, 2, ... (path k: region ``names[path_name[k - 1]]`` inside path ``path_parent[k - 1]``; 0: top
    level) as text: (position of each path's text among the sorted distinct texts, those texts)."""
    text = [""]
    for parent, nm in zip(path_parent.tolist(), path_name.tolist(), strict=True):
        text.append(f"{text[parent]}>{names[nm]}" if text[parent] else names[nm])
    # Names may contain '>' themselves (e.g. LARED-S's "EOS_Match>If_970"), so two call paths can spell the same
    # string: the categories are the distinct strings
    uniq, canon = np.unique(np.array(text, dtype=object), return_inverse=True)
    return canon.ravel().astype(np.int64), [str(x) for x in uniq]


def region_structure(ops: OpTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(enter rows, leave rows, enclosing-region-enter row per op), as
    :func:`waitlab.models.regions.region_structure` returns them, in one pass over the table."""
    r = regions(ops)
    return r.e_rows, r.l_rows, r.enclosing
