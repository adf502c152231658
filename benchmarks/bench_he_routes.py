"""Benchmark: He et al.'s alltoall points on the Sunway platform, static D-mod-k routes vs the aggregated uplink.

Runs the same placement points twice, back to back: on ``sunway_taihulight`` as shipped (``topology.routing =
"d_mod_k"``: SimGrid's ``FAT_TREE`` cluster, 54 up-ports per supernode) and on a copy of its file with
``routing = "balanced"`` (one aggregated uplink per supernode, what waitlab rendered before).  Prints per point:
placement, algorithm, routing, simulated ms, wall s.  The wall times show what the fat tree's per-message
routes cost the simulation; the simulated times show which placements have route conflicts.  The machine is
shared: compare the two routings of one point, measured back to back, rather than absolute times.

    .venv/bin/python benchmarks/bench_he_routes.py --ranks 128 --labels "4 supernodes" "6 supernodes"
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from waitlab.experiments.reproduce.he_alltoall import PLACEMENTS, PLATFORM, run_point
from waitlab.platforms import load_platform


def balanced_copy(folder: Path) -> Path:
    """The Sunway platform file with ``routing = "balanced"``, written into ``folder``."""
    text = Path(load_platform(PLATFORM).file).read_text(encoding="utf-8")
    text, n = re.subn(r'^routing = "d_mod_k"$', 'routing = "balanced"', text, flags=re.M)
    if n != 1:
        raise SystemExit("the Sunway platform file has no 'routing = \"d_mod_k\"' line to replace")
    path = folder / "sunway_balanced.toml"
    path.write_text(text, encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--labels", nargs="+", default=["1 supernode", "4 supernodes", "6 supernodes"],
                    choices=list(PLACEMENTS))
    ap.add_argument("--algorithms", nargs="+", default=["ring", "two_level_ring"])
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        platforms = {"d_mod_k": PLATFORM, "balanced": str(balanced_copy(Path(tmp)))}
        for label in args.labels:
            for algorithm in args.algorithms:
                for routing, platform in platforms.items():
                    p = run_point(label, algorithm, args.ranks, args.ranks_per_node, timeout=args.timeout,
                                  platform=platform)
                    print(f"{label:26s} {algorithm:15s} {routing:9s} {p.seconds * 1e3:9.3f} ms  "
                          f"wall {p.wall:7.2f} s", flush=True)


if __name__ == "__main__":
    main()
