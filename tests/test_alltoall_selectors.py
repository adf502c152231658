"""Issue 44: the sweep table says which alltoall algorithm SMPI ran, the time of one collective, and how many of
the platform's figures are assumed.

Expected algorithms are read off SimGrid 3.32's selector sources by hand (``src/smpi/colls/smpi_*_selector.cpp``);
the simgrid test checks them against SMPI itself: a selector and the algorithm it resolves to give the same
simulated alltoall to the last digit, and another algorithm does not.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import waitlab.platforms
from waitlab.errors import InputError
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.sweep import load_sweep, run_sweep
from waitlab.models.apps.alltoall_selectors import alltoall_ran


@pytest.mark.parametrize(("selector", "ranks", "nbytes", "expected"), [
    # alltoall__ompi (also alltoall__default): p < 128 band: < 1024 B bruck, < 262144 basic_linear, else pair
    ("default", 64, 4096, "basic_linear"), ("ompi", 64, 65536, "basic_linear"), ("ompi", 64, 1023, "bruck"),
    ("ompi", 64, 262144, "pair"),
    # p < 32 band: < 4 B linear_sync (basic_linear), < 512 B bruck; p < 16: always linear
    ("ompi", 16, 3, "basic_linear"), ("ompi", 16, 256, "bruck"), ("ompi", 16, 512, "basic_linear"),
    ("ompi", 8, 100, "basic_linear"),
    # p == 2: 2..3 B two_proc (basic_linear), 4..15 B pairwise
    ("ompi", 2, 3, "basic_linear"), ("ompi", 2, 4, "pair"),
    # alltoall__mpich: < 256 B and p >= 8 bruck; < 32768 B scatter_dest; odd p pair; else ring
    ("mpich", 8, 255, "bruck"), ("mpich", 4, 100, "mvapich2_scatter_dest"), ("mpich", 16, 256, "mvapich2_scatter_dest"),
    ("mpich", 15, 32768, "pair"), ("mpich", 16, 32768, "ring"),
    # alltoall__mvapich2, Stampede table 0: the row of the first process count >= p, then n <= max
    ("mvapich2", 16, 64, "rdb"), ("mvapich2", 16, 65, "bruck"), ("mvapich2", 16, 513, "mvapich2_scatter_dest"),
    ("mvapich2", 3, 262144, "mvapich2_scatter_dest"), ("mvapich2", 3, 262145, "pair"), ("mvapich2", 1000, 8, "rdb"),
    # not selectors, or not resolved
    ("ring", 64, 1, "ring"), ("automatic", 64, 4096, "automatic"),
])
def test_selectors_resolve_as_simgrid_332_does(selector, ranks, nbytes, expected):
    assert alltoall_ran(selector, ranks, nbytes) == expected


@pytest.mark.parametrize(("ranks", "nbytes", "per_host", "expected"), [
    # alltoall__impi: the table of the ranks per host, the first row with p <= its process count, n < bound
    (64, 100, 8, "bruck"),  # 8 per host, 64-process row: < 114 -> algorithm 4 = mvapich2 -> (64 ranks, 100 B) bruck
    (64, 300, 8, "bruck"),  # < 552 -> algorithm 1 = bruck
    (64, 20000, 8, "pair"),  # < 32768 -> 3
    (64, 65536, 8, "mvapich2_scatter_dest"),  # < 160113 -> 4 -> mvapich2 (> 1024 B) scatter_dest
    (16, 256, 8, "bruck"), (16, 256, 1, "mvapich2_scatter_dest"),  # the 8-per-host vs the 1-per-host table
    (16, 256, 3, "mvapich2_scatter_dest"),  # no table for 3 per host: the table of 1
    (2, 5, 1, "pair"), (300, 100, 16, "bruck"), (300, 70000, 16, "mvapich2_scatter_dest"),
])
def test_impi_reads_its_table_of_ranks_per_host(ranks, nbytes, per_host, expected):
    assert alltoall_ran("impi", ranks, nbytes, per_host) == expected


@pytest.mark.parametrize("selector", ["impi", "automatic"])
def test_selectors_simgrid_crashes_in_are_refused_in_one_line(tmp_path, selector):
    (tmp_path / "s.toml").write_text('[scenario]\nname = "s"\nranks = 16\n[platform]\nname = "deepcomp_7000"\n'
                                     f'[application]\nkind = "fft"\n[simulation]\nalltoall = "{selector}"\n')
    with pytest.raises(InputError, match=rf"simulation\.alltoall: SimGrid 3\.32 crashes in its '{selector}'"):
        load_scenario(tmp_path / "s.toml")


def _count_marks(path: Path) -> tuple[int, int]:
    """(assumed, sourced) figures of a platform file, counted from its TOML (independently of the loader)."""
    assumed = sourced = 0

    def walk(x: object) -> None:
        nonlocal assumed, sourced
        if isinstance(x, dict):
            if "value" in x and ("source" in x or x.get("assumed") is True):
                assumed += x.get("assumed") is True
                sourced += "source" in x
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(tomllib.loads(path.read_text()))
    return assumed, sourced


@pytest.mark.simgrid
def test_sweep_table_names_the_algorithm_that_ran_and_its_time(tmp_path):
    (tmp_path / "base.toml").write_text(
        '[scenario]\nname = "sel"\nranks = 16\nseed = 1\n[platform]\nname = "deepcomp_7000"\n'
        '[application]\nkind = "fft"\nsteps = 1\nbytes_per_peer = 256\n[simulation]\nalltoall = "default"\n')
    (tmp_path / "sw.toml").write_text(
        'base = "base.toml"\n[grid]\n"simulation.alltoall" = ["ompi", "bruck", "basic_linear", "mpich", '
        '"mvapich2_scatter_dest", "mvapich2"]\n[sweep]\nworkers = 1\n')
    messages: list[str] = []
    table = run_sweep(load_sweep(tmp_path / "sw.toml"), tmp_path / "out", progress=messages.append)
    t = table.set_index("simulation.alltoall")
    # at 16 ranks and 256 B: ompi -> bruck, mpich -> scatter_dest, mvapich2 (16-process row, <= 512 B) -> bruck
    assert t.loc["ompi", "alltoall_ran"] == "bruck"
    assert t.loc["mpich", "alltoall_ran"] == "mvapich2_scatter_dest"
    assert t.loc["mvapich2", "alltoall_ran"] == "bruck"
    assert t.loc["basic_linear", "alltoall_ran"] == "basic_linear"
    # SMPI agrees: the same simulated time to the last digit, and another algorithm differs
    assert t.loc["ompi", "alltoall_time"] == t.loc["bruck", "alltoall_time"] == t.loc["mvapich2", "alltoall_time"]
    assert t.loc["mpich", "alltoall_time"] == t.loc["mvapich2_scatter_dest", "alltoall_time"]
    assert t.loc["ompi", "alltoall_time"] != t.loc["basic_linear", "alltoall_time"]
    assert t.loc["mpich", "alltoall_time"] != t.loc["bruck", "alltoall_time"]
    # one FFT step: 0.01 s of compute before and after the alltoall, no imbalance: the rest of the makespan
    assert t["alltoall_time"].to_numpy() == pytest.approx((t["makespan"] - 0.02).to_numpy(), abs=1e-9)
    assert (t["alltoall_time"] > 0).all()
    # the platform's own marks, counted from its file
    assumed, sourced = _count_marks(Path(waitlab.platforms.__file__).parent / "data" / "deepcomp_7000.toml")
    assert (assumed, sourced) == (18, 5)
    assert (t["figures_assumed"] == assumed).all() and (t["figures_sourced"] == sourced).all()
    assert "deepcomp_7000: 6 points rest on 18 assumed and 5 sourced platform figures" in messages[-1]
