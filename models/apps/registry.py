"""Registry of application models: kinds, their parameters, their regions, and TOML validation.

Each kind maps to a frozen parameter dataclass and a pure
``generate(params, n_ranks, seed) -> OpTable``:

============ ============================================ =========================
kind         model                                        module
============ ============================================ =========================
stencil      1-D/2-D halo exchange + allreduce             ``app_stencil``
lared_s      Wu et al.'s LARED-S case study                 ``app_lared_s``
pingpong     Okita et al. section 4.1                          ``app_pingpong``
matmul       Okita et al. figure 4 (bcast of column blocks)    ``app_matmul``
fft          compute, alltoall, compute (Rao et al.)         ``app_fft``
wavefront    Sweep3D-like pipeline on a 2-D grid           ``app_wavefront``
============ ============================================ =========================

TOML shape validated by :func:`params_from_mapping`::

    [application]
    kind = "lared_s"          # one of APPLICATIONS
    steps = 3                 # + the kind's own keys (see its params class)

    [[application.imbalance]]
    region = "Hydro"          # one of regions(params)
    ranks = "all"             # or [0, 5], {random = 4}, {fraction = 0.1}, {every = 16}
    distribution = "uniform"  # constant | uniform | normal | exponential | linear
    magnitude = 0.5           # mean excess seconds per affected rank and step
    steps = "all"             # or [0, 2]
    redraw = true             # new draw every step
    spread = 0.25             # relative std of "normal"

Examples
--------
>>> p = params_from_mapping("stencil", {"kind": "stencil", "steps": 4,
...     "imbalance": [{"region": "Stencil", "ranks": [1], "magnitude": 0.2}]}, "demo.toml")
>>> p.steps, p.imbalance[0].magnitude, regions(p)
(4, 0.2, ('Stencil',))
>>> ops = generate(p, n_ranks=4, seed=0)
>>> round(ops.ledger.total(), 6)
0.8
>>> try:
...     params_from_mapping("stencil", {"imbalance": [{"region": "Halo"}]}, "demo.toml")
... except Exception as e:
...     print(e)
demo.toml: application.imbalance[0].region: application 'stencil' has no region 'Halo' (fix: use one of: Stencil)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from waitlab.errors import InputError
from waitlab.models.apps import fft as app_fft
from waitlab.models.apps import lared_s as app_lared_s
from waitlab.models.apps import matmul as app_matmul
from waitlab.models.apps import pingpong as app_pingpong
from waitlab.models.apps import stencil as app_stencil
from waitlab.models.apps import wavefront as app_wavefront
from waitlab.models.apps.common import AppParams
from waitlab.models.apps.fft import FftParams
from waitlab.models.apps.imbalance import Imbalance
from waitlab.models.apps.lared_s import LaredSParams
from waitlab.models.apps.matmul import MatmulParams
from waitlab.models.apps.pingpong import PingpongParams
from waitlab.models.apps.stencil import StencilParams
from waitlab.models.apps.wavefront import WavefrontParams
from waitlab.models.ops import OpTable
from waitlab.models.validation import ParamError, from_mapping

#: Application kind -> parameter dataclass.
APPLICATIONS: dict[str, type[AppParams]] = {
    "stencil": StencilParams,
    "lared_s": LaredSParams,
    "pingpong": PingpongParams,
    "matmul": MatmulParams,
    "fft": FftParams,
    "wavefront": WavefrontParams,
}

_GENERATORS: dict[type[AppParams], Callable[[Any, int, int], OpTable]] = {
    StencilParams: app_stencil.generate,
    LaredSParams: app_lared_s.generate,
    PingpongParams: app_pingpong.generate,
    MatmulParams: app_matmul.generate,
    FftParams: app_fft.generate,
    WavefrontParams: app_wavefront.generate,
}

__all__ = [
    "APPLICATIONS", "AppParams", "FftParams", "Imbalance", "LaredSParams", "MatmulParams", "PingpongParams",
    "StencilParams", "WavefrontParams", "generate", "kind_of", "params_from_mapping", "regions",
]  # fmt: skip


def kind_of(params: AppParams) -> str:
    """The kind name of a parameter object."""
    for kind, cls in APPLICATIONS.items():
        if type(params) is cls:
            return kind
    raise TypeError(f"not application parameters: {params!r}")


def regions(params: AppParams) -> tuple[str, ...]:
    """Names of the compute regions of the application (what imbalance specs may name)."""
    kind_of(params)
    return params.regions()


def generate(params: AppParams, n_ranks: int, seed: int = 0) -> OpTable:
    """Operations of all ranks of the application described by ``params`` (pure, deterministic in ``seed``)."""
    kind_of(params)
    return _GENERATORS[type(params)](params, n_ranks, seed)


def params_from_mapping(kind: str, data: Mapping[str, Any], file: str,
                        section: str = "application") -> AppParams:
    """Validate a TOML table and build the parameters of application ``kind``.

    Parameters
    ----------
    kind : str
        Application kind (``data["kind"]`` may repeat it and is ignored then).
    data : mapping
        The ``[application]`` table as read by :mod:`tomllib`; imbalance specs
        under the key ``imbalance`` as a list of tables.
    file : str
        File name for error messages.
    section : str
        Dotted name of the table in the file.

    Raises
    ------
    waitlab.errors.InputError
        Unknown kind or key, wrong type, out-of-range value, unknown region;
        ``field`` is the dotted path (``application.imbalance[2].magnitude``).
    """
    if kind not in APPLICATIONS:
        raise InputError(file, f"{section}.kind", f"unknown application kind {kind!r}",
                         f"use one of: {', '.join(APPLICATIONS)}")
    if not isinstance(data, Mapping):
        raise InputError(file, section, f"expected a table, got {type(data).__name__}",
                         f'write [{section}] with kind = "{kind}"')
    given = data.get("kind", kind)
    if given != kind:
        raise InputError(file, f"{section}.kind", f"kind {given!r} does not match the requested kind {kind!r}",
                         f'write kind = "{kind}"')
    try:
        return from_mapping(APPLICATIONS[kind], data, skip=("kind",))
    except ParamError as exc:
        field = f"{section}.{exc.key}" if exc.key else section
        raise InputError(file, field, exc.problem, exc.fix) from None
