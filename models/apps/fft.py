"""FFT: a distributed transform whose data transpose is an alltoall (Rao et al.'s HFFT bottleneck).

One step of every rank::

    enter FFT_x; compute; leave FFT_x
    alltoall (bytes_per_peer to and from every rank)
    enter FFT_y; compute; leave FFT_y

``alltoall_algorithm`` is any SMPI 3.32 built-in name (the op stays one
``alltoall`` action and the machine model selects the algorithm,
see :func:`waitlab.platforms.machine.alltoall_settings`) or ``"lam_simple"``, LAM/MPI's
simple algorithm written out as point-to-point operations
(:func:`waitlab.models.apps.alltoall.emit_alltoall`, Rao et al. section 3).

Examples
--------
>>> ops = generate(FftParams(steps=1, alltoall_algorithm="lam_simple"), n_ranks=4)
>>> ops.per_rank_counts().tolist()   # 6 region ops + 3 irecv + 3 isend + waitall
[13, 13, 13, 13]
>>> generate(FftParams(steps=1), n_ranks=4).per_rank_counts().tolist()
[7, 7, 7, 7]
"""

from __future__ import annotations

from typing import ClassVar

from waitlab.models.apps.alltoall import ALLTOALL_ALGORITHMS, USABLE_ALLTOALL, check_alltoall_algorithm, emit_alltoall
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
from waitlab.models.validation import ParamError, num, params


@params
class FftParams(AppParams):
    """Parameters of :func:`generate` (kind ``"fft"``).

    Attributes
    ----------
    steps : int
        Transforms.
    bytes_per_peer : int
        Alltoall message size to each peer (Rao et al. measured 512 B .. 512 KB).
    compute_seconds : float
        Balanced time of each of ``FFT_x`` and ``FFT_y`` per rank and step.
    alltoall_algorithm : str
        An SMPI algorithm name or ``"lam_simple"``.
    """

    KIND: ClassVar[str] = "fft"
    REGIONS: ClassVar[tuple[str, ...]] = ("FFT_x", "FFT_y")

    steps: int = num(10, ge=1)
    bytes_per_peer: int = num(4096, ge=0)
    compute_seconds: float = num(0.01, ge=0.0)
    alltoall_algorithm: str = "default"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alltoall_algorithm not in ALLTOALL_ALGORITHMS:
            raise ParamError("alltoall_algorithm", f"unknown algorithm {self.alltoall_algorithm!r}",
                             f"use one of: {', '.join(USABLE_ALLTOALL)}")

    def work_terms(self, n_ranks: int) -> list[WorkTerm]:
        return [uniform_work(n_ranks, "compute_seconds", f"2 x compute_seconds = 2 x {self.compute_seconds:g} s "
                             "(FFT_x and FFT_y)", 2.0 * self.compute_seconds)]


def generate(params: FftParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks (pure; see the module doc for one step).

    Raises
    ------
    ValueError
        The algorithm cannot run on ``n_ranks`` (e.g. ``pair`` needs a power of two).
    """
    check_ranks(n_ranks, params.KIND)
    check_imbalance_regions(params)
    check_alltoall_algorithm(params.alltoall_algorithm, n_ranks)
    ex_x = region_excess(params, "FFT_x", n_ranks, seed)
    ex_y = region_excess(params, "FFT_y", n_ranks, seed)
    b = OpBuilder(n_ranks=n_ranks)
    for s in range(params.steps):
        emit_region(b, "FFT_x", step=s, seconds=params.compute_seconds + ex_x[s], excess=ex_x[s])
        emit_alltoall(b, params.alltoall_algorithm, n_ranks, params.bytes_per_peer, params.bytes_per_peer, step=s)
        emit_region(b, "FFT_y", step=s, seconds=params.compute_seconds + ex_y[s], excess=ex_y[s])
    return b.build()
