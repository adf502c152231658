"""Matrix multiply by broadcast column blocks: Okita et al., figure 4.

C = A B with M x M matrices; A is split by rows and B by columns over the N
ranks (block partition, ``numpy.array_split`` sizes).  For every group of L
columns, the owner of those columns of B broadcasts them (``MPI_Bcast`` of
``M * L`` doubles), then every rank multiplies its rows of A by them
(``2 * rows * M * L`` flops; Okita et al. figure 4, lines 2-9).  One step is one
broadcast round::

    bcast(root = owner of columns j .. j+L-1); enter Multiply; compute; leave Multiply

``steps = 0`` (default) gives one full product, ``M / L`` rounds; a larger
``steps`` repeats the product (round ``s`` broadcasts block ``s mod (M / L)``).
Compute is in seconds at ``flops_per_second`` (an assumption standing for the
paper's 1 GHz Pentium III; the trace writer converts seconds to flops with the
platform's host speed).  When ``M`` is not a multiple of ``N`` the ranks with
an extra row do extra work; that excess over the smallest share is recorded
in the ledger as imbalance like any injected one.

Examples
--------
>>> p = MatmulParams(matrix_size=8, block_columns=2)
>>> ops = generate(p, n_ranks=4)
>>> p.n_steps(), ops.per_rank_counts().tolist()
(4, [16, 16, 16, 16])
>>> ops.peer[ops.mask(["bcast"]) & (ops.rank == 0)].tolist()
[0, 1, 2, 3]
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from waitlab.models.apps.common import (
    AppParams,
    WorkTerm,
    check_imbalance_regions,
    check_ranks,
    emit_region,
    region_excess,
)
from waitlab.models.ops import OpBuilder, OpTable
from waitlab.models.validation import ParamError, num, params

#: Bytes of one matrix element (double precision).
ELEMENT_BYTES = 8


@params
class MatmulParams(AppParams):
    """Parameters of :func:`generate` (kind ``"matmul"``).

    Attributes
    ----------
    steps : int
        Broadcast rounds; 0 = one full product (``matrix_size / block_columns``).
    matrix_size : int
        M (Okita et al. figure 5: 64 .. 256 and more).
    block_columns : int
        L, columns broadcast at once; must divide M.
    flops_per_second : float
        Compute speed used to express the multiply in seconds (assumption).
    """

    KIND: ClassVar[str] = "matmul"
    REGIONS: ClassVar[tuple[str, ...]] = ("Multiply",)

    steps: int = num(0, ge=0, doc="broadcast rounds, 0 = one full product")
    matrix_size: int = num(256, ge=1)
    block_columns: int = num(16, ge=1)
    flops_per_second: float = num(1.0e9, gt=0.0)

    def __post_init__(self) -> None:
        if self.block_columns > 0 and self.matrix_size % self.block_columns:
            raise ParamError("block_columns", f"must divide matrix_size = {self.matrix_size}, "
                             f"got {self.block_columns}", divisor_fix(self.matrix_size, self.block_columns))
        super().__post_init__()

    def n_steps(self) -> int:
        """Broadcast rounds of the trace."""
        return self.steps or self.matrix_size // self.block_columns

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        m, cols = self.matrix_size, self.block_columns
        rows = partition(m, n_ranks).astype(np.float64)
        return [WorkTerm("flops_per_second", f"2 x matrix_size x block_columns x rows / flops_per_second = 2 x {m} "
                         f"x {cols} x {int(rows.max())} / {self.flops_per_second:g} s",
                         rows * (2.0 * m * cols / self.flops_per_second), inverse=True)]


#: Largest ``matrix_size`` whose divisors :func:`divisor_fix` lists (a trial division up to its square root, 16,384
#: steps); any larger one cannot be broadcast anyway (``matrix_size x 8`` bytes per column pass 2 GiB).
_DIVISOR_SEARCH = 1 << 28


def divisor_fix(size: int, columns: int) -> str:
    """The fix of a ``block_columns`` that does not divide ``matrix_size``: the divisors of ``size`` nearest
    ``columns``, below and above.

    >>> print(divisor_fix(100, 16))
    use a divisor of matrix_size = 100 near 16: block_columns = 10 or 20 (all divisors: 1, 2, 4, 5, 10, 20, 25, 50, 100)
    >>> divisor_fix(97, 200)
    'use a divisor of matrix_size = 97 near 200: block_columns = 97 (all divisors: 1, 97)'
    """
    if size > _DIVISOR_SEARCH:
        return f"use a divisor of matrix_size = {size} (block_columns = 1 always divides)"
    small = [d for d in range(1, math.isqrt(size) + 1) if size % d == 0]
    divisors = sorted({*small, *(size // d for d in small)})
    below = [d for d in divisors if d < columns]
    above = [d for d in divisors if d > columns]
    near = " or ".join(str(d) for d in (below[-1:] + above[:1]))
    listed = ", ".join(map(str, divisors[:24])) + (", ..." if len(divisors) > 24 else "")
    return f"use a divisor of matrix_size = {size} near {columns}: block_columns = {near} (all divisors: {listed})"


def partition(total: int, parts: int) -> np.ndarray:
    """Block sizes of ``total`` items over ``parts`` owners (``numpy.array_split`` rule)."""
    base, extra = divmod(total, parts)
    return np.array([base + 1] * extra + [base] * (parts - extra), dtype=np.int64)


def generate(params: MatmulParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks (pure; see the module doc for one step)."""
    check_ranks(n_ranks, params.KIND)
    check_imbalance_regions(params)
    m, cols = params.matrix_size, params.block_columns
    rows = partition(m, n_ranks)
    col_start = np.concatenate(([0], np.cumsum(rows)))  # B's columns use the same partition
    per_row = 2.0 * m * cols / params.flops_per_second  # seconds per row of A per round
    seconds = rows * per_row
    structural = (rows - rows.min()) * per_row
    n_steps = params.n_steps()
    excess = region_excess(params, "Multiply", n_ranks, seed)
    blocks = m // cols
    b = OpBuilder(n_ranks=n_ranks)
    everyone = np.arange(n_ranks, dtype=np.int32)
    for s in range(n_steps):
        first_col = (s % blocks) * cols
        root = int(np.searchsorted(col_start, first_col, side="right") - 1)
        b.add("bcast", everyone, step=s, value=m * cols * ELEMENT_BYTES, peer=root)
        ex = structural + excess[s]
        emit_region(b, "Multiply", step=s, seconds=seconds + excess[s], excess=ex)
    return b.build()
