"""Karol, Hluchyj and Morgan's HOL saturation throughput, the [contention] section and the machine model's rules."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.models.contention import (
    EXACT_MAX,
    LIMIT,
    SATURATION_THROUGHPUT,
    hol_factors,
    monte_carlo_throughput,
    saturation_throughput,
)
from waitlab.platforms import load_platform, render_platform
from waitlab.platforms.contention import SETTING, ContentionSpec, plugin_rules, port_factors, read_contention
from waitlab.platforms.machine import machine_settings, send_order_config
from waitlab.platforms.model import from_mapping
from waitlab.platforms.smpi_factors import calibrate
from waitlab.simulator.smpi import PLUGIN_SETTINGS


def test_two_port_switch_by_hand() -> None:
    # N = 2, states: both HOL packets for one output ("2") or for different ones ("1,1").
    # From "1,1" both leave and two new packets land on one output w.p. 1/2; from "2" one leaves and the new
    # one joins the waiting one w.p. 1/2.  Both rows are (1/2, 1/2): pi = (1/2, 1/2), and the throughput is
    # (pi_2 * 1 + pi_11 * 2) / 2 = 3/4.
    assert saturation_throughput(2) == pytest.approx(0.75, abs=1e-12)


@pytest.mark.parametrize(("n", "published"), [(1, 1.0), (3, 0.6825), (4, 0.6553), (5, 0.6399), (6, 0.6302),
                                              (7, 0.6234), (8, 0.6184)])
def test_exact_chain_gives_karol_et_al_table(n: int, published: float) -> None:
    assert saturation_throughput(n) == pytest.approx(published, abs=6e-5)


def test_the_table_hol_factors_uses_is_what_the_chains_give() -> None:
    """:data:`SATURATION_THROUGHPUT` (read by :func:`hol_factors` instead of solving the chains at every start) is
    every chain solved again here; the factors up to EXACT_MAX are those values."""
    solved = [saturation_throughput(n) for n in range(1, EXACT_MAX + 1)]
    assert len(SATURATION_THROUGHPUT) == EXACT_MAX
    assert SATURATION_THROUGHPUT == pytest.approx(solved, rel=1e-12, abs=1e-12)
    assert hol_factors(EXACT_MAX).tolist() == list(SATURATION_THROUGHPUT)


def test_monte_carlo_of_the_same_model_agrees_and_reaches_the_limit() -> None:
    assert monte_carlo_throughput(4, slots=20000, seed=1) == pytest.approx(saturation_throughput(4), abs=0.006)
    assert monte_carlo_throughput(400, slots=4000, seed=2) == pytest.approx(2 - math.sqrt(2), abs=0.004)
    assert LIMIT == pytest.approx(0.5858, abs=1e-4)


def test_factors_decrease_to_the_limit_and_the_tail_rule_holds() -> None:
    f = hol_factors(256)
    assert f[0] == pytest.approx(1.0) and f[1] == pytest.approx(0.75)
    assert np.all(np.diff(f) < 0) and f[-1] > LIMIT and f[-1] - LIMIT < 0.002
    scaled = [k * (saturation_throughput(k) - LIMIT) for k in range(8, EXACT_MAX + 1)]
    assert max(scaled) / min(scaled) < 1.03  # N (rho(N) - limit) nearly constant: the 1/N tail of hol_factors
    with pytest.raises(ValueError):
        saturation_throughput(EXACT_MAX + 1)


def test_contention_section_is_validated() -> None:
    assert read_contention({}, "f.toml") == ContentionSpec()
    with pytest.raises(InputError, match=r"contention\.law: unknown law 'hol'"):
        read_contention({"law": "hol"}, "f.toml")
    with pytest.raises(InputError, match=r"contention\.memory_path: must be true or false"):
        read_contention({"memory_path": "yes"}, "f.toml")
    with pytest.raises(InputError, match=r"contention\.lw: unknown key"):
        read_contention({"lw": "none"}, "f.toml")


def test_port_factors_by_hand() -> None:
    # r = P / B = 2.0 / 1.5 = 4/3: min(1, 4/3 f(n)); f(2) = 3/4 gives exactly 1, f(4) = 0.655242 gives 0.873656
    g = port_factors(8, 4 / 3)
    assert g[0] == 1.0 and g[1] == pytest.approx(1.0, abs=1e-12)
    assert g[3] == pytest.approx(4 / 3 * 0.655242, abs=1e-6)
    assert g[7] == pytest.approx(4 / 3 * 0.6184, abs=1e-4)  # Karol et al.'s table, N = 8
    assert np.array_equal(port_factors(8), hol_factors(8))  # r = 1: the law itself
    with pytest.raises(ValueError, match="ratio"):
        port_factors(8, 0.9)


def test_port_bandwidth_is_a_sourced_figure() -> None:
    m = load_platform("dawning_5000a")
    assert m.contention.port_bandwidth == 2.0e9
    f = m.figure("contention.port_bandwidth")
    assert f.source and "8b/10b" in f.source
    data = dict(tomllib.loads(Path(m.file).read_text()))
    data["contention"] = {**data["contention"], "port_bandwidth": {"value": -1.0, "source": "x"}}
    with pytest.raises(InputError, match=r"contention\.port_bandwidth"):
        from_mapping(data, "x.toml")
    with pytest.raises(InputError, match=r"contention\.port_bandwidth"):
        read_contention({"port_bandwidth": {"value": 2e9, "source": "x"}}, "f.toml")  # no figure reader


def test_machine_model_decides_every_setting() -> None:
    assert SETTING in PLUGIN_SETTINGS
    m = load_platform("dawning_5000a")
    rp = render_platform(m, 16, ranks_per_node=8)
    cfg = machine_settings(m, rp)
    assert cfg["smpi/ois"] == send_order_config(m)["smpi/ois"] != rp.smpi_config["smpi/ois"]
    # port 2.0 GB/s over MPI-level 1.5 GB/s: r = 4/3; f(2) = 0.75 -> 1, f(3) = 0.682540 -> 0.910053 (by hand)
    assert cfg[SETTING].startswith("hol:*_DOWN|*-uplink_UP:inputs:1.000000,1.000000,0.910053,")
    assert m.memory_bandwidth is not None
    assert cfg[SETTING].endswith(f";mem:*_loopback:{m.memory_bandwidth / calibrate(m).bw_factor[-1]!r}:1.05")
    off = machine_settings(m, rp, contention="none", solver_precision=1e-3, timing_precision=1e-7)
    assert SETTING not in off and off["maxmin/precision"] == "0.001" and off["surf/precision"] == "1e-07"
    assert {k: v for k, v in cfg.items() if k not in (SETTING, "maxmin/precision", "surf/precision")} == \
        {k: v for k, v in off.items() if k not in (SETTING, "maxmin/precision", "surf/precision")}


def test_sunway_rules_name_the_d_mod_k_up_ports() -> None:
    m = load_platform("sunway_taihulight")
    rp = render_platform(m, 600, ranks_per_node=1)  # 3 supernodes of 256 nodes: SimGrid ids 1533-1535
    rules = machine_settings(m, rp)[SETTING]
    assert "|link_from_1533_*_UP|link_from_1534_*_UP|link_from_1535_*_UP:inputs:" in rules
    assert "mem:" not in rules and send_order_config(m) == {}


def test_no_section_means_no_law() -> None:
    m = load_platform("wu_cluster")
    assert m.contention == ContentionSpec()
    assert SETTING not in machine_settings(m, render_platform(m, 4))
    assert plugin_rules(ContentionSpec(memory_path=True), None, 1.0) == ""


def test_rules_count_input_ports_unless_a_proxy_is_asked() -> None:
    hol = ContentionSpec(law="karol_hol")
    assert plugin_rules(hol, None, 1.0).startswith("hol:*_DOWN|*-uplink_UP:inputs:1.000000,0.750000,")
    assert plugin_rules(hol, None, 1.0, per_input=8).startswith("hol:*_DOWN|*-uplink_UP:8:1.000000,0.750000,")
    with pytest.raises(ValueError, match="per_input"):
        plugin_rules(hol, None, 1.0, per_input=0)


def test_platform_file_rejects_a_bad_contention_table() -> None:
    data = dict(tomllib.loads(Path(load_platform("dawning_5000a").file).read_text()))
    data["contention"] = {"law": "fluid"}
    with pytest.raises(InputError, match=r"contention\.law"):
        from_mapping(data, "x.toml")

