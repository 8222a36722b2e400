// The weir dashboard: polls /api/frame and renders every figure of one
// frame. Every figure carries data-k (its key) and data-v (the value as the
// API gave it), and <body data-seq> names the frame shown (D3), so a test
// can compare the page with /api/frame?seq=N. No library, no network access
// beyond this server's API.
"use strict";

const POLL_MS = 1000;
const MIN_WM = -9.2e18, MAX_WM = 9.2e18; // watermark.Min / watermark.Max as JSON numbers
const COLORS = ["#3a6fd8", "#2f9e63", "#d98a1c", "#c9413b", "#7b55c7", "#1a9fb0", "#b0498f", "#6b7385"];
let history = [];   // Points: {seq, atMs, in[], out[], backPressure[]}
let lastSeq = 0;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of kids.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const svgNS = "http://www.w3.org/2000/svg";
function sv(tag, attrs, ...kids) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined) e.setAttribute(k, v);
  for (const c of kids.flat()) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
// fig is one figure: an element with its key, raw value and shown text.
function fig(tag, key, value, text, cls) {
  return el(tag, {"data-k": key, "data-v": value === null || value === undefined ? "" : String(value), class: cls}, text);
}
const td = (key, value, text, cls) => fig("td", key, value, text, "num " + (cls || ""));

const nf = new Intl.NumberFormat("en-US");
function num(v) { return nf.format(v); }
function rate(v) { return v >= 100 ? nf.format(Math.round(v)) : v.toFixed(1); }
function dur(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  if (ms < 1000) return ms.toFixed(ms < 10 && ms % 1 ? 2 : 0) + " ms";
  const s = ms / 1000;
  if (s < 120) return s.toFixed(s < 10 ? 2 : 1) + " s";
  const m = s / 60;
  if (m < 120) return m.toFixed(1) + " min";
  const h = m / 60;
  if (h < 48) return h.toFixed(1) + " h";
  return (h / 24).toFixed(1) + " d";
}
function bytes(b) {
  if (!b) return "–";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + " " + u[i];
}
function wmText(w) {
  if (w <= MIN_WM) return "none yet";
  if (w >= MAX_WM) return "end of input";
  return new Date(w).toISOString().replace("T", " ").replace("Z", "");
}
function clock(ms) { return new Date(ms).toISOString().substr(11, 12); }
function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {class: h.endsWith(" ") ? "num" : ""}, h.trim())))),
    el("tbody", {}, rows));
}
function empty(text) { return el("p", {class: "mute"}, text); }
function put(id, ...nodes) { const e = document.getElementById(id); e.replaceChildren(...nodes); }

// The job graph: operators in columns by depth (longest path from a source).
function renderGraph(f) {
  // Operators are identified by uid (names may repeat); f.operators lists
  // every operator after its inputs.
  const ops = f.operators, depth = {};
  for (const o of ops) {
    depth[o.uid] = 0;
    for (const e of o.inputs || []) depth[o.uid] = Math.max(depth[o.uid], (depth[e.fromUid] ?? 0) + 1);
  }
  const cols = [];
  for (const o of ops) (cols[depth[o.uid]] = cols[depth[o.uid]] || []).push(o);
  const W = 176, H = 74, GX = 54, GY = 18, pos = {};
  cols.forEach((c, i) => c.forEach((o, j) => pos[o.uid] = {x: 10 + i * (W + GX), y: 10 + j * (H + GY)}));
  const width = 20 + cols.length * (W + GX) - GX, height = 20 + Math.max(...cols.map(c => c.length)) * (H + GY) - GY;
  const svg = sv("svg", {viewBox: `0 0 ${width} ${height}`, style: `max-width:${width * 1.25}px`});
  for (const o of ops) for (const e of o.inputs || []) {
    const a = pos[e.fromUid], b = pos[o.uid];
    if (!a) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    svg.append(sv("path", {class: "edge" + (e.chained ? " chained" : "") + (e.sideOutput ? " side" : ""),
      d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)"}));
    svg.append(sv("text", {class: "elabel", x: mx, y: (y1 + y2) / 2 - 3, "text-anchor": "middle"},
      e.sideOutput ? "side output" : e.chained ? "chained" : e.partitioning));
  }
  svg.prepend(sv("defs", {}, sv("marker", {id: "arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto"},
    sv("path", {d: "M0,0 L8,4 L0,8 z", fill: "#8d96a8"}))));
  for (const o of ops) {
    const p = pos[o.uid], k = "op." + o.uid + ".";
    const g = sv("g", {class: "node" + (o.source ? " src" : ""), transform: `translate(${p.x},${p.y})`});
    g.append(sv("rect", {width: W, height: H}));
    g.append(sv("text", {class: "name", x: 8, y: 16}, `${o.name} ×${o.parallelism}` + (o.sharedName ? " *" : "")));
    const t1 = sv("text", {x: 8, y: 33}, "in ");
    t1.append(sv("tspan", {"data-k": k + "inPerSec", "data-v": o.inPerSec}, rate(o.inPerSec) + "/s"));
    t1.append(" · out ");
    t1.append(sv("tspan", {"data-k": k + "outPerSec", "data-v": o.outPerSec}, rate(o.outPerSec) + "/s"));
    g.append(t1);
    const t2 = sv("text", {x: 8, y: 48, class: "mute"}, "total ");
    t2.append(sv("tspan", {"data-k": k + "recordsIn", "data-v": o.recordsIn}, num(o.recordsIn)));
    t2.append(" → ");
    t2.append(sv("tspan", {"data-k": k + "recordsOut", "data-v": o.recordsOut}, num(o.recordsOut)));
    g.append(t2);
    const bp = o.backPressure;
    g.append(sv("rect", {x: 8, y: 56, width: W - 16, height: 8, fill: "#eceff5", stroke: "none"}));
    g.append(sv("rect", {x: 8, y: 56, width: (W - 16) * bp, height: 8, stroke: "none",
      fill: bp > 0.5 ? "#c9413b" : bp > 0.1 ? "#d98a1c" : "#2f9e63"}));
    const t3 = sv("text", {x: W - 8, y: 52, "text-anchor": "end", class: "mute"}, "bp ");
    t3.append(sv("tspan", {"data-k": k + "backPressure", "data-v": bp}, Math.round(bp * 100) + "%"));
    g.append(t3);
    g.append(sv("title", {}, `${o.name}: task ${o.task}, uid ${o.uid}, watermark ${wmText(o.watermark)}` +
      (o.sharedName ? ` (* other operators are named ${o.name} too: metrics are kept by name, so these figures add theirs up)` : "")));
    svg.append(g);
  }
  put("graph", svg);
}

// Records per second out of every source, and into every other operator.
function renderChart(f) {
  const pts = history.slice(-120);
  if (pts.length < 2) { put("chart", empty("throughput chart: waiting for a second frame")); return; }
  // One line per task (an operator heading a chain): what enters it.
  const idx = [];
  f.operators.forEach((o, i) => { if (o.task === o.name && !o.sharedName) idx.push(i); });
  const W = 900, H = 140, L = 48, B = 16;
  let top = 1;
  for (const p of pts) for (const i of idx) top = Math.max(top, p.in[i] || 0);
  const x = i => L + (W - L - 4) * i / (pts.length - 1), y = v => (H - B) - (H - B - 6) * v / top;
  const svg = sv("svg", {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none"});
  svg.append(sv("line", {class: "axis", x1: L, y1: H - B, x2: W, y2: H - B}));
  svg.append(sv("text", {x: L - 4, y: 12, "text-anchor": "end"}, rate(top)));
  svg.append(sv("text", {x: L - 4, y: H - B, "text-anchor": "end"}, "0"));
  svg.append(sv("text", {x: L, y: H - 2}, clock(pts[0].atMs)));
  svg.append(sv("text", {x: W - 4, y: H - 2, "text-anchor": "end"}, clock(pts[pts.length - 1].atMs)));
  const legend = el("div", {class: "legend"});
  idx.forEach((i, n) => {
    const c = COLORS[n % COLORS.length];
    svg.append(sv("polyline", {fill: "none", stroke: c, "stroke-width": 1.5,
      points: pts.map((p, j) => `${x(j).toFixed(1)},${y(p.in[i] || 0).toFixed(1)}`).join(" ")}));
    legend.append(el("span", {}, el("i", {style: "background:" + c}), f.operators[i].name + " in/s"));
  });
  put("chart", svg, legend);
}

function renderKafka(f) {
  if (!f.kafka.length) { put("kafka", empty("no Kafka source")); return; }
  const out = [];
  for (const t of f.kafkaTopics) {
    const k = `kafka.${t.topic}.`;
    out.push(el("h3", {}, t.topic + " ",
      el("small", {}, t.caughtUp ? "caught up " : "catching up",
        t.caughtUp ? fig("span", k + "catchUpMs", t.catchUpMs, dur(t.catchUpMs) + " after the start") : fig("span", k + "catchUpMs", t.catchUpMs, ""))));
    const rows = f.kafka.filter(p => p.topic === t.topic).map(p => {
      const pk = `kafka.${p.topic}.${p.partition}.`;
      const pct = Math.round(p.progress * 1000) / 10;
      return el("tr", {},
        el("td", {}, p.partition),
        el("td", {}, el("div", {class: "bar" + (p.caughtUp ? " done" : "")}, el("i", {style: `width:${pct}%`}),
          fig("span", pk + "progress", p.progress, pct + "%"))),
        td(pk + "position", p.position, p.position < 0 ? "–" : num(p.position)),
        td(pk + "end", p.end, p.end < 0 ? "–" : num(p.end)),
        td(pk + "catchUpMs", p.catchUpMs, p.catchUpMs < 0 ? "–" : "+" + dur(p.catchUpMs), p.caughtUp ? "ok" : ""),
        el("td", {class: "mute"}, "subtask " + p.subtask));
    });
    out.push(table(["partition", "progress", "position ", "end at start ", "caught up ", ""], rows));
  }
  put("kafka", ...out);
}

function renderWatermarks(f) {
  const rows = f.watermarks.map(w => {
    const k = `wm.${w.operator}.${w.subtask}.`;
    const lag = w.lagMs ?? null;
    return el("tr", {}, el("td", {}, w.operator), el("td", {class: "num"}, w.subtask),
      fig("td", k + "watermark", w.watermark, wmText(w.watermark)),
      td(k + "lagMs", lag, lag === null ? "–" : dur(lag), lag !== null && lag > 60000 ? "bad" : ""));
  });
  put("watermarks", rows.length ? table(["operator", "subtask ", "watermark (UTC)", "lag "], rows) : empty("no watermarks yet"));
}

function renderHeld(f) {
  if (!f.held.length) { put("held", empty("no agent or async operator")); return; }
  const rows = f.held.map(h => {
    const k = `held.${h.operator}.${h.subtask}.`;
    const keys = (h.keys || []).map(x => `${x.key} (${x.inputs})`).join(", ");
    return el("tr", {}, el("td", {}, h.operator), el("td", {class: "num"}, h.subtask), el("td", {}, h.kind),
      td(k + "held", h.held, num(h.held), h.held > 0 ? "" : "mute"),
      td(k + "oldestAgeMs", h.oldestAgeMs, h.held > 0 ? dur(h.oldestAgeMs) : "–"),
      td(k + "inFlight", h.inFlight, num(h.inFlight)),
      fig("td", k + "keys", keys, h.kind === "async" ? "(not keyed)" : keys ? keys + (h.keyCount > (h.keys || []).length ? ` … ${h.keyCount} keys` : "") : "–"));
  });
  put("held", table(["operator", "subtask ", "kind", "held ", "oldest waits ", "in flight ", "keys holding the oldest"], rows));
}

function renderAgents(f) {
  if (!f.agents.length) { put("agents", empty("no agent operator")); return; }
  const out = [];
  for (const a of f.agents) {
    const k = `agent.${a.operator}.`;
    out.push(el("h3", {}, a.operator));
    out.push(table(["in flight ", "running keys ", "actions ", "actions/s ", "errors ", "latency now ", "latency mean ", "p99 ≤ "], [el("tr", {},
      td(k + "inFlight", a.inFlight, num(a.inFlight)), td(k + "runningKeys", a.runningKeys, num(a.runningKeys)),
      td(k + "actionsRun", a.actionsRun, num(a.actionsRun)), td(k + "actionsPerSec", a.actionsPerSec, rate(a.actionsPerSec)),
      td(k + "actionErrors", a.actionErrors, num(a.actionErrors), a.actionErrors ? "bad" : ""),
      td(k + "meanLatencyMs", a.meanLatencyMs, a.meanLatencyMs ? dur(a.meanLatencyMs) : "–"),
      td(k + "totalLatencyMs", a.totalLatencyMs, a.totalLatencyMs ? dur(a.totalLatencyMs) : "–"),
      td(k + "p99LatencyMs", a.p99LatencyMs, a.p99LatencyMs ? dur(a.p99LatencyMs) : "–"))]));
    const calls = [...a.models.map(c => ["model", c]), ...a.tools.map(c => ["tool", c])].map(([kind, c]) => el("tr", {},
      el("td", {}, kind), el("td", {}, c.name),
      td(`${k}${kind}.${c.name}.calls`, c.calls, num(c.calls)),
      td(`${k}${kind}.${c.name}.errors`, c.errors, num(c.errors), c.errors ? "bad" : ""),
      td(`${k}${kind}.${c.name}.retries`, c.retries || 0, num(c.retries || 0)),
      td(`${k}${kind}.${c.name}.rateLimited`, c.rateLimited || 0, num(c.rateLimited || 0)),
      td(`${k}${kind}.${c.name}.tokens`, (c.inputTokens || 0) + (c.outputTokens || 0), kind === "model" ? `${num(c.inputTokens || 0)} / ${num(c.outputTokens || 0)}` : "–"),
      td(`${k}${kind}.${c.name}.p99LatencyMs`, c.p99LatencyMs, c.p99LatencyMs ? dur(c.p99LatencyMs) : "–")));
    if (calls.length) out.push(table(["", "model or tool", "calls ", "errors ", "retries ", "429 waits ", "tokens in / out ", "p99 ≤ "], calls));
    const waits = (a.pendingApprovals || []).map(w => el("tr", {},
      el("td", {class: "num"}, w.subtask), el("td", {}, w.key), el("td", {}, w.action), el("td", {}, w.wait),
      td(`${k}wait.${w.id}.ageMs`, w.ageMs, dur(w.ageMs)),
      fig("td", `${k}wait.${w.id}.deadlineMs`, w.deadlineMs, clock(w.deadlineMs))));
    if (waits.length) out.push(el("h4", {}, "pending approvals"), table(["subtask ", "key", "action", "wait", "waiting ", "deadline (UTC)"], waits));
  }
  put("agents", ...out);
}

function renderCheckpoints(f) {
  const c = f.checkpoints;
  const head = el("p", {}, "completed ", fig("b", "cp.completed", c.completed, num(c.completed)),
    " · failed ", fig("b", "cp.failed", c.failed, num(c.failed), c.failed ? "bad" : ""));
  if (!c.history.length) { put("checkpoints", head, empty("no checkpoint yet (checkpointing may be off)")); return; }
  const rows = c.history.slice().reverse().map(s => {
    const k = `cp.${s.id}.`;
    return el("tr", {}, el("td", {class: "num"}, s.id), el("td", {}, s.kind),
      fig("td", k + "status", s.status, s.status, s.status === "failed" ? "bad" : s.status === "completed" ? "ok" : ""),
      el("td", {}, clock(s.startedMs)),
      td(k + "durationMs", s.durationMs, dur(s.durationMs)),
      td(k + "bytes", s.bytes || 0, bytes(s.bytes)),
      td(k + "syncPauseMicros", s.syncPauseMicros, dur(s.syncPauseMicros / 1000)),
      td(k + "acknowledged", s.acknowledged, `${s.acknowledged}/${s.tasks}`),
      fig("td", k + "cause", s.cause || "", s.cause || "", "bad"));
  });
  put("checkpoints", head, table(["id ", "kind", "status", "started (UTC)", "duration ", "size ", "sync pause ", "tasks acked ", "failure cause"], rows));
}

function renderDead(f) {
  const d = f.deadLetters;
  const per = d.perSource.map(s => el("tr", {}, el("td", {}, s.name), td(`dead.${s.name}`, s.count, num(s.count), s.count ? "bad" : "")));
  const notes = d.latest.slice().reverse().map(n => el("li", {}, `${clock(n.atMs)} ${n.operator}/${n.subtask}: ${n.text}`));
  put("dead", el("p", {}, "total ", fig("b", "dead.total", d.total, num(d.total))),
    per.length ? table(["source", "dead letters "], per) : empty("no source"),
    notes.length ? el("h3", {}, "latest reasons") : "", notes.length ? el("ul", {class: "notes"}, notes) : "");
}

function renderLate(f) {
  if (!f.late.length) { put("late", empty("no window operator")); return; }
  const rows = f.late.map(l => {
    const k = `late.${l.operator}.`;
    let why = "–";
    if (l.lastWatermark !== undefined && l.lastWatermark !== null) {
      why = `timestamp ${wmText(l.lastTimestamp)} + lateness ${dur(l.allowedLatenessMs)} ≤ watermark ${wmText(l.lastWatermark)} (${dur(l.lastWatermark - l.lastTimestamp)} behind)`;
    }
    return el("tr", {}, el("td", {}, l.operator), td(k + "dropped", l.dropped, num(l.dropped), l.dropped ? "bad" : ""),
      td(k + "toSideOutput", l.toSideOutput, num(l.toSideOutput)),
      fig("td", k + "lastWatermark", l.lastWatermark ?? "", why));
  });
  put("late", table(["window operator", "late ", "to side output ", "last one: why late"], rows));
}

// The weir binary serving the page (weir version).
function renderVersion(f) {
  const w = f.weir || {}, tags = (w.tags || []).join(",");
  put("weir", fig("span", "weir.version", w.version, w.version), " · ", fig("span", "weir.commit", w.commit, "commit " + w.commit),
    " · ", fig("span", "weir.go", w.go, w.go), " · ", fig("span", "weir.platform", w.platform, w.platform),
    tags ? " · " : "", fig("span", "weir.tags", tags, tags ? "tags " + tags : ""));
}

function render(f) {
  const st = document.getElementById("status");
  st.textContent = f.done ? "job ended" : "running";
  st.className = "status " + (f.done ? "done" : "running");
  const steps = [renderVersion, renderGraph, renderChart, renderKafka, renderWatermarks, renderHeld, renderAgents, renderCheckpoints, renderDead, renderLate];
  for (const step of steps) {
    try { step(f); } catch (e) { console.error(step.name, e); }
  }
  document.getElementById("seq").textContent = f.seq;
  document.getElementById("at").textContent = new Date(f.atMs).toISOString().replace("T", " ").substr(0, 19) + " UTC";
  document.body.dataset.seq = f.seq; // last: every figure above is from frame f.seq (D3)
}

async function poll() {
  try {
    if (!history.length) {
      const r = await fetch("api/history", {cache: "no-store"});
      if (r.ok) history = await r.json();
    }
    const r = await fetch("api/frame", {cache: "no-store"});
    if (!r.ok) throw new Error(r.status);
    const f = await r.json();
    if (f.seq !== lastSeq) {
      lastSeq = f.seq;
      if (!history.length || history[history.length - 1].seq < f.seq) {
        history.push({seq: f.seq, atMs: f.atMs, in: f.operators.map(o => o.inPerSec), out: f.operators.map(o => o.outPerSec)});
        if (history.length > 300) history.shift();
      }
      render(f);
    }
  } catch (e) {
    const st = document.getElementById("status");
    st.textContent = "server gone";
    st.className = "status lost";
  }
  setTimeout(poll, POLL_MS);
}
poll();
