"""Tests of waitlab.platforms: the data files, their validation, and the documentation's table of them.

The rendering into SimGrid's XML and the tiny real SMPI replays on it are in ``tests/test_platforms_render.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping
from waitlab.platforms import (
    PLATFORM_ALIASES,
    PlatformModel,
    describe_platform,
    list_platforms,
    load_platform,
    render_platform,
)
from waitlab.platforms.describe import format_figure

BUILTIN = ["dawning_5000a", "deepcomp_7000", "okita_myrinet", "sunway_taihulight", "wu_cluster"]


def write_platform(tmp_path: Path, edit: dict[str, str], name: str = "dawning_5000a") -> Path:
    """Copy a built-in TOML to ``tmp_path`` with regex replacements applied."""
    text = Path(load_platform(name).file).read_text()
    for pattern, repl in edit.items():
        text, n = re.subn(pattern, repl, text, count=1, flags=re.M)
        assert n == 1, pattern
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------------
# data files


def test_list_platforms_is_the_five_builtins() -> None:
    assert list_platforms() == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_platform_loads_with_provenance(name: str) -> None:
    m = load_platform(name)
    assert isinstance(m, PlatformModel)
    assert m.name == name and m.description
    assert m.max_nodes >= 16 and m.node.cores >= 1 and m.node.core_speed > 0
    assert 0 < m.trace_buffer_memory <= m.node.memory
    keys = {f.key for f in m.figures}
    for key in ("machine.max_nodes", "node.cores", "node.core_speed", "node.memory", "intra_node.bandwidth",
                "intra_node.latency", "inter_node.bandwidth", "inter_node.latency", "disk.bandwidth",
                "disk.latency", "trace.buffer_memory"):
        assert key in keys
    for f in m.figures:
        assert (f.assumed and f.reason and not f.source) or (not f.assumed and f.source and not f.reason), f
    text = describe_platform(m)
    assert text.startswith(f"{name}: ") and "ASSUMED" in text
    assert "\n" not in describe_platform(m, short=True)


def test_known_figures() -> None:
    d = load_platform("dawning_5000a")
    assert (d.max_nodes, d.node.cores, d.node.core_speed, d.node.memory) == (1920, 16, 7.6e9, 64 * 2**30)
    assert d.inter_node == type(d.inter_node)(2.5e9, 1.6e-6)
    assert not d.figure("inter_node.latency").assumed and "1.6 us" in d.figure("inter_node.latency").source
    assert d.node.speed == pytest.approx(121.6e9)
    c = load_platform("deepcomp_7000")
    assert (c.max_nodes, c.node.cores, c.node.speed) == (1240, 8, 96e9)
    assert c.figure("inter_node.bandwidth").assumed
    s = load_platform("sunway_taihulight")
    assert (s.max_nodes, s.node.cores, s.node.hardware_cores) == (40960, 4, 260)
    assert s.node.speed == pytest.approx(3.06e12)
    assert (s.topology.kind, s.topology.leaf_size, s.topology.taper) == ("fat_tree", 256, 4.7)
    assert s.inter_node.bandwidth == 56e9 / 8
    z = load_platform("wu_cluster")
    assert (z.max_nodes, z.node.cores, z.node.memory) == (1050, 32, 64 * 2**30)
    assert z.figure("node.core_speed").assumed
    m = load_platform("okita_myrinet")
    assert (m.max_nodes, m.node.cores, m.node.memory, m.topology.kind) == (16, 1, 2 * 2**30, "crossbar")
    assert m.trace_buffer_memory == 1920 * 2**20 and not m.figure("trace.buffer_memory").assumed
    # table 1: S = 39.06 s for 15,360 round trips of 128 KiB messages
    assert m.inter_node.bandwidth == pytest.approx(131072 * 30720 / 39.06, rel=1e-3)


def test_load_by_path_and_name_default(tmp_path: Path) -> None:
    path = write_platform(tmp_path, {r'^name = "dawning_5000a"\n': ""})
    m = load_platform(str(path))
    assert m.name == "custom" and m.file == str(path)
    assert m.node == load_platform("dawning_5000a").node
    assert load_platform(path).name == "custom"


# ------------------------------------------------------------------------------------------------
# validation errors


def test_unknown_platform_lists_the_available_ones() -> None:
    with pytest.raises(InputError) as info:
        load_platform("tianhe_2")
    msg = str(info.value)
    assert "unknown platform 'tianhe_2'" in msg
    for name in BUILTIN:
        assert name in msg


def test_missing_file() -> None:
    with pytest.raises(InputError, match=r"nope\.toml: file: platform file does not exist"):
        load_platform("nope.toml")


def test_a_folder_given_as_platform_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"file: platform file is a folder"):
        load_platform(tmp_path)


def test_negative_speed(tmp_path: Path) -> None:
    path = write_platform(tmp_path, {r"core_speed = \{ value = 7.6e9": "core_speed = { value = -7.6e9"})
    with pytest.raises(InputError) as info:
        load_platform(str(path))
    assert str(info.value).startswith(f"{path}: node.core_speed.value: must be > 0, got -7600000000.0")


def test_missing_key(tmp_path: Path) -> None:
    path = write_platform(tmp_path, {r"^latency = \{ value = 1.6e-6.*\n": ""})
    with pytest.raises(InputError) as info:
        load_platform(str(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}: inter_node.latency: is missing")
    assert "under [inter_node]" in msg


def test_missing_section(tmp_path: Path) -> None:
    path = write_platform(tmp_path, {r"^\[disk\]\n.*\n.*\n": ""})
    with pytest.raises(InputError, match=r"disk: section is missing \(fix: add \[disk\] with keys: bandwidth, latency"):
        load_platform(str(path))


def test_unsourced_and_malformed_figures(tmp_path: Path) -> None:
    cases = {
        r'memory = \{ value = 68719476736, source = "[^"]*" \}': ("memory = 68719476736",
                                                                 "node.memory: must be a table with value and source"),
        r', source = "Rao et al. §4.1 table 1: 1920 nodes"': ("",
                                                              "machine.max_nodes: has neither a source nor assumed"),
        r"cores = \{ value = 16,": ("cores = { value = 16.5,", "node.cores.value: must be a whole number, got 16.5"),
        r"^\[node\]\n": ('[node]\nspeed = { value = 1, source = "x" }\n',
                         "node.speed: unknown key 'speed' (did you mean 'core_speed'?) "
                         "(fix: rename speed to core_speed)"),
        r'kind = "fat_tree"': ('kind = "torus"', "topology.kind: unknown topology 'torus'"),
        r'^kind = "fat_tree"\n': ('kind = "fat_tree"\nrouting = "ecmp"\n',
                                  "topology.routing: unknown routing 'ecmp' (fix: use one of: 'balanced', 'd_mod_k')"),
        r"latency = \{ value = 1.6e-6,": ("latency = { value = -1.0,", "inter_node.latency.value: must be >= 0"),
        r'buffer_memory = \{ value = 34359738368': ("buffer_memory = { value = 99999999999999",
                                                    "trace.buffer_memory.value: 99999999999999 bytes is more than"),
        r"^description": ("descripton = 'x'\ndescription", "descripton: unknown key"),
        r"taper = \{ value = 1.0, assumed = true, reason = \"[^\"]*\"": (
            'taper = { value = 1.0, assumed = true, reason = ""', "topology.taper.reason: an assumed figure needs"),
    }
    for i, (pattern, (repl, expected)) in enumerate(cases.items()):
        sub = tmp_path / str(i)
        sub.mkdir()
        path = write_platform(sub, {pattern: repl})
        with pytest.raises(InputError) as info:
            load_platform(str(path))
        assert expected in str(info.value), (pattern, str(info.value))


def test_crossbar_rejects_fat_tree_keys(tmp_path: Path) -> None:
    path = write_platform(tmp_path, {r"^\[topology\]\n": "[topology]\nleaf_size = { value = 4, source = \"x\" }\n"},
                          name="okita_myrinet")
    with pytest.raises(InputError, match=r'topology.leaf_size: only meaningful for kind = "fat_tree"'):
        load_platform(str(path))


def test_bad_toml_syntax(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[node\ncores = 1\n")
    with pytest.raises(InputError, match=r"broken\.toml: \(syntax\): not valid TOML: .*line 1"):
        load_platform(str(path))


def test_render_errors() -> None:
    d = load_platform("dawning_5000a")
    with pytest.raises(InputError) as info:
        render_platform(d, 1921 * 16)
    msg = str(info.value)
    assert msg.startswith("dawning_5000a: nodes: 30736 ranks at 16 per node need 1921 nodes, but dawning_5000a has "
                          "only 1920 (machine.max_nodes)")
    assert "use at most 30720 ranks" in msg
    with pytest.raises(InputError, match=r"nodes: 2000 nodes requested, but dawning_5000a has only 1920"):
        render_platform(d, 8, nodes=2000)
    with pytest.raises(InputError, match=r"ranks_per_node: 17 ranks per node, but a dawning_5000a node has 16"):
        render_platform(d, 34, ranks_per_node=17)
    with pytest.raises(InputError, match=r"n_ranks: 40 ranks do not fit on 2 nodes x 16 ranks per node"):
        render_platform(d, 40, nodes=2)
    with pytest.raises(InputError, match=r"n_ranks: must be >= 1, got 0"):
        render_platform(d, 0)
    with pytest.raises(InputError, match=r"n_ranks: must be a whole number, got 2.0"):
        render_platform(d, 2.0)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"speed_profiles\['node-9'\]: no such host in the platform"):
        render_platform(d, 4, speed_profiles={"node-9": "0 1\n"})
    bad = {"0 1\n0.5\n": "cannot read line '0.5'", "1 1\n0 1\n": "times must not decrease",
           "0 -1\n": "must be finite and >= 0", "PERIODICITY 1\n": "has no 'TIME SCALE' line",
           "0 1\n2 0.5\nPERIODICITY 1\n": "PERIODICITY 1 is shorter than the last time 2"}
    for text, expected in bad.items():
        with pytest.raises(InputError, match=re.escape(expected)):
            render_platform(d, 4, speed_profiles={"node-0": text})


# ------------------------------------------------------------------------------------------------
# documentation stays in step with the data


DOC = Path(__file__).resolve().parents[1] / "docs" / "platforms.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/platforms.md not present")
def test_docs_table_matches_data_files() -> None:

    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    assert rows, "figure table not found"
    models = [load_platform(n) for n in BUILTIN]
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        key = cells[0].strip("`")
        seen.add(key)
        for m, cell in zip(models, cells[1:], strict=True):
            try:
                f = m.figure(key)
            except KeyError:
                assert cell == "—", (m.name, key, cell)
                continue
            assert cell == format_figure(f) + ("*" if f.assumed else ""), (m.name, key, cell)
    assert seen == {f.key for m in models for f in m.figures}


@pytest.mark.skipif(not DOC.exists(), reason="docs/platforms.md not present")
def test_docs_okita_disk_bandwidth_is_the_platform_files_in_its_units() -> None:
    # By hand: Okita et al. §4.1, 3.26e-3 s per MB of R for two record copies, their MB being 2^20 bytes (R counts
    # 128 KB records, 8 to the MB: experiments/reproduce/okita_spilling.py's ROUND_TRIPS_PER_MB).
    copy = 2 * 2**20 / 3.26e-3  # B/s
    assert copy == pytest.approx(643.298e6, rel=1e-6)
    assert load_platform("okita_myrinet").disk.bandwidth == pytest.approx(copy, rel=1e-6)  # the file's figure
    text = " ".join(DOC.read_text().split())
    shown = f"{copy:.3e}".replace("e+0", "e")  # 6.433e8, as the page writes powers of ten
    assert f"2 x 2^20 B / 3.26e-3 s = {shown} B/s ({copy / 1e6:.0f} MB/s, {copy / 2**20:.1f} MiB/s)" in text


@pytest.mark.skipif(not DOC.exists(), reason="docs/platforms.md not present")
def test_docs_example_toml_loads(tmp_path: Path) -> None:
    text = DOC.read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "my_cluster.toml"
    path.write_text(block)
    m = load_platform(str(path))
    assert (m.name, m.max_nodes, m.topology.taper, m.node.hardware_cores) == ("my_cluster", 64, 2.0, 16)
    assert render_platform(m, 64 * 16).n_nodes == 64


def test_deprecated_names_load_the_renamed_files() -> None:
    """The old paper-number names still load, as the files named after the papers, and are not listed twice."""

    assert PLATFORM_ALIASES == {"seed000_cluster": "wu_cluster", "seed003_myrinet": "okita_myrinet"}
    for old, new in PLATFORM_ALIASES.items():
        assert old not in list_platforms() and new in list_platforms()
        assert load_platform(old) == load_platform(new)
        assert load_platform(old).name == new
        sc = {"scenario": {"name": "a", "ranks": 2}, "platform": {"name": old}, "application": {"kind": "pingpong"}}
        new_sc = {**sc, "platform": {"name": new}}
        assert from_mapping(sc).platform.name == new
        assert from_mapping(sc).hash() == from_mapping(new_sc).hash()
