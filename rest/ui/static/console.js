// kconnect console: a plain-JavaScript client of the worker's REST API (no build step, no external assets).
// Every element is built with the DOM API, never from HTML strings, so a connector name, config value or
// stack trace is always text. Writes send JSON with Content-Type application/json (or no body at all),
// which is what the REST API's cross-site write checks accept from its own origin; basic auth, when on,
// is the browser's, for the page and its calls alike.
"use strict";

const BASE = location.pathname.replace(/ui\/[^/]*$/, "");
const STATES = ["FAILED", "UNASSIGNED", "RESTARTING", "PAUSED", "STOPPED", "RUNNING"];
const BULK_CONCURRENCY = 8;
const main = document.getElementById("main");
let timer = null;
//: Bumped by every route(): a render whose data arrives after a newer render began paints nothing, so two
//: overlapping refreshes (an action's follow-up and a hash change) cannot leave the older one on screen.
let renderSeq = 0;
//: What the operator typed into a connector's offsets editor, by connector name: kept here, not read back
//: from the DOM, because a refresh replaces the editor (and may do so while another refresh is in flight).
const offsetDrafts = new Map();

// ------------------------------------------------------------------------------------------------ helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  // Attributes after children, so that a select's value finds its options.
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "value" || (k in el && typeof v !== "string")) el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  return el;
}

function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(BASE + path.replace(/^\//, ""), init);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = text;
  }
  if (!resp.ok) throw new ApiError(resp.status, (data && data.message) || resp.statusText || "HTTP " + resp.status);
  return { status: resp.status, data };
}

const enc = encodeURIComponent;
const conn = (name, ...rest) => ["/connectors", enc(name), ...rest].join("/");

function notice(text, isError) {
  const el = document.getElementById("notice");
  el.textContent = text;
  el.className = "notice" + (isError ? " error" : "");
  el.hidden = !text;
}

function traceHead(trace) {
  // A Java trace starts with the exception; a Python traceback ends with it.
  const lines = trace.split("\n").map((l) => l.trim()).filter(Boolean);
  return lines.length && lines[0].startsWith("Traceback") ? lines[lines.length - 1] : lines[0] || "";
}

function stateBadge(state) {
  return h("span", { class: "state " + (state || ""), text: state || "?" });
}

function shortClass(cls) {
  return (cls || "").split(".").pop();
}

async function inBatches(items, fn) {
  const results = [];
  let next = 0;
  async function lane() {
    while (next < items.length) {
      const item = items[next++];
      try {
        results.push({ item, ok: true, value: await fn(item) });
      } catch (e) {
        results.push({ item, ok: false, error: e });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(BULK_CONCURRENCY, items.length) }, lane));
  return results;
}

// --------------------------------------------------------------------------------------- connectors list

const listState = { filter: "", state: null, selected: new Set(), entries: [], generation: 0 };

function summarize(name, entry) {
  const status = entry.status || {};
  const info = entry.info || {};
  const tasks = status.tasks || [];
  const state = (status.connector || {}).state || "UNASSIGNED";
  const failedTasks = tasks.filter((t) => t.state === "FAILED").length;
  return {
    name,
    state,
    type: status.type || info.type || "",
    cls: (info.config || {})["connector.class"] || "",
    worker: (status.connector || {}).worker_id || "",
    tasks: tasks.length,
    running: tasks.filter((t) => t.state === "RUNNING").length,
    failedTasks,
    failing: state === "FAILED" || failedTasks > 0,
  };
}

function failuresFirst(a, b) {
  if (a.failing !== b.failing) return a.failing ? -1 : 1;
  const sa = STATES.indexOf(a.state), sb = STATES.indexOf(b.state);
  if (sa !== sb) return sa - sb;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

async function showList() {
  const started = performance.now();
  const { data } = await api("GET", "/connectors?expand=status&expand=info");
  document.body.dataset.fetchMs = String(Math.round(performance.now() - started));
  listState.entries = Object.entries(data || {}).map(([n, e]) => summarize(n, e)).sort(failuresFirst);
  const known = new Set(listState.entries.map((e) => e.name));
  for (const n of [...listState.selected]) if (!known.has(n)) listState.selected.delete(n);
  renderList();
  document.body.dataset.listMs = String(Math.round(performance.now() - started));
  // From navigation start to the rows in the DOM, the first time: what bench/console.py reports.
  if (!document.body.dataset.pageMs) document.body.dataset.pageMs = String(Math.round(performance.now()));
  document.body.dataset.listCount = String(listState.entries.length);
}

function renderList() {
  // The frame (filter, bulk bar, table head) is built once per load; typing in the filter or choosing a
  // state only redraws the rows (renderRows), so the filter keeps its focus and caret.
  const includeTasks = h("input", { type: "checkbox", id: "bulk-include-tasks", checked: true });
  const onlyFailed = h("input", { type: "checkbox", id: "bulk-only-failed" });
  const bulk = (label, action) => h("button", { "data-bulk": action, onclick: () => bulkAction(action, includeTasks.checked, onlyFailed.checked) }, label);
  const filter = h("input", {
    type: "search", id: "filter", placeholder: "Filter by name, class, state or worker", value: listState.filter,
    oninput: (ev) => { listState.filter = ev.target.value; renderRows(); },
  });
  const all = h("input", {
    type: "checkbox", id: "select-all", title: "select all shown",
    onchange: (ev) => { for (const e of shownEntries()) ev.target.checked ? listState.selected.add(e.name) : listState.selected.delete(e.name); renderRows(); },
  });
  fill(main,
    h("h1", { id: "list-title" }),
    h("div", { class: "counts", id: "counts" }),
    h("div", { class: "toolbar" }, filter, h("button", { onclick: () => route(), text: "Refresh" })),
    h("div", { class: "toolbar", id: "bulk" }, h("span", { id: "selected-count" }),
      bulk("Pause", "pause"), bulk("Resume", "resume"), bulk("Stop", "stop"), bulk("Restart", "restart"),
      h("label", {}, includeTasks, " with tasks"), h("label", {}, onlyFailed, " only failed")),
    h("table", { id: "connectors" },
      h("thead", {}, h("tr", {}, h("th", {}, all), h("th", { text: "Name" }), h("th", { text: "State" }), h("th", { text: "Type" }),
        h("th", { text: "Class" }), h("th", { text: "Tasks" }), h("th", { text: "Worker" }))),
      h("tbody", { id: "list-body" })),
    h("div", { id: "list-empty" }));
  renderRows();
}

const FIRST_ROWS = 60;
let rowTemplate = null;

function listRow(e, selectedCount) {
  // Rows are cloned from one template and filled with textContent: several times faster than building
  // each element, which matters at a thousand rows.
  if (!rowTemplate) {
    rowTemplate = h("tr", {},
      h("td", {}, h("input", { type: "checkbox" })), h("td", {}, h("a")), h("td", {}, h("span", { class: "state" })),
      h("td"), h("td", { class: "mono" }), h("td", {}, h("span"), h("span", { class: "bad" })), h("td", { class: "mono" }));
  }
  const tr = rowTemplate.cloneNode(true);
  const [boxCell, nameCell, stateCell, typeCell, classCell, tasksCell, workerCell] = tr.children;
  tr.dataset.connector = e.name;
  if (e.failing) tr.className = "failed";
  const box = boxCell.firstChild;
  box.dataset.name = e.name;
  box.checked = listState.selected.has(e.name);
  box.addEventListener("change", () => {
    box.checked ? listState.selected.add(e.name) : listState.selected.delete(e.name);
    selectedCount.textContent = listState.selected.size + " selected";
  });
  nameCell.firstChild.href = "#/c/" + enc(e.name);
  nameCell.firstChild.textContent = e.name;
  stateCell.firstChild.className = "state " + e.state;
  stateCell.firstChild.textContent = e.state;
  typeCell.textContent = e.type;
  classCell.textContent = shortClass(e.cls);
  classCell.title = e.cls;
  tasksCell.firstChild.textContent = `${e.running}/${e.tasks} running`;
  tasksCell.lastChild.textContent = e.failedTasks ? ` · ${e.failedTasks} failed` : "";
  workerCell.textContent = e.worker;
  return tr;
}

function shownEntries() {
  const q = listState.filter.toLowerCase();
  return listState.entries.filter((e) =>
    (!listState.state || (listState.state === "FAILED_TASKS" ? e.failedTasks > 0 : e.state === listState.state)) &&
    (!q || e.name.toLowerCase().includes(q) || e.cls.toLowerCase().includes(q) || e.state.toLowerCase().includes(q) || e.worker.toLowerCase().includes(q)));
}

function renderRows() {
  const entries = listState.entries;
  const counts = {};
  for (const e of entries) counts[e.state] = (counts[e.state] || 0) + 1;
  const countChip = (label, state, n) =>
    h("span", {
      class: "count" + (listState.state === state ? " on" : ""),
      "data-state": state,
      onclick: () => { listState.state = listState.state === state ? null : state; renderRows(); },
    }, label, h("b", { text: String(n) }));
  const chips = [countChip("All", null, entries.length)];
  for (const s of STATES) if (counts[s]) chips.push(countChip(s, s, counts[s]));
  const withFailedTasks = entries.filter((e) => e.failedTasks).length;
  if (withFailedTasks) chips.push(countChip("with failed tasks", "FAILED_TASKS", withFailedTasks));
  fill(document.getElementById("counts"), chips);

  const shown = shownEntries();
  const selectedCount = document.getElementById("selected-count");
  selectedCount.textContent = listState.selected.size + " selected";
  document.getElementById("select-all").checked = shown.length > 0 && shown.every((e) => listState.selected.has(e.name));
  fill(document.getElementById("list-title"), "Connectors ", h("span", { class: "muted", text: `(${shown.length} of ${entries.length})` }));
  // The first screenful goes in at once (failures first, so they are what the operator sees) and the
  // rest in one later task, so a thousand rows never hold the first paint. A newer renderRows (a
  // keystroke in the filter) abandons an older one's rest.
  const generation = ++listState.generation;
  const body = document.getElementById("list-body");
  const addRows = (from, to) => {
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) frag.append(listRow(shown[i], selectedCount));
    body.append(frag);
    if (to === shown.length) document.body.dataset.rowsDoneMs = String(Math.round(performance.now()));
  };
  body.replaceChildren();
  const first = Math.min(shown.length, FIRST_ROWS);
  addRows(0, first);
  if (first < shown.length) {
    setTimeout(() => { if (generation === listState.generation) addRows(first, shown.length); }, 0);
  }
  fill(document.getElementById("list-empty"), entries.length ? null
    : h("p", { class: "muted" }, "No connectors yet. ", h("a", { href: "#/new", text: "Create one" }), " or use kconnect apply."));
}

async function bulkAction(action, includeTasks, onlyFailed) {
  const names = [...listState.selected];
  if (!names.length) { notice("Select connectors first", true); return; }
  const call = (name) => {
    if (action === "restart") {
      return api("POST", conn(name, "restart") + `?includeTasks=${includeTasks}&onlyFailed=${onlyFailed}`);
    }
    return api("PUT", conn(name, action));
  };
  const results = await inBatches(names, call);
  const failed = results.filter((r) => !r.ok);
  const what = action === "restart" ? `restart${includeTasks ? " with tasks" : ""}${onlyFailed ? " (only failed)" : ""}` : action;
  notice(`${what}: ${results.length - failed.length} of ${names.length} accepted` +
    (failed.length ? "; failed: " + failed.map((r) => `${r.item} (${r.error.message})`).join(", ") : ""), failed.length > 0);
  setTimeout(() => route(), 800);
}

// ------------------------------------------------------------------------------------------ one connector

async function showConnector(name, seq) {
  const [status, config] = await Promise.all([api("GET", conn(name, "status")), api("GET", conn(name, "config"))]);
  if (seq !== renderSeq) return;
  const s = status.data;
  const cfg = config.data || {};
  const act = (label, fn, cls) => h("button", { class: cls || "", "data-action": label, onclick: async () => {
    try { const r = await fn(); notice(`${label}: HTTP ${r.status}`); setTimeout(() => route(), 600); } catch (e) { notice(`${label}: ${e.message}`, true); }
  } }, label);
  const tasks = h("tbody", {}, (s.tasks || []).length ? null : h("tr", {}, h("td", { colspan: 5, class: "muted", text: "No tasks running (a stopped connector has none)." })), (s.tasks || []).map((t) => h("tr", { class: t.state === "FAILED" ? "failed" : "", "data-task": String(t.id) },
    h("td", { text: String(t.id) }), h("td", {}, stateBadge(t.state)), h("td", { class: "mono", text: t.worker_id || "" }),
    h("td", {}, t.trace ? h("details", {}, h("summary", { text: traceHead(t.trace) }), h("pre", { text: t.trace })) : ""),
    h("td", {}, act(`Restart task ${t.id}`, () => api("POST", conn(name, "tasks", String(t.id), "restart")))))));
  const c = s.connector || {};
  fill(main, 
    h("h1", {}, name, " ", stateBadge(c.state)),
    h("p", { class: "muted" }, `${s.type || ""} connector ${cfg["connector.class"] || ""} on ${c.worker_id || "?"}`),
    c.trace ? h("details", { open: true }, h("summary", { class: "bad", text: traceHead(c.trace) }), h("pre", { text: c.trace })) : null,
    h("div", { class: "actions" },
      act("Pause", () => api("PUT", conn(name, "pause"))),
      act("Resume", () => api("PUT", conn(name, "resume"))),
      act("Stop", () => api("PUT", conn(name, "stop"))),
      act("Restart connector only", () => api("POST", conn(name, "restart") + "?includeTasks=false&onlyFailed=false")),
      act("Restart with tasks", () => api("POST", conn(name, "restart") + "?includeTasks=true&onlyFailed=false")),
      act("Restart failed", () => api("POST", conn(name, "restart") + "?includeTasks=true&onlyFailed=true")),
      h("a", { href: "#/edit/" + enc(name) }, h("button", { text: "Edit" })),
      act("Delete", async () => { if (!confirm(`Delete ${name}?`)) throw new Error("cancelled"); const r = await api("DELETE", conn(name)); location.hash = "#/"; return r; }, "danger")),
    h("h2", { text: "Tasks" }),
    h("table", { id: "tasks" }, h("thead", {}, h("tr", {}, ["Task", "State", "Worker", "Trace", ""].map((t) => h("th", { text: t })))), tasks),
    h("h2", { text: "Offsets" }),
    h("div", { id: "offsets" }, h("p", { class: "muted", text: "Loading…" })),
    h("h2", { text: "Config" }),
    h("table", { id: "config" }, h("tbody", {}, Object.keys(cfg).sort().map((k) => h("tr", {}, h("td", { class: "mono", text: k }), h("td", { class: "mono", text: cfg[k] }))))));
  await showOffsets(name, c.state);
}

async function showOffsets(name, state) {
  const box = document.getElementById("offsets");
  let offsets;
  try {
    offsets = (await api("GET", conn(name, "offsets"))).data || { offsets: [] };
  } catch (e) {
    if (box.isConnected) fill(box, h("p", { class: "bad", text: e.message }));
    return;
  }
  // A newer render replaced this one's page while the offsets were on their way.
  if (!box.isConnected) return;
  const rows = (offsets.offsets || []).map((o) => h("tr", {}, h("td", { class: "mono", text: JSON.stringify(o.partition) }), h("td", { class: "mono", text: JSON.stringify(o.offset) })));
  const editor = h("textarea", { id: "offsets-editor", rows: 6, value: offsetDrafts.has(name) ? offsetDrafts.get(name) : JSON.stringify({ offsets: offsets.offsets || [] }, null, 2),
    oninput: () => { offsetDrafts.set(name, editor.value); } });
  const write = (method, body) => async () => {
    try {
      const r = await api(method, conn(name, "offsets"), body === undefined ? undefined : body());
      offsetDrafts.delete(name);
      notice((r.data && r.data.message) || `offsets: HTTP ${r.status}`);
      showOffsets(name, state);
    } catch (e) {
      notice(`offsets: ${e.message}`, true);
    }
  };
  fill(box, 
    rows.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", { text: "Partition" }), h("th", { text: "Offset" }))), h("tbody", {}, rows))
      : h("p", { class: "muted", text: "No committed offsets." }),
    h("p", { class: "muted", text: state === "STOPPED" ? "The connector is stopped: its offsets may be altered or reset." : "Offsets can be altered or reset only while the connector is STOPPED (use Stop first)." }),
    editor,
    h("div", { class: "actions" },
      h("button", { id: "offsets-alter", onclick: write("PATCH", () => JSON.parse(editor.value)) }, "Alter offsets"),
      h("button", { id: "offsets-reset", class: "danger", onclick: write("DELETE") }, "Reset offsets")));
}

// ------------------------------------------------------------------------------------- create / edit form

const TOP_KEYS = ["name", "connector.class"];
const COMMON_KEYS = [
  { name: "tasks.max", type: "INT", required: false, default_value: "1", group: "Common", documentation: "Maximum number of tasks." },
  { name: "topics", type: "LIST", required: false, default_value: "", group: "Common", documentation: "Topics to consume.", only: "sink" },
  { name: "key.converter", type: "CLASS", required: false, default_value: null, group: "Common", documentation: "Converter class for keys (the worker's by default)." },
  { name: "value.converter", type: "CLASS", required: false, default_value: null, group: "Common", documentation: "Converter class for values (the worker's by default)." },
];

//: Apache Kafka Connect's groups for the keys every connector has (ConnectorConfig and its kin).
const RUNTIME_GROUPS = ["Common", "Transforms", "Predicates", "Error Handling", "Topic Creation", "Exactly Once Support", "offsets.topic"];

async function showForm(editName) {
  const plugins = (await api("GET", "/connector-plugins?connectorsOnly=true")).data || [];
  let current = {};
  if (editName) current = (await api("GET", conn(editName, "config"))).data || {};
  const nameInput = h("input", { type: "text", id: "connector-name", value: editName || "", readOnly: !!editName, placeholder: "my-connector" });
  const select = h("select", { id: "plugin" }, h("option", { value: "", text: "— choose a connector plugin —" }),
    plugins.map((p) => h("option", { value: p.class, text: `${shortClass(p.class)} (${p.type}${p.version ? ", " + p.version : ""})` })));
  const fields = h("div", { id: "fields" });
  const general = h("div", { id: "form-errors" });
  const extra = h("textarea", { id: "extra", rows: 4, placeholder: "other.key=value (one per line: transforms, overrides...)" });
  let defs = [];

  async function loadPlugin(cls, values) {
    fill(fields);
    defs = [];
    if (!cls) return;
    // name and connector.class are the form's first two fields; keys the answer lacks (an Apache Kafka
    // Connect worker answers the plugin's own ConfigDef only) come from COMMON_KEYS.
    const own = ((await api("GET", `/connector-plugins/${enc(cls)}/config`)).data || []).filter((d) => !TOP_KEYS.includes(d.name));
    const names = new Set(own.map((d) => d.name));
    const kind = (plugins.find((p) => p.class === cls) || {}).type;
    defs = [...own, ...COMMON_KEYS.filter((d) => !names.has(d.name) && (!d.only || d.only === kind))];
    const groups = new Map();
    for (const d of defs) {
      const g = d.group || "Connector";
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(d);
    }
    // The plugin's own groups first and open, then the runtime's common keys; the rest (transforms,
    // error handling, topic creation...) folded unless they hold a value.
    const rank = (g) => (RUNTIME_GROUPS.includes(g) ? 1 + RUNTIME_GROUPS.indexOf(g) : 0);
    for (const [g, items] of [...groups].sort((a, b) => rank(a[0]) - rank(b[0]))) {
      items.sort((a, b) => (a.order_in_group ?? 0) - (b.order_in_group ?? 0));
      const open = rank(g) <= 1 || items.some((d) => values[d.name] !== undefined);
      fields.append(h("details", { class: "form-group", open, "data-group": g }, h("summary", { text: g }), items.map((d) => fieldFor(d, values[d.name]))));
    }
    const known = new Set([...defs.map((d) => d.name), "name", "connector.class"]);
    extra.value = Object.entries(values).filter(([k]) => !known.has(k)).map(([k, v]) => `${k}=${v}`).join("\n");
  }

  function fieldFor(d, value) {
    const id = "f-" + d.name;
    let input;
    if (d.type === "BOOLEAN") {
      input = h("select", { id, "data-key": d.name }, ["", "true", "false"].map((v) => h("option", { value: v, text: v || `(default${d.default_value != null ? ": " + d.default_value : ""})` })));
      input.value = value ?? "";
    } else {
      input = h("input", { id, "data-key": d.name, type: d.type === "PASSWORD" ? "password" : "text", value: value ?? "",
        placeholder: d.default_value != null && d.default_value !== "" ? String(d.default_value) : "", autocomplete: "off" });
    }
    return h("div", { class: "field", "data-field": d.name },
      h("label", { for: id, title: d.display_name || d.name }, h("span", { class: "mono", text: d.name }), d.required ? h("span", { class: "req", text: "*" }) : null,
        d.display_name && d.display_name !== d.name ? h("span", { class: "display", text: d.display_name }) : null),
      input,
      h("div", { class: "doc", text: `${d.type}${d.importance ? ", " + d.importance.toLowerCase() : ""}. ${d.documentation || ""}` }),
      h("div", { class: "err" }));
  }

  function collect() {
    const config = { "connector.class": select.value, name: nameInput.value.trim() };
    for (const input of fields.querySelectorAll("[data-key]")) if (input.value !== "") config[input.dataset.key] = input.value;
    for (const line of extra.value.split("\n")) {
      const m = line.match(/^\s*([^=#\s][^=]*?)\s*=(.*)$/);
      if (m) config[m[1]] = m[2].trim();
    }
    return config;
  }

  async function validate() {
    const config = collect();
    for (const f of fields.querySelectorAll(".field")) { f.classList.remove("invalid"); f.querySelector(".err").textContent = ""; }
    fill(general, );
    if (!config["connector.class"]) { general.append(h("p", { class: "bad", text: "Choose a connector plugin." })); return false; }
    if (!config.name) { general.append(h("p", { class: "bad", text: "A connector needs a name." })); return false; }
    const { data } = await api("PUT", `/connector-plugins/${enc(config["connector.class"])}/config/validate`, config);
    const loose = [];
    for (const entry of data.configs || []) {
      const v = entry.value || {};
      if (!(v.errors || []).length) continue;
      const field = fields.querySelector(`.field[data-field="${CSS.escape(v.name)}"]`);
      if (field) {
        field.classList.add("invalid");
        field.querySelector(".err").textContent = v.errors.join("; ");
        const group = field.closest("details");
        if (group) group.open = true;
      }
      else loose.push(`${v.name}: ${v.errors.join("; ")}`);
    }
    fill(general, h("p", { id: "validate-result", class: data.error_count ? "bad" : "", text: data.error_count ? `${data.error_count} error(s)` : "Valid." }),
      loose.length ? h("ul", {}, loose.map((t) => h("li", { class: "bad", text: t }))) : null);
    return !data.error_count;
  }

  async function save() {
    try {
      if (!(await validate())) return;
      const config = collect();
      if (editName) await api("PUT", conn(editName, "config"), config);
      else await api("POST", "/connectors", { name: config.name, config });
      location.hash = "#/c/" + enc(config.name);
      notice(`${editName ? "Updated" : "Created"} ${config.name}`);
    } catch (e) {
      fill(general, h("p", { class: "bad", id: "save-error", text: e.message }));
    }
  }

  select.addEventListener("change", () => loadPlugin(select.value, collect()).catch((e) => notice(e.message, true)));
  fill(main, 
    h("h1", { text: editName ? `Edit ${editName}` : "New connector" }),
    h("div", { class: "form-group" },
      h("div", { class: "field" }, h("label", { for: "connector-name" }, "name", h("span", { class: "req", text: "*" })), nameInput),
      h("div", { class: "field" }, h("label", { for: "plugin" }, "connector.class", h("span", { class: "req", text: "*" })), select)),
    fields,
    h("details", { class: "form-group", open: true }, h("summary", { text: "Other keys" }), extra),
    general,
    h("div", { class: "actions" },
      h("button", { id: "validate", onclick: () => validate().catch((e) => notice(e.message, true)) }, "Validate"),
      h("button", { id: "save", class: "primary", onclick: save }, editName ? "Save" : "Create")));
  if (editName) {
    select.value = current["connector.class"] || "";
    if (select.value !== current["connector.class"]) select.append(h("option", { value: current["connector.class"], text: current["connector.class"], selected: true }));
    await loadPlugin(current["connector.class"], current);
  }
}

// ------------------------------------------------------------------------------------------ group picture

const rates = { last: new Map(), perTask: new Map(), unreadable: new Set() };

function parseTaskCounters(text) {
  // connect_source_task_source_record_poll_total / connect_sink_task_sink_record_read_total per task.
  const out = new Map();
  const rx = /^connect_(?:source_task_source_record_poll|sink_task_sink_record_read)_total\{([^}]*)\}\s+([0-9.eE+-]+)/gm;
  let m;
  while ((m = rx.exec(text))) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    // Both families list every task (the other kind's counter at 0): a task's records are their sum.
    const key = `${labels.connector}-${labels.task}`;
    out.set(key, (out.get(key) || 0) + Number(m[2]));
  }
  return out;
}

async function sampleRates(urls) {
  const now = performance.now();
  await Promise.all(urls.map(async (url) => {
    let text;
    try {
      const resp = await fetch(url.replace(/\/$/, "") + "/metrics", { credentials: "same-origin" });
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      text = await resp.text();
      rates.unreadable.delete(url);
    } catch (e) {
      // Another worker's /metrics is readable from this page only when its access.control.allow.origin
      // lets this origin in (CORS); its own console shows its tasks' rates.
      rates.unreadable.add(url);
      return;
    }
    for (const [task, total] of parseTaskCounters(text)) {
      const prev = rates.last.get(task);
      if (prev && now > prev.at) rates.perTask.set(task, Math.max(0, (total - prev.total) / ((now - prev.at) / 1000)));
      rates.last.set(task, { total, at: now });
    }
  }));
}

async function showGroup() {
  const workers = (await api("GET", "/workers")).data || {};
  let group = null;
  try {
    group = (await api("GET", "/group")).data;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
  }
  const members = workers.members || [];
  await sampleRates(members.map((m) => m.url).filter(Boolean));
  const current = new Map(((group && group.current) || []).map((c) => [c.member_id, c]));
  const target = new Map((((group && group.target) || {}).members || []).map((t) => [t.member_id, t]));
  const reconciliation = (group && group.reconciliation) || {};

  function chips(member) {
    const mine = member.assignment || { connectors: [], tasks: [] };
    const pins = member.static_assignment || { connectors: [], tasks: [] };
    const cur = current.get(member.id);
    const tgt = target.get(member.id);
    const curTasks = new Set(cur ? cur.tasks : mine.tasks);
    const tgtTasks = new Set(tgt ? tgt.tasks : mine.tasks);
    const all = [...new Set([...curTasks, ...tgtTasks])].sort();
    const learners = (cur && cur.learners) || [];
    const chip = (text, cls, title) => h("span", { class: "chip " + cls, title, "data-chip": text }, text,
      rates.perTask.has(text) ? h("span", { class: "rate", text: `${rates.perTask.get(text).toFixed(1)}/s` }) : null);
    return [
      h("div", { class: "chips" }, (cur ? cur.connectors : mine.connectors).map((c) =>
        chip(c, "connector" + (pins.connectors.includes(c) ? " pinned" : ""), "connector" + (pins.connectors.includes(c) ? ", statically pinned here" : "")))),
      h("div", { class: "chips" }, all.map((t) => {
        const arriving = tgtTasks.has(t) && !curTasks.has(t);
        const leaving = curTasks.has(t) && !tgtTasks.has(t);
        const cls = (arriving ? "arriving" : leaving ? "leaving" : "") + (pins.tasks.includes(t) ? " pinned" : "");
        return chip(t, cls, arriving ? "in the target, not yet running here" : leaving ? "running here, being moved away" : "task");
      })),
      learners.length ? h("div", { class: "chips" }, learners.map((l) => chip(l.task, "learning", l.is_ready ? "learner, warm and ready" : "learner, warming up"))) : null,
    ];
  }

  const cards = members.map((m) => {
    const cur = current.get(m.id);
    return h("div", { class: "worker", "data-worker": m.worker_id || m.url },
      h("h3", {}, m.worker_id || m.url, m.leader ? h("span", { class: "badge leader", text: "leader" }) : null,
        m.protocol ? h("span", { class: "badge", text: m.protocol }) : null),
      h("div", { class: "meta" }, `${m.url || ""} · config offset ${m.config_offset ?? "?"}` +
        (cur ? ` · member epoch ${cur.member_epoch}` : "") +
        ((m.static_assignment && (m.static_assignment.connectors.length || m.static_assignment.tasks.length)) ? ` · static pins (${m.static_assignment_source})` : "")),
      chips(m),
      rates.unreadable.has(m.url) ? h("div", { class: "meta" }, "records/s: this worker's /metrics is not readable from this page (CORS); ",
        h("a", { href: m.url.replace(/\/$/, "") + "/ui/#/group", text: "open its console" })) : null);
  });
  for (const id of (group && group.vanished) || []) {
    const t = target.get(id);
    cards.push(h("div", { class: "worker vanished", "data-worker": id }, h("h3", {}, id, h("span", { class: "badge", text: "gone, work held" })),
      h("div", { class: "chips" }, ((t && t.tasks) || []).map((x) => h("span", { class: "chip leaving", text: x })))));
  }
  const field = (label, value) => h("div", {}, h("b", { text: label }), value === null || value === undefined ? "—" : String(value));
  const scheduled = group && group.scheduled_rebalance;
  fill(main, 
    h("h1", { text: `Group ${workers.group || ""}` }),
    h("div", { class: "summary", id: "group-summary" },
      field("protocol", workers.protocol), field("generation", workers.generation), field("workers", members.length),
      field("group epoch", group ? group.epoch : null),
      field("target epoch", group && group.target ? group.target.assignment_epoch : null),
      field("reconciled", reconciliation.reconciled === undefined ? null : reconciliation.reconciled ? "yes" : "moving"),
      field("held back", group && group.held_back ? group.held_back.tasks.length + " tasks" : null),
      field("scheduled rebalance", scheduled ? Math.round(scheduled.remaining_ms / 1000) + " s" : "none")),
    h("div", { class: "legend" }, "Legend:", h("span", { class: "chip connector", text: "connector" }), h("span", { class: "chip", text: "task" }),
      h("span", { class: "chip arriving", text: "arriving (target)" }), h("span", { class: "chip leaving", text: "leaving" }),
      h("span", { class: "chip learning", text: "learner warming up" }), h("span", { class: "chip pinned", text: "static pin" }),
      h("span", { text: "n.n/s: a task's records per second, from its worker's /metrics" })),
    h("div", { class: "workers", id: "workers" }, cards),
    group ? null : h("p", { class: "muted", text: "No group records yet (the leader writes them after its first assignment)." }));
  timer = setTimeout(() => route(), 3000);
}

// -------------------------------------------------------------------------------------------------- router

async function route() {
  clearTimeout(timer);
  const seq = ++renderSeq;
  const hash = location.hash || "#/";
  for (const a of document.querySelectorAll(".top nav a")) a.classList.toggle("active", a.getAttribute("href") === hash);
  try {
    if (hash.startsWith("#/c/")) await showConnector(decodeURIComponent(hash.slice(4)), seq);
    else if (hash.startsWith("#/edit/")) await showForm(decodeURIComponent(hash.slice(7)));
    else if (hash === "#/new") await showForm(null);
    else if (hash === "#/group") await showGroup();
    else await showList();
    if (seq === renderSeq) document.body.dataset.view = hash;
  } catch (e) {
    if (seq !== renderSeq) return;
    fill(main, h("p", { class: "bad", id: "view-error", text: `${e.message}${e.status ? " (HTTP " + e.status + ")" : ""}` }));
  }
}

async function whoAmI() {
  try {
    const { data } = await api("GET", "/");
    document.getElementById("where").textContent = `${location.host} · kconnect ${data.version} · cluster ${data.kafka_cluster_id}`;
  } catch (e) {
    document.getElementById("where").textContent = location.host;
  }
}

window.addEventListener("hashchange", () => { notice(""); route(); });
whoAmI();
route();
