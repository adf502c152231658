"""Demonstration programs nobody on this project wrote: NAS EP, IS, DT and SMPI test programs from SimGrid.

Their sources ship in SimGrid's source distribution (``examples/smpi/NAS`` and
``teshsuite/smpi``); waitlab never copies them into its repository.
:func:`fetch_simgrid_sources` downloads the source package of the installed
SimGrid version from PyPI with ``pip download`` (an ordinary package-registry
client) into waitlab's cache folder, once, and :func:`nas_scenario` /
:func:`smpi_test_scenario` make scenarios that build and run them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waitlab.errors import EnvironmentProblem, InputError
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.simulator.build import cache_dir, simgrid_version

#: Folders of the source package that waitlab uses.
_WANTED = ("examples/smpi/NAS/", "teshsuite/smpi/coll-", "teshsuite/smpi/pt2pt-")

#: NAS benchmarks: sources (relative to examples/smpi/NAS), arguments and accepted exit statuses.
#: DT's main() returns 1 by design; IS needs a power-of-two number of ranks; DT's BH graph of class S has
#: 5 nodes (one rank each), more ranks stay idle.
NAS: dict[str, dict[str, Any]] = {
    "ep": {"sources": ["ep.c", "nas_common.c"], "args": ["{ranks}", "{klass}"], "exit_codes": [0]},
    "is": {"sources": ["is.c", "nas_common.c"], "args": ["{ranks}", "{klass}"], "exit_codes": [0]},
    "dt": {"sources": ["dt.c", "nas_common.c", "DGraph.c"], "args": ["{ranks}", "{klass}", "BH"],
           "exit_codes": [0, 1]},
}


def _version() -> str:
    v = simgrid_version()
    return v if v[:1].isdigit() else "3.32"


def fetch_simgrid_sources(version: str | None = None, *, timeout: float = 300.0) -> Path:
    """Folder of SimGrid's source distribution (only NAS and SMPI test programs are unpacked).

    Downloads ``simgrid==VERSION`` (the source package) from PyPI with
    ``pip download --no-deps --no-binary :all:`` into the cache folder the first
    time; later calls reuse it.

    Raises
    ------
    EnvironmentProblem
        When the package cannot be downloaded (offline, registry unreachable): the
        message says why, so a test can skip with that reason.
    """
    version = version or _version()
    root = cache_dir() / "simgrid-src" / f"simgrid-{version}"
    if (root / "examples" / "smpi" / "NAS" / "ep.c").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="waitlab-sg-", dir=root.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
               "--disable-pip-version-check", "-q", f"simgrid=={version}", "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"downloading SimGrid {version}'s source package took more than {timeout:g} s "
                                     "(is the network reachable?)") from None
        archives = sorted(Path(tmp).glob("simgrid-*.tar.gz"))
        if proc.returncode != 0 or not archives:
            words = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise EnvironmentProblem(f"cannot download SimGrid {version}'s source package from PyPI (needed for "
                                     f"the NAS demonstration; offline?): {' / '.join(words) or 'no archive'}")
        staging = Path(tmp) / "src"
        with tarfile.open(archives[0]) as tar:
            members = []
            for m in tar.getmembers():
                parts = m.name.split("/", 1)
                safe = not m.name.startswith("/") and ".." not in Path(m.name).parts
                if safe and len(parts) == 2 and parts[1].startswith(_WANTED) and (m.isfile() or m.isdir()):
                    members.append(m)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(staging, members=members, filter="data")
            else:  # Python < 3.11.4: members were checked above
                tar.extractall(staging, members=members)
        tops = [p for p in staging.iterdir() if p.is_dir()]
        if len(tops) != 1 or not (tops[0] / "examples" / "smpi" / "NAS" / "ep.c").is_file():
            raise EnvironmentProblem(f"SimGrid {version}'s source package has no examples/smpi/NAS/ep.c")
        if root.exists():
            shutil.rmtree(root)
        tops[0].rename(root)
    return root


def nas_scenario(benchmark: str, *, klass: str = "S", ranks: int = 4, platform: str = "dawning_5000a",
                 name: str | None = None, extra: Mapping[str, Any] | None = None) -> Scenario:
    """A ``program`` scenario running NAS ``ep``, ``is`` or ``dt`` (class ``klass``) from SimGrid's sources."""
    if benchmark not in NAS:
        raise InputError("(nas)", "benchmark", f"unknown NAS benchmark {benchmark!r}", f"one of {', '.join(NAS)}")
    spec = NAS[benchmark]
    nas_dir = fetch_simgrid_sources() / "examples" / "smpi" / "NAS"
    app = {
        "kind": "program",
        "sources": [str(nas_dir / s) for s in spec["sources"]],
        "args": [a.replace("{klass}", klass) for a in spec["args"]],
        "exit_codes": list(spec["exit_codes"]),
        "link_flags": ["-lm"],
    }
    data: dict[str, Any] = {
        "scenario": {"name": name or f"nas-{benchmark}-{klass}-{ranks}-{platform}", "ranks": ranks},
        "platform": {"name": platform},
        "application": app,
        **(extra or {}),
    }
    return from_mapping(data, f"<nas {benchmark}>")


def smpi_test_scenario(test: str = "coll-allreduce", *, ranks: int = 4, platform: str = "dawning_5000a",
                       args: tuple[str, ...] = ()) -> Scenario:
    """A ``program`` scenario running one of SimGrid's SMPI test programs (``teshsuite/smpi/<test>``)."""
    src = fetch_simgrid_sources() / "teshsuite" / "smpi" / test / f"{test}.c"
    if not src.is_file():
        raise InputError("(smpi test)", "test", f"{test} is not a test program of SimGrid's teshsuite/smpi",
                         "e.g. coll-allreduce, coll-alltoall, coll-bcast, pt2pt-pingpong")
    data = {
        "scenario": {"name": f"smpi-{test}-{ranks}-{platform}", "ranks": ranks},
        "platform": {"name": platform},
        "application": {"kind": "program", "sources": [str(src)], "args": list(args)},
    }
    return from_mapping(data, f"<smpi test {test}>")
