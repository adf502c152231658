"""What-if inputs that used to crash SimGrid or pass silently (issue r22): a collective's buffers beyond a node's
memory, ``[mpi]`` figures faster than the link or beyond the largest message, refused alltoall selectors listed as
valid, and a typo next to a missing required key.  Expected values are worked out by hand in the comments."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from scenario_files import scenario_toml

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.physics_limits import (
    MAX_MESSAGE_BYTES,
    application_problem,
    buffer_problem,
    largest_node_memory,
)
from waitlab.experiments.scenario import from_mapping as scenario_from_mapping
from waitlab.experiments.schema import require_key
from waitlab.models.apps.fft import FftParams
from waitlab.models.apps.stencil import StencilParams
from waitlab.platforms import list_platforms, load_platform
from waitlab.platforms.model import from_mapping

DATA = Path(__file__).resolve().parents[1] / "platforms" / "data"
GIB64 = 64 * 2**30  # Dawning's node memory


# ------------------------------------------------------------------------------------------------------------------
# 1. collective buffers against the node's memory
# ------------------------------------------------------------------------------------------------------------------

def test_fft_alltoall_buffers_of_a_node_beyond_its_memory_name_the_largest_size_that_fits() -> None:
    # 16 ranks on one node, each with a send and a receive buffer of 16 x n bytes: 16 x 2 x 16 = 512 n per node,
    # so n <= 2^36 / 512 = 2^27 = 134217728 fits 64 GiB exactly
    one_node = [0] * 16
    assert buffer_problem(FftParams(bytes_per_peer=134217728), one_node, GIB64, "dawning_5000a") is None
    field, problem, fix = buffer_problem(FftParams(bytes_per_peer=134217729), one_node, GIB64, "dawning_5000a")
    assert field == "application.bytes_per_peer"
    assert "node 0 (16 ranks)" in problem and "68719476736 bytes" in problem
    assert "bytes_per_peer = 134217728 or less" in fix
    # the tester's case, 2^31 - 1 bytes: 512 x (2^31 - 1) = 1.1e12 bytes
    assert "1.1e+12 bytes" in buffer_problem(FftParams(bytes_per_peer=2**31 - 1), one_node, GIB64, "d")[1]
    # one rank per node: 2 x 16 = 32 n per node, so n <= 2^36 / 32 = 2^31 fits
    assert buffer_problem(FftParams(bytes_per_peer=2**31 - 1), list(range(16)), GIB64, "d") is None


def test_stencil_gather_counts_the_root_and_allgather_the_communicator() -> None:
    # gather to root 5 of 32 ranks, 16 per node: node 0 holds ranks 0-15, the root's 32 blocks plus one block each,
    # 16 + 32 = 48 n; node 1 holds 16 n.  n <= 2^36 // 48 = 1431655765
    nodes = [r // 16 for r in range(32)]
    gather = StencilParams(collective="gather", root=5, allreduce_bytes=1431655765)
    assert buffer_problem(gather, nodes, GIB64, "d") is None
    field, problem, fix = buffer_problem(StencilParams(collective="gather", root=5, allreduce_bytes=1431655766),
                                         nodes, GIB64, "d")
    assert field == "application.allreduce_bytes" and "node 0 (16 ranks)" in problem
    assert "allreduce_bytes = 1431655765 or less" in fix
    # allgather over rows of an 8 x 4 grid: every rank holds 8 blocks plus its own, 9 n, 16 ranks: 144 n per node,
    # n <= 2^36 // 144 = 477218588
    row = StencilParams(collective="allgather", collective_comm="row", grid=(8, 4), allreduce_bytes=477218589)
    assert "allreduce_bytes = 477218588 or less" in buffer_problem(row, nodes, GIB64, "d")[2]
    # an allreduce's buffers do not grow with the ranks; no collective at all: nothing to check
    assert buffer_problem(StencilParams(allreduce_bytes=2**31 - 1), nodes, GIB64, "d") is None
    assert buffer_problem(StencilParams(collective="gather", allreduce_every=0, allreduce_bytes=2**31 - 1), nodes,
                          GIB64, "d") is None


def test_run_refuses_the_alltoall_in_one_line_and_leaves_nothing(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "fftbig.toml"
    s.write_text(scenario_toml("fftbig", 16, 'kind = "fft"\nsteps = 1\nbytes_per_peer = 2147483647', seed=1))
    assert main(["run", str(s), "-o", str(tmp_path / "out"), "--no-png"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fftbig.toml: application.bytes_per_peer:" in err[0], err
    assert "bytes_per_peer = 134217728 or less" in err[0]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------------------------
# 2. [mpi] figures faster than the link, or beyond the largest message
# ------------------------------------------------------------------------------------------------------------------

def _dawning_with(size: int, bandwidth: float) -> dict[str, Any]:
    """Dawning with its 1 MiB figure changed; without [contention], whose 2 GB/s port must be above that figure."""
    data = tomllib.loads((DATA / "dawning_5000a.toml").read_text())
    data.pop("contention")
    data["mpi"]["inter_node"][1].update(size=size)
    data["mpi"]["inter_node"][1]["bandwidth"]["value"] = bandwidth
    return data


def test_mpi_figures_implying_more_than_the_link_rate_are_refused() -> None:
    # Dawning: 1.6 us at 8 B, link 2.5e9 B/s.  At 3e9 B/s for 1 MiB the extra 1048568 B take
    # 1048576 / 3e9 - 1.6e-6 = 3.479253e-4 s: 3.0138e9 B/s, 1.2055 x the link (refused before the contention laws
    # compare their port with the figure)
    data = _dawning_with(1048576, 3e9)
    data["contention"] = tomllib.loads((DATA / "dawning_5000a.toml").read_text())["contention"]
    with pytest.raises(InputError) as exc:
        from_mapping(data, "fast.toml")
    text = str(exc.value)
    assert text.startswith("fast.toml: mpi.inter_node[1].bandwidth.value:"), text
    assert "3.014e+09 B/s, 1.206 times" in text
    # the fix: a one-way time of at least 1.6e-6 + 1048568 / 2.5e9 = 4.210272e-4 s, i.e. less than 2.491e9 B/s
    assert "less than 2.491e+09 B/s" in text
    # within the 1% margin for rounded figures: 1.005 x the link passes
    ok = 1048576 / (1.6e-6 + 1048568 / (1.005 * 2.5e9))
    assert from_mapping(_dawning_with(1048576, ok), "ok.toml").mpi is not None


def test_mpi_figure_sizes_above_the_largest_message_are_refused() -> None:
    with pytest.raises(InputError) as exc:
        from_mapping(_dawning_with(2**31, 1.5e9), "big.toml")
    assert str(exc.value).startswith("big.toml: mpi.inter_node[1].size: 2147483648 bytes is more than"), exc.value
    assert from_mapping(_dawning_with(2**31 - 1, 1.5e9), "ok.toml").mpi is not None


# ------------------------------------------------------------------------------------------------------------------
# 4. refused alltoall selectors are not offered
# ------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("section", "key"), [("simulation", "alltoall"), ("application", "alltoall_algorithm")])
def test_alltoall_typo_lists_only_algorithms_that_run(section: str, key: str) -> None:
    data = tomllib.loads(scenario_toml("t", 16, 'kind = "fft"\nsteps = 1'))
    data.setdefault(section, {})[key] = "rign"
    with pytest.raises(InputError) as exc:
        scenario_from_mapping(data, "t.toml")
    text = str(exc.value)
    assert "rign" in text and "ring" in text and "mpich" in text, text
    assert "impi" not in text and "automatic" not in text, text


# ------------------------------------------------------------------------------------------------------------------
# 5. a typo next to a missing required key
# ------------------------------------------------------------------------------------------------------------------

def test_missing_required_key_names_the_unknown_key_like_it() -> None:
    data = tomllib.loads(scenario_toml("t", 4, 'kind = "stencil"'))
    data["platform"] = {"nme": "dawning_5000a"}
    with pytest.raises(InputError) as exc:
        scenario_from_mapping(data, "t.toml")
    assert str(exc.value) == ("t.toml: platform.nme: unknown key 'nme' (did you mean 'name'?) "
                              "(fix: rename nme to name)")
    data["platform"] = {"colour": "dawning_5000a"}  # nothing like name: the required key is named
    with pytest.raises(InputError, match=r"platform\.name: is required"):
        scenario_from_mapping(data, "t.toml")


def test_missing_application_key_names_the_typo() -> None:
    data = tomllib.loads(scenario_toml("t", 4, 'kind = "stencil"'))
    data["application"]["imbalance"] = [{"regoin": "Stencil", "ranks": [1], "magnitude": 0.1}]
    with pytest.raises(InputError) as exc:
        scenario_from_mapping(data, "t.toml")
    assert "application.imbalance[0].regoin: unknown key 'regoin' (did you mean 'region'?)" in str(exc.value)


def test_require_key_names_a_typo_before_the_missing_key() -> None:
    allowed = ("name", "ranks", "seed", "description")
    with pytest.raises(InputError) as exc:
        require_key({"name": "g", "rank": 16, "seed": 1}, "scenario", "ranks", allowed, "s.toml", "set ranks = 64")
    assert str(exc.value) == ("s.toml: scenario.rank: unknown key 'rank' (did you mean 'ranks'?) "
                              "(fix: rename rank to ranks)")
    with pytest.raises(InputError, match=r"scenario.ranks: is required \(fix: set ranks = 64\)"):
        require_key({"name": "g", "seed": 1}, "scenario", "ranks", allowed, "s.toml", "set ranks = 64")
    require_key({"ranks": 4}, "scenario", "ranks", allowed, "s.toml", "")


def test_ranks_typo_in_a_scenario_is_named() -> None:
    data = tomllib.loads(scenario_toml("t", 4, 'kind = "stencil"'))
    data["scenario"]["rank"] = data["scenario"].pop("ranks")
    with pytest.raises(InputError) as exc:
        scenario_from_mapping(data, "t.toml")
    assert "scenario.rank: unknown key 'rank' (did you mean 'ranks'?)" in str(exc.value)


def test_every_node_holds_the_largest_message_so_sizes_below_it_skip_the_platforms() -> None:
    """``application_problem`` loads the built-in platforms (27 ms before SMPI starts) only for a message size above
    MAX_MESSAGE_BYTES: that is exact while every built-in node holds more bytes than that; and a size between the two
    is still refused for SimGrid's C int."""
    assert min(float(load_platform(n).node.memory) for n in list_platforms()) > MAX_MESSAGE_BYTES
    problem = application_problem(StencilParams(halo_bytes=MAX_MESSAGE_BYTES + 1), 4)
    assert problem is not None and problem[0] == "application.halo_bytes" and "C int" in problem[1]
    problem = application_problem(StencilParams(halo_bytes=int(largest_node_memory()) * 2), 4)
    assert problem is not None and "larger than the memory of any platform's node" in problem[1]
