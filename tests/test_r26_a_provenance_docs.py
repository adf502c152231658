"""Tester t4, finding 2: the platform data files and docs cited "DESIGN.md §10" / "§4" as a source, a file the
repository does not hold.  Tester t5, finding 5: run.json's ``contention.acted`` counts the links each law was
installed on, not the links it acted on (a 2-rank Sunway pingpong across two supernodes records 728 ports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from waitlab.platforms.model import list_platforms, load_platform

ROOT = Path(__file__).resolve().parents[1]


def test_no_platform_file_or_platform_page_cites_a_file_outside_the_repository() -> None:
    assert not (ROOT / "DESIGN.md").exists()
    files = [*sorted((ROOT / "platforms" / "data").glob("*.toml")), *sorted((ROOT / "platforms").glob("*.py")),
             ROOT / "docs" / "platforms.md", ROOT / "docs" / "sunway.md"]
    for f in files:
        assert "DESIGN.md" not in f.read_text(), f
    for name in list_platforms():
        for fig in load_platform(name).figures:
            assert "DESIGN" not in (fig.source + fig.reason), (name, fig.key)


def test_the_sunway_taper_is_an_assumption_whose_reason_can_be_checked() -> None:
    taper = load_platform("sunway_taihulight").figure("topology.taper")
    assert taper.value == 4.7 and taper.assumed and not taper.source
    # the reason's two derivations from the public 70 TB/s bisection, by hand
    assert round(40960 * 7e9 / 2 / 70e12, 2) == 2.05 and round(40960 * 16e9 / 2 / 70e12, 2) == 4.68
    for words in ("He et al. 2017 §5.4.2", "70 TB/s", "2.05:1", "4.68"):
        assert words in taper.reason, words
    row = next(line for line in (ROOT / "docs" / "platforms.md").read_text().splitlines()
               if line.startswith("| `topology.taper`"))
    assert row.split("|")[5].strip() == "4.7:1*"  # the sunway column marks it assumed


@pytest.mark.parametrize("page", ["outputs.md", "platforms.md", "real_programs.md"])
def test_the_pages_say_acted_counts_the_links_a_law_was_installed_on(page: str) -> None:
    text = " ".join((ROOT / "docs" / page).read_text().split())
    assert "each law acted on" not in text
    assert "each law was installed on" in text and "whether or not a message crossed it" in text
