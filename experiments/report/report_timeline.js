// waitlab report.html: the timeline of a rank range, filled in the browser from packed columns.
// Why JavaScript: a figure written from Python repeats one hover text per event (10 MB for 100,000
// events); the packed columns are 24 bytes per event before gzip (see html_data.py).  Bokeh draws,
// zooms and pans; this file decodes the columns and fills the timeline's data sources (wl-seg, wl-msg),
// the time budget's (wl-budget-src) and the heatmap's (wl-heat-src): the page's Bokeh part holds no data of the
// run, so that one kept skeleton serves every run page of its shape (html.py).
(function () {
  "use strict";
  const W = window.WAITLAB;
  const D = JSON.parse(document.getElementById("wl-timeline-data").textContent);
  const TYPES = {rank: Int32Array, enter: Float32Array, exit: Float32Array, peer: Int32Array,
    region: Uint16Array, op: Uint16Array, kind: Uint16Array, bytes: Float32Array, w_event: Int32Array,
    w_wait: Float32Array, w_pattern: Uint16Array, w_peer: Int32Array, c_event: Int32Array,
    c_excess: Float32Array, c_kind: Uint16Array, m_send: Int32Array, m_recv: Int32Array};
  const MAX_ARROWS = 1500;
  const t0 = performance.now();

  // A packed column (html_data.py _pack): base64 of gzip of its byte planes (byte 0 of every value, then byte 1, ...).
  async function unpack(b64, Type) {
    const bin = atob(b64);
    const packed = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) packed[i] = bin.charCodeAt(i);
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
    const planes = new Uint8Array(await new Response(stream).arrayBuffer());
    const size = Type.BYTES_PER_ELEMENT, n = planes.length / size;
    const bytes = new Uint8Array(planes.length);
    for (let k = 0; k < size; k++) {
      for (let i = 0, j = k * n; i < n; i++, j++) bytes[i * size + k] = planes[j];
    }
    return new Type(bytes.buffer);
  }

  function fmt(x) { return x >= 0.1 ? x.toFixed(4) + " s" : (x * 1e3).toPrecision(4) + " ms"; }
  function esc(s) { return String(s).replace(/[&<>]/g, (ch) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[ch])); }
  function frame() { return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); }

  function model(name) {
    for (const doc of window.Bokeh.documents) {
      const m = doc.get_model_by_name(name);
      if (m) return m;
    }
    return null;
  }

  const decoded = (async function () {
    const c = {};
    for (const k of Object.keys(TYPES)) c[k] = await unpack(D.cols[k], TYPES[k]);
    c.offsets = await unpack(D.offsets, Int32Array);
    c.waitOf = new Map(); c.causeOf = new Map();
    for (let j = 0; j < c.w_event.length; j++) c.waitOf.set(c.w_event[j], j);
    for (let j = 0; j < c.c_event.length; j++) c.causeOf.set(c.c_event[j], j);
    return c;
  })();

  async function start() {
    const budget = model("wl-budget-src"), budgetFig = model("wl-budget");  // the time budget's bars
    if (budget && budgetFig && D.budget) {
      const per = D.budget.per, bars = D.budget.bars.rank.length;
      budget.data = Object.assign({w: D.budget.bars.rank.map(() => 0.8 * per)}, D.budget.bars);
      const yr = budgetFig.y_range, top = D.budget.top > 0 ? D.budget.top * 1.05 : 1;
      yr.start = yr.reset_start = 0; yr.end = yr.reset_end = top;
      const xr = budgetFig.x_range;
      xr.start = xr.reset_start = -0.6 * per; xr.end = xr.reset_end = (Math.max(bars, 1) - 0.4) * per;
      if (per > 1) budgetFig.below[0].axis_label = "first rank of a bin of " + per + " ranks (mean per rank)";
    }
    const heat = model("wl-heat-src"), heatFig = model("wl-heatmap"), H = D.heatmap;  // wait per rank and step
    if (heat && heatFig && H) {
      const {ndarray} = window.Bokeh.require("core/util/ndarray");  // an image is a 2-D array of BokehJS's own
      const cols = Math.max(H.cols, 1);
      const z = H.cols ? await unpack(H.z, Float64Array) : new Float64Array(H.rows);
      heat.data = {image: [ndarray(z, {shape: [H.rows, cols]})], x: [-0.5], y: [0], dw: [cols], dh: [H.rows * H.per]};
      model("wl-heat-colours").high = H.high > 0 ? H.high : 1;
      const xr = heatFig.x_range, yr = heatFig.y_range;
      xr.start = xr.reset_start = -0.5; xr.end = xr.reset_end = cols - 0.5;
      yr.start = yr.reset_start = H.ranks; yr.end = yr.reset_end = 0;
      if (H.outside) heatFig.below[0].axis_label = "BSP step (column 0: outside steps)";
    }
    const c = await decoded;
    const tDecoded = performance.now();
    const seg = model("wl-seg"), msg = model("wl-msg"), fig = model("wl-timeline");
    const yr = fig.y_range, xr = fig.x_range;
    const status = document.getElementById("wl-range-status");
    let current = [0, 0];

    function hover(i) {
      const op = D.ops[c.op[i]], kind = D.kinds[c.kind[i]];
      let t = "<b>rank " + c.rank[i] + ": " + esc(kind === "mpi" ? "MPI " + op : kind + " (" + op + ")") + "</b>" +
        "<br>region " + esc(D.regions[c.region[i]] || "(top level)") +
        "<br>" + fmt(c.enter[i]) + " to " + fmt(c.exit[i]) + " (" + fmt(c.exit[i] - c.enter[i]) + ")";
      if (c.peer[i] >= 0) t += "<br>peer rank " + c.peer[i];
      if (c.bytes[i] > 0) t += "<br>" + c.bytes[i].toLocaleString("en") + " bytes";
      const w = c.waitOf.get(i);
      if (w !== undefined) t += "<br>wait " + fmt(c.w_wait[w]) + " (" + esc(D.patterns[c.w_pattern[w]]) +
        ", waited for rank " + c.w_peer[w] + ")";
      const k = c.causeOf.get(i);
      if (k !== undefined) t += "<br>injected cause: " + esc(D.cause_kinds[c.c_kind[k]]) + ", " + fmt(c.c_excess[k]);
      return t;
    }

    function arrows(t0, t1) {
      const [r0, r1] = current;
      const a = {x_start: [], y_start: [], x_end: [], y_end: []};
      let n = 0;
      for (let m = 0; m < c.m_send.length; m++) {
        const s = c.m_send[m], r = c.m_recv[m];
        const rs = c.rank[s], rr = c.rank[r];
        if ((rs < r0 || rs >= r1) && (rr < r0 || rr >= r1)) continue;
        if (c.exit[r] < t0 || c.enter[s] > t1) continue;
        if (++n > MAX_ARROWS) return {x_start: [], y_start: [], x_end: [], y_end: []};
        a.x_start.push(c.enter[s]); a.y_start.push(rs); a.x_end.push(c.exit[r]); a.y_end.push(rr);
      }
      return a;
    }

    function render(r0, r1) {
      r0 = Math.max(0, Math.min(r0 | 0, D.detail_ranks - 1));
      r1 = Math.max(r0 + 1, Math.min(r1 | 0, D.detail_ranks));
      current = [r0, r1];
      const d = {left: [], right: [], bottom: [], top: [], color: [], label: [], text: []};
      function bar(i, y0, y1, x0, x1, colour, label, text) {
        d.left.push(x0); d.right.push(x1); d.bottom.push(y0); d.top.push(y1);
        d.color.push(colour); d.label.push(label); d.text.push(text);
      }
      let tmax = 0;
      for (let i = c.offsets[r0]; i < c.offsets[r1]; i++) {
        const kind = D.kinds[c.kind[i]], region = D.regions[c.region[i]] || "(top level)";
        const y = c.rank[i], text = hover(i);
        tmax = Math.max(tmax, c.exit[i]);
        if (kind === "compute") bar(i, y - 0.35, y + 0.35, c.enter[i], c.exit[i], W.regionColours[region] ||
          W.colours.kinds.compute, region, text);
        else bar(i, y - 0.35, y + 0.35, c.enter[i], c.exit[i], W.colours.kinds[kind] || W.colours.other,
          kind === "mpi" ? "MPI" : kind, text);
        const w = c.waitOf.get(i);
        if (w !== undefined) {
          const p = D.patterns[c.w_pattern[w]];
          bar(i, y + 0.05, y + 0.35, c.enter[i], c.enter[i] + c.w_wait[w], W.colours.patterns[p] || W.colours.wait,
            "wait: " + p, text);
        }
        const k = c.causeOf.get(i);
        if (k !== undefined) {
          bar(i, y - 0.45, y - 0.3, c.exit[i] - c.c_excess[k], c.exit[i], W.colours.cause, "injected cause", text);
        }
      }
      seg.data = d;
      yr.start = r1 - 0.5; yr.end = r0 - 0.5;
      xr.start = 0; xr.end = tmax > 0 ? tmax : 1;
      msg.data = arrows(-Infinity, Infinity);
      status.textContent = "showing ranks " + r0 + " to " + (r1 - 1) + " (" + (c.offsets[r1] - c.offsets[r0]) +
        " events)";
      document.getElementById("wl-r0").value = r0;
      document.getElementById("wl-r1").value = r1 - 1;
    }

    // messages as arrows once the visible window holds few enough of them
    let pending = 0;
    function onZoom() {
      clearTimeout(pending);
      pending = setTimeout(() => { msg.data = arrows(xr.start, xr.end); }, 80);
    }
    xr.connect(xr.properties.start.change, onZoom);
    xr.connect(xr.properties.end.change, onZoom);

    W.showRanks = (r0, r1) => render(r0, r1 === undefined ? r0 + W.window : r1);
    document.getElementById("wl-range-form").addEventListener("submit", (e) => {
      e.preventDefault();
      render(parseInt(document.getElementById("wl-r0").value, 10),
        parseInt(document.getElementById("wl-r1").value, 10) + 1);
    });
    render(W.initialRanks[0], W.initialRanks[1]);
    await frame();
    const tReady = performance.now();
    document.body.setAttribute("data-ready-ms", String(Math.round(tReady)));
    document.body.setAttribute("data-timeline-ms", [t0, tDecoded, tReady].map(Math.round).join(" "));
    document.body.setAttribute("data-timeline", "ready");
  }

  window.WAITLAB_start = () => start().catch((e) => {
    document.getElementById("wl-range-status").textContent = "timeline failed: " + e;
    throw e;
  });
})();
