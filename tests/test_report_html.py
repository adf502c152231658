"""report.html (issue 26): self-contained, deterministic, carrying the run's events; and, in real headless
Chromium with the network off, rendering the late rank's region as the cause without a console message."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mimage

from waitlab.experiments.report import html as report_html
from waitlab.experiments.report import html_data
from waitlab.experiments.report.html_data import rank_step_wait, timeline_payload
from waitlab.experiments.report.html_text import detail_note
from waitlab.experiments.report.palette import CAUSE, PATTERN_COLOURS
from waitlab.models.analysis.propagation import propagation_graph
from waitlab.models.analysis.summary import rank_budget
from waitlab.models.analysis.waitstates import make_events, wait_states

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from headless import CHROMIUM, load  # noqa: E402


def _chain() -> tuple[pd.DataFrame, pd.DataFrame]:
    # rank 0 computes 3 s and sends to 1; rank 1 (1 s of work) waits 2 s, sends to 2, which waits 2 s
    ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                     enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
                     done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
    ev["excess"] = [2.0, 0, 0, 0, 0, 0, 0]
    ev["cause"] = [0, -1, -1, -1, -1, -1, -1]
    ev["bytes"] = [0, 800, 0, 0, 800, 0, 0]
    return ev, wait_states(ev)


def _unpack(b64: str, dtype: str) -> np.ndarray:
    """A packed column: gzip of its byte planes (byte 0 of every value, then byte 1, ...), base64."""
    t = np.dtype(dtype).newbyteorder("<")
    planes = np.frombuffer(gzip.decompress(base64.b64decode(b64)), np.uint8)
    return np.frombuffer(planes.reshape(t.itemsize, -1).T.tobytes(), dtype=t)


def test_payload_carries_the_events_waits_causes_and_messages():
    ev, waits = _chain()
    ledger = pd.DataFrame({"rank": [0], "region": [""], "step": [0], "seconds": [2.0], "kind": ["imbalance"]})
    p = timeline_payload(ev, waits, ledger, 3)
    c = p["cols"]
    assert p["events"] == 7 and p["detail_ranks"] == 3
    assert _unpack(p["offsets"], "int32").tolist() == [0, 2, 5, 7]
    assert _unpack(c["enter"], "float32").tolist() == [0, 3, 0, 1, 3, 0, 1]
    assert sorted(_unpack(c["w_wait"], "float32").tolist()) == [2.0, 2.0]  # the two waits of the docstring
    assert sorted(_unpack(c["w_event"], "int32").tolist()) == [3, 6]
    assert _unpack(c["c_event"], "int32").tolist() == [0] and p["cause_kinds"] == ["imbalance"]
    # messages: 0 -> 1 (rows 1 -> 3) and 1 -> 2 (rows 4 -> 6)
    assert _unpack(c["m_send"], "int32").tolist() == [1, 4] and _unpack(c["m_recv"], "int32").tolist() == [3, 6]


def test_heatmap_sums_every_wait_and_bins_ranks():
    waits = pd.DataFrame({"rank": [0, 1, 2047, 5], "step": [0, 1, 1, -1], "wait": [1.0, 2.0, 4.0, 8.0]})
    z, first, steps = rank_step_wait(waits, 2048)
    assert z.shape == (1024, 3) and steps.tolist() == [-1, 0, 1] and first[1] == 2
    assert z.sum() == 15.0 and z[0, 1] == 1.0 and z[0, 2] == 2.0 and z[1023, 2] == 4.0 and z[2, 0] == 8.0


def test_page_is_self_contained_and_deterministic():
    ev, waits = _chain()
    meta = {"scenario": "chain", "ranks": 3, "platform": "p", "nodes": 1, "ranks_per_node": 3, "seed": 0}
    summary = {"makespan": 3.0, "events": 7, "wait_states": 2, "totals": {"compute": 5.0, "wait": 4.0},
               "wait_by_pattern": {"late_sender": 4.0}}
    args = (meta, summary, ev, waits, rank_budget(ev, waits, 3), None)
    page = report_html.build_html(*args)
    assert page == report_html.build_html(*args)
    markup = re.sub(r"<script[^>]*>.*?</script>", "<script></script>", page, flags=re.S)
    assert re.findall(r"""(?:src|href)\s*=""", markup) == []  # no script, style, image or link to load
    assert "<link" not in markup and "@import" not in markup
    assert "Bokeh" in page and "wl-timeline-data" in page
    data = re.search(r'<script type="application/json" id="wl-timeline-data">(.*?)</script>', page, re.S)
    assert data is not None and json.loads(data.group(1))["n_ranks"] == 3
    assert '"name":"wl-heatmap"' not in page  # 3 ranks: the whole timeline, no heatmap
    big = ev.assign(rank=ev["rank"] * 40)
    page_big = report_html.build_html({**meta, "ranks": 81}, summary, big, waits.assign(rank=waits["rank"] * 40),
                                      rank_budget(big, waits, 81), None)
    assert '"name":"wl-heatmap"' in page_big


def _run_and_diagnose(example: str, run: Path) -> Path:
    """``waitlab run`` of ``examples/EXAMPLE.toml`` into ``run``, then ``waitlab diagnose`` of it (the commands as
    users type them)."""
    waitlab = shutil.which("waitlab", path=str(Path(sys.executable).parent)) or "waitlab"
    for cmd in ([waitlab, "run", "-q", str(ROOT / "examples" / f"{example}.toml"), "-o", str(run)],
                [waitlab, "diagnose", "-q", str(run)]):
        subprocess.run(cmd, check=True, timeout=600)
    return run


def _pixels_near(img: np.ndarray, colour: str, tol: float = 0.06) -> np.ndarray:
    rgb = np.array(mcolors.to_rgb(colour))
    return np.all(np.abs(img[..., :3] - rgb) < tol, axis=-1)


@pytest.mark.simgrid
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is installed by scripts/bootstrap.sh")
def test_stencil_late_rank_report_in_headless_chromium(tmp_path: Path):
    run = _run_and_diagnose("stencil_late_rank", tmp_path / "R")
    page_file = run / "report.html"
    assert page_file.is_file() and page_file.stat().st_size < 10 * 2**20
    shot = tmp_path / "shot.png"
    model = "Bokeh.documents[0].get_model_by_name"
    page = load(page_file, screenshot=shot, values={
        "status": "document.getElementById('wl-range-status').textContent",
        "cause": "document.getElementById('wl-top-cause').textContent",
        "seg": f"(() => {{ const d = {model}('wl-seg').data; return [Array.from(d.label), Array.from(d.bottom)]; }})()",
        "blame": f"(() => {{ const d = {model}('wl-blame').renderers[0].data_source.data; const o = {{}}; "
                 "for (const k of Object.keys(d)) o[k] = Array.from(d[k]); return o; })()",
        "region_colour": "window.WAITLAB.regionColours['Stencil']",
        "budget": f"(() => {{ const d = {model}('wl-budget-src').data; const o = {{}}; for (const k of Object.keys(d)) "
                  f"o[k] = Array.from(d[k]); o.y_end = {model}('wl-budget').y_range.end; return o; }})()",
    })
    errors = [m for m in page.console if not m.startswith(("console.log:", "console.info:", "console.debug:"))]
    assert errors == [] and page.failed_requests == []
    v = page.values
    assert v["status"] == "showing ranks 0 to 15 (1440 events)"
    assert v["cause"].startswith("Largest injected cause: rank 5, region Stencil (imbalance")
    labels, bottom = v["seg"]
    assert {"Stencil", "MPI", "wait: wait_at_nxn", "injected cause"} <= set(labels)
    cause_rows = {round(b + 0.45, 6) for lab, b in zip(labels, bottom, strict=True) if lab == "injected cause"}
    assert cause_rows == {5}  # the injected excess sits on rank 5 only
    # the time budget's bars, filled by the page's script: each rank's seconds as ranks.parquet has them
    ranks = pd.read_parquet(run / "ranks.parquet")
    budget = v["budget"]
    assert budget["rank"] == list(range(16))
    for col in ("compute", "communication", "wait", "idle"):
        assert np.allclose(budget[col], ranks[col].to_numpy(), rtol=1e-12, atol=0), col
    stacked = ranks[["compute", "perturbation", "communication", "wait", "idle"]].clip(lower=0).sum(axis=1).max()
    assert stacked < budget["y_end"] <= 1.06 * stacked  # the y range holds the highest stack, not the 0..1 it starts at
    blame = v["blame"]
    regions = blame.pop("x")
    for name in ("ground truth", "CWP-DM"):
        assert regions[max(range(len(regions)), key=lambda i, n=name: blame[n][i])] == "Stencil"
    # the screenshot: not blank, and the timeline shows the region's colour and the cause's blue
    img = mimage.imread(shot)
    assert img.std() > 0.05
    stencil = _pixels_near(img, v["region_colour"])
    assert stencil.mean() > 0.02  # the timeline's Stencil bars fill a good part of the page
    rows = np.flatnonzero(stencil.any(axis=1))
    timeline = img[rows.min():rows.max() + 1]  # the band of the page where the timeline is drawn
    blue = np.argwhere(_pixels_near(timeline, CAUSE))
    # the cause's blue inside it, along the time axis (10 steps x 0.05 s of 1.5 s), not only a legend swatch
    assert blue.shape[0] > 200 and np.unique(blue[:, 1]).size > 100


def test_a_rank_beyond_the_detail_cap_carries_its_first_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 alone has more rows than the cap: the page carries its first ``DETAIL_CAP`` rows and says until when
    (it carried no rank at all, and said "ranks 0 to -1")."""
    ev, waits = _chain()
    monkeypatch.setattr(html_data, "DETAIL_CAP", 1)  # rank 0 has 2 rows
    p = timeline_payload(ev, waits, None, 3)
    assert p["detail_ranks"] == 1 and p["events"] == 1 and p["until"] == 3.0  # rank 0's compute, 0 to 3 s
    assert _unpack(p["offsets"], "int32").tolist() == [0, 1]
    assert _unpack(p["cols"]["enter"], "float32").tolist() == [0.0]
    assert detail_note(p, 3) == (" Detail is carried for rank 0 up to 3 s only (its first 1 events; "
                                              "<code>waitlab export --chrome</code> writes the whole run).")
    monkeypatch.setattr(html_data, "DETAIL_CAP", 3)  # ranks 0 and 1 do not fit together: rank 0 whole
    p = timeline_payload(ev, waits, None, 3)
    assert p["detail_ranks"] == 1 and p["events"] == 2 and p["until"] is None
    assert detail_note(p, 3) == " Detail is carried for ranks 0 to 0 only (the first 2 events)."


def _box(name: str) -> str:
    """JS: the page rows and columns a named Bokeh root is drawn in."""
    return (f"(() => {{ const m = Bokeh.documents[0].get_model_by_name('{name}'); "
            "const el = document.querySelector('[data-root-id=\"' + m.id + '\"]'); "
            "const r = (el.firstElementChild || el).getBoundingClientRect(); "
            "return [r.top + window.scrollY, r.bottom + window.scrollY, r.left, r.right]; })()")


def _source(name: str) -> str:
    """JS: the columns of a named data source, as lists."""
    return (f"(() => {{ const d = Bokeh.documents[0].get_model_by_name('{name}').data; const o = {{}}; "
            "for (const k of Object.keys(d)) o[k] = Array.from(d[k]); return o; })()")


@pytest.mark.simgrid
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is installed by scripts/bootstrap.sh")
def test_wavefront_report_shows_the_propagation_picture_and_the_communication_matrix(tmp_path: Path):
    run = _run_and_diagnose("wavefront_propagation", tmp_path / "W")
    shot = tmp_path / "shot.png"
    page = load(run / "report.html", screenshot=shot, values={
        "graph": _source("wl-propagation-src"), "matrix": _source("wl-matrix-src"),
        "graph_box": _box("wl-propagation"), "matrix_box": _box("wl-matrix")})
    errors = [m for m in page.console if not m.startswith(("console.log:", "console.info:", "console.debug:"))]
    assert errors == [] and page.failed_requests == []
    v = page.values
    # the picture is the propagation graph at (time, rank), node for node (as propagation.png draws it)
    events, waits = pd.read_parquet(run / "events.parquet"), pd.read_parquet(run / "waits.parquet")
    g = propagation_graph(events, waits)
    want = sorted((int(d["rank"]), round(float(d["time"]), 9)) for _, d in g.nodes(data=True))
    assert sorted(zip(v["graph"]["rank"], [round(t, 9) for t in v["graph"]["time"]], strict=True)) == want
    assert v["graph"]["label"].count("root cause: excess work") == sum(1 for _, d in g.nodes(data=True)
                                                                       if d["kind"] == "delay")
    # the matrix by hand: on the 4 x 4 grid each rank sends east and south, 2 steps x 4 blocks of 8 KiB
    m = v["matrix"]
    east_south = {(r, r + 1) for r in range(16) if r % 4 != 3} | {(r, r + 4) for r in range(12)}
    assert set(zip(m["sender"], m["receiver"], strict=True)) == east_south
    assert set(m["messages"]) == {8} and set(m["bytes"]) == {8 * 8192}
    # every wait of the run is a late sender, so the pairs' waits add up to the run's total wait
    assert sum(m["wait"]) == pytest.approx(float(waits["wait"].sum()), rel=1e-9)
    # the screenshot: the picture's band holds the waits' red and the causes' blue; the matrix's its grey cells
    img = mimage.imread(shot)[..., :3]
    top, bottom, left, right = (int(x) for x in v["graph_box"])
    band = img[top:bottom, left:right]
    assert _pixels_near(band, PATTERN_COLOURS["late_sender"]).sum() > 2000
    assert _pixels_near(band, CAUSE).sum() > 500
    top, bottom, left, right = (int(x) for x in v["matrix_box"])
    cells = img[top:bottom, left:right]
    grey = (np.ptp(cells, axis=-1) < 0.02) & (cells.mean(axis=-1) < 0.8)
    assert grey.sum() > 24 * 300  # 24 cells of about 30 x 30 pixels


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is installed by scripts/bootstrap.sh")
@pytest.mark.parametrize("ranks", [81, 600])
def test_the_page_s_script_fills_the_heatmap_and_the_time_budget(tmp_path: Path, monkeypatch, ranks: int):
    """A run page's figures hold no data (their skeleton is kept, html.py): the script fills them. The chain's waits
    (2 s on rank 1, 2 s on rank 2) moved to ranks 40 and 80 (x 40) or 80 and 160 (x 80) of an 81- or 600-rank run;
    every rank its own heatmap row (up to 1,024 rows), time budget bars of 1 rank (81) or of 3 ranks (600: 200 bars
    of at most 256)."""
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path))
    ev, waits = _chain()
    k = 40 if ranks == 81 else 80
    ev, waits = ev.assign(rank=ev["rank"] * k), waits.assign(rank=waits["rank"] * k)
    meta = {"scenario": "chain", "ranks": ranks, "platform": "p", "nodes": 1, "ranks_per_node": ranks, "seed": 0}
    summary = {"makespan": 3.0, "events": 7, "wait_states": 2, "totals": {}, "wait_by_pattern": {}}
    (tmp_path / "p.html").write_text(report_html.build_html(meta, summary, ev, waits, rank_budget(ev, waits, ranks),
                                                            None))
    model = "Bokeh.documents[0].get_model_by_name"
    page = load(tmp_path / "p.html", values={
        "heat": f"(() => {{ const d = {model}('wl-heat-src').data, z = d.image[0]; return [z.shape, Array.from(z), "
                "d.dw[0], d.dh[0]]; })()",
        "heat_ranges": f"(() => {{ const f = {model}('wl-heatmap'); return [f.y_range.start, f.y_range.end, "
                       f"f.x_range.start, f.x_range.end, {model}('wl-heat-colours').high]; }})()",
        "budget": f"(() => {{ const f = {model}('wl-budget'), d = {model}('wl-budget-src').data; return ["
                  "f.x_range.start, f.x_range.end, Array.from(d.rank), Array.from(d.w), Array.from(d.wait), "
                  "f.below[0].axis_label]; })()"})
    errors = [m for m in page.console if not m.startswith(("console.log:", "console.info:", "console.debug:"))]
    assert errors == [] and page.failed_requests == []
    shape, z, dw, dh = page.values["heat"]
    assert shape == [ranks, 1] and dw == 1 and dh == ranks  # one step (0), a row per rank
    assert [(i, w) for i, w in enumerate(z) if w] == [(k, 2.0), (2 * k, 2.0)]
    assert page.values["heat_ranges"] == [ranks, 0, -0.5, 0.5, 2.0]
    x0, x1, first, width, wait, label = page.values["budget"]
    per = 1 if ranks == 81 else 3
    assert first == list(range(0, ranks, per)) and width == [0.8 * per] * len(first)
    assert [x0, x1] == pytest.approx([-0.6 * per, (ranks // per - 0.4) * per])
    # the wait per bar is the mean per rank of its ranks: 2 s on one rank of the bar
    assert [(b, w) for b, w in zip(first, wait, strict=True) if w] == [(k // per * per, 2.0 / per),
                                                                      (2 * k // per * per, 2.0 / per)]
    assert label == ("rank" if per == 1 else "first rank of a bin of 3 ranks (mean per rank)")
