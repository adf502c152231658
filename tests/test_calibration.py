"""Calibration of SMPI against the platforms' MPI-level figures (platforms/smpi_factors.py, calibration.py)."""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest

from waitlab.errors import InputError
from waitlab.models.columns import values
from waitlab.models.ops import OpBuilder
from waitlab.platforms import calibrate, list_platforms, load_platform, render_platform
from waitlab.platforms.calibration import calibration_table, pingpong_time
from waitlab.platforms.model import PlatformModel, from_mapping
from waitlab.simulator.replay import replay_ops

DATA = Path(__file__).resolve().parents[1] / "platforms" / "data"
CALIBRATION_DOC = Path(__file__).resolve().parents[1] / "docs" / "calibration.md"
needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")


def test_every_builtin_platform_states_mpi_figures_with_provenance() -> None:
    for name in list_platforms():
        m = load_platform(name)
        assert m.mpi is not None, name
        assert m.mpi.inter_node, name
        for p in (*m.mpi.inter_node, *m.mpi.intra_node):
            f = m.figure(p.key)
            assert f.source or (f.assumed and f.reason), (name, p.key)


def _with_copy(bandwidth: float) -> PlatformModel:
    """Dawning with an eager copy bandwidth (docs/calibration.md: tried, not in the file)."""
    data = tomllib.loads((DATA / "dawning_5000a.toml").read_text())
    data["mpi"]["copy_bandwidth"] = {"value": bandwidth, "assumed": True, "reason": "test"}
    return from_mapping(data, "x.toml")


def test_dawning_factors_by_hand() -> None:
    # Dawning: 1.6 us at 8 B, 1.5 GB/s at 1 MiB, o_s = o_r = 0.25 us below 12288 B, links 1.6 us / 2.5 GB/s.
    c = calibrate(load_platform("dawning_5000a"))
    b = (1048576 / 1.5e9 - 1.6e-6) / (1048576 - 8)  # s per byte of the line through the two figures
    a = 1.6e-6 - 8 * b
    assert c.breakpoints == (0, 12287)
    assert c.bw_factor[0] == pytest.approx(1 / (b * 2.5e9), rel=1e-12)
    assert c.lat_factor[0] == pytest.approx((a - 0.5e-6 - 16 * b) / 1.6e-6, rel=1e-12)  # eager: overheads
    assert c.lat_factor[1] == pytest.approx((a - 16 * b) / 1.6e-6, rel=1e-12)  # rendezvous: no overheads
    cfg = render_platform(load_platform("dawning_5000a"), 16).smpi_config
    assert cfg == c.smpi_config
    assert cfg["smpi/send-is-detached-thresh"] == "12288" and cfg["smpi/os"] == "0:2.5e-07:0"
    assert cfg["smpi/lat-factor"].startswith("0:") and ";12303:" in cfg["smpi/lat-factor"]  # 12287 + envelope


def test_dawning_factors_with_an_eager_copy_cost_by_hand() -> None:
    # the same figures, and an eager message copied twice (sender, receiver) at 5.35 GB/s: c = 1 / 5.35e9 s/B each
    m = _with_copy(5.35e9)
    c = calibrate(m)
    b = (1048576 / 1.5e9 - 1.6e-6) / (1048576 - 8)  # s per byte of the line through the two figures
    a = 1.6e-6 - 8 * b
    copy = 1 / 5.35e9
    assert c.breakpoints == (0, 12287)
    assert c.bw_factor[0] == pytest.approx(1 / ((b - 2 * copy) * 2.5e9), rel=1e-12)  # eager: copies take 2c
    assert c.bw_factor[1] == pytest.approx(1 / (b * 2.5e9), rel=1e-12)  # rendezvous: zero-copy
    assert c.lat_factor[0] == pytest.approx((a - 0.5e-6 - 16 * (b - 2 * copy)) / 1.6e-6, rel=1e-12)
    assert c.lat_factor[1] == pytest.approx((a - 16 * b) / 1.6e-6, rel=1e-12)  # rendezvous: no overheads
    cfg = render_platform(m, 16).smpi_config
    assert cfg == c.smpi_config
    assert cfg["smpi/send-is-detached-thresh"] == "12288"
    # offset + c * S for sizes up to 12287 B, the offset alone from 12288 B on (sections cover sizes above t)
    assert cfg["smpi/os"] == f"0:2.5e-07:{copy!r};12287:2.5e-07:0" == cfg["smpi/or"] == cfg["smpi/ois"]
    assert cfg["smpi/lat-factor"].startswith("0:") and ";12303:" in cfg["smpi/lat-factor"]  # 12287 + envelope


def test_eager_copy_cost_is_charged_per_byte_and_absorbed_by_the_factors() -> None:
    # Without copy_bandwidth the same figures give the old constant overheads; with it, T(S) on the line is
    # o_s + o_r + 2 c S + lat_f L + (S + 16) / (bw_f B): evaluate by hand at 4 KiB for both, same time.
    plain = calibrate(load_platform("dawning_5000a"))
    assert plain.smpi_config["smpi/os"] == "0:2.5e-07:0"
    copy = calibrate(_with_copy(5.35e9))
    size = 4096

    def t(cal: object, per_byte: float) -> float:
        lat_f, bw_f = cal.lat_factor[0], cal.bw_factor[0]  # type: ignore[attr-defined]
        return 0.5e-6 + 2 * per_byte * size + lat_f * 1.6e-6 + (size + 16) / (bw_f * 2.5e9)

    line = 1.6e-6 + (size - 8) * (1048576 / 1.5e9 - 1.6e-6) / (1048576 - 8)
    assert t(plain, 0.0) == pytest.approx(line, rel=1e-12)
    assert t(copy, 1 / 5.35e9) == pytest.approx(line, rel=1e-12)


def test_copy_bandwidth_must_be_positive() -> None:
    with pytest.raises(InputError) as err:
        _with_copy(0.0)
    assert "mpi.copy_bandwidth" in str(err.value)


def test_platform_without_mpi_section_switches_factors_off() -> None:
    data = tomllib.loads((DATA / "dawning_5000a.toml").read_text())
    del data["mpi"]
    del data["contention"]  # its send order and port rate act through [mpi]: refused without it
    m = from_mapping(data, "x.toml")
    assert m.mpi is None
    assert render_platform(m, 4).smpi_config == {"smpi/lat-factor": "0:1", "smpi/bw-factor": "0:1"}


def test_smpi_factors_false_sets_unit_factors_and_keeps_overheads() -> None:
    """Okita et al.'s Myrinet file: its bandwidth is MPI-level already, so SMPI's factors are 1."""
    c = calibrate(load_platform("okita_myrinet"))
    assert (c.smpi_config["smpi/lat-factor"], c.smpi_config["smpi/bw-factor"]) == ("0:1.0", "0:1.0")
    assert c.lat_factor == (1.0,) and c.bw_factor == (1.0,)
    assert c.smpi_config["smpi/os"] == "0:2e-06:0"  # the file's 2 us send overhead stays
    assert c.smpi_config["smpi/send-is-detached-thresh"] == "16384"
    assert calibrate(load_platform("dawning_5000a")).bw_factor != (1.0,)  # default: fitted


def test_smpi_factors_must_be_a_boolean() -> None:
    data = tomllib.loads((DATA / "okita_myrinet.toml").read_text())
    data["mpi"]["smpi_factors"] = "off"
    with pytest.raises(InputError) as exc:
        from_mapping(data, "bad.toml")
    assert "mpi.smpi_factors" in str(exc.value) and "true or false" in str(exc.value)


@pytest.mark.parametrize(("edit", "field", "words"), [
    (lambda p: p.update(bandwidth={"value": 1e9, "source": "x"}), "mpi.inter_node[0]", "exactly one of"),
    (lambda p: p.update(size=0), "mpi.inter_node[0].size", "whole number of bytes"),
    (lambda p: p["latency"].pop("source"), "mpi.inter_node[0].latency", "neither a source"),
    (lambda p: p.update(colour=1), "mpi.inter_node[0].colour", "unknown key"),
])
def test_bad_mpi_points_are_named(edit, field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    data = tomllib.loads((DATA / "dawning_5000a.toml").read_text())
    edit(data["mpi"]["inter_node"][0])
    with pytest.raises(InputError) as exc:
        from_mapping(data, "bad.toml")
    text = str(exc.value)
    assert field in text and words in text, text


def _doc_rows(name: str) -> list[list[str]]:
    """The rows of docs/calibration.md's calibration table for platform ``name`` (cells, with ASCII minus signs)."""
    rows = []
    for line in CALIBRATION_DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().replace("\u2212", "-") for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0] == name:
            rows.append(cells)
    return rows


@pytest.mark.parametrize("name", list_platforms())
def test_calibration_doc_table_lists_every_figure_of_the_file(name: str) -> None:
    # one row per [mpi] figure, in the file's order (inter-node, then intra-node, by size), with the figure as the
    # file states it (us or GB/s, * when assumed) and the one-way time it implies
    model = load_platform(name)
    assert model.mpi is not None
    want = []
    for path in ("inter_node", "intra_node"):
        for p in model.mpi.points(path):
            shown = f"{p.value * 1e6:.4g} us" if p.kind == "latency" else f"{p.value / 1e9:.4g} GB/s"
            one_way = p.value if p.kind == "latency" else p.size / p.value
            want.append([name, path, str(p.size), shown + ("*" if model.figure(p.key).assumed else ""),
                         f"{one_way * 1e6:.4g}"])
    assert [row[:5] for row in _doc_rows(name)] == want


def _check_doc_rows(name: str, table) -> None:  # type: ignore[no-untyped-def]
    """docs/calibration.md's rows of ``name`` show ``table``'s simulated and default times (4 digits) and errors."""
    rows = _doc_rows(name)
    assert len(rows) == len(table), f"docs/calibration.md has {len(rows)} rows of {name}, the tool {len(table)}"
    for doc, row in zip(rows, table.itertuples(), strict=True):
        where = f"docs/calibration.md, {name} {row.path} {row.size} B"
        assert doc[5] == f"{row.simulated_s * 1e6:.4g}", where
        assert float(doc[6].rstrip("%")) == pytest.approx(row.rel_error * 100, abs=0.006), where
        default, percent = doc[7].rstrip("%)").split(" (")
        assert default == f"{row.default_s * 1e6:.4g}", where
        assert float(percent) == pytest.approx(row.default_rel_error * 100, abs=0.51), where


@needs_simgrid
@pytest.mark.simgrid
@pytest.mark.parametrize("name", list_platforms())
def test_pingpong_meets_every_figure_within_5_percent(name: str) -> None:
    table = calibration_table(name)
    model = load_platform(name)
    assert model.mpi is not None
    assert len(table) == len(model.mpi.inter_node) + len(model.mpi.intra_node)
    _check_doc_rows(name, table)  # the page's table is this one, so it cannot drift
    if not model.mpi.smpi_factors:  # factors 1: SMPI's own formula on the file's link, by hand
        mpi, link = model.mpi, model.inter_node
        for row in table.itertuples():
            o = mpi.send_overhead + mpi.recv_overhead if row.size < mpi.eager_threshold else 0.0
            assert row.simulated_s == pytest.approx(o + link.latency + (row.size + 16) / link.bandwidth, rel=1e-3)
        return
    assert (table["rel_error"].abs() < 0.05).all(), table[["path", "size", "source_s", "simulated_s", "rel_error"]]
    # the problem this fixes: SMPI's default factors on top of the MPI figures double small-message latency
    small = table[(table["path"] == "inter_node")].iloc[0]
    assert small["default_rel_error"] > 0.9


@needs_simgrid
@pytest.mark.simgrid
@pytest.mark.parametrize("size", [4096, 65536])
def test_calibrated_curve_between_figures_is_the_line_through_them(size: int) -> None:
    # between the two Dawning figures the one-way time follows T = a + b S (a hand-computed check): at 4 KiB
    # (eager: constant overheads and the two per-byte copies included) and at 64 KiB (rendezvous, none)
    m = load_platform("dawning_5000a")
    b = (1048576 / 1.5e9 - 1.6e-6) / (1048576 - 8)
    a = 1.6e-6 - 8 * b
    assert pingpong_time(m, size) == pytest.approx(a + b * size, rel=1e-9)


def _ring_of_messages(rp, n_msgs: int, size: int) -> float:  # type: ignore[no-untyped-def]
    """Every rank of ``rp`` sends ``n_msgs`` concurrent ``size``-byte messages to the next rank; makespan."""



    n = rp.n_ranks
    ranks = np.arange(n, dtype=np.int32)
    b = OpBuilder(n_ranks=n)
    for k in range(n_msgs):
        b.add("irecv", ranks, value=size, peer=(ranks - 1) % n, tag=k)
    for k in range(n_msgs):
        b.add("isend", ranks, value=size, peer=(ranks + 1) % n, tag=k)
    b.add("waitall", ranks)
    with tempfile.TemporaryDirectory() as tmp:
        xml, hostfile = rp.write(Path(tmp))
        rep = replay_ops(b.build(), xml, hostfile, rp.core_speed, config=rp.smpi_config, timeout=60)
    return float(values(rep.events, "exit").max())


@needs_simgrid
@pytest.mark.simgrid
def test_split_cores_share_the_node_memory_bandwidth() -> None:
    m = load_platform("sunway_taihulight")
    assert m.memory_bandwidth == 2.0e10
    size = 4 * 2**20
    split = _ring_of_messages(render_platform(m, 4, split_cores=True), 8, size)  # 32 messages in one node
    assert 32 * size / split <= m.memory_bandwidth * 1.0001  # aggregate never above the node's memory
    assert 32 * size / split > 0.9 * m.memory_bandwidth  # and the bus is the bottleneck (core links: 4 x 9.7 GB/s)
    flat = _ring_of_messages(render_platform(m, 4), 8, size)  # default rendering: FATPIPE loopback (known gap)
    assert 32 * size / flat > 2 * m.memory_bandwidth


@needs_simgrid
@pytest.mark.simgrid
def test_smpi_charges_the_eager_copy_per_byte_as_calibrated() -> None:
    # with a copy cost, SMPI's os/or sleeps (offset + c S) plus the re-derived factors still give the line at 4 KiB
    # (eager) and at 8 B; the copy cost alone is 2 x 4096 / 5.35e9 = 1.53 us of the 4.27 us
    m = _with_copy(5.35e9)
    b = (1048576 / 1.5e9 - 1.6e-6) / (1048576 - 8)
    for size in (8, 4096):
        assert pingpong_time(m, size) == pytest.approx(1.6e-6 + b * (size - 8), rel=1e-9)
