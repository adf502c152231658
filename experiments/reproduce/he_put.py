"""He et al.'s tables 2 and 3: one-sided put latency and bandwidth, Parallel C and MPI, on Sunway TaihuLight.

- MPI columns: ``he_rma.c`` (next to this module) run as a ``kind = "program"`` scenario through the one
  run path (:func:`~waitlab.experiments.pipeline.prepare`, :func:`~waitlab.experiments.pipeline.simulate_ops`)
  on 2 ranks on 2 nodes of the calibrated platform; its printed ``RESULT`` line is parsed.  SMPI 3.32
  runs ``MPI_Put`` and its synchronisations, and the platform's ``[mpi] rma_protocol = "mvapich2"`` makes the
  measurement layer add MVAPICH2's one-sided messages (lock request/grant, rendezvous, completion and done
  acknowledgements; active-target puts above 8 KB as direct RDMA writes whose completions are collected in
  ``MPI_Win_complete``) as real SimGrid messages (docs/rma.md, "MPI library protocol"); nothing is fitted to
  the tables.
- Parallel C columns: the put model of :mod:`waitlab.models.apps.parallel_c_put`, priced with the
  platform's MPI-level figures (the put message is what the platform's ``[mpi] inter_node`` points were
  sourced from: table 2's Parallel C column gave the small-message latencies, table 3 the 4 MB bandwidth).
  Its threshold ``L_m`` is :data:`PUT_THRESHOLD` (an assumption; He et al. only say "at most the
  send/recv packet length").

Every row has a ``role``: ``calibration target`` for the Parallel C cells the platform's ``[mpi] inter_node``
points were taken from (table 2's 4 B and 1 KB, table 3's 4 MB: :data:`CALIBRATION_CELLS`; their errors
check the put model's reading of the calibration, not the model), ``check`` for the others.

Bandwidth in MB/s is ``32 x size / epoch time`` with MB = 10^6 B (the table's 4 MB rows, 5,783 MB/s,
are below the 7,000 MB/s of 56 Gb/s only with MB = 10^6 B).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pandas as pd

from waitlab.errors import SimulationError
from waitlab.experiments.pipeline import prepare, simulate_ops
from waitlab.experiments.scenario import from_mapping
from waitlab.models.apps.parallel_c_put import put_seconds, stream_seconds
from waitlab.platforms import load_platform

__all__ = ["CALIBRATION_CELLS", "PAPER_TABLE2", "PAPER_TABLE3", "PUT_THRESHOLD", "SIZES", "mpi_put_seconds",
           "rma_protocol", "role", "table2", "table3"]

PLATFORM = "sunway_taihulight"
SIZES = (4, 1024, 65536, 4 * 1024 * 1024)
PUTS = 32
#: L_m of the Parallel C put protocol (assumed): below 1 KB, because He et al.'s table 3 shows the reply word
#: costing bandwidth at 1 KB (202.94 vs 339.49 MB/s), which happens only above L_m; 512 B taken.
PUT_THRESHOLD = 512

#: He et al. table 2, microseconds: size -> (Parallel C, MPI active target, MPI passive target).
PAPER_TABLE2 = {4: (2.74, 11.63, 8.56), 1024: (3.62, 13.06, 11.07), 65536: (9.83, 23.83, 37.91),
                4194304: (368.65, 703.61, 717.43)}
#: He et al. table 3, MB/s: size -> (Parallel C with reply, Parallel C without reply, MPI active, MPI passive).
PAPER_TABLE3 = {4: (1.17, 1.20, 0.73, 1.23), 1024: (202.94, 339.49, 178.53, 253.41),
                65536: (5520.04, 5867.44, 5818.35, 4307.37), 4194304: (5783.63, 5813.34, 5782.97, 5757.12)}

#: The cells (table, size, column) whose paper figure is one of the platform's ``[mpi] inter_node`` points
#: (platforms/data/sunway_taihulight.toml): calibration targets, not checks.
CALIBRATION_CELLS = frozenset({(2, 4, "Parallel C"), (2, 1024, "Parallel C"), (3, 4194304, "Parallel C")})


def role(table: int, size: int, column: str) -> str:
    """``calibration target`` for a :data:`CALIBRATION_CELLS` cell, else ``check``."""
    return "calibration target" if (table, size, column) in CALIBRATION_CELLS else "check"


_RESULT = re.compile(r"^RESULT (\S+) (\d+) (\S+)$", re.M)


def rma_protocol() -> str:
    """The one-sided protocol of the platform the MPI columns run on (``[mpi] rma_protocol``)."""
    mpi = load_platform(PLATFORM).mpi
    return "smpi" if mpi is None else mpi.rma_protocol


def source_file() -> Path:
    """The benchmark program ``he_rma.c``."""
    return Path(str(resources.files("waitlab.experiments.reproduce") / "he_rma.c"))


def mpi_put_seconds(mode: str, size: int, iters: int = 20, timeout: float = 120.0) -> float:
    """Seconds printed by ``he_rma MODE SIZE ITERS`` on 2 ranks on 2 nodes (see the C file)."""
    sc = from_mapping({
        "scenario": {"name": "he-rma", "ranks": 2},
        "platform": {"name": PLATFORM, "ranks_per_node": 1},
        "application": {"kind": "program", "sources": [str(source_file())], "args": [mode, str(size), str(iters)]},
        "simulation": {"timeout": timeout},
    }, file=str(source_file().with_suffix(".toml")))
    res = simulate_ops(prepare(sc))
    found = _RESULT.findall(res.smpi_output)
    if not found:
        raise SimulationError(f"he_rma {mode} {size} printed no RESULT line:\n{res.smpi_output[-2000:]}")
    return float(found[-1][2])


def _err(sim: float, paper: float) -> float:
    return (sim - paper) / paper


def table2(iters: int = 20) -> pd.DataFrame:
    """Put latency (us): paper vs simulated, per size and column, with the relative error."""
    model = load_platform(PLATFORM)
    assert model.mpi is not None
    lat, bw = model.mpi.inter_node[0].seconds, model.mpi.inter_node[-1].size / model.mpi.inter_node[-1].seconds
    rows = []
    for size in SIZES:
        pc = put_seconds(size, latency=lat, bandwidth=bw, threshold=PUT_THRESHOLD) * 1e6
        act = mpi_put_seconds("latency-active", size, iters) * 1e6
        pas = mpi_put_seconds("latency-passive", size, iters) * 1e6
        for col, sim, paper in (("Parallel C", pc, PAPER_TABLE2[size][0]),
                                ("MPI active", act, PAPER_TABLE2[size][1]),
                                ("MPI passive", pas, PAPER_TABLE2[size][2])):
            rows.append({"size": size, "column": col, "paper_us": paper, "simulated_us": sim,
                         "error": _err(sim, paper), "role": role(2, size, col)})
    return pd.DataFrame(rows)


def table3(iters: int = 5) -> pd.DataFrame:
    """Put bandwidth (MB/s, 32 puts per epoch): paper vs simulated, with the relative error."""
    model = load_platform(PLATFORM)
    assert model.mpi is not None
    lat, bw = model.mpi.inter_node[0].seconds, model.mpi.inter_node[-1].size / model.mpi.inter_node[-1].seconds
    rows = []
    for size in SIZES:
        total = PUTS * size
        pcr = total / stream_seconds(size, PUTS, latency=lat, bandwidth=bw, threshold=PUT_THRESHOLD) / 1e6
        pcn = total / stream_seconds(size, PUTS, latency=lat, bandwidth=bw, threshold=PUT_THRESHOLD,
                                     reply=False) / 1e6
        act = total / mpi_put_seconds("bw-active", size, iters) / 1e6
        pas = total / mpi_put_seconds("bw-passive", size, iters) / 1e6
        for col, sim, paper in (("Parallel C", pcr, PAPER_TABLE3[size][0]),
                                ("Parallel C, no reply", pcn, PAPER_TABLE3[size][1]),
                                ("MPI active", act, PAPER_TABLE3[size][2]),
                                ("MPI passive", pas, PAPER_TABLE3[size][3])):
            rows.append({"size": size, "column": col, "paper_MBps": paper, "simulated_MBps": sim,
                         "error": _err(sim, paper), "role": role(3, size, col)})
    return pd.DataFrame(rows)
