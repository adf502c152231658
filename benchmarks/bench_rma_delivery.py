"""Put completion under SMPI 3.32's one-sided protocol and under MVAPICH2's: origin- vs target-side timings.

Runs ``tests/programs/rma_delivery.c`` (2 ranks on two nodes of the Dawning 5000A platform, ``[mpi]
rma_protocol`` set to each protocol in a copy of it) through waitlab's program path for each epoch kind and
size, and prints, from the measurement layer's records: the time in
MPI_Put, in the origin's closing call (complete / unlock / fence), the origin's epoch (put enter -> closing
call exit) and the delivery (:func:`~waitlab.models.analysis.rma_timing.delivery_times`: exit of the target's
win_wait or fence; for passive target the origin's unlock), with the bandwidths they imply.
Simulated times: deterministic, independent of the machine's load.

    .venv/bin/python benchmarks/bench_rma_delivery.py [smpi|mvapich2 ...]   (default: both)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.rma_timing import delivery_times
from waitlab.platforms import load_platform

PROGRAM = Path(__file__).resolve().parents[1] / "tests" / "programs" / "rma_delivery.c"
SIZES = (4, 1024, 65536, 1 << 20, 4 << 20)
#: The origin's closing call of each epoch kind.
CLOSE = {"pscw": "win_complete", "lock": "win_unlock", "fence": "win_fence"}


def platform_file(work: Path, protocol: str) -> Path:
    """A copy of the Dawning 5000A platform with ``[mpi] rma_protocol = protocol``."""
    text = Path(load_platform("dawning_5000a").file).read_text()
    path = work / f"dawning_{protocol}.toml"
    path.write_text(text.replace("[mpi]\n", f'[mpi]\nrma_protocol = "{protocol}"\n', 1))
    return path


def measure(mode: str, size: int, work: Path, protocol: str) -> dict[str, float]:
    sc = from_mapping({"scenario": {"name": f"rma_{mode}_{size}", "ranks": 2},
                       "platform": {"name": str(platform_file(work, protocol)), "ranks_per_node": 1},
                       "application": {"kind": "program", "sources": [str(PROGRAM)], "args": [mode, str(size)]}},
                      str(work / "scenario.toml"))
    ev = simulate(sc).events
    d = delivery_times(ev).iloc[0]
    put = ev.loc[int(d["event"])]
    close = ev[(ev["rank"] == 0) & (ev["op"] == CLOSE[mode])].iloc[-1]
    lock = ev[(ev["rank"] == 0) & (ev["op"] == "win_lock")]
    return {"put": put["exit"] - put["enter"], "close": close["exit"] - close["enter"],
            "origin": d["origin_done"] - d["enter"], "target": d["delivered"] - d["enter"],
            "lock": float((lock["exit"] - lock["enter"]).iloc[-1]) if len(lock) else float("nan")}


def main(argv: list[str]) -> int:
    protocols = argv or ["smpi", "mvapich2"]
    print(f"{'protocol':9} {'epoch':6} {'bytes':>8} {'put us':>9} {'close us':>9} {'origin us':>10} "
          f"{'target us':>10} {'origin MB/s':>12} {'target MB/s':>12}")
    with tempfile.TemporaryDirectory(prefix="waitlab-rma-") as tmp:
        for protocol in protocols:
            for mode in CLOSE:
                for size in SIZES:
                    m = measure(mode, size, Path(tmp), protocol)
                    tgt = m["target"]
                    print(f"{protocol:9} {mode:6} {size:8d} {m['put'] * 1e6:9.2f} {m['close'] * 1e6:9.2f} "
                          f"{m['origin'] * 1e6:10.2f} {tgt * 1e6:10.2f} {size / m['origin'] / 1e6:12.1f} "
                          f"{size / tgt / 1e6:12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
