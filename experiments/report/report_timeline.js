// waitlab report.html: the timeline of a rank range, built in the browser from packed columns.
// Why JavaScript: a Plotly figure written from Python repeats one hover text per event (10 MB for
// 100,000 events); the packed columns are 24 bytes per event before gzip (see html_data.py).
// Plotly draws, zooms and pans; this file only decodes the columns and makes the traces.
(function () {
  "use strict";
  const W = window.WAITLAB;
  const D = JSON.parse(document.getElementById("wl-timeline-data").textContent);
  const TYPES = {rank: Int32Array, enter: Float32Array, exit: Float32Array, peer: Int32Array,
    region: Uint16Array, op: Uint16Array, kind: Uint16Array, bytes: Float32Array, w_event: Int32Array,
    w_wait: Float32Array, w_pattern: Uint16Array, w_peer: Int32Array, c_event: Int32Array,
    c_excess: Float32Array, c_kind: Uint16Array, m_send: Int32Array, m_recv: Int32Array};
  const MAX_ARROWS = 1500;

  async function unpack(b64, Type) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Type(await new Response(stream).arrayBuffer());
  }

  function fmt(x) { return x >= 0.1 ? x.toFixed(4) + " s" : (x * 1e3).toPrecision(4) + " ms"; }

  async function main() {
    const c = {};
    for (const k of Object.keys(TYPES)) c[k] = await unpack(D.cols[k], TYPES[k]);
    const offsets = await unpack(D.offsets, Int32Array);
    const waitOf = new Map(), causeOf = new Map();
    for (let j = 0; j < c.w_event.length; j++) waitOf.set(c.w_event[j], j);
    for (let j = 0; j < c.c_event.length; j++) causeOf.set(c.c_event[j], j);
    const div = document.getElementById("wl-timeline");
    const status = document.getElementById("wl-range-status");
    let current = [0, 0];

    function hover(i) {
      const op = D.ops[c.op[i]], kind = D.kinds[c.kind[i]];
      let t = "rank " + c.rank[i] + ": " + (kind === "mpi" ? "MPI " + op : kind + " (" + op + ")") +
        "<br>region " + (D.regions[c.region[i]] || "(top level)") +
        "<br>" + fmt(c.enter[i]) + " to " + fmt(c.exit[i]) + " (" + fmt(c.exit[i] - c.enter[i]) + ")";
      if (c.peer[i] >= 0) t += "<br>peer rank " + c.peer[i];
      if (c.bytes[i] > 0) t += "<br>" + c.bytes[i].toLocaleString() + " bytes";
      const w = waitOf.get(i);
      if (w !== undefined) t += "<br>wait " + fmt(c.w_wait[w]) + " (" + D.patterns[c.w_pattern[w]] +
        ", waited for rank " + c.w_peer[w] + ")";
      const k = causeOf.get(i);
      if (k !== undefined) t += "<br>injected cause: " + D.cause_kinds[c.c_kind[k]] + ", " + fmt(c.c_excess[k]);
      return t;
    }

    function segments(groups, key, i, y0, y1, colour, name, text) {
      let g = groups.get(key);
      if (!g) { g = {x: [], y: [], text: [], colour: colour, name: name}; groups.set(key, g); }
      const mid = 0.5 * (y0 + y1);
      g.x.push(y0, mid, y1, null); g.y.push(i, i, i, null); g.text.push(text, text, text, null);
    }

    function arrows(r0, r1, t0, t1) {
      const x = [], y = [], sym = [], txt = [];
      for (let m = 0; m < c.m_send.length && x.length < 3 * MAX_ARROWS; m++) {
        const s = c.m_send[m], r = c.m_recv[m];
        const rs = c.rank[s], rr = c.rank[r];
        if ((rs < r0 || rs >= r1) && (rr < r0 || rr >= r1)) continue;
        if (c.exit[r] < t0 || c.enter[s] > t1) continue;
        const label = "message rank " + rs + " to " + rr + ", " + c.bytes[s].toLocaleString() + " bytes";
        x.push(c.enter[s], c.exit[r], null); y.push(rs, rr, null);
        sym.push("circle", "arrow", "circle"); txt.push(label, label, null);
      }
      return {x: x, y: y, n: x.length / 3};
    }

    function arrowTrace(a, visible) {
      return {type: "scatter", mode: "lines+markers", x: a.x, y: a.y, name: "messages (" + a.n + ")",
        line: {color: W.colours.ink, width: 1}, hoverinfo: "skip", visible: visible,
        marker: {symbol: a.x.map((_, j) => (j % 3 === 1 ? "arrow" : "circle")), angleref: "previous",
          size: a.x.map((_, j) => (j % 3 === 1 ? 9 : 2)), color: W.colours.ink}};
    }

    function render(r0, r1) {
      r0 = Math.max(0, Math.min(r0, D.detail_ranks - 1));
      r1 = Math.max(r0 + 1, Math.min(r1, D.detail_ranks));
      current = [r0, r1];
      const groups = new Map(), waitGroups = new Map(), causeGroups = new Map();
      for (let i = offsets[r0]; i < offsets[r1]; i++) {
        const kind = D.kinds[c.kind[i]], region = D.regions[c.region[i]] || "(top level)";
        const text = hover(i);
        if (kind === "compute") {
          segments(groups, "r:" + region, c.rank[i], c.enter[i], c.exit[i], W.regionColour(region), region, text);
        } else {
          segments(groups, "k:" + kind, c.rank[i], c.enter[i], c.exit[i], W.colours.kinds[kind] || W.colours.other,
            kind === "mpi" ? "MPI" : kind, text);
        }
        const w = waitOf.get(i);
        if (w !== undefined) {
          const p = D.patterns[c.w_pattern[w]];
          segments(waitGroups, p, c.rank[i] + 0.22, c.enter[i], c.enter[i] + c.w_wait[w],
            W.colours.patterns[p] || W.colours.wait, "wait: " + p, text);
        }
        const k = causeOf.get(i);
        if (k !== undefined) {
          segments(causeGroups, "cause", c.rank[i] - 0.3, c.exit[i] - c.c_excess[k], c.exit[i], W.colours.cause,
            "injected cause", text);
        }
      }
      const n = r1 - r0;
      const height = Math.max(320, Math.min(900, 40 + 18 * n));
      const lw = Math.max(2, Math.min(14, 0.55 * (height - 80) / n));
      // SVG below a few thousand segments (no WebGL needed), WebGL above (fast with 100,000)
      const type = offsets[r1] - offsets[r0] <= 6000 ? "scatter" : "scattergl";
      const traces = [];
      for (const [gs, width] of [[groups, lw], [waitGroups, Math.max(1.5, lw / 3)], [causeGroups, Math.max(1.5, lw / 3)]]) {
        for (const g of gs.values()) {
          traces.push({type: type, mode: "lines", x: g.x, y: g.y, text: g.text, name: g.name,
            hoverinfo: "text", line: {color: g.colour, width: width}});
        }
      }
      const a = arrows(r0, r1, -Infinity, Infinity);
      traces.push(arrowTrace(a, a.n <= MAX_ARROWS ? true : "legendonly"));
      const layout = {height: height, margin: {l: 60, r: 10, t: 30, b: 90}, hovermode: "closest",
        xaxis: {title: {text: "simulated time (s)"}}, dragmode: "zoom",
        yaxis: {title: {text: "rank"}, autorange: "reversed", range: [r1 - 0.5, r0 - 0.5]},
        legend: {orientation: "h", y: -0.16, yanchor: "top"}, title: {text: "ranks " + r0 + " to " + (r1 - 1) +
          " of " + D.n_ranks + " (drag to zoom, double-click to reset)", font: {size: 13}}};
      Plotly.react(div, traces, layout, {responsive: true, scrollZoom: true, displaylogo: false});
      status.textContent = "showing ranks " + r0 + " to " + (r1 - 1) + " (" + (offsets[r1] - offsets[r0]) + " events)";
    }

    // messages as arrows once the zoomed window holds few enough of them
    function onZoom(ev) {
      if (!ev || ev["xaxis.range[0]"] === undefined) return;
      const a = arrows(current[0], current[1], ev["xaxis.range[0]"], ev["xaxis.range[1]"]);
      const idx = div.data.length - 1;
      Plotly.restyle(div, {x: [a.x], y: [a.y], name: ["messages (" + a.n + ")"], visible: [a.n <= MAX_ARROWS],
        "marker.symbol": [a.x.map((_, j) => (j % 3 === 1 ? "arrow" : "circle"))],
        "marker.size": [a.x.map((_, j) => (j % 3 === 1 ? 9 : 2))]}, [idx]);
    }

    W.showRanks = render;
    document.getElementById("wl-range-form").addEventListener("submit", (e) => {
      e.preventDefault();
      render(parseInt(document.getElementById("wl-r0").value, 10), parseInt(document.getElementById("wl-r1").value, 10) + 1);
    });
    const first = W.initialRanks;
    render(first[0], first[1]);
    div.on("plotly_relayout", onZoom);
    const heat = document.getElementById("wl-heatmap");
    if (heat && heat.on) {
      heat.on("plotly_click", (ev) => {
        const r = Math.round(ev.points[0].y);
        render(Math.max(0, r - W.window / 2), Math.max(0, r - W.window / 2) + W.window);
        div.scrollIntoView();
      });
    }
    document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
    document.body.setAttribute("data-timeline", "ready");
  }
  main().catch((e) => { document.getElementById("wl-range-status").textContent = "timeline failed: " + e; throw e; });
})();
