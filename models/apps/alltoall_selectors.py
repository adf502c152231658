"""Which alltoall algorithm SMPI 3.32 really runs when a scenario names a selector (``default``, ``ompi``, ...).

SMPI's ``smpi/alltoall`` names either an algorithm (``ring``, ``bruck``, ...) or a *selector* that picks one per
call from the communicator size ``p`` and the bytes each rank sends to each other rank ``n`` (the TI trace's count,
in ``MPI_BYTE``).  :func:`alltoall_ran` gives the algorithm a call ran, from the selectors of SimGrid 3.32
(``src/smpi/colls/``):

``default``
    ``alltoall__default`` calls ``alltoall__ompi`` (``smpi_default_selector.cpp``).
``ompi``
    ``alltoall__ompi`` (``smpi_openmpi_selector.cpp``), Open MPI's fixed decision: algorithms 1 (linear),
    4 (linear_sync) and 5 (two_proc) are all ``basic_linear`` in SMPI, 2 is ``pair`` and 3 is ``bruck``;
    the decision depends on ``p`` in bands (2, < 8, < 16, < 32, < 64, < 128, ...) and on ``n``.
``mpich``
    ``alltoall__mpich`` (``smpi_mpich_selector.cpp``): ``n < 256`` and ``p >= 8``: ``bruck``; ``n < 32768``:
    ``mvapich2_scatter_dest``; odd ``p``: ``pair``; otherwise ``ring``.
``mvapich2``
    ``alltoall__mvapich2`` (``smpi_mvapich2_selector.cpp`` with the Stampede tables of
    ``smpi_mvapich2_selector_stampede.hpp``, whose first (1 process per node) table is always used): the first
    row whose process count is >= ``p`` (the last row, 64, beyond), then the first size range with ``n <= max``.

``impi`` (its tables also depend on the ranks per node) and ``automatic`` (it times every algorithm) are not
resolved: :func:`alltoall_ran` returns them unchanged.  ``tests/test_alltoall_selectors.py`` checks the
resolution against SMPI itself: a selector and the algorithm it resolves to give the same simulated time to the
last digit, and a different algorithm does not.

Examples
--------
>>> alltoall_ran("default", 64, 4096), alltoall_ran("ompi", 64, 512), alltoall_ran("ompi", 64, 262144)
('basic_linear', 'bruck', 'pair')
>>> alltoall_ran("mpich", 64, 65536), alltoall_ran("mvapich2", 64, 65536), alltoall_ran("ring", 64, 1)
('ring', 'mvapich2_scatter_dest', 'ring')
"""

from __future__ import annotations

__all__ = ["SELECTORS", "UNRESOLVED", "alltoall_ran"]

#: Values of ``smpi/alltoall`` that pick an algorithm per call.
SELECTORS: tuple[str, ...] = ("default", "ompi", "mpich", "mvapich2", "impi", "automatic")
#: Selectors :func:`alltoall_ran` does not resolve (returned as they are).
UNRESOLVED: tuple[str, ...] = ("impi", "automatic")

_L, _P, _B = "basic_linear", "pair", "bruck"
_INF = float("inf")
# alltoall__ompi of SimGrid 3.32: (communicator size below which the band applies, ((bytes below which, algorithm),
# ...)); the band for p == 2 is separate.  Adjacent ranges with the same SMPI algorithm are merged.
_OMPI_TWO = ((2, _P), (4, _L), (16, _P), (64, _L), (256, _P), (4096, _L), (32768, _P), (1048576, _L), (_INF, _P))
_OMPI: tuple[tuple[float, tuple[tuple[float, str], ...]], ...] = (
    (8, ((524288, _L), (1048576, _P), (_INF, _L))),
    (16, ((_INF, _L),)),
    (32, ((4, _L), (512, _B), (_INF, _L))),
    (64, ((512, _B), (_INF, _L))),
    (128, ((1024, _B), (262144, _L), (_INF, _P))),
    (256, ((1024, _B), (262144, _L), (_INF, _P))),
    (512, ((1024, _B), (32768, _L), (_INF, _P))),
    (1024, ((512, _B), (262144, _L), (_INF, _P))),
    (2048, ((512, _B), (_INF, _L))),
    (4096, ((1024, _B), (_INF, _L))),
    (_INF, ((2048, _B), (_INF, _L))),
)
_SD, _RD = "mvapich2_scatter_dest", "rdb"
# alltoall__mvapich2 of SimGrid 3.32, table 0: (process count, ((largest bytes, algorithm), ...)); -1 = no limit.
_MVAPICH2: tuple[tuple[int, tuple[tuple[float, str], ...]], ...] = (
    (2, ((_INF, _P),)),
    (4, ((262144, _SD), (_INF, _P))),
    (8, ((8, _RD), (_INF, _SD))),
    (16, ((64, _RD), (512, _B), (_INF, _SD))),
    (32, ((32, _RD), (2048, _B), (_INF, _SD))),
    (64, ((8, _RD), (1024, _B), (_INF, _SD))),
)


def _below(ranges: tuple[tuple[float, str], ...], n: int) -> str:
    return next(alg for top, alg in ranges if n < top)


def alltoall_ran(algorithm: str, n_ranks: int, block_bytes: int) -> str:
    """The algorithm SMPI 3.32 runs for ``smpi/alltoall = algorithm`` on ``n_ranks`` ranks sending ``block_bytes``
    bytes to each other rank; ``algorithm`` itself when it is not a selector or is one of :data:`UNRESOLVED`."""
    p, n = int(n_ranks), int(block_bytes)
    if algorithm in ("default", "ompi"):
        if p == 2:
            return _below(_OMPI_TWO, n)
        return _below(next(r for top, r in _OMPI if p < top), n)
    if algorithm == "mpich":
        if n < 256 and p >= 8:
            return _B
        if n < 32768:
            return _SD
        return _P if p % 2 else "ring"
    if algorithm == "mvapich2":
        row = next((r for procs, r in _MVAPICH2 if p <= procs), _MVAPICH2[-1][1])
        return next(alg for top, alg in row if n <= top)
    return algorithm
