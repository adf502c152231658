"""docs/sweeps.md's two-switch answer: the table's cells and the prose drawn from them, checked against runs.

The table is parsed from the page (so an edit of the page is what is checked).  A few of its cells, spread over
every column and most rows, are simulated again: the scenario ``waitlab.load_sweep`` makes for that point of
``examples/two_switch_sweep.toml``, run by ``waitlab.api.run``, and its ``alltoall_time`` computed here from the
event table, as the page defines it (an alltoall instance lasts from its last rank's entry to its last rank's exit;
the mean over the run's instances), not through the sweep's own column code.  The page must print each value as it
rounds it (the decimals the cell shows).  The prose's percentages and "within 0.1 ms" are recomputed from the
parsed table.  The runs are deterministic; the checked ones take a few seconds (the `basic_linear` points on two
switches, 15 s each, are left out).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import waitlab
import waitlab.api
from waitlab.platforms import load_platform

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "sweeps.md"
SWEEP = ROOT / "examples" / "two_switch_sweep.toml"
HEAD = "| algorithm (ran) |"

#: (grid value of simulation.alltoall, bytes per peer, switches): the cells re-run.  Every column, six of the
#: seven rows: the selectors `default` and `mpich`, the fastest and the slowest algorithm, and the bruck cell
#: (64 KB, 2 switches) a tester found off by one in the last digit.
CELLS = [
    ("bruck", 65536, 2),
    ("mpich", 4096, 1),
    ("default", 65536, 1),
    ("pair", 4096, 2),
    ("ring", 65536, 1),
    ("2dmesh", 65536, 2),
    ("rdb", 65536, 1),
]


class Table:
    """The page's two-switch table: ``ms[(row, bytes, switches)]`` and the names of each row."""

    def __init__(self, page: str) -> None:
        lines = page.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(HEAD))
        header = [c.strip() for c in lines[start].strip("|").split("|")]
        self.columns: list[tuple[int, int]] = []
        for cell in header[1:]:
            m = re.fullmatch(r"(\d+) KB, (\d+) switch(?:es)?", cell)
            assert m, f"column header {cell!r}"
            self.columns.append((int(m.group(1)) * 1024, int(m.group(2))))
        self.text: dict[tuple[int, int, int], str] = {}
        self.bold: set[tuple[int, int, int]] = set()
        self.rows: list[tuple[list[str], list[str]]] = []  # (grid values it stands for, what they ran)
        for line in lines[start + 2:]:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip("|").split("|")]
            label, values = cells[0], cells[1:]
            lead, _, paren = label.partition("(")
            row = len(self.rows)
            self.rows.append((re.findall(r"`([^`]+)`", lead), re.findall(r"`([^`]+)`", paren)))
            assert len(values) == len(self.columns), line
            for col, value in zip(self.columns, values, strict=True):
                if value.startswith("**"):
                    self.bold.add((row, *col))
                self.text[(row, *col)] = value.strip("*")

    def row(self, name: str) -> int:
        """The row of a grid value: the one that names it first, else the one that says it ran it."""
        for i, (lead, _) in enumerate(self.rows):
            if name in lead:
                return i
        return next(i for i, (lead, ran) in enumerate(self.rows) if ran == [name])

    def ms(self, name: str, nbytes: int, switches: int) -> float:
        return float(self.text[(self.row(name), nbytes, switches)].replace(",", ""))

    def decimals(self, name: str, nbytes: int, switches: int) -> int:
        text = self.text[(self.row(name), nbytes, switches)]
        return len(text.partition(".")[2])


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def flat(text: str) -> str:
    return " ".join(text.split())


def alltoall_ms(events) -> float:
    """Mean over the alltoall instances of (last exit - last entry), in ms: the page's definition."""
    rows = events[events["op"].astype(str) == "alltoall"]
    spans = rows.groupby("match")["exit"].max() - rows.groupby("match")["enter"].max()
    assert len(spans) >= 1
    return 1000.0 * float(spans.mean())


def test_the_table_covers_every_algorithm_of_the_sweep() -> None:
    t = Table(page())
    assert t.columns == [(4096, 1), (4096, 2), (65536, 1), (65536, 2)]
    grid = waitlab.load_sweep(SWEEP).points
    algorithms = {dict(pt.values)["simulation.alltoall"] for pt in grid}
    assert {t.rows[t.row(a)][0][0] for a in algorithms} == {lead[0] for lead, _ in t.rows}  # each row is swept
    for a in algorithms:
        t.row(a)  # every swept value has its row (basic_linear: the row of default and ompi, which ran it)
    # the sh block's comment: the number of points
    assert len(grid) == 36 and "# 36 points:" in page()


@pytest.mark.simgrid
def test_the_table_cells_are_what_the_sweep_points_give() -> None:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    t = Table(page())
    points = {(v["simulation.alltoall"], v["application.bytes_per_peer"], v["platform.supernodes"]): pt
              for pt in waitlab.load_sweep(SWEEP).points for v in [dict(pt.values)]}
    assert len({(n, b) for n, b, _ in CELLS}) >= 4 and {s for *_, s in CELLS} == {1, 2}
    assert ("bruck", 65536, 2) in CELLS
    wrong = []
    for cell in CELLS:
        ms = alltoall_ms(waitlab.api.run(points[cell].scenario).result.events)
        shown = t.text[(t.row(cell[0]), cell[1], cell[2])]
        if f"{ms:,.{t.decimals(*cell)}f}" != shown:
            wrong.append(f"{cell}: page {shown}, run {ms:.4f} ms")
    assert wrong == [], "docs/sweeps.md's two-switch table differs from the sweep's points"


def test_the_prose_is_what_the_table_says() -> None:
    text = page()
    t = Table(text)
    ms = t.ms
    kb4, kb64 = 4096, 65536
    prose = flat(text)

    # "MPICH's choices are the fastest on one switch": the bold cells, the minimum of their column
    for size in (kb4, kb64):
        column = [ms(lead[0], size, 1) for lead, _ in t.rows]
        assert ms("mpich", size, 1) == min(column)
        assert (t.row("mpich"), size, 1) in t.bold
    assert "MPICH's choices are the fastest on one switch" in prose

    # "on two, basic_linear and pair are within 0.1 ms of the best at 64 KB"
    best = min(ms(lead[0], kb64, 2) for lead, _ in t.rows)
    assert ms("basic_linear", kb64, 2) - best <= 0.1 and ms("pair", kb64, 2) - best <= 0.1
    assert "on two, `basic_linear` and `pair` are within 0.1 ms of the best at 64 KB" in prose

    # "the second switch costs ring and mpich 4%, bruck 2%, pair nothing" (64 KB)
    def cost(name: str) -> int:
        return round(100 * (ms(name, kb64, 2) / ms(name, kb64, 1) - 1))

    assert cost("ring") == cost("mpich")
    pair = "nothing" if cost("pair") == 0 else f"{cost('pair')}%"
    assert (f"the second switch costs `ring` and `mpich` {cost('ring')}%, `bruck` {cost('bruck')}%, `pair` {pair}"
            in prose)

    # "basic_linear and 2dmesh get *faster* with two switches", at both sizes
    for name in ("basic_linear", "2dmesh"):
        for size in (kb4, kb64):
            assert ms(name, size, 2) < ms(name, size, 1), (name, size)
    assert "`basic_linear` and `2dmesh` get *faster* with two switches" in prose

    # "recursive doubling's 1.5 s would otherwise flatten every other algorithm" (the plot's log scale)
    rdb = max(ms("rdb", size, s) for size in (kb4, kb64) for s in (1, 2))
    assert f"recursive doubling's {rdb / 1000:.1f} s" in prose


def test_the_platform_figures_the_page_quotes() -> None:
    prose = flat(page())
    deep = load_platform("deepcomp_7000")
    assumed, total = len(deep.assumed), len(deep.figures)
    assert f"`deepcomp_7000: 36 points rest on {assumed} assumed and {total - assumed} sourced" in prose
    assert f"{assumed} of {total} assumed" in prose
    leaf = {n: load_platform(n).topology.leaf_size for n in ("deepcomp_7000", "dawning_5000a", "wu_cluster",
                                                             "sunway_taihulight")}
    assert leaf["deepcomp_7000"] == leaf["dawning_5000a"]
    assert (f"({leaf['deepcomp_7000']:g} nodes per leaf on DeepComp 7000 and Dawning 5000A, {leaf['wu_cluster']:g} "
            f"on Wu et al.'s cluster, {leaf['sunway_taihulight']:g} on Sunway)") in prose
