"""Tester t5, finding 6: a user platform file that takes a built-in platform's name (a copy of a built-in data file,
as docs/platforms.md tells users to make one, keeps its ``name`` line) was labelled as the built-in in runs and
sweeps.  It cannot be refused (the documented recipe is "copy a built-in file and edit it"), so its label carries
its path too; the built-in itself, by name or by its own data file, keeps its name."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from waitlab.platforms.describe import describe_platform
from waitlab.platforms.model import load_platform

DATA = Path(str(resources.files("waitlab.platforms") / "data"))


def test_a_copy_that_keeps_a_built_in_name_is_labelled_with_its_path(tmp_path: Path) -> None:
    copy = tmp_path / "dc_2x.toml"
    shutil.copyfile(DATA / "deepcomp_7000.toml", copy)
    assert load_platform(copy).name == f"deepcomp_7000 ({copy})"
    assert load_platform(str(copy)).name == f"deepcomp_7000 ({copy})"
    clash = tmp_path / "clash.toml"  # the tester's file: DeepComp 7000's figures named as Dawning 5000A
    clash.write_text((DATA / "deepcomp_7000.toml").read_text().replace('name = "deepcomp_7000"',
                                                                       'name = "dawning_5000a"'))
    m = load_platform(clash)
    assert m.name == f"dawning_5000a ({clash})" and m.node.cores == 8  # DeepComp's 8 cores, not Dawning's 16
    assert describe_platform(m, short=True).startswith(f"dawning_5000a ({clash}): 1,240 nodes x 8 cores")


def test_a_file_named_by_its_stem_or_an_alias_is_labelled_too(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    stem = tmp_path / "d" / "wu_cluster.toml"  # no name line: the file name is the name
    stem.write_text((DATA / "wu_cluster.toml").read_text().replace('name = "wu_cluster"\n', ""))
    assert load_platform(stem).name == f"wu_cluster ({stem})"
    alias = tmp_path / "old.toml"  # a deprecated name of a built-in platform
    alias.write_text((DATA / "wu_cluster.toml").read_text().replace('name = "wu_cluster"', 'name = "seed000_cluster"'))
    assert load_platform(alias).name == f"seed000_cluster ({alias})"


def test_the_built_in_by_name_by_its_data_file_or_through_a_link_keeps_its_name(tmp_path: Path) -> None:
    assert load_platform("deepcomp_7000").name == "deepcomp_7000"
    assert load_platform(DATA / "deepcomp_7000.toml").name == "deepcomp_7000"
    (tmp_path / "link").symlink_to(DATA)
    assert load_platform(tmp_path / "link" / "deepcomp_7000.toml").name == "deepcomp_7000"


def test_a_file_with_a_name_of_its_own_keeps_it(tmp_path: Path) -> None:
    mine = tmp_path / "x.toml"
    mine.write_text((DATA / "deepcomp_7000.toml").read_text().replace('name = "deepcomp_7000"', 'name = "dc_2x"'))
    assert load_platform(mine).name == "dc_2x"
