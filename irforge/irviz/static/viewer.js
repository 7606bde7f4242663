// irviz viewer: draws the union of every step's nodes once (so a node keeps its place from step
// to step), shows one step at a time, and marks what changed against a base step.
(() => {
"use strict";
const D = IRVIZ_DATA;
const CHUNK = 120;           // a group with more children is split into chunks laid out on demand
const INITIAL_VISIBLE = 160; // open groups breadth-first until about this many boxes show
const BUDGET_MS = 1500;      // layout time budget per request; past it, the fast layered layout
const NODE_H = 26, CHAR_W = 7, GROUP_PAD = 14, GROUP_HEADER = 22;
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const records = D.records, steps = D.steps;
const metrics = { firstPaint: null, lastSwitch: null, lastLayout: null, layouts: 0 };

// ---- the union of all steps -------------------------------------------------------------
const stepMaps = [];
function stepMap(k) {
  if (!stepMaps[k]) {
    const m = new Map();
    for (const i of steps[k].items) m.set(records[i].id, i);
    stepMaps[k] = m;
  }
  return stepMaps[k];
}
const firstRecord = new Map(); // sid -> a record of it (its first), for labels and scope
const orderOf = new Map();
for (const step of steps) {
  for (const i of step.items) {
    const sid = records[i].id;
    if (!firstRecord.has(sid)) { firstRecord.set(sid, i); orderOf.set(sid, orderOf.size); }
  }
}

// ---- groups: name scopes, subgraph and function bodies, chunks ---------------------------
const groups = new Map();
const parentOf = new Map(); // child key (sid or group key) -> group key
function makeGroup(key, label, parent, kind) {
  const g = { key, label, parent, kind, children: [], self: null, order: Infinity };
  groups.set(key, g);
  if (parent !== null) { groups.get(parent).children.push(key); parentOf.set(key, parent); }
  return g;
}
makeGroup("", D.title || "graph", null, "root");
for (const [sid, i] of firstRecord) {
  let key = "";
  for (const seg of records[i].scope) {
    const next = key + "\u001f" + seg;
    if (!groups.has("g" + next)) {
      const g = makeGroup("g" + next, seg, key === "" ? "" : "g" + key, seg[0] === "#" ? "body" : "scope");
      if (g.kind === "body") g.self = seg.slice(1);
    }
    key = next;
  }
  const parent = key === "" ? "" : "g" + key;
  groups.get(parent).children.push(sid);
  parentOf.set(sid, parent);
}
// a node with a body is drawn as its body group: the group takes the node's place
const groupOfSelf = new Map();
for (const g of groups.values()) {
  if (g.kind !== "body" || !parentOf.has(g.self)) continue;
  groupOfSelf.set(g.self, g.key);
  const siblings = groups.get(g.parent).children;
  const at = siblings.indexOf(g.self);
  siblings.splice(siblings.indexOf(g.key), 1);
  if (at >= 0) siblings[at] = g.key;
  parentOf.set(g.self, g.key);
}
function orderKey(key) { return orderOf.has(key) ? orderOf.get(key) : groups.get(key).order; }
(function settle(key) { // children in first-appearance order; a group's order is its first child's
  const g = groups.get(key);
  for (const c of g.children) if (groups.has(c)) settle(c);
  g.children.sort((a, b) => orderKey(a) - orderKey(b));
  g.order = Math.min(g.self !== null && orderOf.has(g.self) ? orderOf.get(g.self) : Infinity,
    g.children.length ? orderKey(g.children[0]) : Infinity);
})("");
// scope chains with one child read as one scope ("encoder/layer.0"); a scope holding one node is the node
for (const g of [...groups.values()]) {
  if (g.kind !== "scope" || !groups.has(g.key)) continue;
  while (g.children.length === 1 && groups.has(g.children[0]) && groups.get(g.children[0]).kind === "scope") {
    const only = groups.get(g.children[0]);
    g.label += "/" + only.label;
    g.children = only.children;
    for (const c of g.children) { parentOf.set(c, g.key); if (groups.has(c)) groups.get(c).parent = g.key; }
    groups.delete(only.key);
  }
  if (g.children.length === 1 && !groups.has(g.children[0])) {
    const parent = groups.get(g.parent), leaf = g.children[0];
    if (!parent) continue;
    parent.children[parent.children.indexOf(g.key)] = leaf;
    parentOf.set(leaf, g.parent);
    groups.delete(g.key);
  }
}
let chunkCount = 0;
(function chunk(key) { // chunks of CHUNK; past CHUNK chunks, at most CHUNK bigger ones, each chunked again
  const g = groups.get(key);
  for (const c of g.children) if (groups.has(c)) chunk(c);
  if (g.children.length <= CHUNK) return;
  const kids = g.children;
  const per = Math.ceil(kids.length / CHUNK) <= CHUNK ? CHUNK : Math.ceil(kids.length / CHUNK);
  g.children = [];
  for (let s = 0; s < kids.length; s += per) {
    const part = kids.slice(s, s + per);
    const c = makeGroup(`chunk${++chunkCount}`, "", key, "chunk");
    c.children = part; c.order = orderKey(part[0]);
    for (const k of part) { parentOf.set(k, c.key); if (groups.has(k)) groups.get(k).parent = c.key; }
    if (part.length > CHUNK) chunk(c.key);
  }
})("");
const leafCache = new Map();
function leaves(key) { // sids under a group (its own node included), cached
  if (!groups.has(key)) return [key];
  let out = leafCache.get(key);
  if (!out) {
    const g = groups.get(key);
    out = g.self !== null ? [g.self] : [];
    for (const c of g.children) for (const s of leaves(c)) out.push(s);
    leafCache.set(key, out);
  }
  return out;
}
for (const g of groups.values()) {
  if (g.kind === "chunk") {
    const n = leaves(g.key).length;
    g.label = `nodes ${orderKey(g.children[0]) + 1}…, ${n}`;
  }
}

// ---- union edges (every step's), so the layout never changes from step to step --------------
const unionEdges = [];
{
  const seen = new Set();
  for (const r of records) {
    for (const inp of r.in) {
      if (!inp || !inp[2]) continue;
      const e = inp[2] + "\u0001" + r.id;
      if (!seen.has(e)) { seen.add(e); unionEdges.push([inp[2], r.id]); }
    }
  }
}

// ---- view state ---------------------------------------------------------------------------
const expanded = new Set([""]);
let current = steps.length - 1, base = steps.length > 1 ? current - 1 : -1, baseMode = "previous";
let selected = null, overlay = -1, matches = new Set();
let layout = null; // {abs: Map(key -> [x, y, w, h]), visible: [keys], boxes: [group keys]}

function label(key) {
  if (groups.has(key)) {
    const g = groups.get(key);
    if (g.kind === "body") return recordOf(g.self).op;
    return g.label;
  }
  const r = recordOf(key);
  return r.cat === "io" ? r.name : r.op;
}
function recordOf(sid) { const m = stepMap(current); return records[m.has(sid) ? m.get(sid) : firstRecord.get(sid)]; }
function boxSize(key) {
  const text = label(key);
  if (groups.has(key)) {
    const extra = groups.get(key).kind === "body" ? 4 : 10 + String(leaves(key).length).length;
    return [Math.max(70, (text.length + extra) * CHAR_W + 20), NODE_H + 14];
  }
  return [Math.max(56, text.length * CHAR_W + 18), NODE_H];
}
function repMap() { // the visible box that stands for each sid: itself, or its outermost closed group
  const rep = new Map();
  (function walk(key, stand) {
    const g = groups.get(key);
    if (g.self !== null) rep.set(g.self, stand || key);
    for (const c of g.children) {
      if (groups.has(c)) walk(c, stand || (expanded.has(c) ? null : c));
      else rep.set(c, stand || c);
    }
  })("", null);
  return rep;
}
function ancestors(key) { const out = []; for (let k = parentOf.get(key); k !== undefined; k = parentOf.get(k)) out.push(k); return out; }

// ---- layout (in the worker) --------------------------------------------------------------
let worker = null, inlineLayout = null, requestId = 0;
const pending = new Map();
function startWorker() {
  const source = IRVIZ_LAYOUT_LIBRARY + "\n" + IRVIZ_LAYOUT_WORKER;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  try {
    worker = new Worker(url);
    worker.onmessage = (e) => answer(e.data);
    worker.onerror = () => { worker = null; };
  } catch (err) { // no workers (some file:// policies): the same code on the page, from the same Blob
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => { inlineLayout = window.layoutGroups || self.layoutGroups; };
    document.head.appendChild(script);
  }
}
function answer(msg) {
  const p = pending.get(msg.id);
  if (!p) return;
  if (msg.progress !== undefined) { showProgress(`laying out ${Math.round(msg.progress * 100)}%`); return; }
  pending.delete(msg.id);
  p(msg);
}
function showProgress(text) { const el = $("progress"); el.hidden = !text; el.textContent = text || ""; }
function requestLayout() {
  const rep = repMap();
  const open = [];
  (function post(key) { // innermost first
    for (const c of groups.get(key).children) if (groups.has(c) && expanded.has(c)) post(c);
    open.push(key);
  })("");
  const edgeSets = new Map(open.map((k) => [k, new Set()]));
  for (const [a, b] of unionEdges) {
    const ra = rep.get(a), rb = rep.get(b);
    if (ra === undefined || rb === undefined || ra === rb) continue;
    const pa = [ra, ...ancestors(ra)], pb = [rb, ...ancestors(rb)];
    const inB = new Map(pb.map((k, i) => [k, i]));
    for (let i = 1; i < pa.length; i++) {
      if (!inB.has(pa[i])) continue;
      const j = inB.get(pa[i]);
      if (j === 0) break; // one inside the other: no edge between siblings
      edgeSets.get(pa[i]).add(pa[i - 1] + "\u0001" + pb[j - 1]);
      break;
    }
  }
  const request = { id: ++requestId, budgetMs: BUDGET_MS, groups: open.map((key) => ({
    key,
    nodes: groups.get(key).children.map((c) => [c, ...boxSize(c)]),
    edges: [...edgeSets.get(key)].map((e) => e.split("\u0001")),
  })) };
  const started = performance.now();
  const slow = setTimeout(() => showProgress(`laying out ${open.length} group${open.length === 1 ? "" : "s"}…`), 150);
  return new Promise((resolve) => {
    pending.set(request.id, (msg) => {
      metrics.lastLayout = performance.now() - started; metrics.layouts++;
      clearTimeout(slow);
      showProgress("");
      resolve(place(msg));
    });
    if (worker) worker.postMessage(request);
    else if (inlineLayout) answer(inlineLayout(request, null));
    else setTimeout(() => (inlineLayout ? answer(inlineLayout(request, null)) : worker && worker.postMessage(request)), 50);
  });
}
function place(msg) {
  const abs = new Map(), visible = [], boxes = [];
  (function put(key, x0, y0) {
    const L = msg.layouts[key];
    for (const c of groups.get(key).children) {
      const [x, y, w, h] = L.pos[c];
      const box = [x0 + x, y0 + y, w, h];
      abs.set(c, box);
      if (groups.has(c) && expanded.has(c)) { boxes.push(c); put(c, box[0] + GROUP_PAD, box[1] + GROUP_HEADER); }
      else visible.push(c);
    }
  })("", 0, 0);
  return { abs, visible, boxes };
}

// ---- what a step shows --------------------------------------------------------------------
function status(sid) { // "", "added", "removed", "rewritten", or null (absent from both)
  const cur = stepMap(current), inCur = cur.has(sid);
  if (base < 0) return inCur ? "" : null;
  const old = stepMap(base), inOld = old.has(sid);
  if (!inCur) return inOld ? "removed" : null;
  if (!inOld) return "added";
  return old.get(sid) !== cur.get(sid) ? "rewritten" : "";
}
// graph inputs and outputs are not nodes; nor are the copies of a function body under each call
function isNode(sid) { return records[firstRecord.get(sid)].cat !== "io" && !sid.includes("/"); }
function counts(key) {
  const c = { present: 0, added: 0, removed: 0, rewritten: 0 };
  for (const s of leaves(key)) {
    const st = status(s);
    if (st === null) continue;
    if (st !== "removed") c.present++;
    if (st && isNode(s)) c[st]++;
  }
  return c;
}
function diffText(c) {
  const parts = [];
  if (c.added) parts.push(`<span class="add">+${c.added}</span>`);
  if (c.removed) parts.push(`<span class="rem">−${c.removed}</span>`);
  if (c.rewritten) parts.push(`<span class="rw">~${c.rewritten}</span>`);
  return parts.join(" ");
}

// ---- drawing ----------------------------------------------------------------------------
function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function render() {
  const gGroups = $("groups"), gEdges = $("edges"), gNodes = $("nodes");
  gGroups.textContent = ""; gEdges.textContent = ""; gNodes.textContent = "";
  const shown = new Set();
  const ov = overlay >= 0 ? D.overlays[overlay] : null;
  const scale = ov ? overlayScale(ov) : null;
  for (const key of layout.boxes) {
    const body = groups.get(key).kind === "body";
    const c = counts(key), st = body ? status(groups.get(key).self) : "";
    if (body ? st === null : !c.present && !c.removed) continue;
    const [x, y, w, h] = layout.abs.get(key);
    const cls = "group" + (st ? " " + st : "") + (key === selected ? " selected" : "");
    const g = el("g", { class: cls, "data-id": key, transform: `translate(${x},${y})` }, gGroups);
    el("rect", { width: w, height: h, rx: 6 }, g);
    const t = el("text", { x: 8, y: 15, class: "title" }, g);
    t.textContent = "▾ " + label(key);
    t.addEventListener("click", (e) => { e.stopPropagation(); toggle(key); });
    shown.add(key);
  }
  for (const key of layout.visible) {
    const isGroup = groups.has(key);
    let st, c = null;
    if (isGroup && groups.get(key).kind === "body") { // a node with a body: that node's status
      st = status(groups.get(key).self);
      if (st === null) continue;
    } else if (isGroup) {
      c = counts(key);
      if (!c.present && !c.removed) continue;
      st = c.present ? "" : "removed";
    } else {
      st = status(key);
      if (st === null) continue;
    }
    const [x, y, w, h] = layout.abs.get(key);
    const cat = isGroup ? (groups.get(key).kind === "body" ? recordOf(groups.get(key).self).cat : "scope") : recordOf(key).cat;
    const cls = ["node", "cat-" + cat];
    if (isGroup) cls.push("collapsed");
    if (st) cls.push(st);
    if (key === selected) cls.push("selected");
    if (matches.has(key)) cls.push("match");
    const g = el("g", { class: cls.join(" "), "data-id": key, transform: `translate(${x},${y})` }, gNodes);
    const rect = el("rect", { width: w, height: h, rx: isGroup ? 8 : 4 }, g);
    if (scale) {
      const v = isGroup ? maxOf(ov, leaves(key)) : ov.values[key];
      if (v !== undefined && v !== null) rect.setAttribute("style", `fill:${(ov.colors && ov.colors[key]) || scale(v)}`);
    }
    const text = el("text", { x: 9, y: 17 }, g);
    text.textContent = !isGroup ? label(key) : c ? `▸ ${label(key)} (${c.present})` : "▸ " + label(key);
    if (c && (c.added || c.removed || c.rewritten)) {
      const b = el("text", { x: 9, y: h - 5, class: "badge" }, g);
      b.textContent = [c.added ? `+${c.added}` : "", c.removed ? `−${c.removed}` : "", c.rewritten ? `~${c.rewritten}` : ""].filter(Boolean).join(" ");
    }
    const tip = el("title", {}, g);
    tip.textContent = isGroup ? `${label(key)}: ${leaves(key).length} nodes (click to open)` : (recordOf(key).name || key);
    shown.add(key);
  }
  // edges of the current step between the boxes that stand for their ends
  const rep = repMap(), drawn = new Set(), cur = stepMap(current);
  for (const [sid, i] of cur) {
    const r = records[i];
    for (const inp of r.in) {
      if (!inp || !inp[2]) continue;
      const a = rep.get(inp[2]), b = rep.get(sid);
      if (a === undefined || b === undefined || a === b || !shown.has(a) || !shown.has(b)) continue;
      const k = a + "\u0001" + b;
      if (drawn.has(k)) continue;
      drawn.add(k);
      const A = layout.abs.get(a), B = layout.abs.get(b);
      if (!A || !B) continue;
      const x1 = A[0] + A[2] / 2, y1 = A[1] + A[3], x2 = B[0] + B[2] / 2, y2 = B[1];
      const dy = Math.max(20, Math.abs(y2 - y1) / 2);
      const p = el("path", { d: `M${x1},${y1} C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}` }, gEdges);
      el("title", {}, p).textContent = `%${inp[0]}: ${inp[1] || "?"}`;
    }
  }
  $("graph").dataset.edges = String(drawn.size);
  layout.shown = shown;
}
function maxOf(ov, sids) {
  let best;
  for (const s of sids) { const v = ov.values[s]; if (v !== undefined && (best === undefined || v > best)) best = v; }
  return best;
}

// ---- overlays -----------------------------------------------------------------------------
function hex(c) { const m = /^#?([0-9a-f]{6})$/i.exec(c || ""); return m ? parseInt(m[1], 16) : null; }
function overlayScale(ov) {
  const vals = Object.values(ov.values).filter((v) => typeof v === "number" && isFinite(v));
  const lo = Math.min(...vals), hi = Math.max(...vals);
  if (ov.thresholds && ov.thresholds.length) {
    return (v) => { for (const [t, c] of ov.thresholds) if (v <= t) return c; return "#ffffff"; };
  }
  const stops = ov.gradient && ov.gradient.length ? ov.gradient : [[0, "#fff7bc"], [0.5, "#fe9929"], [1, "#cc1c1c"]];
  return (v) => {
    const t = hi > lo ? (v - lo) / (hi - lo) : 1;
    for (let i = 1; i < stops.length; i++) {
      if (t <= stops[i][0]) {
        const [s0, c0] = stops[i - 1], [s1, c1] = stops[i];
        const a = hex(c0), b = hex(c1);
        if (a === null || b === null) return t - s0 < s1 - t ? c0 : c1;
        const f = s1 > s0 ? (t - s0) / (s1 - s0) : 0;
        const mix = (sh) => Math.round(((a >> sh) & 255) * (1 - f) + ((b >> sh) & 255) * f);
        return `rgb(${mix(16)},${mix(8)},${mix(0)})`;
      }
    }
    return stops[stops.length - 1][1];
  };
}
function showLegend() {
  const box = $("legend");
  if (overlay < 0) { box.hidden = true; return; }
  const ov = D.overlays[overlay], scale = overlayScale(ov);
  const vals = Object.values(ov.values);
  const lo = Math.min(...vals), hi = Math.max(...vals);
  const css = [0, 0.25, 0.5, 0.75, 1].map((t) => scale(lo + t * (hi - lo))).join(",");
  box.innerHTML = `<div>${esc(ov.name)}${ov.unit ? " (" + esc(ov.unit) + ")" : ""}</div><div class="bar" style="background:linear-gradient(to right,${css})"></div><div>${fmt(lo)} … ${fmt(hi)}</div>`;
  box.hidden = false;
}
function fmt(v) { return Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(4)); }

// ---- pan and zoom -------------------------------------------------------------------------
const view = { x: 20, y: 20, k: 1 };
function applyView() { $("viewport").setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`); }
function contentBox() { // of what the step shows
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const key of layout.shown || layout.abs.keys()) {
    const [x, y, w, h] = layout.abs.get(key); x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x + w); y1 = Math.max(y1, y + h); }
  return x0 === Infinity ? [0, 0, 1, 1] : [x0, y0, x1 - x0, y1 - y0];
}
function fit(readable) { // the whole step; with readable, its width only, top first, not below 60%
  const [x, y, w, h] = contentBox(), r = $("graph").getBoundingClientRect();
  const k = readable ? Math.max(0.6, (r.width - 40) / w) : Math.min((r.width - 40) / w, (r.height - 40) / h);
  view.k = Math.min(1.5, Math.max(0.02, k));
  view.x = Math.max(20, (r.width - w * view.k) / 2) - x * view.k; view.y = 20 - y * view.k;
  applyView();
}
function centerOn(key) {
  const b = layout.abs.get(key);
  if (!b) return;
  const r = $("graph").getBoundingClientRect();
  view.k = Math.max(view.k, 0.8);
  view.x = r.width / 2 - (b[0] + b[2] / 2) * view.k; view.y = r.height / 2 - (b[1] + b[3] / 2) * view.k;
  applyView();
}
{
  const svg = $("graph");
  let drag = null;
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), f = Math.exp(-e.deltaY * 0.0015);
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    const k = Math.min(4, Math.max(0.02, view.k * f));
    view.x = mx - (mx - view.x) * (k / view.k); view.y = my - (my - view.y) * (k / view.k); view.k = k;
    applyView();
  }, { passive: false });
  svg.addEventListener("pointerdown", (e) => {
    if (e.target.closest(".node") || e.target.closest(".title")) return;
    drag = { x: e.clientX - view.x, y: e.clientY - view.y };
    svg.classList.add("panning"); svg.setPointerCapture(e.pointerId);
  });
  svg.addEventListener("pointermove", (e) => { if (drag) { view.x = e.clientX - drag.x; view.y = e.clientY - drag.y; applyView(); } });
  svg.addEventListener("pointerup", () => { drag = null; svg.classList.remove("panning"); });
  svg.addEventListener("click", (e) => {
    const n = e.target.closest(".node");
    if (!n) return;
    const key = n.getAttribute("data-id");
    if (groups.has(key) && groups.get(key).kind !== "body") toggle(key);
    else select(key);
  });
  svg.addEventListener("dblclick", (e) => { // a node with a body (If/Loop, a fused op's function) opens on double-click
    const n = e.target.closest(".node");
    if (n && groups.has(n.getAttribute("data-id"))) toggle(n.getAttribute("data-id"));
  });
}

// ---- actions ------------------------------------------------------------------------------
async function relayout() { layout = await requestLayout(); render(); }
async function toggle(key) {
  if (expanded.has(key)) {
    for (const g of groups.keys()) if (g === key || ancestors(g).includes(key)) expanded.delete(g);
  } else expanded.add(key);
  if (groups.get(key).kind === "body") selected = groups.get(key).self;
  await relayout();
}
async function reveal(sid) {
  let changed = false;
  for (const a of ancestors(sid)) if (!expanded.has(a) && a !== groupOfSelf.get(sid)) { expanded.add(a); changed = true; }
  if (changed) await relayout();
}
function showStep(k, b) {
  const started = performance.now();
  current = Math.max(0, Math.min(steps.length - 1, k));
  if (b !== undefined) { base = b; baseMode = b < 0 ? "none" : String(b); }
  else base = baseMode === "previous" ? current - 1 : baseMode === "none" ? -1 : Number(baseMode);
  if (base >= current && baseMode !== "none") base = current - 1;
  render();
  drawTimeline();
  if (selected) panelFor(selected);
  metrics.lastSwitch = performance.now() - started;
  return metrics.lastSwitch;
}
async function focusNode(sid) {
  await reveal(sid);
  select(sid);
  centerOn(layout.abs.has(sid) ? sid : repMap().get(sid));
}
function select(key) {
  selected = key;
  for (const n of document.querySelectorAll(".node.selected")) n.classList.remove("selected");
  const mine = document.querySelector(`.node[data-id="${CSS.escape(key)}"]`);
  if (mine) mine.classList.add("selected");
  panelFor(key);
}
function search(text) {
  const q = text.trim().toLowerCase();
  matches = new Set();
  if (!q) { render(); return []; }
  const found = [];
  const rep = repMap();
  for (const [sid, i] of stepMap(current)) {
    const r = records[i];
    const hay = [sid, r.name, r.op, ...(r.out || []).map((o) => (o ? o[0] : "")), ...r.in.map((x) => (x ? x[0] : ""))];
    if (hay.some((s) => s && String(s).toLowerCase().includes(q))) {
      found.push(sid);
      matches.add(rep.get(sid) || sid);
    }
  }
  render();
  $("panel").innerHTML = `<h2>${found.length} match${found.length === 1 ? "" : "es"} for “${esc(text)}”</h2><ul>` +
    found.slice(0, 200).map((s) => `<li><a data-go="${esc(s)}">${esc(records[stepMap(current).get(s)].op)} ${esc(records[stepMap(current).get(s)].name || s)}</a></li>`).join("") + "</ul>";
  return found;
}

// ---- side panel ---------------------------------------------------------------------------
function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }
function nodeLink(sid, stepIndex) {
  const i = firstRecord.get(sid);
  const r = i === undefined ? null : records[i];
  const text = r ? `${r.op}${r.name ? " " + r.name : ""}` : sid;
  return `<a data-go="${esc(sid)}" data-step="${stepIndex === undefined ? "" : stepIndex}">${esc(text)}</a>`;
}
function lastStepWith(sid, before) { for (let k = before; k >= 0; k--) if (stepMap(k).has(sid)) return k; return 0; }
function panelFor(key) {
  const P = $("panel");
  if (groups.has(key) && groups.get(key).kind !== "body") {
    const c = counts(key);
    P.innerHTML = `<h2>${esc(label(key))}</h2><p>${c.present} nodes in this step <span class="counts">${diffText(c)}</span></p>`;
    return;
  }
  const sid = groups.has(key) ? groups.get(key).self : key;
  const m = stepMap(current);
  const inStep = m.has(sid);
  const r = records[inStep ? m.get(sid) : (base >= 0 && stepMap(base).has(sid) ? stepMap(base).get(sid) : firstRecord.get(sid))];
  let h = `<h2>${esc(r.dom ? r.dom + "::" : "")}${esc(r.op)}${r.ov ? "@" + esc(r.ov) : ""}</h2>`;
  h += `<table><tr><td>name</td><td>${esc(r.name || "")}</td></tr><tr><td>id</td><td>${esc(sid)}</td></tr><tr><td>kind</td><td>${esc(r.cat)}</td></tr>`;
  const st = status(sid);
  if (st) h += `<tr><td>in this step</td><td>${st}${base >= 0 ? " (against step " + base + ")" : ""}</td></tr>`;
  if (!inStep) h += `<tr><td>note</td><td>not in this step</td></tr>`;
  if (r.scope.length) h += `<tr><td>scope</td><td>${esc(r.scope.filter((s) => s[0] !== "#").join("/"))}</td></tr>`;
  if (overlay >= 0 && D.overlays[overlay].values[sid] !== undefined) h += `<tr><td>${esc(D.overlays[overlay].name)}</td><td>${fmt(D.overlays[overlay].values[sid])}</td></tr>`;
  h += "</table>";
  if (r.attrs && r.attrs.length) h += "<h3>attributes</h3><table>" + r.attrs.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("") + "</table>";
  if (r.in.length) h += "<h3>inputs</h3><table>" + r.in.map((x, i) => x ? `<tr><td>${i}</td><td>%${esc(x[0])}: ${esc(x[1] || "?")}${x[3] === "const" ? " (constant)" : ""}${x[2] ? " ← " + nodeLink(x[2]) : ""}</td></tr>` : `<tr><td>${i}</td><td>(omitted)</td></tr>`).join("") + "</table>";
  if (r.out.length) h += "<h3>outputs</h3><table>" + r.out.map((x, i) => x ? `<tr><td>${i}</td><td>%${esc(x[0])}: ${esc(x[1] || "?")}</td></tr>` : "").join("") + "</table>";
  const meta = Object.entries(r.meta || {}).filter(([k]) => k !== "irforge.provenance");
  if (meta.length) h += "<h3>source</h3><table>" + meta.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("") + "</table>";
  h += "<h3>provenance</h3>" + provenanceHtml(sid, r);
  P.innerHTML = h;
}
function provenanceHtml(sid, r) {
  const o = D.origins[sid];
  if (!o) return "<p>in the input model</p>";
  let h = `<p>created at <a data-step-go="${o.step}">step ${o.step}</a> by pass <b>${esc(o.pass)}</b>`;
  if (o.pattern) h += `, pattern <b>${esc(o.pattern)}</b> <code>${esc(o.at)}</code>`;
  h += "</p>";
  if (o.from.length) h += "<p>from: " + o.from.map((s) => nodeLink(s, lastStepWith(s, o.step - 1))).join(", ") + "</p>";
  else if (r.meta && r.meta["irforge.provenance"]) h += `<p>from: ${esc(r.meta["irforge.provenance"])}</p>`;
  const chain = [], seen = new Set([sid]), queue = [...o.from];
  while (queue.length && chain.length < 60) {
    const s = queue.shift();
    if (seen.has(s)) continue;
    seen.add(s);
    const a = D.origins[s];
    chain.push(`<li>${nodeLink(s, lastStepWith(s, a ? steps.length - 1 : 0))} — ${a ? "step " + a.step + ", " + esc(a.pattern || a.pass) : "input model"}</li>`);
    if (a) queue.push(...a.from);
  }
  if (chain.length) h += `<h3>ancestry</h3><ul class="ancestry">${chain.join("")}</ul>`;
  return h;
}
$("panel").addEventListener("click", async (e) => {
  const a = e.target.closest("a");
  if (!a) return;
  if (a.dataset.stepGo !== undefined) { showStep(Number(a.dataset.stepGo)); return; }
  if (a.dataset.go) {
    const s = a.dataset.step;
    if (s !== undefined && s !== "" && !stepMap(current).has(a.dataset.go)) showStep(Number(s));
    await focusNode(a.dataset.go);
  }
});

// ---- timeline -----------------------------------------------------------------------------
const stepDiffs = [];
function stepDiff(k) {
  if (k === 0) return { added: 0, removed: 0, rewritten: 0 };
  if (!stepDiffs[k]) {
    const a = stepMap(k - 1), b = stepMap(k), c = { added: 0, removed: 0, rewritten: 0 };
    for (const [s, i] of b) { if (isNode(s)) { if (!a.has(s)) c.added++; else if (a.get(s) !== i) c.rewritten++; } }
    for (const s of a.keys()) if (isNode(s) && !b.has(s)) c.removed++;
    stepDiffs[k] = c;
  }
  return stepDiffs[k];
}
function drawTimeline() {
  const nav = $("timeline");
  let h = "";
  steps.forEach((s, k) => {
    if (s.folded.length) h += `<div class="folded" title="${esc(s.folded.map((f) => f[0]).join(", "))}">${s.folded.length} pass${s.folded.length === 1 ? "" : "es"} changed nothing</div>`;
    const cls = ["step", k === current ? "current" : "", k === base ? "base" : ""].join(" ");
    const ms = (s.seconds * 1000).toFixed(s.seconds < 0.01 ? 2 : 0);
    const rw = s.rewrites.length ? `, ${s.rewrites.length} rewrite${s.rewrites.length === 1 ? "" : "s"}` : "";
    h += `<div class="${cls}" data-step="${k}"><div>${k}. ${esc(s.title)}</div><div class="meta">${s.nodes} nodes${k ? ", " + ms + " ms" : ""}${rw} <span class="counts">${diffText(stepDiff(k))}</span></div></div>`;
  });
  if (D.trailing.length) h += `<div class="folded">${D.trailing.length} more pass${D.trailing.length === 1 ? "" : "es"} changed nothing</div>`;
  nav.innerHTML = h;
}
$("timeline").addEventListener("click", (e) => {
  const s = e.target.closest(".step");
  if (!s) return;
  selected = null;
  showStep(Number(s.dataset.step));
  panelForStep(current);
  const first = firstChange(); // bring the step's first change into view
  if (first && layout.shown.has(first)) centerOn(first);
});
function panelForStep(k) { // what the pass did: time, statistics, the passes folded before it, every rewrite
  const s = steps[k], d = stepDiff(k);
  let h = `<h2>step ${k}: ${esc(s.title)}</h2><p>${s.nodes} nodes`;
  if (k) h += `, ${(s.seconds * 1000).toFixed(2)} ms <span class="counts">${diffText(d)}</span>`;
  h += "</p>";
  const stats = Object.entries(s.statistics || {}).filter(([, v]) => v);
  if (stats.length) h += "<h3>statistics</h3><table>" + stats.map(([key, v]) => `<tr><td>${esc(key)}</td><td>${v}</td></tr>`).join("") + "</table>";
  if (s.folded.length) h += "<h3>before it, changed nothing</h3><ul>" + s.folded.map(([t, sec]) => `<li>${esc(t)} (${(sec * 1000).toFixed(2)} ms)</li>`).join("") + "</ul>";
  if (s.rewrites.length) {
    h += `<h3>rewrites (${s.rewrites.length})</h3><table class="rewrites">`;
    for (const r of s.rewrites.slice(0, 500)) {
      const made = r.created.length ? r.created.map((c) => nodeLink(c, k)).join(", ") : "nothing";
      const from = r.matched.map((m) => nodeLink(m, k - 1)).join(", ") || esc(r.text[0].join(", "));
      h += `<tr><td>${(r.seconds * 1000).toFixed(2)} ms</td><td><b>${esc(r.pattern)}</b> <code>${esc(r.at)}</code><br>${from} → ${made}</td></tr>`;
    }
    h += "</table>" + (s.rewrites.length > 500 ? `<p>and ${s.rewrites.length - 500} more</p>` : "");
  }
  $("panel").innerHTML = h;
}
function firstChange() {
  const rep = repMap();
  for (const [sid] of stepMap(current)) { const st = status(sid); if (st === "added" || st === "rewritten") return rep.get(sid); }
  return null;
}

// ---- header controls ----------------------------------------------------------------------
function exportSvg() {
  const [x, y, w, h] = contentBox();
  const clone = $("graph").cloneNode(true);
  clone.setAttribute("viewBox", `${x - 10} ${y - 10} ${w + 20} ${h + 20}`);
  clone.setAttribute("width", String(Math.ceil(w + 20))); clone.setAttribute("height", String(Math.ceil(h + 20)));
  clone.querySelector("#viewport").removeAttribute("transform");
  const style = document.createElementNS(SVG, "style");
  style.textContent = [...document.styleSheets[0].cssRules].map((r) => r.cssText).filter((t) => /^(\.|#edges)/.test(t)).join("\n") + "\ntext{font-family:sans-serif}";
  clone.insertBefore(style, clone.firstChild);
  return new XMLSerializer().serializeToString(clone);
}
$("export").addEventListener("click", () => {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([exportSvg()], { type: "image/svg+xml" }));
  a.download = `irviz-step${current}.svg`;
  a.click();
});
$("fit").addEventListener("click", () => fit(false));
{
  const sel = $("base");
  sel.innerHTML = `<option value="previous">previous step</option><option value="none">nothing</option>` + steps.map((s, k) => `<option value="${k}">step ${k}: ${esc(s.title)}</option>`).join("");
  sel.addEventListener("change", () => { baseMode = sel.value; showStep(current); });
  const ov = $("overlay");
  ov.innerHTML = `<option value="-1">none</option>` + D.overlays.map((o, i) => `<option value="${i}">${esc(o.name)}</option>`).join("");
  ov.disabled = !D.overlays.length;
  ov.addEventListener("change", () => { overlay = Number(ov.value); showLegend(); render(); });
  let timer = null;
  const input = $("search");
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => search(input.value), 150); });
  input.addEventListener("keydown", async (e) => {
    if (e.key !== "Enter") return;
    clearTimeout(timer);
    const found = search(input.value);
    if (found.length) await focusNode(found[0]);
  });
  $("title").textContent = D.title || "";
}

// ---- start --------------------------------------------------------------------------------
(function openInitially() {
  let visible = groups.get("").children.length;
  const queue = [""];
  while (queue.length) {
    const g = groups.get(queue.shift());
    for (const c of g.children) {
      if (!groups.has(c) || groups.get(c).kind === "body") continue;
      const more = groups.get(c).children.length - 1;
      if (visible + more <= INITIAL_VISIBLE) { expanded.add(c); visible += more; queue.push(c); }
    }
  }
})();
window.irviz = {
  metrics, get current() { return current; }, get base() { return base; }, steps: steps.length,
  showStep, search, focus: focusNode, select, toggle, exportSvg, fit, panelForStep,
  expanded: () => [...expanded], groups: () => [...groups.keys()],
  visibleCount: () => document.querySelectorAll("#nodes .node").length,
  expandAll: async () => { for (const k of groups.keys()) expanded.add(k); await relayout(); },
  collapseAll: async () => { expanded.clear(); expanded.add(""); await relayout(); },
  setOverlay: (i) => { overlay = i; $("overlay").value = String(i); showLegend(); render(); },
};
startWorker();
drawTimeline();
relayout().then(() => {
  fit(true);
  requestAnimationFrame(() => {
    metrics.firstPaint = performance.now();
    document.body.dataset.state = "ready";
  });
});
})();
