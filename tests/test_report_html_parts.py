"""report.html's parts made faster for issue 25 keep the page as it was: Bokeh's validation of every figure (run
here instead of on every page), ids renumbered outside the verbatim parts, waits summed per region by codes."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bokeh.core.validation.check import check_integrity
from bokeh.settings import settings

from waitlab.experiments.report import html as report_html
from waitlab.experiments.report.html_text import sums_by_name
from waitlab.models.analysis.summary import rank_budget
from waitlab.models.analysis.waitstates import wait_states

sys.path.insert(0, str(Path(__file__).parent))
from test_report_html import _chain

META = {"scenario": "chain", "ranks": 3, "platform": "p", "nodes": 1, "ranks_per_node": 3, "seed": 0}
SUMMARY = {"makespan": 3.0, "events": 7, "wait_states": 2, "totals": {"compute": 5.0, "wait": 4.0},
           "wait_by_pattern": {"late_sender": 4.0}}
DIAGNOSIS = {
    "models": {"cwpdm": {"name": "CWP-DM", "by_region": {"r1": 2.0, "": 1.0}, "attributed": 3.0, "unexplained": 1.0,
                         "culprits": ["r1"], "scores": {"spearman_region": 0.5}}},
    "truth": {"by_region": {"r1": 2.5}, "all_causes": 4.0},
    "critical_path": {"by_region": [{"region": "r1", "seconds": 2.0}, {"region": "MPI_Recv", "seconds": 1.0}],
                      "length": 3.0, "makespan": 3.0, "by_rank": {"0": 2.0, "1": 1.0}},
}


def _pages() -> list[tuple]:
    ev, waits = _chain()
    ledger = pd.DataFrame({"rank": [0], "region": [""], "step": [0], "seconds": [2.0], "kind": ["imbalance"]})
    big, big_waits = ev.assign(rank=ev["rank"] * 40), waits.assign(rank=waits["rank"] * 40)
    return [(META, SUMMARY, ev, waits, rank_budget(ev, waits, 3), ledger, DIAGNOSIS),
            ({**META, "ranks": 81}, SUMMARY, big, big_waits, rank_budget(big, big_waits, 81), None, DIAGNOSIS)]


def test_every_figure_passes_bokehs_validation():
    names = set()
    for args in _pages():
        meta, _summary, ev, waits, budget, _ledger, diagnosis = args
        doc, parts = report_html.report_document(report_html.page_shape(meta["ranks"], budget), ev, waits, diagnosis,
                                                 meta["ranks"])
        issues = check_integrity(doc.models)
        assert issues.error == [] and issues.warning == [], (issues.error, issues.warning)
        names |= {name for kind, name in parts if kind == "root"}
    assert names == {"wl-budget", "wl-heatmap", "wl-timeline", "wl-blame", "wl-critical", "wl-propagation",
                     "wl-matrix"}


def test_page_leaves_no_mark_and_validation_on_for_others():
    assert settings.perform_document_validation()
    page = report_html.build_html(*_pages()[1])
    assert "\x00" not in page and "wl-verbatim" not in page
    assert settings.perform_document_validation()  # switched off for the page only
    ids = report_html._ID.findall(page)
    assert ids and sorted(set(ids), key=lambda i: int(i[2:-1]))[0] == '"p1001"'  # renumbered from p1001


def test_ids_are_renumbered_outside_the_verbatim_parts_in_order():
    m = report_html._VERBATIM
    u1, u2 = "12345678-aaaa-bbbb-cccc-1234567890ab", "87654321-aaaa-bbbb-cccc-1234567890ab"
    page = f'x "p7" "p2000" {m}"p2000" {u2}{m} "p3000" {u1} {m}"p9000"{m} "p2000" {u2}'
    # outside the marks "p2000", "p3000", "p2000" and u1, u2 in order; inside, "p2000", u2 and "p9000" untouched
    assert report_html._ids_outside_verbatim(page) == (
        'x "p7" "p1001" "p2000" 87654321-aaaa-bbbb-cccc-1234567890ab "p1002" 00000000-0000-4000-8000-000000000000'
        ' "p9000" "p1001" 00000000-0000-4000-8000-000000000001')
    # a page whose text holds the mark itself: everything renumbered, marks dropped
    assert report_html._ids_outside_verbatim(f'"p2000"{m}"p3000"') == '"p1001""p1002"'


def test_waits_per_region_as_by_their_text():
    rng = np.random.default_rng(3)
    names = np.array(["halo", "solve", "", "MPI_Allreduce", "z"], dtype=object)
    region = names[rng.integers(0, 5, 10_000)]
    region[rng.random(10_000) < 0.05] = None
    waits = pd.DataFrame({"region": pd.Categorical(region, categories=["z", "solve", "halo", "", "MPI_Allreduce",
                                                                        "unused"]),
                          "wait": rng.exponential(1e-3, 10_000)})
    expected = waits.groupby(waits["region"].astype(str), observed=True)["wait"].sum()
    names, got = sums_by_name(waits, "region", "wait")  # what the page's table of waits per region holds
    assert names == expected.index.tolist() == ["", "MPI_Allreduce", "halo", "solve", "z"]
    assert got.tobytes() == expected.to_numpy().tobytes()  # the same floats, bit for bit


def test_a_run_page_is_its_kept_skeleton_with_the_run_s_data_in_the_slots(tmp_path: Path, monkeypatch):
    """A run's page without a diagnosis is the skeleton kept in waitlab's cache with the run's parts filled in: the
    skeleton holds none of the run's data (nor its name or rank count), the page all of it, and a page from the kept
    skeleton is the page made with Bokeh, byte for byte."""
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path))
    meta, summary, ev, _waits, _budget, ledger, _diag = _pages()[0]
    slow = ev.assign(enter=ev["enter"] * 1.2345678, exit=ev["exit"] * 1.2345678)  # same shape, other numbers
    pages = []
    for i, events in enumerate((ev, slow)):
        w = wait_states(events)
        budget = rank_budget(events, w, 3)
        for kept in tmp_path.glob("report-*.html"):
            kept.unlink()
        fresh = report_html.build_html({**meta, "scenario": f"run{i}"}, summary, events, w, budget, ledger)
        assert len(list(tmp_path.glob("report-*.html"))) == 1  # kept
        kept = report_html.build_html({**meta, "scenario": f"run{i}"}, summary, events, w, budget, ledger)
        assert kept == fresh
        pages.append((fresh, budget))
    shape = report_html.PageShape.of_run(3)
    assert report_html.page_shape(3, pages[0][1]) == shape and not shape.heatmap
    skeleton = report_html.run_page_skeleton(shape)
    assert sorted(report_html._SLOT.findall(skeleton)) == sorted(report_html.SLOTS)
    for i, (page, budget) in enumerate(pages):
        payload = json.loads(re.search(r'id="wl-timeline-data">(.*?)</script>', page, re.S).group(1))
        assert payload["budget"]["bars"]["wait"] == budget["wait"].tolist()  # the budget's numbers: in the page
        assert f"<title>waitlab report: run{i}</title>" in page and f"<h1>waitlab report: run{i}</h1>" in page
    scaled = json.dumps(float(pages[1][1]["compute"].iloc[0]))  # 3 s x 1.2345678: its digits are the run's own
    assert len(scaled) > 6 and scaled in pages[1][0] and scaled not in skeleton
    assert pages[0][0] != pages[1][0]


def test_a_kept_skeleton_is_made_again_when_its_slots_are_not_all_there(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path))
    shape = report_html.PageShape.of_run(81)
    assert shape.heatmap
    made = report_html.run_page_skeleton(shape)
    (kept,) = tmp_path.glob("report-*.html")
    kept.write_text(made.replace("\x00wl-slot-data\x00", ""))  # damaged: a slot lost
    assert report_html.run_page_skeleton(shape) == made
    assert kept.read_text() == made  # and kept again whole
    other = report_html.PageShape(("compute", "wait"), True)  # another shape: another file
    report_html.run_page_skeleton(other)
    assert len(list(tmp_path.glob("report-*.html"))) == 2
    stale = tmp_path / "report-000000000000-00000000.html"  # kept for other code (an older waitlab or Bokeh)
    stale.write_text(made)
    kept.unlink()
    report_html.run_page_skeleton(shape)  # a new file: the stale one goes, the other shape's stays
    assert sorted(tmp_path.glob("report-*.html")) == sorted([kept, report_html.skeleton_file(other)])


def test_fill_page_fills_every_slot_once():
    page = "a\x00wl-slot-one\x00b\x00wl-slot-two\x00"
    assert report_html.fill_page(page, {"one": "1", "two": "\x00wl-slot-one\x00"}) == "a1b\x00wl-slot-one\x00"
    with pytest.raises(ValueError, match="slots"):
        report_html.fill_page(page, {"one": "1"})  # a slot left unfilled would end up in the page
    with pytest.raises(ValueError, match="slots"):
        report_html.fill_page(page + page, {"one": "1", "two": "2"})


def test_a_region_name_cannot_close_the_page_s_scripts():
    meta, summary, ev, _waits, budget, ledger, _diag = _pages()[0]
    name = "</script><script>alert(1)</script>"
    ev = ev.assign(region=pd.Categorical([name] * len(ev)))
    page = report_html.build_html(meta, summary, ev, wait_states(ev), budget, ledger)
    assert "</script><script>alert" not in page  # in the payload and the colours "<\/script>": the same JSON text
    payload = json.loads(re.search(r'id="wl-timeline-data">(.*?)</script>', page, re.S).group(1))
    assert payload["regions"] == [name]


def test_bokeh_s_settings_from_the_environment_name_another_kept_skeleton(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path))
    shape = report_html.PageShape.of_run(3)
    plain = report_html.skeleton_file(shape)
    monkeypatch.setenv("BOKEH_MINIFIED", "false")  # Bokeh then inlines its library unminified: another page
    assert report_html.skeleton_file(shape) != plain
