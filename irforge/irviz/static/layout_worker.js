// irviz layout worker: lays out each expanded group's children (dagre, layered top to bottom),
// innermost groups first so a parent knows its expanded children's sizes.  Runs in a Web Worker
// made from a Blob URL; the page falls back to running it inline where workers are unavailable.
//
// Request:  {id, groups: [{key, nodes: [[key, w, h]], edges: [[a, b]]}], budgetMs}
// Replies:  {id, progress: 0..1} while working, then {id, done: true, layouts: {key: layout}}
// layout:   {pos: {key: [x, y, w, h]}, width, height}   (x, y: top-left, relative to the group)
"use strict";

const DAGRE_LIMIT = 600; // more children than this: the fast layered layout (dagre is superlinear)
const GROUP_PAD = 14;
const GROUP_HEADER = 22;
const layoutCache = new Map();

function dagreLayout(nodes, edges) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 28, edgesep: 8, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const [k, w, h] of nodes) g.setNode(k, { width: w, height: h });
  for (const [a, b] of edges) if (a !== b && g.hasNode(a) && g.hasNode(b)) g.setEdge(a, b);
  dagre.layout(g);
  const pos = {};
  let width = 0, height = 0;
  for (const [k] of nodes) {
    const n = g.node(k);
    pos[k] = [n.x - n.width / 2, n.y - n.height / 2, n.width, n.height];
    width = Math.max(width, n.x + n.width / 2);
    height = Math.max(height, n.y + n.height / 2);
  }
  return { pos, width, height };
}

// Longest-path layers in input order, then one barycentre sweep: linear time, for big groups
// and for whatever is left once the time budget is spent.
function fastLayout(nodes, edges) {
  const index = new Map(nodes.map(([k], i) => [k, i]));
  const preds = nodes.map(() => []);
  const indeg = new Int32Array(nodes.length);
  const succs = nodes.map(() => []);
  for (const [a, b] of edges) {
    const i = index.get(a), j = index.get(b);
    if (i === undefined || j === undefined || i === j) continue;
    succs[i].push(j); preds[j].push(i); indeg[j]++;
  }
  const layer = new Int32Array(nodes.length);
  const queue = [];
  for (let i = 0; i < nodes.length; i++) if (indeg[i] === 0) queue.push(i);
  const seen = new Uint8Array(nodes.length);
  for (let q = 0; q < queue.length; q++) {
    const i = queue[q]; seen[i] = 1;
    for (const j of succs[i]) { layer[j] = Math.max(layer[j], layer[i] + 1); if (--indeg[j] === 0) queue.push(j); }
  }
  for (let i = 0; i < nodes.length; i++) if (!seen[i]) layer[i] = i ? layer[i - 1] : 0; // cycles: keep order
  const layers = [];
  for (let i = 0; i < nodes.length; i++) (layers[layer[i]] = layers[layer[i]] || []).push(i);
  const slot = new Float64Array(nodes.length);
  const pos = {};
  let width = 0, y = 0;
  for (const members of layers) {
    if (!members) continue;
    for (const i of members) {
      const p = preds[i];
      slot[i] = p.length ? p.reduce((s, j) => s + slot[j], 0) / p.length : 0;
    }
    members.sort((a, b) => slot[a] - slot[b]);
    let x = 0, tallest = 0;
    for (const i of members) {
      const [k, w, h] = nodes[i];
      pos[k] = [x, y, w, h]; slot[i] = x + w / 2;
      x += w + 18; tallest = Math.max(tallest, h);
    }
    width = Math.max(width, x - 18);
    y += tallest + 28;
  }
  return { pos, width, height: Math.max(0, y - 28) };
}

function layoutGroups(request, report) {
  const started = performance.now();
  const sizes = {};
  const layouts = {};
  const groups = request.groups;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i];
    const nodes = g.nodes.map(([k, w, h]) => (sizes[k] ? [k, sizes[k][0], sizes[k][1]] : [k, w, h]));
    const signature = g.key + "\u0001" + JSON.stringify(nodes) + "\u0001" + JSON.stringify(g.edges);
    let result = layoutCache.get(signature);
    if (!result) {
      const late = performance.now() - started > request.budgetMs;
      result = nodes.length > DAGRE_LIMIT || late ? fastLayout(nodes, g.edges) : dagreLayout(nodes, g.edges);
      layoutCache.set(signature, result);
    }
    layouts[g.key] = result;
    sizes[g.key] = [Math.max(result.width + 2 * GROUP_PAD, 120), result.height + GROUP_PAD + GROUP_HEADER];
    if (report && (i % 8 === 7)) report({ id: request.id, progress: (i + 1) / groups.length });
  }
  return { id: request.id, done: true, layouts, sizes };
}

if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = (e) => self.postMessage(layoutGroups(e.data, (m) => self.postMessage(m)));
}
