// memloci dashboard: one page over the JSON API under /api/ (docs/dashboard.md).
// Vanilla ES modules, no build step; every request goes to this page's own origin.
//
// Test hooks (data-testid), stable:
//   header, nav, nav-toggle, search-form, search-input, library-pick, library-select, who, sign-out,
//   notice (notice-text, notice-action), error, view (main; data-route = the page, data-state =
//   "loading" | "ready" | "error", data-render = how many renders began for a navigation or an action,
//   live updates not counted: a test waits for a higher one),
//   confirm-dialog, confirm-text, confirm-ok, confirm-cancel,
//   search:   search-page, search-page-input, search-kind, search-library, search-results, search-memories,
//             search-entities, search-notes, search-hit (data-kind = memory | entity | note), hit-link, hit-why
//   memories: memories-page, memory-filters, filter-library, filter-tags, filter-tag (checkbox per tag),
//             filter-all-tags, filter-type, filter-after, filter-before, filter-time, filter-zone,
//             filter-superseded, filter-archived, filter-sort, filter-page-size, filter-apply, filter-reset,
//             memory-list, memory-row (data-hash), memory-link, memory-total, pager-prev, pager-next,
//             page-info, new-memory, new-memory-content, new-memory-tags, new-memory-save
//   memory:   memory-page, memory-content, memory-facts, memory-links, memory-edit, edit-content, edit-tags,
//             edit-importance, edit-save, memory-delete, memory-history, history-entry, undo-button
//   entity:   entity-page, entity-name, entity-type, entity-graph-link, observations, observation,
//             observation-text, observation-correct, observation-delete, correct-input, correct-save,
//             correct-cancel, add-observation, add-observation-input, add-observation-save,
//             relations-out, relations-in, relation, body-html
//   graph:    graph-page, graph-pick, graph-pick-input, graph-pick-list, graph, graph-svg, graph-node
//             (data-name, data-expanded), graph-edge (data-from, data-to), graph-zoom-in, graph-zoom-out,
//             graph-fit, graph-stats, graph-list
//   history:  history-page, history-list, history-entry (data-id), undo-button
//   previews: previews-page, preview-make, preview-operation, preview-similar, preview-older-than,
//             preview-make-submit, preview-list, preview-row (data-id), preview-open, preview-page,
//             preview-summary, preview-items, preview-item, preview-offered, preview-execute, preview-executed
//   health:   health-page, health-library (data-name), health-version
//   sign-in:  signin-page, signin-form, signin-token, signin-submit, signin-error

import { GraphView } from "/static/graph.js";

const IMPORTANCE = ["critical", "high", "medium", "low"];
const ZONES = ["active", "stale", "archive_candidate"];
const SORTS = [["newest", "Newest first"], ["oldest", "Oldest first"], ["importance", "Importance"], ["uses", "Most used"]];
const OPERATIONS = [["cleanup_duplicates", "Clean up duplicates"], ["memory_cleanup", "Memory cleanup (duplicates, old memories)"],
                    ["archive", "Archive (forget into the archive)"]];

const state = {
  session: null,       // GET /api/session's answer
  library: null,       // the library picked in the header
  events: null,        // the EventSource of /api/events
  dirty: false,        // a form of the current view has input not yet sent: a live change waits
  refreshView: null,   // how the current view updates itself on a change (else it renders again)
  renderId: 0,         // renders begun (a newer one makes an older one's answer moot)
  renders: 0,          // renders begun for a navigation or an action, not a live update (data-render)
  focusNext: null,     // the control to focus after the next navigation (see focusKey)
  writing: 0,          // the page's own changes under way: live updates wait for them
};

// ---------------------------------------------------------------- DOM helpers

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "testid") node.dataset.testid = v;
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "value") node.value = v;
    else if (k === "checked") node.checked = Boolean(v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : String(c));
  }
}

let fieldCount = 0;
function field(labelText, control, extra = "") {
  const id = control.id || `f${++fieldCount}`;
  control.id = id;
  const check = control.type === "checkbox";
  return h("div", { class: `field${check ? " check" : ""} ${extra}` },
           check ? [control, h("label", { for: id }, labelText)] : [h("label", { for: id }, labelText), control]);
}

function select(attrs, options, chosen) {
  return h("select", attrs, options.map(([value, label]) =>
    h("option", { value, selected: String(value) === String(chosen ?? "") }, label)));
}

const firstLine = (text, n = 140) => {
  const line = String(text || "").split("\n").find((l) => l.trim()) || "";
  return line.length > n ? `${line.slice(0, n - 1)}…` : line;
};
const when = (iso) => (iso ? String(iso).replace("T", " ").slice(0, 16) : "");
const bytes = (n) => {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
};
const enc = encodeURIComponent;

function memoryHref(hash, library) {
  return `#/memory/${enc(hash)}${library ? `?library=${enc(library)}` : ""}`;
}
function entityHref(library, name) { return `#/entity/${enc(library)}/${enc(name)}`; }
function graphHref(library, name) { return `#/graph/${enc(library)}/${enc(name)}`; }

function tags(list) {
  return (list || []).map((t) => h("span", { class: "tag" }, t));
}

function errorBox(e) {
  const hint = e && e.hint ? h("div", { class: "muted" }, e.hint) : null;
  return h("div", { class: "error", role: "alert", testid: "error" },
           h("strong", {}, e && e.code ? `${e.code}: ` : "Error: "), e && e.message ? e.message : String(e), hint);
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, code, message, hint) {
    super(message);
    this.status = status; this.code = code; this.hint = hint;
  }
}

/** One call of the API; its JSON answer, or an ApiError. A change (not GET) holds live updates
 *  until its answer is read, so a view is not fetched again halfway through it. */
async function api(method, path, options = {}) {
  if (method === "GET") return call(method, path, options);
  state.writing += 1;
  try {
    return await call(method, path, options);
  } finally {
    state.writing -= 1;
  }
}

async function call(method, path, { query, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v === null || v === undefined || v === "" || v === false) continue;
    for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(one));
  }
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.session && state.session.csrf) headers["X-CSRF-Token"] = state.session.csrf;
  const response = await fetch(url, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    const e = (data && data.error) || {};
    if (response.status === 401 && path !== "/api/session") {
      state.session = { ...(state.session || {}), signed_in: false, csrf: null };  // the session ended (revoked, expired)
      stopEvents();
      drawHeader();
      if (!location.hash.startsWith("#/signin")) location.hash = "#/signin";
    }
    throw new ApiError(response.status, e.code || String(response.status), e.message || response.statusText, e.hint);
  }
  return data;
}

// ---------------------------------------------------------------- session and libraries

function libraries() { return (state.session && state.session.libraries) || []; }
function libraryInfo(name) { return libraries().find((l) => l.name === name); }
function canWrite(name) {
  const lib = libraryInfo(name || state.library);
  return Boolean(lib && lib.write);
}
function pickLibrary(query) {
  const wanted = query && query.get("library");
  if (wanted && wanted !== "*") return wanted;
  return state.library;
}

async function loadSession() {
  state.session = await api("GET", "/api/session");
  const names = libraries().map((l) => l.name);
  if (!names.includes(state.library)) {
    const saved = sessionStorage.getItem("memloci.library");
    state.library = names.includes(saved) ? saved : (names[0] || null);
  }
  drawHeader();
  if (state.session.signed_in) startEvents(); else stopEvents();
}

/** The library the header shows and pages use when their address names none. */
function useLibrary(name) {
  if (!libraryInfo(name) || name === state.library) return;
  state.library = name;
  sessionStorage.setItem("memloci.library", name);
  document.getElementById("library").value = name;
}

function drawHeader() {
  const s = state.session || {};
  const signedIn = Boolean(s.signed_in);
  for (const sel of ["#nav", ".top-search", ".nav-toggle"]) document.querySelector(sel).hidden = !signedIn;
  const pick = document.querySelector(".library-pick");
  const list = libraries();
  pick.hidden = !signedIn || list.length < 2;
  const sel = document.getElementById("library");
  sel.replaceChildren(...list.map((l) => h("option", { value: l.name, selected: l.name === state.library },
                                            `${l.name}${l.write ? "" : " (read only)"}`)));
  const who = document.querySelector(".who");
  who.replaceChildren();
  if (signedIn && !s.open) {
    who.append(h("span", {}, s.name ? `Signed in as ${s.name}` : "Signed in"),
               h("button", { type: "button", testid: "sign-out", onclick: signOut }, "Sign out"));
  } else if (signedIn) {
    who.append(h("span", {}, "Open on this computer"));
  }
}

async function signOut() {
  try { await api("DELETE", "/api/session"); } catch { /* signed out either way */ }
  state.session = null;
  stopEvents();
  await loadSession();
  location.hash = "#/signin";
}

// ---------------------------------------------------------------- live updates

function startEvents() {
  if (state.events || typeof EventSource === "undefined") return;
  const source = new EventSource("/api/events");
  source.addEventListener("change", (e) => {
    let data = {};
    try { data = JSON.parse(e.data); } catch { /* a change all the same */ }
    changed(data);
  });
  state.events = source;
}

function stopEvents() {
  if (state.events) state.events.close();
  state.events = null;
}

let changeTimer = null;
let pending = null;  // the changes since the last update: their libraries and the entities they name
function changed(data) {
  pending = pending || { libraries: new Set(), entities: new Set(), unnamed: false };
  if (data.library) pending.libraries.add(data.library);
  if (Array.isArray(data.entities)) data.entities.forEach((e) => pending.entities.add(e));
  else pending.unnamed = true;
  clearTimeout(changeTimer);
  changeTimer = setTimeout(showChanges, 250);
}

async function showChanges() {
  if (state.writing) {  // the page's own change is under way: it shows its outcome, then the view updates
    changeTimer = setTimeout(showChanges, 250);
    return;
  }
  const batch = pending;
  pending = null;
  if (!batch || parseHash().name === "signin") return;
  if (state.dirty) {
    notice(`Library ${[...batch.libraries].join(", ")} changed`.replace(/ $/, ""), "Show", () => render());
    return;
  }
  if (state.refreshView) {
    if (await state.refreshView(batch) === false) return;
  } else {
    await render({ keep: true, live: true });
  }
  notice("Updated");
}

let noticeTimer = null;
function notice(text, actionLabel, action) {
  const box = document.querySelector(".notice");
  const button = actionLabel ? h("button", {
    type: "button", testid: "notice-action",
    onclick: async () => { box.replaceChildren(); await action(); },
  }, actionLabel) : null;
  box.replaceChildren(h("div", { testid: "notice-text" }, text, button ? " " : null, button));
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => box.replaceChildren(), actionLabel ? 12000 : 2500);
}

// ---------------------------------------------------------------- confirm dialog

function confirmDialog(text, okLabel = "Confirm") {
  const dialog = document.querySelector("dialog.confirm");
  dialog.querySelector(".confirm-text").textContent = text;
  dialog.querySelector("[data-testid=confirm-ok]").textContent = okLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    dialog.querySelector("[data-testid=confirm-cancel]").focus();
  });
}

// ---------------------------------------------------------------- routing

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?", 2);
  const parts = path.split("/").filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { name: parts[0] || "search", parts: parts.slice(1), query: new URLSearchParams(qs || "") };
}

/** Where the keyboard is inside the view, as selectors that find the same control after it is drawn again. */
function focusKey() {
  const el = document.activeElement;
  const main = document.getElementById("main");
  if (!el || el === main || !main.contains(el)) return null;
  const quoted = (el2, names) => names.filter((a) => el2.hasAttribute(a))
    .map((a) => `[${a}="${el2.getAttribute(a).replace(/["\\]/g, "\\$&")}"]`).join("");
  const row = el.parentElement && el.parentElement.closest("[data-hash], [data-id], [data-name]");
  const rowKey = row && main.contains(row) ? quoted(row, ["data-testid", "data-hash", "data-id", "data-name"]) : "";
  return { sel: el.tagName.toLowerCase() + quoted(el, ["data-testid", "href", "name", "value", "aria-label"]),
           row: rowKey ? row.tagName.toLowerCase() + rowKey : null };
}

function restoreFocus(key) {
  if (!key) return;
  const main = document.getElementById("main");
  try {
    const scope = (key.row && main.querySelector(key.row)) || main;
    const el = scope.querySelector(key.sel) || main.querySelector(key.sel);
    if (el) el.focus({ preventScroll: true });
  } catch { /* a selector the page cannot read: the focus stays where it is */ }
}

/** Draws the view the address names. `keep`: the same view again (a live change, an action
 *  done in place): the scroll position, the focused control and the header's search text stay. */
async function render({ keep = false, focus = null, live = false } = {}) {
  const id = ++state.renderId;
  const route = parseHash();
  const main = document.getElementById("main");
  const y = window.scrollY;
  const key = focus || (keep ? focusKey() : null);
  main.dataset.route = route.name;
  main.dataset.state = "loading";
  if (!live) main.dataset.render = String(++state.renders);  // what a person did, not a live update
  if (!keep) document.getElementById("q").value = route.name === "search" ? route.query.get("q") || "" : "";
  for (const a of document.querySelectorAll(".nav a")) {
    if (a.dataset.route === route.name || (route.name === "memory" && a.dataset.route === "memories")) {
      a.setAttribute("aria-current", "page");
    }
    else a.removeAttribute("aria-current");
  }
  try {
    if (!state.session) await loadSession();
    if (!state.session.signed_in && route.name !== "signin") {
      location.replace("#/signin");  // the hashchange renders it
      return;
    }
    const named = route.name === "entity" || route.name === "graph" ? route.parts[0] : route.query.get("library");
    if (named) useLibrary(named);
    const view = VIEWS[route.name] || notFound;
    const refresh = { fn: null };
    const node = await view(route, refresh);
    if (id !== state.renderId) return;
    state.refreshView = refresh.fn;
    state.dirty = false;
    main.replaceChildren(node);
    main.dataset.state = "ready";
    if (keep) window.scrollTo(0, y);
    restoreFocus(key);
    if (refresh.after) await refresh.after();
  } catch (e) {
    if (id !== state.renderId) return;
    if (e instanceof ApiError && e.status === 401 && route.name !== "signin" && parseHash().name === "signin") return;  // drawn next
    state.refreshView = null;
    main.replaceChildren(errorBox(e));
    main.dataset.state = "error";
  }
}

function go(hash) {
  if (location.hash === hash) render(); else location.hash = hash;
}

// ---------------------------------------------------------------- search

async function searchView(route) {
  const q = route.query.get("q") || "";
  const kind = route.query.get("kind") || "all";
  const several = libraries().length > 1;
  const library = route.query.get("library") || (several ? "*" : state.library);
  const kindSel = select({ name: "kind", testid: "search-kind" },
                         [["all", "Everything"], ["memories", "Memories"], ["entities", "Entities"], ["notes", "Notes"]], kind);
  const libSel = select({ name: "library", testid: "search-library" },
                        [...(several ? [["*", "All libraries"]] : []), ...libraries().map((l) => [l.name, l.name])], library);
  const input = h("input", { type: "search", name: "q", value: q, testid: "search-page-input" });
  const form = h("form", {
    class: "filters", role: "search",
    onsubmit: (e) => {
      e.preventDefault();
      const p = new URLSearchParams({ q: input.value.trim(), kind: kindSel.value, library: libSel.value });
      go(`#/search?${p}`);
    },
  }, field("Search for", input), field("Kind", kindSel), field("Library", libSel),
     h("button", { type: "submit", class: "primary" }, "Search"));
  const page = h("section", { testid: "search-page" }, h("h1", {}, "Search"), form);
  if (!q.trim()) {
    page.append(h("p", { class: "muted" }, "Type words, a name or a question. Press / to jump to the search box."));
    return page;
  }
  const data = await api("GET", "/api/search", { query: { q, kind, library, limit: 20 } });
  const results = h("div", { testid: "search-results" });
  const section = (title, testid, hits, draw) => {
    if (!hits || (!hits.length && kind !== "all")) return null;
    return h("section", { testid }, h("h2", {}, `${title} (${hits.length})`),
             hits.length ? h("ul", { class: "hits" }, hits.map(draw)) : h("p", { class: "muted" }, "None."));
  };
  results.append(
    section("Memories", "search-memories", data.memories, (m) => h("li", { class: "hit", testid: "search-hit", "data-kind": "memory" },
      h("a", { href: memoryHref(m.content_hash, m.library), testid: "hit-link" }, firstLine(m.content)),
      m.why ? h("div", { class: "why", testid: "hit-why" }, m.why) : null,
      h("div", { class: "meta" }, m.library ? h("span", {}, m.library) : null, h("span", {}, m.memory_type),
        m.similarity_score !== undefined ? h("span", {}, `score ${m.similarity_score}`) : null, tags(m.tags)))),
    section("Entities", "search-entities", data.entities, (e) => h("li", { class: "hit", testid: "search-hit", "data-kind": "entity" },
      h("a", { href: entityHref(e.library || library, e.name), testid: "hit-link" }, e.name),
      " ", h("span", { class: "muted" }, e.entity_type || ""),
      e.why ? h("div", { class: "why", testid: "hit-why" }, e.why) : null,
      (e.observations || []).length ? h("ul", {}, e.observations.slice(0, 3).map((o) => h("li", {}, firstLine(o)))) : null)),
    section("Notes", "search-notes", data.notes, (n) => h("li", { class: "hit", testid: "search-hit", "data-kind": "note" },
      h("a", { href: entityHref(n.library || library, n.name), testid: "hit-link" }, n.name),
      n.why ? h("div", { class: "why", testid: "hit-why" }, n.why) : null,
      n.line ? h("div", { class: "content" }, firstLine(n.line, 200)) : null)),
  );
  const none = !(data.memories || []).length && !(data.entities || []).length && !(data.notes || []).length;
  if (none) results.append(h("p", { class: "muted" }, `Nothing found for “${q}”.`));
  page.append(results);
  return page;
}

// ---------------------------------------------------------------- memories

async function memoriesView(route) {
  const q = route.query;
  const library = pickLibrary(q);
  const chosenTags = q.getAll("tag");
  const pageNo = Math.max(1, parseInt(q.get("page") || "1", 10) || 1);
  const pageSize = q.get("page_size") || "25";
  const query = {
    library, tag: chosenTags, all_tags: q.get("all_tags") === "true", type: q.get("type"), after: q.get("after"),
    before: q.get("before"), time: q.get("time"), zone: q.get("zone"), superseded: q.get("superseded") === "true",
    archived: q.get("archived") === "true", sort: q.get("sort") || "newest", page: pageNo, page_size: pageSize,
  };
  const data = await api("GET", "/api/memories", { query });

  const c = {
    library: select({ name: "library", testid: "filter-library" }, libraries().map((l) => [l.name, l.name]), library),
    allTags: h("input", { type: "checkbox", name: "all_tags", checked: query.all_tags, testid: "filter-all-tags" }),
    type: h("input", { type: "text", name: "type", value: query.type || "", testid: "filter-type", size: 10 }),
    after: h("input", { type: "date", name: "after", value: query.after || "", testid: "filter-after" }),
    before: h("input", { type: "date", name: "before", value: query.before || "", testid: "filter-before" }),
    time: h("input", { type: "text", name: "time", value: query.time || "", placeholder: "last week", testid: "filter-time", size: 12 }),
    zone: select({ name: "zone", testid: "filter-zone" }, [["", "Any"], ...ZONES.map((z) => [z, z.replace("_", " ")])], query.zone),
    superseded: h("input", { type: "checkbox", name: "superseded", checked: query.superseded, testid: "filter-superseded" }),
    archived: h("input", { type: "checkbox", name: "archived", checked: query.archived, testid: "filter-archived" }),
    sort: select({ name: "sort", testid: "filter-sort" }, SORTS, query.sort),
    pageSize: select({ name: "page_size", testid: "filter-page-size" }, [["10", "10"], ["25", "25"], ["50", "50"], ["100", "100"], ["200", "200"]], pageSize),
  };
  const tagList = data.tags || [];
  const tagBoxes = tagList.map((t) => {
    const box = h("input", { type: "checkbox", name: "tag", value: t.tag, checked: chosenTags.includes(t.tag), testid: "filter-tag",
                             id: `tag-${++fieldCount}` });
    return h("span", {}, box, h("label", { for: box.id }, ` ${t.tag} (${t.count})`));
  });
  const hashFor = (pageWanted) => {
    const p = new URLSearchParams();
    const set = (k, v) => { if (v) p.set(k, v); };
    set("library", c.library.value);
    for (const box of form.querySelectorAll("input[name=tag]:checked")) p.append("tag", box.value);
    if (c.allTags.checked) p.set("all_tags", "true");
    set("type", c.type.value.trim()); set("after", c.after.value); set("before", c.before.value);
    set("time", c.time.value.trim()); set("zone", c.zone.value);
    if (c.superseded.checked) p.set("superseded", "true");
    if (c.archived.checked) p.set("archived", "true");
    if (c.sort.value !== "newest") p.set("sort", c.sort.value);
    if (c.pageSize.value !== "25") p.set("page_size", c.pageSize.value);
    if (pageWanted > 1) p.set("page", String(pageWanted));
    return `#/memories?${p}`;
  };
  const form = h("form", {
    class: "filters", testid: "memory-filters", "aria-label": "Filters",
    onsubmit: (e) => { e.preventDefault(); go(hashFor(1)); },
  },
  libraries().length > 1 ? field("Library", c.library) : null,
  tagList.length ? h("fieldset", { class: "tag-filter", testid: "filter-tags" }, h("legend", {}, "Tags"), tagBoxes) : null,
  tagList.length ? field("Every tag chosen", c.allTags) : null,
  field("Type", c.type), field("After", c.after), field("Before", c.before), field("Time phrase", c.time),
  field("Zone", c.zone), field("Superseded", c.superseded), field("Archived", c.archived),
  field("Sort", c.sort), field("Per page", c.pageSize),
  h("div", { class: "buttons" },
    h("button", { type: "submit", class: "primary", testid: "filter-apply" }, "Apply"),
    h("a", { href: `#/memories?library=${enc(library || "")}`, testid: "filter-reset" }, "Reset")));
  form.addEventListener("change", (e) => {  // a checkbox or a list applies at once; text waits for Apply
    if (e.target.matches("input[type=checkbox], select")) {
      state.focusNext = focusKey();
      go(hashFor(1));
    }
  });

  const rows = (data.memories || []).map((m) => h("li", { class: "card", testid: "memory-row", "data-hash": m.content_hash },
    h("a", { href: memoryHref(m.content_hash, library), testid: "memory-link" }, firstLine(m.content) || "(empty)"),
    h("div", { class: "meta" }, h("span", {}, m.memory_type), h("span", {}, m.importance),
      h("span", { title: m.created_at }, when(m.created_at)), h("span", { class: m.zone === "stale" ? "zone-stale" : "" }, m.zone),
      m.entity ? h("span", {}, "of ", h("a", { href: entityHref(library, m.entity) }, m.entity)) : null,
      m.superseded_by ? h("span", {}, "superseded") : null, m.archived_at ? h("span", {}, "archived") : null, tags(m.tags))));
  const pages = Math.max(1, Math.ceil((data.total || 0) / (data.page_size || 25)));
  const pager = h("nav", { class: "pager", "aria-label": "Pages of memories" },
    pageNo > 1 ? h("a", { href: hashFor(pageNo - 1), testid: "pager-prev" }, "← Previous") : null,
    h("span", { testid: "page-info" }, `Page ${data.page || pageNo} of ${pages}`),
    data.has_more ? h("a", { href: hashFor(pageNo + 1), testid: "pager-next" }, "Next →") : null);

  const page = h("section", { testid: "memories-page" },
    h("h1", {}, "Memories"), form,
    canWrite(library) ? newMemoryForm(library) : null,
    h("p", { class: "muted", testid: "memory-total" }, `${data.total} ${data.total === 1 ? "memory" : "memories"}`),
    rows.length ? h("ul", { class: "cards", testid: "memory-list" }, rows) : h("p", { testid: "memory-list" }, "No memory matches."),
    pager);
  return page;
}

function newMemoryForm(library) {
  const content = h("textarea", { name: "content", required: true, testid: "new-memory-content" });
  const tagsInput = h("input", { type: "text", name: "tags", placeholder: "comma, separated", testid: "new-memory-tags" });
  const type = h("input", { type: "text", name: "memory_type", value: "note" });
  const importance = select({ name: "importance" }, IMPORTANCE.map((i) => [i, i]), "medium");
  const out = h("div");
  const form = h("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const data = await api("POST", "/api/memories", { body: {
          library, content: content.value, tags: splitTags(tagsInput.value), memory_type: type.value.trim() || "note",
          importance: importance.value, metadata: {},
        } });
        notice(data.change_id ? `Stored (change #${data.change_id})` : "Already stored");
        state.dirty = false;
        go(memoryHref(data.memory.content_hash, library));
      } catch (err) { out.replaceChildren(errorBox(err)); }
    },
  }, field("Content", content), h("div", { class: "row" }, field("Tags", tagsInput), field("Type", type), field("Importance", importance)),
  h("div", { class: "buttons" }, h("button", { type: "submit", class: "primary", testid: "new-memory-save" }, "Store")), out);
  const details = h("details", { class: "card new-memory", testid: "new-memory" }, h("summary", {}, "New memory"), form);
  details.addEventListener("toggle", () => { if (details.open) state.dirty = true; });  // open: live updates wait
  return details;
}

const splitTags = (text) => text.split(",").map((t) => t.trim()).filter(Boolean);

// ---------------------------------------------------------------- one memory

async function memoryView(route) {
  const hash = route.parts[0];
  const library = pickLibrary(route.query);
  const data = await api("GET", `/api/memories/${enc(hash)}`, { query: { library } });
  const m = data.memory;
  const lib = m.library || library;
  const writable = canWrite(lib);
  const facts = [["Library", lib], ["Type", m.memory_type], ["Importance", m.importance], ["Tags", (m.tags || []).join(", ") || "—"],
                 ["Created", when(m.created_at)], ["Updated", when(m.updated_at)], ["Uses", m.access_count], ["Zone", m.zone],
                 ["Entity", m.entity ? h("a", { href: entityHref(lib, m.entity) }, m.entity) : null],
                 ["Superseded by", m.superseded_by ? h("a", { href: memoryHref(m.superseded_by, lib) }, m.superseded_by.slice(0, 12)) : null],
                 ["Archived", m.archived_at ? when(m.archived_at) : null], ["Hash", h("code", {}, m.content_hash)]];
  const page = h("section", { testid: "memory-page", "data-hash": m.content_hash },
    h("p", {}, h("a", { href: `#/memories?library=${enc(lib)}` }, "← Memories")),
    h("h1", {}, firstLine(m.content, 80) || "Memory"),
    h("div", { class: "content card", testid: "memory-content" }, m.content),
    h("dl", { class: "facts", testid: "memory-facts" }, facts.filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    (m.links || []).length ? [h("h2", {}, "Links"), h("ul", { testid: "memory-links" }, m.links.map((l) => h("li", {},
      h("span", { class: "muted" }, `${(l.type || "references").replace(/_/g, " ")} `),
      l.entity ? h("a", { href: entityHref(lib, l.entity) }, l.entity) : null,
      l.memory ? h("a", { href: memoryHref(l.memory, lib) }, `memory ${l.memory.slice(0, 12)}`) : null,
      l.score !== undefined ? h("span", { class: "muted" }, ` (${l.score})`) : null)))] : null);
  if (Object.keys(m.metadata || {}).length) page.append(h("h2", {}, "Metadata"), h("pre", { class: "content" }, JSON.stringify(m.metadata, null, 2)));
  if (writable) page.append(memoryEditor(m, lib));
  page.append(h("h2", {}, "History"), historyList(data.history || [], lib, "memory-history"));
  return page;
}

function memoryEditor(m, lib) {
  const content = h("textarea", { name: "content", testid: "edit-content" }, m.content);
  const tagsInput = h("input", { type: "text", name: "tags", value: (m.tags || []).join(", "), testid: "edit-tags" });
  const importance = select({ name: "importance", testid: "edit-importance" }, IMPORTANCE.map((i) => [i, i]), m.importance);
  const out = h("div");
  const form = h("form", {
    testid: "memory-edit",
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { library: lib };
      if (content.value !== m.content) body.content = content.value;
      const newTags = splitTags(tagsInput.value);
      if (newTags.join("\u0000") !== (m.tags || []).join("\u0000")) body.tags = newTags;
      if (importance.value !== m.importance) body.importance = importance.value;
      if (Object.keys(body).length === 1) { out.replaceChildren(h("p", { class: "muted" }, "Nothing changed.")); return; }
      try {
        const data = await api("PATCH", `/api/memories/${enc(m.content_hash)}`, { body });
        state.dirty = false;
        notice(`Saved (change ${(data.change_ids || []).map((i) => `#${i}`).join(", ")})`);
        go(memoryHref(data.memory.content_hash, lib));
      } catch (err) { out.replaceChildren(errorBox(err)); }
    },
  }, h("h2", {}, "Edit"), field("Content", content),
  h("div", { class: "row" }, field("Tags (comma separated)", tagsInput), field("Importance", importance)),
  h("div", { class: "buttons" },
    h("button", { type: "submit", class: "primary", testid: "edit-save" }, "Save"),
    h("button", {
      type: "button", class: "danger", testid: "memory-delete",
      onclick: async () => {
        if (!await confirmDialog(`Delete this memory? “${firstLine(m.content, 80)}” (undo brings it back)`, "Delete")) return;
        try {
          const data = await api("DELETE", `/api/memories/${enc(m.content_hash)}`, { query: { library: lib } });
          state.dirty = false;
          const change = (data.change_ids || [])[0];
          if (change) notice(`Deleted (change #${change})`, "Undo", () => undoChange(change, lib));
          else notice("Deleted");
          go(`#/memories?library=${enc(lib)}`);
        } catch (err) { out.replaceChildren(errorBox(err)); }
      },
    }, "Delete")), out);
  return form;
}

// ---------------------------------------------------------------- history

function historyList(entries, lib, testid) {
  if (!entries.length) return h("p", { class: "muted", testid }, "No change recorded.");
  const writable = canWrite(lib);
  return h("div", { class: "table-wrap" }, h("table", { testid },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "When"), h("th", {}, "What"), h("th", { class: "wide-only" }, "Entities"),
      h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
    h("tbody", {}, entries.map((e) => h("tr", { testid: "history-entry", "data-id": e.id },
      h("td", {}, String(e.id)), h("td", { title: e.at }, when(e.at)),
      h("td", {}, h("div", {}, e.summary || e.action), h("div", { class: "meta" }, e.tool ? h("span", {}, e.tool) : null, e.action !== e.tool ? h("span", {}, e.action) : null)),
      h("td", { class: "wide-only" }, (e.entities || []).map((n, i) => [i ? ", " : "", h("a", { href: entityHref(lib, n) }, n)])),
      h("td", {}, writable && e.undoable ? h("button", {
        type: "button", testid: "undo-button", "aria-label": `Undo change ${e.id}`,
        onclick: () => undoChange(e.id, lib),
      }, "Undo") : null))))));
}

async function undoChange(id, lib) {
  try {
    await api("POST", `/api/history/${enc(id)}/undo`, { body: { library: lib } });
    notice(`Undid change #${id}`);
  } catch (err) {
    notice(`Undo of #${id} failed: ${err.message}`);
  }
  await render({ keep: true });
}

async function historyView(route) {
  const lib = pickLibrary(route.query);
  const data = await api("GET", "/api/history", { query: { library: lib, limit: 50 } });
  return h("section", { testid: "history-page" }, h("h1", {}, `History of ${lib}`),
    h("p", { class: "muted" }, "Every change, newest first. Undo reverts one change (the undo is recorded too)."),
    historyList(data.entries || [], lib, "history-list"));
}

// ---------------------------------------------------------------- entities and notes

async function entityView(route) {
  const lib = route.parts[0];
  const name = route.parts.slice(1).join("/");
  const data = await api("GET", `/api/entities/${enc(name)}`, { query: { library: lib } });
  const writable = canWrite(lib);
  const out = h("div");
  const obsList = h("ul", { class: "obs-list", testid: "observations" });
  const call = async (method, body, done) => {
    try {
      await api(method, `/api/entities/${enc(data.name)}/observations`, { body: { library: lib, ...body } });
      state.dirty = false;
      notice(done);
      await render({ keep: true });
    } catch (err) { out.replaceChildren(errorBox(err)); }
  };
  for (const o of data.observations || []) {
    const text = typeof o === "string" ? o : o.content;
    const li = h("li", { testid: "observation" });
    const show = () => {
      li.replaceChildren(h("span", { class: "obs-text", testid: "observation-text" }, text),
        writable ? h("button", { type: "button", class: "link", testid: "observation-correct", "aria-label": `Correct: ${firstLine(text, 40)}`,
          onclick: () => {
            state.dirty = true;  // a live change waits while the correction is open
            const input = h("input", { type: "text", value: text, testid: "correct-input", size: 50 });
            li.replaceChildren(h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); call("PATCH", { old: text, new: input.value }, "Corrected"); } },
              field("Correct to", input),
              h("button", { type: "submit", class: "primary", testid: "correct-save" }, "Save"),
              h("button", { type: "button", testid: "correct-cancel", onclick: () => { state.dirty = false; show(); } }, "Cancel")));
            input.focus();
          } }, "Correct") : null,
        writable ? h("button", { type: "button", class: "link", testid: "observation-delete", "aria-label": `Delete: ${firstLine(text, 40)}`,
          onclick: async () => {
            if (await confirmDialog(`Delete the observation “${firstLine(text, 80)}”?`, "Delete")) call("DELETE", { contents: [text] }, "Deleted");
          } }, "Delete") : null);
    };
    show();
    obsList.append(li);
  }
  const rel = data.relations || { outgoing: [], incoming: [] };
  const addInput = h("input", { type: "text", name: "observation", testid: "add-observation-input", size: 50, required: true });
  const page = h("section", { testid: "entity-page", "data-name": data.name },
    h("h1", { testid: "entity-name" }, data.name),
    h("div", { class: "meta" }, h("span", { testid: "entity-type" }, data.entity_type || "entity"), h("span", {}, lib),
      (data.aliases || []).length ? h("span", {}, `also: ${data.aliases.join(", ")}`) : null,
      h("a", { href: graphHref(lib, data.name), testid: "entity-graph-link" }, "Show in the graph")),
    h("h2", {}, `Observations (${(data.observations || []).length})`),
    (data.observations || []).length ? obsList : h("p", { class: "muted", testid: "observations" }, "None."),
    writable ? h("form", {
      class: "row", testid: "add-observation",
      onsubmit: (e) => { e.preventDefault(); if (addInput.value.trim()) call("POST", { contents: [addInput.value.trim()] }, "Added"); },
    }, field("Add an observation", addInput), h("button", { type: "submit", class: "primary", testid: "add-observation-save" }, "Add")) : null,
    out,
    h("h2", {}, "Relations"),
    h("h3", {}, "From this entity"),
    rel.outgoing.length ? h("ul", { testid: "relations-out" }, rel.outgoing.map((r) => h("li", { testid: "relation" },
      h("span", { class: "muted" }, `${r.relation_type} → `), h("a", { href: entityHref(lib, r.to) }, r.to))))
      : h("p", { class: "muted", testid: "relations-out" }, "None."),
    h("h3", {}, "To this entity"),
    rel.incoming.length ? h("ul", { testid: "relations-in" }, rel.incoming.map((r) => h("li", { testid: "relation" },
      h("a", { href: entityHref(lib, r.from) }, r.from), h("span", { class: "muted" }, ` ${r.relation_type} → this`))))
      : h("p", { class: "muted", testid: "relations-in" }, "None."));
  if (data.body_html) {
    const body = h("article", { class: "body-html", testid: "body-html", "aria-label": "Note" });
    body.innerHTML = data.body_html;  // rendered by the server with raw HTML off (http/dashboard/render.py)
    page.append(h("h2", {}, "Note"), body);
  }
  return page;
}

// ---------------------------------------------------------------- graph

async function graphView(route, refresh) {
  const lib = route.parts[0] || state.library;
  const name = route.parts.slice(1).join("/");
  if (!name) return graphPick(lib, route.query.get("q") || "");
  const stats = h("p", { class: "muted", testid: "graph-stats" });
  const list = h("ul", { class: "graph-list", testid: "graph-list" });
  const graph = new GraphView({
    center: name,
    load: (n) => api("GET", "/api/graph", { query: { library: lib, name: n, depth: 1 } }),
    open: (n) => go(entityHref(lib, n)),
    onChange: (g) => {
      stats.textContent = `${g.nodes.size} entities, ${g.edges.size} relations${g.truncated ? " (cut at the limit)" : ""}. `
        + "Drag to pan, wheel or buttons to zoom; click a node to show its neighbours, double-click or Enter to open it.";
      list.replaceChildren(...[...g.nodes.values()].map((n) => h("li", {},
        h("a", { href: entityHref(lib, n.name) }, n.name), " ", h("span", { class: "muted" }, n.entity_type || ""),
        g.expanded.has(n.name) ? null : [" ", h("button", { type: "button", class: "link", onclick: () => g.expand(n.name) }, "show neighbours")])));
    },
  });
  refresh.fn = (changes) => {  // changes that name no entity (free memories) leave the graph as it is
    if (!changes.unnamed && !changes.entities.size) return false;
    return graph.reload();
  };
  refresh.after = () => graph.start();
  return h("section", { testid: "graph-page", "data-center": name },
    h("h1", {}, "Graph around ", h("a", { href: entityHref(lib, name) }, name)), stats, graph.element,
    h("h2", {}, "Entities shown"), list);
}

async function graphPick(lib, q) {
  const data = await api("GET", "/api/entities", { query: { library: lib, q, limit: 50 } });
  const input = h("input", { type: "search", name: "q", value: q, testid: "graph-pick-input" });
  return h("section", { testid: "graph-page" }, h("h1", {}, "Graph"),
    h("form", { class: "filters", testid: "graph-pick", onsubmit: (e) => { e.preventDefault(); go(`#/graph/${enc(lib)}?q=${enc(input.value)}`); } },
      field("Find an entity", input), h("button", { type: "submit" }, "Find")),
    (data.entities || []).length ? h("ul", { testid: "graph-pick-list" }, data.entities.map((e) => h("li", {},
      h("a", { href: graphHref(lib, e.name) }, e.name), " ", h("span", { class: "muted" }, `${e.entity_type || ""} · ${e.observations} observations`))))
      : h("p", { class: "muted", testid: "graph-pick-list" }, "No entity found."));
}

// ---------------------------------------------------------------- previews

async function previewsView(route) {
  const lib = pickLibrary(route.query);
  if (route.parts[0]) return previewView(lib, route.parts[0]);
  const data = await api("GET", "/api/previews", { query: { library: lib } });
  const page = h("section", { testid: "previews-page" }, h("h1", {}, `Previews of ${lib}`),
    h("p", { class: "muted" }, "A preview changes nothing: it lists what an operation would change. Execute applies exactly that, as one undoable change."));
  if (canWrite(lib)) page.append(previewMaker(lib));
  const previews = data.previews || [];
  page.append(h("h2", {}, "Previews"), previews.length ? h("div", { class: "table-wrap" }, h("table", { testid: "preview-list" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Operation"), h("th", { class: "wide-only" }, "Made"), h("th", {}, "Summary"), h("th", {}, "State"))),
    h("tbody", {}, previews.map((p) => h("tr", { testid: "preview-row", "data-id": p.id },
      h("td", {}, h("a", { href: `#/previews/${enc(p.id)}?library=${enc(lib)}`, testid: "preview-open" }, `#${p.id}`)),
      h("td", {}, p.operation), h("td", { class: "wide-only" }, when(p.created_at)),
      h("td", {}, p.summary || "", p.count !== undefined ? h("span", { class: "muted" }, ` (${p.count} items)`) : null),
      h("td", {}, p.executed ? "executed" : "pending"))))))
    : h("p", { class: "muted", testid: "preview-list" }, "No preview yet."));
  return page;
}

function previewMaker(lib) {
  const op = select({ name: "operation", testid: "preview-operation" }, OPERATIONS, "cleanup_duplicates");
  const similar = h("input", { type: "checkbox", name: "similar", testid: "preview-similar" });
  const older = h("input", { type: "text", name: "older_than", placeholder: "6 months", testid: "preview-older-than", size: 10 });
  const similarField = field("Near duplicates too", similar);
  const olderField = field("Archive older than", older);
  const out = h("div");
  const sync = () => { similarField.hidden = op.value !== "cleanup_duplicates"; olderField.hidden = op.value !== "memory_cleanup"; };
  op.addEventListener("change", sync);
  sync();
  return h("form", {
    class: "filters", testid: "preview-make",
    onsubmit: async (e) => {
      e.preventDefault();
      const args = {};
      if (op.value === "cleanup_duplicates" && similar.checked) args.similar = true;
      if (op.value === "memory_cleanup" && older.value.trim()) args.older_than = older.value.trim();
      try {
        const data = await api("POST", "/api/previews", { body: { library: lib, operation: op.value, arguments: args } });
        const id = data.preview && (data.preview.id ?? data.preview.preview_id);
        go(`#/previews/${enc(id)}?library=${enc(lib)}`);
      } catch (err) { out.replaceChildren(errorBox(err)); }
    },
  }, field("Operation", op), similarField, olderField,
  h("button", { type: "submit", class: "primary", testid: "preview-make-submit" }, "Make a preview"), out);
}

async function previewView(lib, id) {
  const data = await api("GET", `/api/previews/${enc(id)}`, { query: { library: lib } });
  const p = data.preview || data;
  const items = p.items || [];
  const executed = Boolean(p.executed) || (p.dry_run === false);
  const actions = {};
  for (const it of items) actions[it.action || "change"] = (actions[it.action || "change"] || 0) + 1;
  const summary = p.summary || p.message || (items.length
    ? `${items.length} item${items.length === 1 ? "" : "s"}: ${Object.entries(actions).map(([a, n]) => `${n} ${a}`).join(", ")}.`
    : "Nothing to change.") + (executed ? "" : " Nothing has changed yet.");
  const offered = p.offered || [];
  const out = h("div");
  const page = h("section", { testid: "preview-page", "data-id": id },
    h("p", {}, h("a", { href: `#/previews?library=${enc(lib)}` }, "← Previews")),
    h("h1", {}, `Preview #${id}: ${p.operation || p.kind || ""}`),
    h("p", { testid: "preview-summary" }, summary),
    p.created_at ? h("p", { class: "muted" }, `Made ${when(p.created_at)}`) : null,
    executed ? h("p", { testid: "preview-executed" }, h("strong", {}, "Executed."), p.change_id ? ` Change #${p.change_id}.` : "") : null,
    h("h2", {}, `Items (${items.length}${p.items_not_shown ? ` + ${p.items_not_shown} not shown` : ""})`),
    items.length ? h("ul", { class: "cards", testid: "preview-items" }, items.map((it) => h("li", { class: "card", testid: "preview-item" },
      h("strong", {}, it.action || ""), " ",
      it.content_hash ? h("a", { href: memoryHref(it.content_hash, lib) }, it.text || it.content || it.content_hash) : (it.text || it.content || ""),
      it.why ? h("div", { class: "why muted" }, it.why) : null,
      it.set ? h("div", { class: "meta" }, `sets ${Object.keys(it.set).join(", ")}`) : null)))
      : h("p", { class: "muted", testid: "preview-items" }, "Nothing to change."),
    offered.length ? [h("h2", {}, `Offered, not included (${offered.length})`), h("ul", { class: "cards", testid: "preview-offered" },
      offered.map((it) => h("li", { class: "card" }, h("strong", {}, it.action || ""), " ", it.text || it.content || it.content_hash || JSON.stringify(it),
        it.why ? h("div", { class: "why muted" }, it.why) : null)))] : null,
    out);
  if (!executed && canWrite(lib)) {
    page.append(h("div", { class: "buttons" }, h("button", {
      type: "button", class: "danger", testid: "preview-execute",
      onclick: async () => {
        if (!await confirmDialog(`Execute preview #${id}? It applies the ${items.length} items listed, as one change that undo reverts.`, "Execute")) return;
        try {
          const done = await api("POST", `/api/previews/${enc(id)}/execute`, { body: { library: lib } });
          notice(`Executed (change #${done.change_id ?? "?"})`);
          await render();
        } catch (err) { out.replaceChildren(errorBox(err)); }
      },
    }, "Execute")));
  }
  return page;
}

// ---------------------------------------------------------------- health

async function healthView() {
  const data = await api("GET", "/api/health");
  const kv = (obj) => (obj && typeof obj === "object"
    ? h("dl", { class: "facts" }, Object.entries(obj).map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")),
      h("dd", {}, v === null || v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v))]))
    : String(obj ?? "—"));
  return h("section", { testid: "health-page" }, h("h1", {}, "Health"),
    data.version ? h("p", { class: "muted", testid: "health-version" }, `memloci ${data.version}`) : null,
    h("ul", { class: "cards" }, (data.libraries || []).map((l) => h("li", { class: "card", testid: "health-library", "data-name": l.name },
      h("h2", {}, `${l.name} `, h("span", { class: "muted" }, [l.engine, l.status].filter(Boolean).join(" · "))),
      h("dl", { class: "facts" },
        [["Memories", l.memories], ["Entities", l.entities], ["Observations", l.observations], ["Relations", l.relations],
         ["Size", bytes(l.size_bytes)], ["Last backup", l.last_backup ? when(l.last_backup) : "never"],
         ["Embedding backlog", l.backlog ?? "—"]].map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v ?? "—"))])),
      h("h3", {}, "Embedder"), kv(l.embedder),
      h("h3", {}, "Zones"), kv(l.zones),
      (l.problems || []).length ? [h("h3", {}, "Problems"), h("ul", {}, l.problems.map((p) => h("li", {}, typeof p === "string" ? p : JSON.stringify(p))))] : null))));
}

// ---------------------------------------------------------------- sign-in

async function signinView() {
  if (state.session && state.session.signed_in) {
    return h("section", { testid: "signin-page" }, h("h1", {}, "Signed in"), h("p", {}, h("a", { href: "#/search" }, "Go to search")));
  }
  const token = h("input", { type: "password", name: "token", autocomplete: "current-password", required: true, testid: "signin-token" });
  const out = h("div", { testid: "signin-error" });
  const form = h("form", {
    class: "signin", testid: "signin-form",
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api("POST", "/api/session", { body: { token: token.value.trim() } });
        token.value = "";
        await loadSession();
        go("#/search");
      } catch (err) {
        const refused = new ApiError(401, "UNAUTHORIZED", "That token is not valid.",
                                     "Paste a token made with: memloci token create NAME --scope LIBRARY:read");
        out.replaceChildren(errorBox(err.status === 401 ? refused : err));
      }
    },
  }, field("Access token", token), h("div", { class: "buttons" }, h("button", { type: "submit", class: "primary", testid: "signin-submit" }, "Sign in")), out);
  return h("section", { testid: "signin-page" }, h("h1", {}, "Sign in"),
    h("p", {}, "This server needs an access token (the same as for MCP clients)."), form);
}

async function notFound(route) {
  return h("section", {}, h("h1", {}, "Not found"), h("p", {}, `No page “${route.name}”. `, h("a", { href: "#/search" }, "Search")));
}

const VIEWS = {
  search: searchView, memories: memoriesView, memory: memoryView, entity: entityView, graph: graphView,
  history: historyView, previews: previewsView, health: healthView, signin: signinView,
};

// ---------------------------------------------------------------- start

function start() {
  document.querySelector(".top-search").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = document.getElementById("q").value.trim();
    go(`#/search?q=${enc(q)}`);
  });
  document.getElementById("library").addEventListener("change", (e) => {
    useLibrary(e.target.value);
    const route = parseHash();
    const lib = enc(state.library);
    if (route.name === "graph") go(`#/graph/${lib}`);
    else if (["history", "previews"].includes(route.name)) go(`#/${route.name}?library=${lib}`);
    else if (route.name === "search") render();
    else go(`#/memories?library=${lib}`);
  });
  document.querySelector(".skip").addEventListener("click", (e) => {  // the hash is the router's
    e.preventDefault();
    document.getElementById("main").focus();
  });
  const toggle = document.querySelector(".nav-toggle");
  const nav = document.getElementById("nav");
  toggle.addEventListener("click", () => {
    const open = !nav.classList.contains("open");
    nav.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
  });
  nav.addEventListener("click", (e) => {
    if (e.target.closest("a")) { nav.classList.remove("open"); toggle.setAttribute("aria-expanded", "false"); }
  });
  document.addEventListener("keydown", (e) => {
    const typing = e.target.closest && e.target.closest("input, textarea, select, [contenteditable]");
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      const q = document.getElementById("q");
      q.focus();
      q.select();
    } else if (e.key === "Escape" && nav.classList.contains("open")) {
      nav.classList.remove("open");
      toggle.setAttribute("aria-expanded", "false");
      toggle.focus();
    }
  });
  document.getElementById("main").addEventListener("input", () => { state.dirty = true; });  // a live change waits
  window.addEventListener("hashchange", () => {
    const key = state.focusNext;  // a filter applied at once keeps the keyboard on it
    state.focusNext = null;
    render({ focus: key });
    if (!key) document.getElementById("main").focus({ preventScroll: true });
  });
  render();
}

start();
