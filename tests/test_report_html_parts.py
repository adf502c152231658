"""report.html's parts made faster for issue 25 keep the page as it was: Bokeh's validation of every figure (run
here instead of on every page), ids renumbered outside the verbatim parts, waits summed per region by codes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from bokeh.core.validation.check import check_integrity
from bokeh.settings import settings

from waitlab.experiments.report import html as report_html
from waitlab.models.analysis.summary import rank_budget

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
        doc, parts, _payload, _config = report_html.report_document(*args)
        issues = check_integrity(doc.models)
        assert issues.error == [] and issues.warning == [], (issues.error, issues.warning)
        names |= {name for kind, name in parts if kind == "root"}
    assert names == {"wl-budget", "wl-heatmap", "wl-timeline", "wl-blame", "wl-critical", "wl-propagation"}


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
    got = report_html._sum_by_name(waits["region"], waits["wait"])
    assert got.index.tolist() == expected.index.tolist() == ["", "MPI_Allreduce", "halo", "solve", "z"]
    assert got.to_numpy().tobytes() == expected.to_numpy().tobytes()  # the same floats, bit for bit
