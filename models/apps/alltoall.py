"""Alltoall algorithms: SMPI's built-in ones, and LAM/MPI's "simple" one as point-to-point operations.

SMPI 3.32 runs an ``alltoall`` action with one of its built-in algorithms
(:data:`SMPI_ALLTOALL_ALGORITHMS`, read from the selector table of
``libsimgrid.so.3.32``); the machine model selects it
(:func:`waitlab.platforms.machine.alltoall_settings`).  LAM/MPI's simple algorithm is not
among them (DESIGN.md section 4), so :func:`emit_alltoall` writes it out as
point-to-point operations.  Rao et al. (section 3) describes it: it is like
MPICH's basic algorithm (each rank posts ``MPI_Irecv``, then ``MPI_Isend``,
then ``MPI_Waitall``), and "with i -> j meaning that process i sends a message
to process j, the communication order of process i is i -> 0, i -> 1, ...,
i -> p-1" -- every rank starts with rank 0, which is what causes the node
contention the paper measured.  MPICH's basic_linear instead staggers the
order (``(rank + i) % p``).

Constraints checked by :func:`check_alltoall_algorithm`, as in the SMPI 3.32
sources (``src/smpi/colls/alltoall/``): the ``pair`` family throws for rank
counts that are not powers of two; ``2dmesh`` and ``3dmesh`` return
``MPI_ERR_OTHER`` (silently doing nothing in a replay) when the rank count has
no 2-D / 3-D mesh shape.

Examples
--------
>>> lam_simple_peers(3).tolist()
[[1, 2], [0, 2], [0, 1]]
>>> from waitlab.models.ops import ACTIONS, OpBuilder
>>> b = OpBuilder(n_ranks=3)
>>> emit_alltoall(b, "lam_simple", 3, send_bytes=64, recv_bytes=64, step=0)
>>> ops = b.build()
>>> [ACTIONS[c] for c in ops.code[ops.rank == 2]]
['irecv', 'irecv', 'isend', 'isend', 'waitall']
>>> check_alltoall_algorithm("pair", 12)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: alltoall algorithm 'pair' needs a power-of-two number of ranks, got 12 (use 8 or 16 ranks, ...)
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpBuilder

#: Alltoall algorithms built into SMPI 3.32 (the names its alltoall selector accepts).
SMPI_ALLTOALL_ALGORITHMS: tuple[str, ...] = (
    "default", "2dmesh", "3dmesh", "basic_linear", "bruck", "pair", "pair_rma",
    "pair_light_barrier", "pair_mpi_barrier", "pair_one_barrier", "rdb", "ring",
    "ring_light_barrier", "ring_mpi_barrier", "ring_one_barrier", "mvapich2",
    "mvapich2_scatter_dest", "ompi", "mpich", "impi", "automatic",
)  # fmt: skip
#: Algorithms waitlab expands into point-to-point operations itself.
P2P_ALLTOALL_ALGORITHMS: tuple[str, ...] = ("lam_simple",)
#: Every accepted value of an application's ``alltoall_algorithm``.
ALLTOALL_ALGORITHMS: tuple[str, ...] = SMPI_ALLTOALL_ALGORITHMS + P2P_ALLTOALL_ALGORITHMS

#: Tag of the point-to-point messages of an expanded alltoall (apart from application tags).
LAM_SIMPLE_TAG = 7001

#: Selectors SimGrid 3.32 accepts but crashes in when a replay runs them (checked on 16 ranks, 1 and 8 per node:
#: ``impi`` aborts with "free(): invalid pointer", ``automatic`` with a segmentation fault); refused up front.
CRASHING_SELECTORS = frozenset({"impi", "automatic"})
#: The SMPI algorithms a scenario may name (:data:`SMPI_ALLTOALL_ALGORITHMS` without :data:`CRASHING_SELECTORS`):
#: what error messages list.
USABLE_SMPI_ALLTOALL: tuple[str, ...] = tuple(a for a in SMPI_ALLTOALL_ALGORITHMS if a not in CRASHING_SELECTORS)
#: Every value of an application's ``alltoall_algorithm`` that runs (:data:`ALLTOALL_ALGORITHMS` without the crashing
#: selectors).
USABLE_ALLTOALL: tuple[str, ...] = USABLE_SMPI_ALLTOALL + P2P_ALLTOALL_ALGORITHMS

_POW2_ONLY = frozenset({"pair", "pair_rma", "pair_light_barrier", "pair_mpi_barrier", "pair_one_barrier"})


def _is_2dmesh(n: int) -> bool:
    # alltoall_check_is_2dmesh of SMPI 3.32: some x in [floor(sqrt n), n / 2] divides n.
    x, top = math.isqrt(n), n // 2
    return any(n % v == 0 for v in range(max(x, 1), top + 1))


def _is_3dmesh(n: int) -> bool:
    # alltoall_check_is_3dmesh of SMPI 3.32: some x in [floor(cbrt n), n / 3] with x * x dividing n.
    x = round(n ** (1.0 / 3.0))
    while x > 0 and x**3 > n:
        x -= 1
    top = n // 3
    return any(n % (v * v) == 0 for v in range(max(x, 1), top + 1))


def check_alltoall_algorithm(name: str, n_ranks: int) -> None:
    """Raise ValueError if ``name`` is unknown or cannot run on ``n_ranks`` ranks."""
    if name not in ALLTOALL_ALGORITHMS:
        raise ValueError(f"unknown alltoall algorithm {name!r}; use one of: {', '.join(USABLE_ALLTOALL)}")
    if name in CRASHING_SELECTORS:
        raise ValueError(f"SimGrid 3.32 crashes in its {name!r} alltoall selector in a replay ("
                         + ("'free(): invalid pointer'" if name == "impi" else "segmentation fault")
                         + "); name an algorithm instead, e.g. the one the selector would pick "
                         "(waitlab.models.apps.alltoall_selectors.alltoall_ran)")
    if name in _POW2_ONLY and (n_ranks < 1 or n_ranks & (n_ranks - 1)):
        lo = 1 << (max(n_ranks, 1).bit_length() - 1)
        raise ValueError(f"alltoall algorithm {name!r} needs a power-of-two number of ranks, got {n_ranks} "
                         f"(use {lo} or {lo * 2} ranks, or another algorithm such as 'ring')")
    if name == "2dmesh" and not _is_2dmesh(n_ranks):
        raise ValueError(f"alltoall algorithm '2dmesh' cannot arrange {n_ranks} ranks as a 2-D mesh "
                         "(SMPI returns an error); use another rank count or algorithm")
    if name == "3dmesh" and not _is_3dmesh(n_ranks):
        raise ValueError(f"alltoall algorithm '3dmesh' cannot arrange {n_ranks} ranks as a 3-D mesh "
                         "(SMPI returns an error); use another rank count or algorithm")


#: Largest value of a C ``int`` (SimGrid 3.32 keeps buffer sizes and offsets of some algorithms in ``int``).
INT_MAX = 2**31 - 1


def mesh_shape(name: str, n_ranks: int) -> tuple[int, ...]:
    """The mesh SMPI 3.32 arranges ``n_ranks`` ranks in: (X, Y) for 2dmesh, (X, Y, Z) for 3dmesh.

    ``alltoall_check_is_2dmesh``: the first x from floor(sqrt p) up to p/2 dividing p, then X <= Y.
    ``alltoall_check_is_3dmesh``: the first x from floor(cbrt p) up to p/3 with x^2 dividing p, X = Y = x.

    >>> mesh_shape("2dmesh", 128), mesh_shape("3dmesh", 128), mesh_shape("3dmesh", 256)
    ((8, 16), (8, 8, 2), (8, 8, 4))
    """
    if name == "2dmesh":
        for x in range(max(math.isqrt(n_ranks), 1), n_ranks // 2 + 1):
            if n_ranks % x == 0:
                return (min(x, n_ranks // x), max(x, n_ranks // x))
        raise ValueError(f"{n_ranks} ranks have no 2-D mesh shape")
    x = round(n_ranks ** (1.0 / 3.0))
    while x > 0 and x**3 > n_ranks:
        x -= 1
    for v in range(max(x, 1), n_ranks // 3 + 1):
        if n_ranks % (v * v) == 0:
            return (v, v, n_ranks // (v * v))
    raise ValueError(f"{n_ranks} ranks have no 3-D mesh shape")


def overflow_product(algorithm: str, n_ranks: int, nbytes: int) -> int:
    """The largest ``int`` product SimGrid 3.32's ``algorithm`` forms for one alltoall (0: none known).

    From ``src/smpi/colls/alltoall/`` of SimGrid 3.32, with ``n`` bytes per rank pair and ``p`` ranks:

    - ``rdb``: ``int max_size = p * (n * p)`` sizes its temporary buffer: ``p^2 n``.
    - ``2dmesh``: ``smpi_get_tmp_sendbuffer(block_size * num_procs * Y)`` with ``int`` operands: ``n p Y``.
    - ``3dmesh``: ``block_size * num_procs * two_dsize`` (``two_dsize = X Y``): ``n p X Y``.
    - ``bruck``: ``num_procs * recv_count`` (``int``) before the ``MPI_Aint`` extent: ``p n``.

    >>> overflow_product("rdb", 64, 512 * 1024) > INT_MAX
    True
    """
    if algorithm == "rdb":
        return n_ranks * n_ranks * nbytes
    if algorithm == "2dmesh":
        return nbytes * n_ranks * mesh_shape("2dmesh", n_ranks)[1]
    if algorithm == "3dmesh":
        x, y, _ = mesh_shape("3dmesh", n_ranks)
        return nbytes * n_ranks * x * y
    if algorithm == "bruck":
        return n_ranks * nbytes
    return 0


def check_alltoall_point(algorithm: str, n_ranks: int, nbytes: int) -> None:
    """Refuse a point SimGrid 3.32 cannot simulate correctly.

    On top of :func:`check_alltoall_algorithm`, refuses the sizes where the algorithm's ``int``
    arithmetic overflows (:func:`overflow_product` >= 2^31): SimGrid then aborts with
    ``std::length_error`` or returns times like 6.6e10 s.  The bound per algorithm, in bytes per rank pair:
    ``rdb`` p^2 n < 2^31; ``2dmesh`` n p Y < 2^31; ``3dmesh`` n p X Y < 2^31; ``bruck`` p n < 2^31.

    Raises
    ------
    waitlab.errors.InputError
        Naming the algorithm, the bound and what to use instead.

    Examples
    --------
    >>> check_alltoall_point("ring", 256, 512 * 1024)
    >>> check_alltoall_point("rdb", 256, 32 * 1024)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    waitlab.errors.InputError: ...
    """
    try:
        check_alltoall_algorithm(algorithm, n_ranks)
    except ValueError as exc:
        raise InputError("alltoall", "algorithm", str(exc), "choose another algorithm or rank count") from None
    if isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer) or nbytes < 0:
        raise InputError("alltoall", "bytes", f"must be a whole number of bytes >= 0, got {nbytes!r}",
                         "give the bytes each rank sends to each other rank")
    product = overflow_product(algorithm, n_ranks, int(nbytes))
    if product > INT_MAX:
        formula = {"rdb": "ranks^2 x bytes", "2dmesh": "bytes x ranks x Y (mesh X x Y)",
                   "3dmesh": "bytes x ranks x X x Y (mesh X x Y x Z)", "bruck": "ranks x bytes"}[algorithm]
        limit = nbytes * INT_MAX // product
        raise InputError("alltoall", "bytes",
                         f"SimGrid 3.32's {algorithm!r} alltoall overflows 32-bit int arithmetic at {n_ranks} ranks "
                         f"and {nbytes} B per pair ({formula} = {product} >= 2^31): it would crash or report a "
                         "time like 6.6e10 s",
                         f"use at most {limit} B per pair at {n_ranks} ranks, fewer ranks, or another algorithm "
                         "(ring, pair, bruck, basic_linear, lam_simple)")


def lam_simple_peers(n_ranks: int) -> npt.NDArray[np.int32]:
    """``[n_ranks, n_ranks - 1]`` array: row i lists i's peers in LAM's order 0, 1, ..., p-1 (without i)."""
    if n_ranks < 1:
        raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
    full = np.broadcast_to(np.arange(n_ranks, dtype=np.int32), (n_ranks, n_ranks))
    keep = ~np.eye(n_ranks, dtype=bool)
    return full[keep].reshape(n_ranks, n_ranks - 1)


def emit_alltoall(builder: OpBuilder, algorithm: str, n_ranks: int, send_bytes: float, recv_bytes: float,
                  *, step: int = -1, tag: int = LAM_SIMPLE_TAG) -> None:
    """Append one alltoall over all ``n_ranks`` ranks to ``builder``.

    SMPI algorithms become a single ``alltoall`` action per rank (the
    algorithm is chosen by SMPI's configuration); ``lam_simple`` becomes, per
    rank i, ``irecv`` from 0..p-1 then ``isend`` to 0..p-1 (skipping i) and one
    ``waitall``.  ``send_bytes``/``recv_bytes`` are per peer.
    """
    check_alltoall_algorithm(algorithm, n_ranks)
    ranks = np.arange(n_ranks, dtype=np.int32)
    if algorithm in SMPI_ALLTOALL_ALGORITHMS:
        builder.add("alltoall", ranks, step=step, value=send_bytes, value2=recv_bytes)
        return
    if n_ranks == 1:
        return
    peers = lam_simple_peers(n_ranks).ravel()
    owners = np.repeat(ranks, n_ranks - 1)
    builder.add("irecv", owners, step=step, value=recv_bytes, peer=peers, tag=tag)
    builder.add("isend", owners, step=step, value=send_bytes, peer=peers, tag=tag)
    builder.add("waitall", ranks, step=step)
