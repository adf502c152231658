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

``impi``
    ``alltoall__impi`` (``smpi_intel_mpi_selector.cpp``, Intel MPI 4.1 on Stampede): a table per number of
    ranks per host (1, 2, 4, 8 or 16; any other number, or hosts with different numbers of ranks, use the table
    of 1), in it the first row whose process count is >= ``p``, then the first size with ``n <`` its bound;
    algorithm 1 is ``bruck``, 2 ``mvapich2_scatter_dest``, 3 ``pair`` and 4 (Intel's "Plum") ``mvapich2``,
    itself resolved as above.

``automatic`` (it times every algorithm) is not resolved: :func:`alltoall_ran` returns it unchanged.
``tests/test_alltoall_selectors.py`` checks the resolution against SMPI itself: a selector and the algorithm it
resolves to give the same simulated time to the last digit, and a different algorithm does not.

Examples
--------
>>> alltoall_ran("default", 64, 4096), alltoall_ran("ompi", 64, 512), alltoall_ran("ompi", 64, 262144)
('basic_linear', 'bruck', 'pair')
>>> alltoall_ran("mpich", 64, 65536), alltoall_ran("mvapich2", 64, 65536), alltoall_ran("ring", 64, 1)
('ring', 'mvapich2_scatter_dest', 'ring')
>>> alltoall_ran("impi", 64, 65536, ranks_per_host=8), alltoall_ran("impi", 64, 100, ranks_per_host=8)
('mvapich2_scatter_dest', 'bruck')
"""

from __future__ import annotations

__all__ = ["SELECTORS", "UNRESOLVED", "alltoall_ran"]

#: Values of ``smpi/alltoall`` that pick an algorithm per call.
SELECTORS: tuple[str, ...] = ("default", "ompi", "mpich", "mvapich2", "impi", "automatic")
#: Selectors :func:`alltoall_ran` does not resolve (returned as they are).
UNRESOLVED: tuple[str, ...] = ("automatic",)

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

_MAX = 2147483647
# alltoall__impi of SimGrid 3.32: ranks per host -> ((process count, ((bytes below which, Intel algorithm), ...)), ...)
_IMPI: dict[int, tuple[tuple[int, tuple[tuple[int, int], ...]], ...]] = {
    1: (
        (2, ((_MAX, 3),)),
        (4, ((0, 4), (_MAX, 2))),
        (8, ((_MAX, 2),)),
        (16, ((0, 3), (84645, 2), (167570, 3), (413152, 4), (_MAX, 2))),
        (32, ((61, 1), (164, 2), (696, 1), (143254, 2), (387024, 3), (_MAX, 2))),
        (64, ((523, 1), (146088, 2), (488989, 4), (_MAX, 2))),
        (_MAX, ((270, 1), (628, 4), (_MAX, 2))),
    ),
    2: (
        (4, ((1, 2), (75, 3), (131072, 2), (_MAX, 2))),
        (8, ((709, 1), (131072, 2), (_MAX, 2))),
        (16, ((40048, 2), (131072, 3), (155927, 3), (_MAX, 4))),
        (32, ((105, 1), (130, 2), (1030, 1), (58893, 2), (131072, 2), (271838, 3), (_MAX, 2))),
        (_MAX, ((521, 1), (2032, 4), (2412, 2), (4112, 4), (61620, 2), (131072, 3), (427408, 3), (_MAX, 4))),
    ),
    4: (
        (8, ((512, 1), (32768, 2), (_MAX, 2))),
        (64, ((7, 1), (199, 4), (764, 1), (6409, 4), (20026, 2), (32768, 3), (221643, 4), (_MAX, 3))),
        (_MAX, ((262, 1), (7592, 4), (22871, 2), (32768, 3), (47538, 3), (101559, 4), (_MAX, 3))),
    ),
    8: (
        (16, ((973, 1), (5126, 4), (16898, 2), (32768, 4), (65456, 4), (_MAX, 2))),
        (32, ((874, 1), (6727, 4), (17912, 2), (32768, 3), (41513, 3), (199604, 4), (_MAX, 3))),
        (64, ((5, 1), (114, 4), (552, 1), (8130, 4), (32768, 3), (34486, 3), (160113, 4), (_MAX, 3))),
        (128, ((270, 1), (3679, 4), (32768, 3), (64367, 3), (146595, 4), (_MAX, 3))),
        (_MAX, ((133, 1), (4017, 4), (32768, 3), (76351, 4), (_MAX, 3))),
    ),
    16: (
        (32, ((963, 1), (1818, 4), (20007, 2), (32768, 4), (54296, 4), (169735, 3), (_MAX, 2))),
        (64, ((17, 1), (42, 4), (592, 1), (2015, 4), (2753, 2), (6496, 3),
              (20402, 4), (32768, 3), (36246, 3), (93229, 4), (_MAX, 3))),
        (128, ((18, 1), (40, 4), (287, 1), (1308, 4), (6842, 1), (32768, 3), (36986, 3), (129081, 4), (_MAX, 3))),
        (256, ((135, 1), (1538, 4), (3267, 1), (4132, 3), (31469, 4), (32768, 3), (_MAX, 3))),
        (_MAX, ((66, 1), (1637, 4), (2626, 1), (4842, 4), (32768, 3), (33963, 3), (72978, 4), (_MAX, 3))),
    ),
}  # fmt: skip
_IMPI_ALGORITHMS = {1: _B, 2: _SD, 3: _P}  # 4: alltoall__mvapich2


def _below(ranges: tuple[tuple[float, str], ...], n: int) -> str:
    return next(alg for top, alg in ranges if n < top)


def alltoall_ran(algorithm: str, n_ranks: int, block_bytes: int, ranks_per_host: int = 1) -> str:
    """The algorithm SMPI 3.32 runs for ``smpi/alltoall = algorithm`` on ``n_ranks`` ranks sending ``block_bytes``
    bytes to each other rank; ``algorithm`` itself when it is not a selector or is one of :data:`UNRESOLVED`.

    ``ranks_per_host`` (``impi`` only): the ranks on every host of the communicator, 1 when hosts hold different
    numbers (SMPI's ``Comm::is_uniform``)."""
    p, n = int(n_ranks), int(block_bytes)
    if algorithm == "impi":
        rows = _IMPI.get(int(ranks_per_host), _IMPI[1])
        sizes = next(r for procs, r in rows if p <= procs)
        code = next(alg for top, alg in sizes if n < top)
        return _IMPI_ALGORITHMS[code] if code in _IMPI_ALGORITHMS else alltoall_ran("mvapich2", p, n)
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
