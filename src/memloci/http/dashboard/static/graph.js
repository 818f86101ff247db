// The graph view: an entity's neighbourhood as SVG, laid out by a small force simulation.
// Drag the background to pan, the wheel, two fingers or the buttons to zoom; click a node (or Space) to
// add its neighbours, double-click it (or Enter) to open the entity.

const SVG = "http://www.w3.org/2000/svg";
const LINK_LENGTH = 110;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c);
  return node;
}

function seeded(text) {  // a stable angle per name, so a layout does not jump between loads
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return ((h >>> 0) % 3600) / 3600 * Math.PI * 2;
}

export class GraphView {
  /** load(name) -> Promise<{center, nodes, edges, truncated}>; open(name) opens the entity. */
  constructor({ center, load, open, onChange }) {
    this.center = center;
    this.load = load;
    this.open = open;
    this.onChange = onChange || (() => {});
    this.nodes = new Map();
    this.edges = new Map();
    this.expanded = new Set();
    this.truncated = false;
    this.k = 1; this.tx = 0; this.ty = 0;
    this.queue = Promise.resolve();  // loads one at a time, so a reload never drops an expansion
    this.element = this.build();
  }

  build() {
    this.viewport = svg("g", { class: "viewport" });
    this.edgeLayer = svg("g", { class: "edges" });
    this.nodeLayer = svg("g", { class: "nodes" });
    this.viewport.append(this.edgeLayer, this.nodeLayer);
    this.svg = svg("svg", { role: "group", "aria-label": `Graph around ${this.center}`, "data-testid": "graph-svg" }, this.viewport);
    const controls = document.createElement("div");
    controls.className = "graph-controls";
    const button = (label, text, testid, fn) => {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = text; b.setAttribute("aria-label", label);
      b.dataset.testid = testid; b.addEventListener("click", fn);
      return b;
    };
    controls.append(button("Zoom in", "+", "graph-zoom-in", () => this.zoomBy(1.25)),
                    button("Zoom out", "−", "graph-zoom-out", () => this.zoomBy(0.8)),
                    button("Fit the graph in view", "Fit", "graph-fit", () => this.fit()));
    const wrap = document.createElement("div");
    wrap.className = "graph-wrap";
    wrap.dataset.testid = "graph";
    wrap.append(this.svg, controls);
    this.listen();
    return wrap;
  }

  listen() {
    let drag = null;   // one pointer on the background: pan
    let pinch = null;  // two pointers (a touch screen): zoom around their middle
    const pointers = new Map();
    const middle = () => {
      const [a, b] = [...pointers.values()];
      const r = this.svg.getBoundingClientRect();
      return { d: Math.hypot(a.x - b.x, a.y - b.y) || 1,
               x: (a.x + b.x) / 2 - r.left - r.width / 2, y: (a.y + b.y) / 2 - r.top - r.height / 2 };
    };
    this.svg.addEventListener("pointerdown", (e) => {
      pointers.set(e.pointerId, { x: e.clientX, y: e.clientY });
      if (pointers.size === 2) {
        drag = null;
        pinch = middle();
        return;
      }
      if (e.target.closest && e.target.closest(".graph-node")) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, id: e.pointerId };
      this.svg.setPointerCapture(e.pointerId);
      this.svg.classList.add("dragging");
    });
    this.svg.addEventListener("pointermove", (e) => {
      if (pointers.has(e.pointerId)) pointers.set(e.pointerId, { x: e.clientX, y: e.clientY });
      if (pinch && pointers.size === 2) {
        const now = middle();
        this.zoomBy(now.d / pinch.d, now.x, now.y);
        pinch = now;
        return;
      }
      if (!drag || e.pointerId !== drag.id) return;
      this.tx = drag.tx + (e.clientX - drag.x);
      this.ty = drag.ty + (e.clientY - drag.y);
      this.place();
    });
    const end = (e) => {
      pointers.delete(e.pointerId);
      if (pointers.size < 2) pinch = null;
      if (!drag || e.pointerId !== drag.id) return;
      drag = null;
      this.svg.classList.remove("dragging");
    };
    this.svg.addEventListener("pointerup", end);
    this.svg.addEventListener("pointercancel", end);
    this.svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = this.svg.getBoundingClientRect();
      this.zoomBy(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left - r.width / 2, e.clientY - r.top - r.height / 2);
    }, { passive: false });
  }

  size() {
    const r = this.svg.getBoundingClientRect();
    return { w: r.width || 800, h: r.height || 500 };
  }

  zoomBy(factor, px = 0, py = 0) {  // (px, py): the point that stays, from the middle of the view
    const k = Math.min(6, Math.max(0.15, this.k * factor));
    const wx = (px - this.tx) / this.k, wy = (py - this.ty) / this.k;
    this.k = k;
    this.tx = px - wx * k;
    this.ty = py - wy * k;
    this.place();
  }

  fit() {
    if (!this.nodes.size) return;
    const { w, h } = this.size();
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of this.nodes.values()) {
      x0 = Math.min(x0, n.x - 30); x1 = Math.max(x1, n.x + 120);
      y0 = Math.min(y0, n.y - 30); y1 = Math.max(y1, n.y + 30);
    }
    this.k = Math.min(1.5, Math.max(0.15, Math.min(w / (x1 - x0), h / (y1 - y0))));
    this.tx = -((x0 + x1) / 2) * this.k;
    this.ty = -((y0 + y1) / 2) * this.k;
    this.place();
  }

  place() {
    const { w, h } = this.size();
    this.viewport.setAttribute("transform", `translate(${w / 2 + this.tx} ${h / 2 + this.ty}) scale(${this.k})`);
  }

  /** Adds a neighbourhood; new nodes start around the node they were reached from. */
  merge(data, from) {
    const origin = this.nodes.get(from) || { x: 0, y: 0 };
    for (const n of data.nodes) {
      const old = this.nodes.get(n.name);
      if (old) {
        old.entity_type = n.entity_type; old.observations = n.observations;
        continue;
      }
      const a = seeded(n.name), d = this.nodes.size ? LINK_LENGTH : 0;
      this.nodes.set(n.name, { ...n, x: origin.x + Math.cos(a) * d, y: origin.y + Math.sin(a) * d, vx: 0, vy: 0 });
    }
    for (const e of data.edges) {
      if (this.nodes.has(e.from) && this.nodes.has(e.to)) this.edges.set(`${e.from}\u0000${e.relation_type}\u0000${e.to}`, e);
    }
    this.truncated = this.truncated || Boolean(data.truncated);
  }

  simulate(steps) {
    const nodes = [...this.nodes.values()];
    const edges = [...this.edges.values()];
    for (let step = 0; step < steps; step++) {
      const cool = 1 - step / steps;
      for (let i = 0; i < nodes.length; i++) {
        const a = nodes[i];
        for (let j = i + 1; j < nodes.length; j++) {
          const b = nodes[j];
          let dx = a.x - b.x, dy = a.y - b.y;
          let d2 = dx * dx + dy * dy;
          if (d2 < 1) { dx = Math.cos(seeded(a.name + b.name)); dy = Math.sin(seeded(b.name + a.name)); d2 = 1; }
          if (d2 > 250000) continue;
          const f = 4000 / d2;
          const d = Math.sqrt(d2);
          a.vx += dx / d * f; a.vy += dy / d * f;
          b.vx -= dx / d * f; b.vy -= dy / d * f;
        }
      }
      for (const e of edges) {
        const a = this.nodes.get(e.from), b = this.nodes.get(e.to);
        if (!a || !b || a === b) continue;
        const dx = b.x - a.x, dy = b.y - a.y;
        const d = Math.max(1, Math.sqrt(dx * dx + dy * dy));
        const f = (d - LINK_LENGTH) * 0.04;
        a.vx += dx / d * f; a.vy += dy / d * f;
        b.vx -= dx / d * f; b.vy -= dy / d * f;
      }
      for (const n of nodes) {
        n.vx -= n.x * 0.01; n.vy -= n.y * 0.01;
        const limit = 30 * cool + 1;
        n.x += Math.max(-limit, Math.min(limit, n.vx));
        n.y += Math.max(-limit, Math.min(limit, n.vy));
        n.vx *= 0.6; n.vy *= 0.6;
      }
    }
  }

  draw() {
    const labels = this.edges.size <= 80;
    const edgeNodes = [];
    for (const e of this.edges.values()) {
      const a = this.nodes.get(e.from), b = this.nodes.get(e.to);
      const g = svg("g", { class: "graph-edge", "data-testid": "graph-edge", "data-from": e.from, "data-to": e.to },
                    svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }));
      if (labels) {
        const t = svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, "text-anchor": "middle" });
        t.textContent = e.relation_type;
        g.append(t);
      }
      edgeNodes.push(g);
    }
    this.edgeLayer.replaceChildren(...edgeNodes);
    const nodeEls = [];
    for (const n of this.nodes.values()) {
      const r = 9 + Math.min(9, Math.sqrt(n.observations || 0) * 2);
      const classes = ["graph-node"];
      if (n.name === this.center) classes.push("center");
      if (this.expanded.has(n.name)) classes.push("expanded");
      const label = svg("text", { x: r + 4, y: 4 });
      label.textContent = n.name;
      const title = svg("title");
      title.textContent = `${n.name} (${n.entity_type || "entity"}, ${n.observations || 0} observations)`;
      const g = svg("g", {
        class: classes.join(" "), transform: `translate(${n.x} ${n.y})`, tabindex: 0, role: "button",
        "aria-label": `${n.name}: click or Space to show its neighbours, double-click or Enter to open`,
        "data-testid": "graph-node", "data-name": n.name, "data-expanded": this.expanded.has(n.name) ? "true" : "false",
      }, title, svg("rect", { class: "hit", x: -r - 2, y: -r - 2, width: 2 * r + 10 + n.name.length * 7.5, height: 2 * r + 4 }),
      svg("circle", { r }), label);
      g.addEventListener("click", () => this.expand(n.name));
      g.addEventListener("dblclick", () => this.open(n.name));
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); this.open(n.name); }
        if (e.key === " ") { e.preventDefault(); this.expand(n.name); }
      });
      nodeEls.push(g);
    }
    this.nodeLayer.replaceChildren(...nodeEls);
    this.place();
    this.onChange(this);
  }

  /** The first load: the centre and its neighbours. */
  async start() {
    const data = await this.load(this.center);
    this.merge(data, this.center);
    this.expanded.add(this.center);
    this.simulate(300);
    this.draw();
    requestAnimationFrame(() => this.fit());
  }

  enqueue(task) {
    const next = this.queue.then(task);
    this.queue = next.catch(() => {});
    return next;
  }

  expand(name) {
    return this.enqueue(async () => {
      if (this.expanded.has(name)) return;
      const data = await this.load(name);
      this.expanded.add(name);
      this.merge(data, name);
      this.simulate(160);
      this.draw();
    });
  }

  /** Loads every expanded node again (after a change), keeping the positions of nodes that stay. */
  reload() {
    return this.enqueue(() => this.reloadNow());
  }

  async reloadNow() {
    const old = this.nodes;
    const names = [...this.expanded];
    const answers = await Promise.all(names.map((n) => this.load(n).catch(() => null)));
    this.nodes = new Map();
    this.edges = new Map();
    this.truncated = false;
    const kept = new Set();
    answers.forEach((data, i) => {
      if (!data) return;
      kept.add(names[i]);
      for (const n of data.nodes) {
        const was = old.get(n.name);
        if (was) this.nodes.set(n.name, { ...was, ...n });
      }
      this.merge(data, names[i]);
    });
    this.expanded = kept;
    this.simulate(60);
    this.draw();
  }
}
