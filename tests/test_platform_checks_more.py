"""Platform checks found by robustness testing: contention settings that cannot act, cores, ranges, [mpi] overheads,
calibration on small platforms (platforms/model.py, contention.py, figures.py, smpi_factors.py, calibration.py).

Every case is a one-line :class:`InputError` when the file is loaded (before anything is rendered or run), naming
the file, the key and a fix; the expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.platforms import load_platform
from waitlab.platforms.calibration import calibration_table, unmeasurable
from waitlab.platforms.figures import CLOCK_END_SECONDS, LARGEST_MESSAGE, MAX_CORES, MIN_BANDWIDTH
from waitlab.platforms.machine import machine_settings
from waitlab.platforms.render import render_platform
from waitlab.platforms.smpi_factors import calibrate

#: The tester's base platform: 8 nodes of 2 cores on one crossbar.
BASE = """name = "tiny"
[machine]
max_nodes = { value = 8, source = "x" }
[node]
cores = { value = 2, source = "x" }
core_speed = { value = 1.0e9, source = "x" }
memory = { value = 1073741824, source = "x" }
[intra_node]
bandwidth = { value = 1.0e9, source = "x" }
latency = { value = 1.0e-6, source = "x" }
[inter_node]
bandwidth = { value = 1.0e9, source = "x" }
latency = { value = 1.0e-5, source = "x" }
[topology]
kind = "crossbar"
[disk]
bandwidth = { value = 1.0e8, source = "x" }
latency = { value = 1.0e-3, source = "x" }
[trace]
buffer_memory = { value = 536870912, source = "x" }
"""

#: o_s + o_r = 2e-7 s; the largest inter-node figure is 4 MiB at 0.9e9 B/s (the MPI-level rate B = 9e8 B/s).
MPI = """[mpi]
eager_threshold = { value = 16384, source = "x" }
send_overhead = { value = SEND, source = "x" }
recv_overhead = { value = 1.0e-7, source = "x" }
inter_node = [
  { size = 8, latency = { value = INTER, source = "x" } },
  { size = 4194304, bandwidth = { value = 0.9e9, source = "x" } },
]
intra_node = [
  { size = 8, latency = { value = INTRA, source = "x" } },
]
"""


def mpi(inter: float = 1.1e-5, intra: float = 1.2e-6, send: float = 1.0e-7) -> str:
    return MPI.replace("SEND", repr(send)).replace("INTER", repr(inter)).replace("INTRA", repr(intra))


def write(tmp_path: Path, *extra: str, edit: tuple[str, str] | None = None, name: str = "p.toml") -> str:
    text = BASE if edit is None else BASE.replace(*edit)
    assert edit is None or text != BASE, edit
    path = tmp_path / name
    path.write_text(text + "\n".join(extra))
    return str(path)


def refused(path: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_platform(path)
    assert info.value.file == path
    assert "\n" not in str(info.value) and info.value.fix
    return info.value


# -- 1. port_bandwidth below the MPI-level rate ----------------------------------------------------------------


def test_a_port_slower_than_the_mpi_rate_is_refused_when_loaded(tmp_path: Path) -> None:
    port = '[contention]\nlaw = "karol_hol"\nport_bandwidth = { value = 5e8, source = "x" }\n'
    err = refused(write(tmp_path, mpi(), port))
    # B = 4194304 B / (4194304 / 0.9e9 s) = 9e8 B/s, above the port's 5e8
    assert err.field == "contention.port_bandwidth.value"
    assert "5e+08 B/s is below the MPI-level rate 9e+08 B/s" in err.problem
    assert "mpi.inter_node[1].bandwidth" in err.problem and "at least 9e+08 B/s" in err.fix
    # at the rate itself r = 1 (no headroom, the law as it is); above it the headroom of Dawning's files
    same = load_platform(write(tmp_path, mpi(), port.replace("5e8", "9e8"), name="same.toml"))
    assert same.contention.port_bandwidth == 9e8
    load_platform(write(tmp_path, mpi(), port.replace("5e8", "2e9"), name="fast.toml"))


@pytest.mark.parametrize("command", ["platforms", "calibrate"])
def test_the_commands_say_one_line_instead_of_a_traceback(tmp_path: Path, command: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, mpi(), '[contention]\nlaw = "karol_hol"\nport_bandwidth = { value = 5e8, source = "x" }\n')
    assert main([command, path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"waitlab: error: {path}: contention.port_bandwidth.value: 5e+08 B/s is below")


# -- 2. contention settings that cannot act ---------------------------------------------------------------------


def test_memory_path_without_the_memory_bandwidth_is_refused(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "[contention]\nmemory_path = true\n"))
    assert err.field == "contention.memory_path" and "intra_node.memory_bandwidth" in err.problem
    ok = write(tmp_path, "[contention]\nmemory_path = true\n", name="ok.toml",
               edit=("[inter_node]", 'memory_bandwidth = { value = 4.0e9, source = "x" }\n[inter_node]'))
    assert load_platform(ok).contention.memory_path


def test_send_order_without_mpi_is_refused(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "[contention]\nsend_order = true\n"))
    assert err.field == "contention.send_order" and "[mpi]" in err.problem
    m = load_platform(write(tmp_path, mpi(), "[contention]\nsend_order = true\n", name="ok.toml"))
    # with [mpi] it acts: smpi/ois gets 1 / 9e8 s per byte (4 MiB at 0.9e9 B/s)
    cfg = machine_settings(m, render_platform(m, 4))
    assert cfg["smpi/ois"] == f"0:1e-07:{(4194304 / 0.9e9) / 4194304!r}"


@pytest.mark.parametrize(("contention", "words"), [
    ('law = "karol_hol"\n', "needs the [mpi] section"),  # without [mpi]: no ratio to act through
    ('law = "none"\n', 'only used by law = "karol_hol"'),
])
def test_a_port_bandwidth_that_cannot_act_is_refused(tmp_path: Path, contention: str, words: str) -> None:
    extra = (mpi(),) if "none" in contention else ()
    path = write(tmp_path, *extra, f'[contention]\n{contention}port_bandwidth = {{ value = 2e9, source = "x" }}\n')
    err = refused(path)
    assert err.field == "contention.port_bandwidth" and words in err.problem


# -- 3. node.cores is a C int in SimGrid --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["cores", "hardware_cores"])
def test_core_counts_stop_at_the_largest_c_int(tmp_path: Path, key: str) -> None:
    line = 'cores = { value = 2, source = "x" }'
    edit = (line, f'cores = {{ value = {2**31}, source = "x" }}') if key == "cores" else \
        (line, f'{line}\nhardware_cores = {{ value = {2**31}, source = "x" }}')
    err = refused(write(tmp_path, edit=edit))
    assert err.field == f"node.{key}.value" and "must be <= 2147483647, got 2147483648" in err.problem
    assert MAX_CORES == 2147483647  # what std::stoi reads: 2^31 - 1
    top = write(tmp_path, edit=(line, 'cores = { value = 2147483647, source = "x" }'), name="top.toml")
    assert load_platform(top).node.cores == 2**31 - 1


# -- 4. figures whose times the int64-nanosecond clock cannot hold -----------------------------------------------


@pytest.mark.parametrize(("old", "new", "field", "words"), [
    ('latency = { value = 1.0e-5', 'latency = { value = 1e10', "inter_node.latency.value", "must be <= 1000 s"),
    ('latency = { value = 1.0e-5', 'latency = { value = 1000.5', "inter_node.latency.value", "must be <= 1000 s"),
    ('latency = { value = 1.0e-6', 'latency = { value = 2e3', "intra_node.latency.value", "must be <= 1000 s"),
    ('latency = { value = 1.0e-3', 'latency = { value = 1e4', "disk.latency.value", "must be <= 1000 s"),
    ('bandwidth = { value = 1.0e9, source = "x" }\nlatency = { value = 1.0e-5',
     'bandwidth = { value = 1e-300, source = "x" }\nlatency = { value = 1.0e-5', "inter_node.bandwidth.value",
     "must be >= 1 B/s"),
    ('bandwidth = { value = 1.0e8', 'bandwidth = { value = 0.5', "disk.bandwidth.value", "must be >= 1 B/s"),
    ('core_speed = { value = 1.0e9', 'core_speed = { value = 1e-300', "node.core_speed.value",
     "must be >= 1 flop/s"),
    ('core_speed = { value = 1.0e9', 'core_speed = { value = 0.99', "node.core_speed.value", "must be >= 1 flop/s"),
])
def test_figures_outside_the_representable_ranges_are_refused(tmp_path: Path, old: str, new: str, field: str,
                                                               words: str) -> None:
    err = refused(write(tmp_path, edit=(old, new)))
    assert err.field == field and err.problem.startswith(words), err
    assert err.fix == f"give a value {words.removeprefix('must be ')}"


def test_the_range_ends_themselves_load(tmp_path: Path) -> None:
    path = write(tmp_path, edit=('latency = { value = 1.0e-5', 'latency = { value = 1000.0'))
    assert load_platform(path).inter_node.latency == 1000.0
    path = write(tmp_path, name="slow.toml", edit=('core_speed = { value = 1.0e9', 'core_speed = { value = 1.0'))
    assert load_platform(path).node.core_speed == 1.0
    path = write(tmp_path, name="bw.toml", edit=('bandwidth = { value = 1.0e8', 'bandwidth = { value = 1.0'))
    assert load_platform(path).disk.bandwidth == 1.0


def test_the_bandwidth_floor_keeps_the_largest_message_on_the_clock() -> None:
    # 2^63 ns = 9.223e9 s; the replay's largest message, 2^31 - 1 B, takes 2.147e9 s at 1 B/s, and at 0.23 B/s it
    # would take 9.34e9 s: past the clock
    assert CLOCK_END_SECONDS == pytest.approx(9.223372e9, rel=1e-6)
    assert LARGEST_MESSAGE / MIN_BANDWIDTH == pytest.approx(2.147483647e9)
    assert LARGEST_MESSAGE / MIN_BANDWIDTH < CLOCK_END_SECONDS
    assert LARGEST_MESSAGE / 0.23 > CLOCK_END_SECONDS


@pytest.mark.parametrize(("figure", "field", "words"), [
    ('{ size = 4194304, bandwidth = { value = 0.5, source = "x" } }', "mpi.inter_node[1].bandwidth.value",
     "must be >= 1 B/s"),
    ('{ size = 4194304, latency = { value = 5e3, source = "x" } }', "mpi.inter_node[1].latency.value",
     "must be <= 1000 s"),
])
def test_mpi_figures_have_the_same_ranges(tmp_path: Path, figure: str, field: str, words: str) -> None:
    text = mpi().replace('{ size = 4194304, bandwidth = { value = 0.9e9, source = "x" } }', figure)
    err = refused(write(tmp_path, text))
    assert err.field == field and err.problem.startswith(words)


# -- 5. [mpi] latency figures below the overheads -----------------------------------------------------------------


def test_a_latency_figure_below_the_overheads_is_refused(tmp_path: Path) -> None:
    err = refused(write(tmp_path, mpi(inter=1e-9)))
    # 1e-9 s against o_s + o_r = 1e-7 + 1e-7 = 2e-7 s
    assert err.field == "mpi.inter_node[0].latency.value"
    assert "1e-09 s one way" in err.problem and "= 2e-07 s" in err.problem
    assert err.fix.startswith("give mpi.inter_node[0].latency more than 2e-07 s")
    err = refused(write(tmp_path, mpi(intra=1.5e-7), name="intra.toml"))
    assert err.field == "mpi.intra_node[0].latency.value" and "more than 2e-07 s" in err.fix


def test_overheads_above_every_figure_are_named(tmp_path: Path) -> None:
    err = refused(write(tmp_path, mpi(send=10.0)))
    # o_s + o_r = 10.0000001 s; the shortest eager figure is the intra-node 1.2e-6 s
    assert err.field == "mpi.send_overhead.value"
    assert "o_s + o_r = 10 s" in err.problem and "mpi.intra_node[0].latency, 1.2e-06 s" in err.problem
    assert "below 1.2e-06 s" in err.fix


def test_a_line_that_leaves_no_latency_after_the_overheads_is_refused(tmp_path: Path) -> None:
    # 2.1e-7 s is above o = 2e-7 s, but the line through (8 B, t0) and (4194304 B, t1 = 4194304 / 0.9e9 s) has
    # slope b = (t1 - t0) / 4194296 and lat_part = t0 - 24 b - o < 0.  lat_part > 0 needs, with w = 24 / 4194296:
    # t0 > (o + t1 w) / (1 + w) = (2e-7 + 4.66034e-3 * 5.72205e-6) / (1 + 5.72e-6) = 2.26666e-7 s
    err = refused(write(tmp_path, mpi(inter=2.1e-7)))
    assert err.field == "mpi.inter_node[0].latency.value" and "latency factor would be 0" in err.problem
    assert err.fix.startswith("give mpi.inter_node[0].latency more than 2.267e-07 s")
    # the wire's latency at most the MPI latency measured over it (inter_node.latency is 1e-5 s in BASE)
    wire = ('latency = { value = 1.0e-5', 'latency = { value = 2.0e-7')
    m = load_platform(write(tmp_path, mpi(inter=2.27e-7), name="ok.toml", edit=wire))
    c = calibrate(m)
    assert c.lat_factor[0] > 0 and c.notes == ()


def test_a_hand_made_model_below_the_overheads_does_not_divide_by_zero(tmp_path: Path) -> None:
    # calibrate() is also called on models built in code: a zero latency factor is noted, never divided by
    m = load_platform(write(tmp_path, mpi()))
    assert m.mpi is not None
    low = dataclasses.replace(m, mpi=dataclasses.replace(m.mpi, send_overhead=10.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "divide by zero" RuntimeWarning fails the test
        c = calibrate(low)
    assert c.lat_factor[0] == 0.0 and c.intra_node == m.intra_node  # the file's link, as the note says
    assert any("clamped at 0" in n for n in c.notes) and any("cannot be met" in n for n in c.notes)


# -- 6. calibrating a platform too small for a pingpong ----------------------------------------------------------


ONE_NODE = ('max_nodes = { value = 8', 'max_nodes = { value = 1')


def test_what_a_small_platform_cannot_measure(tmp_path: Path) -> None:
    two_cores = load_platform(write(tmp_path, mpi(), edit=ONE_NODE))
    assert list(unmeasurable(two_cores)) == ["inter_node"]
    assert unmeasurable(two_cores)["inter_node"][0] == "machine.max_nodes"
    assert unmeasurable(load_platform(write(tmp_path, mpi(), name="b.toml"))) == {}


def test_calibrating_one_node_of_one_core_names_the_platform_keys(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace(*ONE_NODE).replace('cores = { value = 2', 'cores = { value = 1') + mpi()
    path = tmp_path / "one.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        calibration_table(str(path))
    err = info.value
    assert err.field == "machine.max_nodes" and "no [mpi] figure can be measured" in err.problem
    assert "node.cores >= 2" in err.fix and "machine.max_nodes >= 2" in err.fix
    assert main(["calibrate", str(path)]) == 2
    out = capsys.readouterr().err
    assert out.count("\n") == 1 and "2 ranks at 1 per node" not in out


@pytest.mark.simgrid
def test_calibrating_one_node_measures_the_intra_node_figures(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, mpi(), edit=ONE_NODE)
    assert main(["calibrate", path]) == 0
    out = capsys.readouterr().out
    assert "note: mpi.inter_node: not measured: a pingpong between two nodes needs 2 nodes" in out
    assert "(machine.max_nodes)" in out
    assert main(["calibrate", path, "-q"]) == 0 and capsys.readouterr().out == ""
    table = calibration_table(path)
    assert table["path"].tolist() == ["intra_node"] and table["size"].tolist() == [8]
    assert abs(table["rel_error"].iloc[0]) < 0.05  # the 1.2 us figure is met on the node
