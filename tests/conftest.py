"""Shared fixtures: a tiny hand-written SimGrid platform with exactly known speeds and links."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.columns import frame
from waitlab.models.ops import OpTable
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.ti_vectors import VectorStore

#: Host speed of the test platform: 1 Gflop/s, so `compute` seconds are exact.
SPEED = 1e9


def star_platform(folder: Path, n_hosts: int, bw: str = "1GBps", lat: str = "1us") -> tuple[Path, Path]:
    """A flat cluster of single-core hosts n0..n{k-1}; one rank per host."""
    xml = folder / "platform.xml"
    xml.write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        '<platform version="4.1">\n'
        f'  <cluster id="c" prefix="n" suffix="" radical="0-{n_hosts - 1}" speed="1Gf" bw="{bw}" lat="{lat}"/>\n'
        "</platform>\n"
    )
    hostfile = folder / "hostfile"
    hostfile.write_text("".join(f"n{i}\n" for i in range(n_hosts)))
    return xml, hostfile


Replayer = Callable[..., tuple[pd.DataFrame, pd.DataFrame]]


@pytest.fixture
def replay(tmp_path: Path) -> Replayer:
    """Replay an OpTable on the star platform; return (events, waits)."""
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")

    def run(ops: OpTable, vectors: VectorStore | None = None, **config: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        xml, hostfile = star_platform(tmp_path, ops.n_ranks)
        rep = replay_ops(ops, xml, hostfile, SPEED, config=config or None, timeout=300, work=tmp_path / "work",
                         vectors=vectors)
        events = frame(rep.events)  # the replay's Arrow table as the DataFrame the tests read
        return events, wait_states(events)

    return run


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 20 MB tmpfs mounted at ``tmp_path/disk`` for the test (unmounted after it); skipped without root."""
    disk = tmp_path / "disk"
    disk.mkdir()
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not root or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)],
                                  capture_output=True).returncode != 0:
        pytest.skip("mounting a 20 MB tmpfs needs root (and mount rights)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)
