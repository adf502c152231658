"""Tester t5, findings 1 and 2: with ``[mpi]`` figures, the node link's latency (``inter_node.latency``, the wire) is
at most the shortest one-way time of the inter-node figures, since an MPI message cannot beat the wire it crosses
(SimGrid's TCP-gamma bound used the unscaled link latency: 1.5e-3 s written for 1.5 us made DeepComp 7000's 1 MiB
pingpong 79% slower, unnoticed), and above 0 while SMPI's factors are fitted (the latency factor scales it: at 0 the
8-byte pingpong took 0.34 us against the 1.5 us figure).  The expected bounds are the files' own figures, read by
hand: DeepComp 7000's 8-byte figure is 1.5e-6 s; a single 1 MiB figure at 1.5e9 B/s is 1048576 / 1.5e9 s."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from waitlab.errors import InputError
from waitlab.platforms.calibration import pingpong_time
from waitlab.platforms.model import load_platform
from waitlab.platforms.smpi_factors import calibrate

DATA = Path(str(resources.files("waitlab.platforms") / "data"))
#: The [inter_node] latency line of deepcomp_7000.toml (the [mpi] 8-byte figure has the same value: 1.5e-6 s).
LINK = "latency = { value = 1.5e-6, assumed = true, reason = \"DDR InfiniBand MPI latency of 2008, about 1.5 us"


def variant(tmp_path: Path, name: str, *changes: tuple[str, str], base: str = "deepcomp_7000") -> Path:
    text = (DATA / f"{base}.toml").read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def link(value: str) -> tuple[str, str]:
    return LINK, LINK.replace("value = 1.5e-6", f"value = {value}")


def refused(path: Path) -> InputError:
    with pytest.raises(InputError) as err:
        load_platform(path)
    return err.value


@pytest.mark.parametrize("value", ["1.5e-3", "1.5", "1.6e-6"])  # ms for us, s for us, a rounded-up link figure
def test_a_link_latency_above_the_mpi_latency_is_refused_with_the_bound(tmp_path: Path, value: str) -> None:
    path = variant(tmp_path, "slow", link(value))
    err = refused(path)
    assert err.file == str(path) and err.field == "inter_node.latency.value"
    assert "cannot exceed the MPI latency measured over it" in err.problem
    assert "mpi.inter_node[0].latency" in err.problem
    assert err.fix.startswith("give a value of at most 1.5e-06 s")
    assert "\n" not in str(err)


def test_the_bound_itself_and_anything_below_it_load(tmp_path: Path) -> None:
    assert load_platform(variant(tmp_path, "same")).inter_node.latency == 1.5e-6  # the built-in's own figures
    assert load_platform(variant(tmp_path, "below", link("1.0e-7"))).inter_node.latency == 1.0e-7
    refused(variant(tmp_path, "just_above", link("1.5000001e-6")))


def test_a_zero_link_latency_is_refused_while_the_factors_are_fitted(tmp_path: Path) -> None:
    err = refused(variant(tmp_path, "zero", link("0.0")))
    assert err.field == "inter_node.latency.value" and err.problem.startswith("is 0")
    assert "above 0 and at most 1.5e-06 s" in err.fix


def test_a_zero_link_latency_stays_allowed_without_fitted_factors(tmp_path: Path) -> None:
    # okita_myrinet: smpi_factors = false, the link figures are the MPI-level ones (factors 1, nothing to scale)
    old = '\nlatency = { value = 1.0e-5, assumed = true'  # [inter_node]'s line (the [mpi] figure is indented)
    m = load_platform(variant(tmp_path, "okita0", (old, old.replace("1.0e-5", "0.0")), base="okita_myrinet"))
    assert m.inter_node.latency == 0.0 and m.mpi is not None and not m.mpi.smpi_factors
    err = refused(variant(tmp_path, "okita_slow", (old, old.replace("1.0e-5", "1.0e-4")), base="okita_myrinet"))
    assert err.fix.startswith("give a value of at most 1e-05 s")


def test_the_bound_from_a_bandwidth_figure_is_rounded_down(tmp_path: Path) -> None:
    # one inter-node figure, 1 MiB at 1.5e9 B/s: 1048576 / 1.5e9 = 6.990507e-4 s one way; 4 digits rounded down
    # give 6.990e-4 (6.991e-4, rounded to nearest, would itself be refused)
    assert 1048576 / 1.5e9 == pytest.approx(6.990507e-4, rel=1e-7)
    small = ('  { size = 8, latency = { value = 1.5e-6, assumed = true, reason = "DDR InfiniBand MPI latency of 2008 '
             "(Koop, Jones, Panda, 'MVAPICH-Aptus', OSU 2008: 1.5 usec); no DeepComp figure found\" } },\n")
    err = refused(variant(tmp_path, "one_figure", (small, ""), link("1.0e-3")))
    assert "mpi.inter_node[0].bandwidth" in err.problem
    assert err.fix.startswith("give a value of at most 0.000699 s")
    ok = load_platform(variant(tmp_path, "one_figure_ok", (small, ""), link("0.000699")))
    assert ok.inter_node.latency == 6.99e-4


def test_the_intra_node_latency_has_no_such_role_with_intra_node_figures(tmp_path: Path) -> None:
    """The loopback is fitted to the intra-node figures: the file's intra_node.latency, large or 0, renders the same
    (so it is not refused: it changes no time)."""
    line = 'latency = { value = 4.0e-7, assumed = true, reason = "shared-memory MPI latency'
    fitted = calibrate(load_platform("deepcomp_7000")).intra_node
    for value in ("1.5", "0.0"):
        m = load_platform(variant(tmp_path, f"intra_{value}", (line, line.replace("4.0e-7", value))))
        assert m.intra_node.latency == float(value)
        assert calibrate(m).intra_node == fitted


@pytest.mark.simgrid
def test_a_link_latency_below_the_mpi_latency_keeps_the_mpi_figures(tmp_path: Path) -> None:
    """What the rule leaves allowed changes no message time: with the link at 0.1 us (under the 1.5 us figure) a
    pingpong still takes the figures, 1.5e-6 s for 8 B and 1048576 / 1.5e9 s for 1 MiB one way."""
    m = load_platform(variant(tmp_path, "below", link("1.0e-7")))
    assert pingpong_time(m, 8, steps=2) == pytest.approx(1.5e-6, rel=1e-6)
    assert pingpong_time(m, 1048576, steps=2) == pytest.approx(1048576 / 1.5e9, rel=1e-6)
