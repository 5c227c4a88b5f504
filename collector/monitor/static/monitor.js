/* likeastore collector — monitor page.
 *
 * Vanilla JS, no third-party code. Every value from the server reaches the DOM through textContent or
 * setAttribute of a data-*, class, title or SVG geometry attribute, never as markup (the page's CSP forbids
 * inline script and style; the strings come from documents and may hold anything).
 * Memory stays flat for a tab left open: rows and polylines are reused, every buffer is bounded.
 */
(function () {
  "use strict";

  let svgNS = null; // the SVG namespace, taken from the page's own <svg> elements (no URL in this file)
  const SERIES = ["runs", "newItems", "requests", "notModified", "errors", "rateLimited"];
  const WINDOW_S = 15 * 60; // what the charts show
  const RECENT_S = 120; // a chart's scale: the highest value of the last two minutes (older peaks are clipped, marked)
  const COLLECTING_S = 30; // less history than this: the chart says so rather than draw a spike at its right edge
  const SPANS = [90, 180, 360, 540, WINDOW_S]; // a chart spans the shortest of these that holds its history
  const MAX_POINTS = 3600; // and never more points than this, however often the monitor refreshes
  const MAX_LINES = 12; // collectors drawn one by one (the total always is); as many colours
  const MAX_FLEET_ROWS = 200;
  const MAX_ROWS = 200; // any other table
  const MAX_TITLE = 2000; // characters of a long value kept in a cell's tooltip
  const RUNNING_SHOWN = 3;
  const STALE_AFTER_S = 5; // "updated Ns ago" turns amber past this
  const REOPEN_MS = 3000; // when the browser gave up on the stream (it reconnects by itself otherwise)

  // Chart geometry, in the SVG's viewBox units (320 x 120).
  const G = { w: 320, h: 120, left: 4, right: 316, top: 16, bottom: 102, label: 116 };

  const state = {
    snapshot: null,
    points: [], // {t, total, by}, oldest first
    token: "", // held here only: never in storage or cookies
    actions: false,
    lastQuery: null,
    results: [],
    selected: null,
    renderPending: false,
    services: [], // {name, connect: "device" | "loopback" | "", fields: [{name, secret, required}]}
    flow: null, // the connect flow this page started, as the monitor last said
    confirming: null, // the network whose "remove" waits for a second click
  };

  const $ = (sel, root) => (root || document).querySelector(sel);

  // ---------- formatting (pure) ----------

  function isNum(v) {
    return typeof v === "number" && Number.isFinite(v);
  }

  function str(v) {
    if (v === null || v === undefined) return "";
    return typeof v === "string" ? v : typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  function fmtRate(v) {
    if (!isNum(v)) return "–";
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a < 10) return v.toFixed(2);
    if (a < 100) return v.toFixed(1);
    return Math.round(v).toLocaleString("en-US");
  }

  function fmtInt(v) {
    return isNum(v) ? Math.round(v).toLocaleString("en-US") : "–";
  }

  function fmtDur(s) {
    if (!isNum(s)) return "–";
    const neg = s < 0;
    let t = Math.round(Math.abs(s));
    let out;
    if (t < 60) out = t + "s";
    else if (t < 3600) out = Math.floor(t / 60) + "m " + (t % 60) + "s";
    else if (t < 86400) out = Math.floor(t / 3600) + "h " + Math.floor((t % 3600) / 60) + "m";
    else out = Math.floor(t / 86400) + "d " + Math.floor((t % 86400) / 3600) + "h";
    return neg ? "-" + out : out;
  }

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  function parseTime(iso) {
    if (typeof iso !== "string") return null;
    const ms = Date.parse(iso);
    return Number.isFinite(ms) ? ms : null;
  }

  function clock(ms) {
    const d = new Date(ms);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  // Local time: HH:MM:SS today, else the date too.
  function fmtTime(iso) {
    const ms = parseTime(iso);
    if (ms === null) return iso ? str(iso) : "–";
    const d = new Date(ms);
    const now = new Date();
    if (d.toDateString() === now.toDateString()) return clock(ms);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + clock(ms);
  }

  function fmtMiB(bytes) {
    return isNum(bytes) ? (bytes / 1048576).toFixed(1) : "–";
  }

  function fmtPct(v) {
    return isNum(v) ? v.toFixed(1) : "–";
  }

  // A "nice" upper bound for a chart: 1, 2, 2.5, 5 times a power of ten.
  function niceMax(v) {
    if (!isNum(v) || v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  /* A chart's scale from what a person needs to see now: a nice number above the highest value of the last
   * RECENT_S seconds (the start-up burst does not flatten the quarter of an hour after it). samples: [t, v] pairs,
   * `now` the newest t. Returns {top, peak, clipped}: `peak` the highest value of all, `clipped` whether some value
   * is above `top` (drawn at the top, marked). Pure. */
  function chartScale(samples, now) {
    let recent = 0;
    let peak = 0;
    for (const [t, v] of samples) {
      if (!isNum(v) || !isNum(t)) continue;
      if (v > peak) peak = v;
      if (t >= now - RECENT_S && v > recent) recent = v;
    }
    const top = niceMax(recent * 1.05);
    return { top: top, peak: peak, clipped: peak > top };
  }

  // The seconds a chart spans: the shortest of SPANS that holds `had` seconds of history (a young monitor's lines
  // fill the chart rather than squeeze against its right edge). Pure.
  function chartSpan(had) {
    for (const s of SPANS) if (had <= s) return s;
    return WINDOW_S;
  }

  // A tick's label, `ago` seconds before now on a chart spanning `span`: "-90 s", "-3 min".
  function tickText(ago, span) {
    if (ago <= 0) return "now";
    return span < 180 ? "-" + Math.round(ago) + " s" : "-" + Math.round(ago / 60) + " min";
  }

  // ---------- DOM helpers ----------

  function setText(el, v) {
    const s = str(v);
    if (el.textContent !== s) el.textContent = s;
  }

  function setAttr(el, name, v) {
    const s = str(v);
    if (el.getAttribute(name) !== s) el.setAttribute(name, s);
  }

  function toggle(el, cls, on) {
    if (el.classList.contains(cls) !== !!on) el.classList.toggle(cls, !!on);
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }

  // A cell's text, with the whole of a long value in its tooltip.
  function cellText(td, v) {
    const s = str(v);
    setText(td, s);
    if (s.length > 40) setAttr(td, "title", s.length > MAX_TITLE ? s.slice(0, MAX_TITLE) + "…" : s);
    else if (td.hasAttribute("title")) td.removeAttribute("title");
  }

  /* Make `tbody` hold one row per item (up to `cap`), reusing the rows it has.
   * columns: [{cls, get(item) -> text, box: the text goes in a scrolling div}];
   * decorate(tr, item) sets the row's own attributes. */
  function syncRows(tbody, items, columns, cap, decorate) {
    const list = Array.isArray(items) ? items.slice(0, cap) : [];
    const rows = tbody.rows;
    while (rows.length > list.length) tbody.deleteRow(rows.length - 1);
    for (let i = 0; i < list.length; i++) {
      let tr = rows[i];
      if (!tr) {
        tr = document.createElement("tr");
        for (const c of columns) {
          const td = tr.appendChild(el("td", c.cls || ""));
          if (c.box) td.appendChild(el("div", "box"));
        }
        tbody.appendChild(tr);
      }
      const item = list[i] || {};
      for (let j = 0; j < columns.length; j++) {
        const td = tr.cells[j];
        if (columns[j].box) setText(td.firstChild, columns[j].get(item));
        else cellText(td, columns[j].get(item));
      }
      if (decorate) decorate(tr, item);
    }
    return Array.isArray(items) ? Math.max(0, items.length - list.length) : 0;
  }

  // ---------- charts ----------

  const charts = {}; // series -> {svg, lines: Map(id -> polyline), total, ymax}
  const colours = new Map(); // instance -> colour index, while it is drawn

  function buildChart(s) {
    const root = document.querySelector('svg.chart[data-series="' + s + '"]');
    if (!root) return;
    svgNS = root.namespaceURI;
    const grid = svg("g", { class: "grid" });
    for (const f of [0, 0.5, 1]) {
      const y = G.top + (G.bottom - G.top) * f;
      grid.appendChild(svg("line", { x1: G.left, y1: y, x2: G.right, y2: y, class: f === 1 ? "axis" : "" }));
    }
    for (const f of [1 / 3, 2 / 3]) {
      const x = G.left + (G.right - G.left) * f;
      grid.appendChild(svg("line", { x1: x, y1: G.top, x2: x, y2: G.bottom, class: "v" }));
    }
    root.appendChild(grid);
    const ymax = svg("text", { x: G.left, y: G.top - 4, class: "ymax" });
    ymax.textContent = "1/s";
    root.appendChild(ymax);
    const labels = [
      [G.left, "start", 1],
      [G.left + (G.right - G.left) / 3, "middle", 2 / 3],
      [G.left + (2 * (G.right - G.left)) / 3, "middle", 1 / 3],
      [G.right, "end", 0],
    ];
    const ticks = [];
    for (const [x, anchor, part] of labels) {
      const t = svg("text", { x: x, y: G.label, "text-anchor": anchor, class: "tlabel" });
      t.textContent = tickText(part * WINDOW_S, WINDOW_S);
      root.appendChild(t);
      ticks.push([t, part]);
    }
    // the total under the collectors' lines, wider and paler: a collector's line equal to it still shows
    const total = svg("polyline", { class: "line total", "data-instance": "*", "data-points": "0", points: "" });
    root.appendChild(total);
    const per = svg("g", { class: "per" });
    root.appendChild(per);
    const clip = svg("path", { class: "clip", d: "" });
    root.appendChild(clip);
    const peak = svg("text", { x: G.right, y: G.top - 4, "text-anchor": "end", class: "peak" });
    root.appendChild(peak);
    const young = svg("text", { x: (G.left + G.right) / 2, y: (G.top + G.bottom) / 2, "text-anchor": "middle", class: "young" });
    root.appendChild(young);
    charts[s] = { svg: root, per, lines: new Map(), total, ymax, clip, peak, young, ticks };
  }

  const collator = new Intl.Collator("en", { numeric: true });
  const byName = (a, b) => collator.compare(a, b);

  // The collectors drawn one by one: those in the window, by id, up to MAX_LINES; each keeps its colour.
  function drawnInstances(points) {
    const ids = new Set();
    for (const p of points) if (p.by && typeof p.by === "object") for (const id in p.by) ids.add(id);
    const all = Array.from(ids).sort(byName);
    const drawn = all.slice(0, MAX_LINES);
    const keep = new Set(drawn);
    for (const id of Array.from(colours.keys())) if (!keep.has(id)) colours.delete(id);
    const used = new Set(colours.values());
    for (const id of drawn) {
      if (colours.has(id)) continue;
      let c = 0;
      while (used.has(c)) c++;
      colours.set(id, c);
      used.add(c);
    }
    return { drawn: drawn, hidden: all.length - drawn.length };
  }

  // A line's points, values above `ymax` drawn at the top (their x added to `clipped`).
  function coords(points, pick, t0, ymax, clipped) {
    const out = [];
    const xs = (G.right - G.left) / chartSpan(historyS(points));
    const ys = (G.bottom - G.top) / ymax;
    for (const p of points) {
      const v = pick(p);
      if (!isNum(v) || !isNum(p.t)) continue;
      const x = G.left + (p.t - t0) * xs;
      const y = G.bottom - Math.min(v, ymax) * ys;
      if (v > ymax) clipped.add(x.toFixed(1));
      out.push(x.toFixed(1) + "," + y.toFixed(1));
    }
    return out;
  }

  function samples(points, s, drawn) {
    const out = [];
    for (const p of points) {
      out.push([p.t, p.total ? p.total[s] : null]);
      if (!p.by) continue;
      for (const id of drawn) {
        const r = p.by[id];
        if (r) out.push([p.t, r[s]]);
      }
    }
    return out;
  }

  // The history the charts hold, in seconds (0 for fewer than two points).
  function historyS(points) {
    return points.length > 1 ? points[points.length - 1].t - points[0].t : 0;
  }

  // The marks of clipped values: a small triangle at the top of the chart above each.
  function clipMarks(c, clipped, scale) {
    const d = Array.from(clipped, (x) => "M" + x + "," + (G.top + 1) + "l-2.5,-4h5z").join("");
    setAttr(c.clip, "d", d);
    setAttr(c.clip, "data-clipped", clipped.size);
    setText(c.peak, scale.clipped ? "▲ peak " + fmtRate(scale.peak) + "/s, clipped" : "");
  }

  function renderChart(s, points, drawn, t0) {
    const c = charts[s];
    if (!c) return;
    const span = chartSpan(historyS(points));
    for (const [t, part] of c.ticks) setText(t, tickText(part * span, span));
    const scale = chartScale(samples(points, s, drawn), t0 + span);
    const ymax = scale.top;
    const clipped = new Set();
    setText(c.ymax, Number(ymax.toPrecision(3)).toLocaleString("en-US") + "/s"); // a nice number: 5/s, 2.5/s
    const had = historyS(points);
    toggle(c.svg, "collecting", had < COLLECTING_S);
    setText(c.young, had < COLLECTING_S ? "collecting: " + Math.floor(had) + " s of history" : "");
    const total = coords(points, (p) => (p.total ? p.total[s] : null), t0, ymax, clipped);
    setAttr(c.total, "points", total.join(" "));
    setAttr(c.total, "data-points", total.length);
    const keep = new Set(drawn);
    for (const [id, line] of c.lines) {
      if (!keep.has(id)) {
        line.remove();
        c.lines.delete(id);
      }
    }
    drawn.forEach((id, layer) => {
      let line = c.lines.get(id);
      if (!line) {
        line = svg("polyline", { "data-instance": id, points: "" });
        c.lines.set(id, line);
      }
      c.per.appendChild(line); // in the order drawn: each line above is thinner, so one under it still shows
      setAttr(line, "class", "line c" + colours.get(id) + " w" + Math.min(layer, 3));
      const xy = coords(points, (p) => (p.by && p.by[id] ? p.by[id][s] : null), t0, ymax, clipped);
      setAttr(line, "points", xy.join(" "));
      setAttr(line, "data-points", xy.length);
    });
    clipMarks(c, clipped, scale);
  }

  function renderLegend(drawn, hidden) {
    const ul = $("#legend");
    let more = $("#legend-more");
    if (more) more.remove();
    const want = [["*", "total", "total"]].concat(drawn.map((id) => [id, "c" + colours.get(id), id]));
    while (ul.children.length > want.length) ul.lastChild.remove();
    for (let i = 0; i < want.length; i++) {
      let li = ul.children[i];
      if (!li) {
        li = el("li");
        li.appendChild(el("span", "sw"));
        li.appendChild(el("span", "name"));
        ul.appendChild(li);
      }
      setAttr(li, "data-instance", want[i][0]);
      setAttr(li.firstChild, "class", "sw " + want[i][1]);
      setText(li.lastChild, want[i][2]);
    }
    if (hidden > 0) {
      if (!more) {
        more = el("li", "muted");
        more.id = "legend-more";
      }
      ul.appendChild(more);
      setText(more, "+" + hidden + " more (in the total only)");
    }
  }

  function renderCharts() {
    const pts = state.points;
    const last = pts.length ? pts[pts.length - 1].t : Date.now() / 1000;
    const t0 = last - chartSpan(historyS(pts));
    const { drawn, hidden } = drawnInstances(pts);
    for (const s of SERIES) renderChart(s, pts, drawn, t0);
    renderLegend(drawn, hidden);
  }

  // ---------- points ----------

  function validPoint(p) {
    return p && typeof p === "object" && isNum(p.t);
  }

  function trimPoints() {
    const pts = state.points;
    if (!pts.length) return;
    const from = pts[pts.length - 1].t - WINDOW_S;
    let i = 0;
    while (i < pts.length && pts[i].t < from) i++;
    if (pts.length - i > MAX_POINTS) i = pts.length - MAX_POINTS;
    if (i > 0) pts.splice(0, i);
  }

  function addPoint(p) {
    if (!validPoint(p)) return;
    const pts = state.points;
    const last = pts.length ? pts[pts.length - 1] : null;
    if (last && p.t < last.t) return; // out of order: a reconnect's replay
    if (last && p.t === last.t) pts[pts.length - 1] = p;
    else pts.push(p);
    trimPoints();
  }

  // ---------- header ----------

  function renderHeader(snap) {
    const db = snap.database || {};
    const dbEl = $("#db-status");
    const banner = $("#db-banner");
    if (db.ok === false) {
      const since = parseTime(db.since);
      setText(dbEl, "database: unreachable");
      dbEl.className = "pill bad";
      setText(
        $("#db-banner-text"),
        "database unreachable since " + (since === null ? "?" : clock(since)) + " — showing the last data read",
      );
      setText($("#db-banner-error"), db.error || "");
      banner.hidden = false;
    } else {
      setText(dbEl, "database: ok");
      dbEl.className = "pill ok";
      banner.hidden = true;
    }
    const mon = snap.monitor || {};
    setText($("#mon-version"), mon.version ? "monitor " + str(mon.version) : "");
    setText($("#viewers"), isNum(mon.viewers) ? mon.viewers + (mon.viewers === 1 ? " viewer" : " viewers") : "");
    setActions(mon.actions === true);
    tickAges();
  }

  function ago(iso) {
    const ms = parseTime(iso);
    if (ms === null) return null;
    return Math.max(0, (Date.now() - ms) / 1000);
  }

  function tickAges() {
    const snap = state.snapshot;
    const up = $("#updated");
    if (!snap) return;
    const age = ago(snap.at);
    setText(up, age === null ? "updated: unknown" : "updated " + fmtDur(age) + " ago");
    up.className = "pill " + (age !== null && age <= STALE_AFTER_S ? "muted" : "warn");
    const work = snap.work || {};
    const wage = ago(work.at);
    setText($("#work-age"), wage === null ? "" : "read " + fmtDur(wage) + " ago");
  }

  // ---------- rates ----------

  function renderRates(snap) {
    const r = snap.rates || {};
    for (const s of SERIES) {
      const e = document.querySelector('#rates [data-rate="' + s + '"]');
      if (e) setText(e, fmtRate(r[s]) + "/s");
    }
    const kinds = r.errorsByKind && typeof r.errorsByKind === "object" ? r.errorsByKind : {};
    const list = Object.entries(kinds)
      .filter(([, v]) => isNum(v) && v > 0)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 30);
    const ul = $("#errors-by-kind");
    const want = list.length ? list.map(([k, v]) => [k, fmtRate(v) + "/s"]) : [[null, "none now"]];
    while (ul.children.length > want.length) ul.lastChild.remove();
    for (let i = 0; i < want.length; i++) {
      let li = ul.children[i];
      if (!li) {
        li = el("li");
        ul.appendChild(li);
      }
      const [kind, text] = want[i];
      setText(li, kind === null ? text : kind + ": " + text);
      setAttr(li, "class", kind === null ? "muted" : "kind");
    }
  }

  // ---------- fleet ----------

  function running(list) {
    if (!Array.isArray(list) || !list.length) return "–";
    const shown = list.slice(0, RUNNING_SHOWN).map((r) => str(r && r.service) + "/" + str(r && r.user));
    const more = list.length - shown.length;
    return shown.join(", ") + (more > 0 ? " +" + more + " more" : "");
  }

  const FLEET = [
    { cls: "id mono", get: (f) => f.id },
    { cls: "alive", get: (f) => (f.alive === false ? "stale " + fmtDur(f.ageS) : "alive") },
    { cls: "mode", get: (f) => f.mode },
    { cls: "host", get: (f) => str(f.host) + ":" + str(f.pid) },
    { cls: "version", get: (f) => f.version },
    { cls: "services", get: (f) => f.services },
    { cls: "uptime num", get: (f) => fmtDur(f.uptimeS) },
    { cls: "rss num", get: (f) => fmtMiB(f.rssBytes) },
    { cls: "cpu num", get: (f) => fmtPct(f.cpuPercent) },
    { cls: "inflight num", get: (f) => fmtInt(f.inflight) },
    { cls: "running", get: (f) => running(f.running) },
    { cls: "r-runs num", get: (f) => fmtRate(f.rates && f.rates.runs) },
    { cls: "r-items num", get: (f) => fmtRate(f.rates && f.rates.newItems) },
  ];

  function renderFleet(snap) {
    const fleet = Array.isArray(snap.fleet) ? snap.fleet : [];
    const hidden = syncRows($("#fleet tbody"), fleet, FLEET, MAX_FLEET_ROWS, (tr, f) => {
      setAttr(tr, "data-instance", f.id);
      toggle(tr, "stale", f.alive === false);
      const alive = tr.querySelector("td.alive");
      toggle(alive, "bad", f.alive === false);
      toggle(alive, "good", f.alive !== false);
    });
    const live = fleet.filter((f) => f && f.alive !== false).length;
    const total = Number.isFinite(snap.fleetCount) ? Math.max(snap.fleetCount, fleet.length) : fleet.length;
    const unsent = total - fleet.length; // the monitor sends the first 200 (the alive ones first)
    setText($("#fleet-count"), total + " collectors, " + live + (unsent ? "+" : "") + " alive");
    const more = $("#fleet-more");
    more.hidden = hidden + unsent === 0;
    setText(more, hidden + unsent ? "+" + (hidden + unsent) + " more collectors not shown" : "");
  }

  // ---------- work ----------

  const MODES = [
    { cls: "mode", get: (m) => m._mode },
    { cls: "num", get: (m) => fmtInt(m.networks) },
    { cls: "num", get: (m) => fmtInt(m.due) },
    { cls: "num", get: (m) => fmtDur(m.lagS) },
    { cls: "num", get: (m) => fmtInt(m.rateLimit) },
    { cls: "num", get: (m) => fmtInt(m.disabled) },
    { cls: "num", get: (m) => fmtInt(m.leased) },
  ];
  const SERVICES = [
    { cls: "service", get: (s) => s.service },
    { cls: "num", get: (s) => fmtInt(s.networks) },
    { cls: "num", get: (s) => fmtInt(s.due) },
    { cls: "num", get: (s) => fmtDur(s.lagS) },
    { cls: "num", get: (s) => fmtInt(s.erroring) },
    { cls: "num", get: (s) => fmtInt(s.disabled) },
  ];
  const PAUSES = [
    { cls: "scope", get: (p) => p.scope || "mode " + str(p.mode) + ", service " + str(p.service) },
    { cls: "reason", get: (p) => p.reason },
    { cls: "by", get: (p) => p.by },
    { cls: "at", get: (p) => fmtTime(p.at) },
    { cls: "until", get: (p) => (p.until ? fmtTime(p.until) : "resumed by hand") },
  ];
  const SINKS = [
    { cls: "name", get: (s) => s.name },
    { cls: "kind", get: (s) => s.kind },
    { cls: "state", get: (s) => s.state },
    { cls: "num", get: (s) => fmtInt(s.backlog) },
    { cls: "num", get: (s) => fmtDur(s.lagS) },
    { cls: "num", get: (s) => fmtInt(s.delivered) },
    { cls: "num", get: (s) => fmtInt(s.deadLetters) },
    { cls: "at", get: (s) => (s.failing ? fmtTime(s.failing.since) : "") },
    { cls: "message", get: (s) => (s.failing ? s.failing.reason : "") },
  ];
  const BEHIND = [
    { cls: "id mono", get: (b) => b.id },
    { cls: "user", get: (b) => b.user },
    { cls: "service", get: (b) => b.service },
    { cls: "mode", get: (b) => b.mode },
    { cls: "at", get: (b) => fmtTime(b.scheduledTo) },
    { cls: "num", get: (b) => fmtDur(b.lagS) },
    { cls: "num", get: (b) => fmtInt(b.errors) },
  ];
  const RENEWALS = [
    { cls: "id mono", get: (r) => r.id },
    { cls: "user", get: (r) => r.user },
    { cls: "service", get: (r) => r.service },
  ];
  const ERRORS = [
    { cls: "at", get: (e) => fmtTime(e.at) },
    { cls: "service", get: (e) => e.service },
    { cls: "kind", get: (e) => e.kind },
    { cls: "user", get: (e) => e.user },
    { cls: "message", get: (e) => e.message },
  ];

  function renderWork(snap) {
    const work = snap.work || {};
    const modes = work.modes && typeof work.modes === "object" ? work.modes : {};
    const modeRows = Object.keys(modes).map((k) => Object.assign({}, modes[k], { _mode: k }));
    syncRows($("#work-modes tbody"), modeRows, MODES, MAX_ROWS, (tr, m) => setAttr(tr, "data-mode", m._mode));
    syncRows($("#work-services tbody"), work.services, SERVICES, MAX_ROWS, (tr, s) =>
      setAttr(tr, "data-service", s.service),
    );
    const items = work.items || {};
    for (const k of ["total", "lastHour", "lastDay"]) {
      const e = document.querySelector('#items [data-item="' + k + '"]');
      if (e) setText(e, fmtInt(items[k]));
    }
    syncRows($("#pauses tbody"), work.pauses, PAUSES, MAX_ROWS);
    const sinks = work.sinks && Array.isArray(work.sinks.rows) ? work.sinks.rows : [];
    syncRows($("#sinks tbody"), sinks, SINKS, MAX_ROWS, (tr, s) => {
      setAttr(tr, "data-sink", s.name);
      toggle(tr, "failing", !!s.failing);
    });
    syncRows($("#behind tbody"), work.behind, BEHIND, MAX_ROWS, (tr, b) => {
      setAttr(tr, "data-network", b.id);
      toggle(tr, "clickable", true);
    });
    syncRows($("#renewals tbody"), work.renewals, RENEWALS, MAX_ROWS, (tr, r) => {
      setAttr(tr, "data-network", r.id); // a click opens it below, where "renew" runs a connect flow
      toggle(tr, "clickable", true);
    });
    syncRows($("#errors tbody"), work.errors, ERRORS, MAX_ROWS);
  }

  // Under every table of the snapshot: what its emptiness means (the note's data-empty), hidden when it has rows.
  function renderEmpty() {
    for (const note of document.querySelectorAll("p.empty[data-for]")) {
      const body = $("#" + note.getAttribute("data-for") + " tbody");
      const rows = body ? body.rows.length : 0;
      note.hidden = rows > 0;
      if (!rows) setText(note, note.getAttribute("data-empty"));
    }
  }

  // ---------- rendering ----------

  function render() {
    state.renderPending = false;
    const snap = state.snapshot;
    renderCharts();
    if (!snap) return;
    renderHeader(snap);
    renderRates(snap);
    renderFleet(snap);
    renderWork(snap);
    renderEmpty();
  }

  function scheduleRender() {
    if (state.renderPending) return;
    state.renderPending = true;
    requestAnimationFrame(render);
  }

  // ---------- the stream ----------

  function parse(ev) {
    try {
      return JSON.parse(ev.data);
    } catch (e) {
      return null;
    }
  }

  function streamStatus(text, cls) {
    const e = $("#stream-status");
    setText(e, text);
    e.className = "pill " + cls;
  }

  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("open", () => streamStatus("live", "ok"));
    es.addEventListener("error", () => {
      streamStatus("reconnecting…", "warn");
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        setTimeout(connect, REOPEN_MS);
      }
    });
    es.addEventListener("history", (ev) => {
      const data = parse(ev);
      if (!data || !Array.isArray(data.points)) return;
      const pts = data.points.filter(validPoint).slice(-MAX_POINTS);
      pts.sort((a, b) => a.t - b.t);
      state.points = pts;
      trimPoints();
      scheduleRender();
    });
    es.addEventListener("snapshot", (ev) => {
      const snap = parse(ev);
      if (!snap || typeof snap !== "object") return;
      state.snapshot = snap;
      addPoint(snap.point);
      scheduleRender();
    });
  }

  // ---------- actions ----------

  function showResult(text, ok) {
    const e = $("#action-result");
    setText(e, text);
    e.className = "result " + (ok ? "good" : "bad");
  }

  // on: true (a token is configured), false (read-only), null (not known yet: no snapshot read).
  function setActions(on) {
    const mode = on === true ? "on" : on === false ? "off" : "unknown";
    if (document.body.dataset.actions === mode) return;
    document.body.dataset.actions = mode;
    state.actions = on === true;
    const note = $("#actions-note");
    setText(note, mode === "on" ? "" : mode === "off" ? "read-only: no MONITOR_TOKEN configured" : "waiting for the monitor…");
    note.hidden = mode === "on";
    for (const b of document.querySelectorAll("[data-action]")) b.disabled = !state.actions;
    $("#token").disabled = !state.actions;
  }

  // A POST with the token: {ok, message, data}, said nowhere (post() shows it).
  async function call(path, body) {
    let resp;
    try {
      resp = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Monitor-Token": state.token },
        body: JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (e) {
      return { ok: false, message: "request failed: " + str(e && e.message), data: null };
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    const ok = resp.ok && !!(data && data.ok);
    const msg = data && typeof data.message === "string" ? data.message : "HTTP " + resp.status;
    return { ok: ok, message: msg, data: data };
  }

  async function post(path, body) {
    if (!state.actions) {
      showResult("read-only: no MONITOR_TOKEN configured", false);
      return { ok: false, data: null };
    }
    const got = await call(path, body);
    showResult(got.message, got.ok);
    return got;
  }

  function scope() {
    const mode = $("#act-mode").value;
    const service = $("#act-service").value.trim();
    return { mode: mode || null, service: service || null };
  }

  function onPause() {
    const body = scope();
    body.reason = $("#act-reason").value.trim();
    return post("/api/pause", body);
  }

  function onResume() {
    return post("/api/resume", scope());
  }

  async function onNetworkAction(action, id) {
    const got = await post("/api/networks/" + action, { id: id });
    if (got.ok && state.lastQuery !== null) search(state.lastQuery, id);
  }

  // "remove" asks for a second click within CONFIRM_MS (the button says so), then removes.
  const CONFIRM_MS = 8000;

  function onRemove(id) {
    if (state.confirming !== id) {
      state.confirming = id;
      renderNetworks();
      setTimeout(() => {
        if (state.confirming !== id) return;
        state.confirming = null;
        renderNetworks();
      }, CONFIRM_MS);
      return;
    }
    state.confirming = null;
    renderNetworks();
    onNetworkAction("remove", id);
  }

  // ---------- accounts: connect flows, add with a token ----------

  const FLOW_POLL_MS = 1000;

  function webLink(a, url, text) {
    const ok = typeof url === "string" && /^https?:\/\//i.test(url);
    if (ok) a.setAttribute("href", url);
    else a.removeAttribute("href");
    setText(a, ok ? text || url : "");
  }

  function showFlow(f) {
    state.flow = f;
    const pane = $("#connect-flow");
    pane.hidden = false;
    const pending = f.status === "pending";
    setText($("#connect-what"), str(f.service) + " for " + str(f.user));
    let step = "";
    if (pending && f.way === "device") {
      step = f.userCode ? "Enter this code at the address below, signed in as the person:" : "asking the service for a code…";
    } else if (pending) {
      step = f.openUrl ? "Open the service’s page, allow access; it sends the browser back to this monitor." : "preparing…";
    }
    setText($("#connect-step"), step);
    setText($("#connect-code"), pending && f.way === "device" ? f.userCode : "");
    const link = $("#connect-link");
    if (!pending) webLink(link, "", "");
    else if (f.way === "device") webLink(link, f.verificationUri);
    else webLink(link, f.openUrl, "open the service’s page");
    const out = $("#connect-outcome");
    setText(out, pending ? "waiting for the person…" : (f.status === "done" ? "done: " : "failed: ") + str(f.message));
    out.className = "result " + (pending ? "" : f.status === "done" ? "good" : "bad");
  }

  async function watchFlow(id) {
    if (!state.flow || state.flow.id !== id || state.flow.status !== "pending") return;
    const got = await call("/api/connect/state", { id: id });
    if (!state.flow || state.flow.id !== id) return; // another flow was started meanwhile
    if (got.data && got.data.flow && typeof got.data.flow === "object") showFlow(got.data.flow);
    else if (!got.ok) showFlow(Object.assign({}, state.flow, { status: "failed", message: got.message }));
    if (state.flow.status === "pending") setTimeout(() => watchFlow(id), FLOW_POLL_MS);
    else if (state.lastQuery !== null) search(state.lastQuery, state.selected);
  }

  async function startFlow(service, user) {
    const got = await post("/api/connect", { service: service, user: user, origin: location.origin });
    if (!got.ok || !got.data || !got.data.flow || typeof got.data.flow !== "object") return;
    showFlow(got.data.flow);
    setTimeout(() => watchFlow(got.data.flow.id), FLOW_POLL_MS);
  }

  function onConnect() {
    return startFlow($("#connect-service").value, $("#connect-user").value.trim());
  }

  function serviceNamed(name) {
    return state.services.find((s) => s.name === name) || null;
  }

  function renderAddFields() {
    const box = $("#add-fields");
    box.replaceChildren();
    const s = serviceNamed($("#add-service").value);
    for (const f of (s && Array.isArray(s.fields) ? s.fields : [])) {
      const label = el("label", "", str(f.name) + " ");
      const input = el("input");
      input.type = f.secret ? "password" : "text";
      input.autocomplete = "off";
      input.spellcheck = false;
      input.placeholder = f.required ? "required" : "optional";
      input.setAttribute("data-field", str(f.name));
      label.appendChild(input);
      box.appendChild(label);
    }
  }

  function fillSelect(select, names) {
    select.replaceChildren();
    for (const n of names) {
      const o = el("option", "", n);
      o.value = n;
      select.appendChild(o);
    }
  }

  async function loadServices() {
    let data = null;
    try {
      const resp = await fetch("/api/services", { cache: "no-store" });
      data = await resp.json();
    } catch (e) {
      return;
    }
    const list = data && Array.isArray(data.services) ? data.services.filter((s) => s && typeof s.name === "string") : [];
    state.services = list;
    fillSelect($("#connect-service"), list.filter((s) => s.connect).map((s) => s.name));
    fillSelect($("#add-service"), list.map((s) => s.name));
    for (const select of [$("#connect-service"), $("#add-service")]) {
      if (serviceNamed("github")) select.value = "github"; // the one most operators connect first
    }
    renderAddFields();
  }

  async function onAdd() {
    const credentials = {};
    for (const input of document.querySelectorAll("#add-fields input[data-field]")) {
      if (input.value.trim()) credentials[input.getAttribute("data-field")] = input.value.trim();
    }
    const body = {
      service: $("#add-service").value,
      user: $("#add-user").value.trim(),
      credentials: credentials,
      replace: $("#add-replace").checked,
    };
    const got = await post("/api/networks/add", body);
    if (got.ok) {
      for (const input of document.querySelectorAll("#add-fields input")) input.value = ""; // the token is not kept
      if (state.lastQuery !== null) search(state.lastQuery, state.selected);
    }
  }

  // ---------- drill-down ----------

  function stateText(n) {
    const st = str(n.state);
    return n.disabled && !/disabled/i.test(st) ? (st ? st + " (disabled)" : "disabled") : st;
  }

  const NETWORKS = [
    { cls: "id mono", get: (n) => n.id },
    { cls: "user", get: (n) => n.user },
    { cls: "service", get: (n) => n.service },
    { cls: "mode", get: (n) => n.mode },
    { cls: "state", get: (n) => stateText(n) },
    { cls: "num", get: (n) => fmtInt(n.errors) },
    { cls: "num", get: (n) => fmtInt(n.items) },
  ];

  function renderNetworks() {
    const tbody = $("#networks tbody");
    syncRows(tbody, state.results, NETWORKS.concat([{ cls: "buttons", get: () => "" }]), MAX_ROWS, (tr, n) => {
      setAttr(tr, "data-network", n.id);
      toggle(tr, "selected", state.selected === n.id);
      toggle(tr, "clickable", true);
      const td = tr.cells[tr.cells.length - 1];
      if (!td.firstChild) {
        for (const a of ["enable", "reset", "renew", "remove"]) {
          const b = el("button", "small", a);
          b.type = "button";
          b.setAttribute("data-action", a);
          td.appendChild(b);
        }
      }
      for (const b of td.querySelectorAll("button")) b.disabled = !state.actions;
      const renew = td.querySelector('[data-action="renew"]');
      const remove = td.querySelector('[data-action="remove"]');
      renew.hidden = n.unauthorized !== true; // waits for re-authorisation: a connect flow renews it
      renew.title = "start a connect flow that renews this network (the same account)";
      const asking = state.confirming === n.id;
      setText(remove, asking ? "confirm remove" : "remove");
      toggle(remove, "danger", asking);
      remove.title = asking ? "click again to remove this network (its items are kept)" : "remove this network";
    });
  }

  function renderDetail() {
    const pane = $("#network-detail");
    const n = state.results.find((r) => r && r.id === state.selected);
    if (!n) {
      pane.hidden = true;
      return;
    }
    setText($("#nd-id"), n.id);
    setText($("#nd-state"), stateText(n) || "–");
    setText($("#nd-next"), n.scheduledTo ? fmtTime(n.scheduledTo) + "  (" + str(n.scheduledTo) + ")" : "–");
    const le = n.lastError;
    setText(
      $("#nd-error"),
      le && typeof le === "object" ? str(le.kind) + " at " + fmtTime(le.at) + ": " + str(le.message) : "none",
    );
    const doc = n.document && typeof n.document === "object" ? n.document : {};
    const rows = Object.keys(doc).map((k) => ({ k: k, v: doc[k] }));
    const columns = [
      { cls: "key mono", get: (r) => r.k },
      { cls: "value", get: (r) => r.v, box: true },
    ];
    syncRows($("#nd-document tbody"), rows, columns, 500);
    pane.hidden = false;
  }

  // How many a search found, and where it stopped: "3 networks", "first 50 of more: narrow the search".
  function foundText(n, data) {
    const what = n + (n === 1 ? " network" : " networks");
    if (data && data.slow) return "first " + what + " found: the search of addresses stopped at its time bound";
    if (data && data.more) return "first " + n + " of more: narrow the search";
    return what;
  }

  async function search(q, keepSelected) {
    state.lastQuery = q;
    setText($("#search-status"), "searching…");
    let data = null;
    try {
      const resp = await fetch("/api/networks?q=" + encodeURIComponent(q), { cache: "no-store" });
      data = await resp.json();
    } catch (e) {
      setText($("#search-status"), "search failed: " + str(e && e.message));
      return;
    }
    if (state.lastQuery !== q) return; // a later search answered first
    const list = data && Array.isArray(data.networks) ? data.networks.filter((n) => n && typeof n === "object") : [];
    state.results = list.slice(0, MAX_ROWS);
    state.selected = keepSelected && list.some((n) => n.id === keepSelected) ? keepSelected : null;
    const err = data && data.error ? "error: " + str(data.error) : "";
    setText($("#search-status"), err || foundText(list.length, data));
    const none = $("#networks-none");
    none.hidden = list.length > 0 || !!err;
    setText(none, q ? "no network matches “" + q + "”: no id, no service of that name, no user whose address holds it" : "type a part of a user’s address, a service’s name or a network’s id");
    renderNetworks();
    renderDetail();
  }

  function onNetworksClick(ev) {
    const tr = ev.target.closest("tr[data-network]");
    if (!tr) return;
    const id = tr.getAttribute("data-network");
    const button = ev.target.closest("button[data-action]");
    if (button) {
      const action = button.getAttribute("data-action");
      const n = state.results.find((r) => r && r.id === id);
      if (action === "remove") onRemove(id);
      else if (action === "renew") {
        if (n) startFlow(str(n.service), str(n.user));
      } else onNetworkAction(action, id);
      return;
    }
    state.selected = id;
    renderNetworks();
    renderDetail();
  }

  function onBehindClick(ev) {
    const tr = ev.target.closest("tr[data-network]");
    if (!tr) return;
    const id = tr.getAttribute("data-network");
    $("#search-q").value = id;
    search(id, id);
  }

  // ---------- start ----------

  function start() {
    for (const s of SERIES) buildChart(s);
    setActions(null);
    streamStatus("connecting…", "warn");
    $("#token").addEventListener("input", (ev) => {
      state.token = ev.target.value;
    });
    $("#search").addEventListener("submit", (ev) => {
      ev.preventDefault();
      search($("#search-q").value.trim());
    });
    for (const form of ["#actions", "#connect", "#add"]) {
      $(form).addEventListener("submit", (ev) => ev.preventDefault()); // Enter in a field acts on nothing
    }
    $('#connect [data-action="connect"]').addEventListener("click", onConnect);
    $('#add [data-action="add"]').addEventListener("click", onAdd);
    $("#add-service").addEventListener("change", renderAddFields);
    loadServices();
    $("#networks tbody").addEventListener("click", onNetworksClick);
    $("#behind tbody").addEventListener("click", onBehindClick);
    $("#renewals tbody").addEventListener("click", onBehindClick);
    $('#actions-section [data-action="pause"]').addEventListener("click", onPause);
    $('#actions-section [data-action="resume"]').addEventListener("click", onResume);
    setInterval(tickAges, 1000);
    connect();
    scheduleRender();
  }

  // For the browser test (and the curious, in the console): the charts' scale, and the charts drawn from points.
  window.monitorCharts = Object.freeze({
    scale: chartScale,
    span: chartSpan,
    draw: function (points) {
      state.points = Array.isArray(points) ? points.filter(validPoint) : [];
      renderCharts();
    },
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
