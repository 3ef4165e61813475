// The console page: plain script, no framework, nothing loaded from elsewhere. Every value
// from an input is written with textContent, never parsed as HTML.
"use strict";

const params = new URLSearchParams(window.location.search);
const token = params.get("token");
let passes = null;
let uploaded = null;

function $(id) { return document.getElementById(id); }

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

async function api(path, init) {
  const options = Object.assign({}, init || {});
  options.headers = Object.assign({}, options.headers || {});
  if (token) options.headers["Authorization"] = "Bearer " + token;
  const response = await fetch(path, options);
  const type = response.headers.get("content-type") || "";
  const body = type.startsWith("application/json") ? await response.json() : await response.text();
  if (!response.ok) {
    const message = body && body.error ? body.error.message + " (" + body.error.problem + ")" : String(body);
    throw new Error(message);
  }
  return body;
}

function withToken(href) {
  return token ? href + (href.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : href;
}

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.className = isError ? "error" : "";
}

// Tabs.
for (const button of document.querySelectorAll("button.tab")) {
  button.addEventListener("click", () => showTab(button.dataset.tab));
}

function showTab(name) {
  showTabLoaded(name).catch(showError);
}

async function showTabLoaded(name) {
  for (const button of document.querySelectorAll("button.tab")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const panel of document.querySelectorAll("section.panel")) {
    panel.hidden = panel.id !== name;
  }
  if (name === "sessions") await loadSessions();
  if (name === "reports") await loadReports();
}

function showError(err) {
  setStatus(err.message || String(err), true);
}

// Inputs: bundled examples, uploads, pasted text.
async function loadExamples() {
  const examples = await api("/api/examples");
  const select = $("example");
  for (const example of examples) {
    const option = el("option", null, example.title + " (" + example.name + ")");
    option.value = example.name;
    select.appendChild(option);
  }
}

async function loadExample(name) {
  const text = await api("/api/examples/" + encodeURIComponent(name));
  uploaded = null;
  $("input").value = text;
  setStatus("Loaded example " + name + ".");
}

$("example").addEventListener("change", (event) => {
  if (event.target.value) loadExample(event.target.value).catch(showError);
});

$("upload").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  // The file is sent as it is, so the server sees its exact bytes (and names a bad one).
  uploaded = file;
  $("input").value = new TextDecoder("utf-8", { fatal: false }).decode(await file.arrayBuffer());
  setStatus("Loaded " + file.name + " (" + file.size + " bytes).");
});

$("input").addEventListener("input", () => { uploaded = null; });

$("compile").addEventListener("click", () => compile().catch(showError));

async function compile() {
  const query = new URLSearchParams({ preset: $("preset").value });
  if ($("from").value) query.set("from", $("from").value);
  const body = uploaded || $("input").value;
  setStatus("Compiling…");
  const view = await api("/api/compile?" + query.toString(), { method: "POST", body: body });
  renderView(view, { items: $("items"), output: $("output"), summary: $("summary") }, null);
  renderPresets(view.presets);
  renderRegister(view.register);
  $("result").hidden = false;
  setStatus("Compiled: " + view.receipts.length + " receipt(s).");
  document.body.dataset.compiled = "true";
  return view;
}

function saved(before, after) {
  if (!before) return "";
  return " (" + (100 * (before - after) / before).toFixed(1) + "% saved)";
}

function prettyOutput(view) {
  if (view.format === "events") return view.output;
  try { return JSON.stringify(JSON.parse(view.output), null, 2); } catch (_) { return view.output; }
}

// One view (playground or stored session): items with their originals, the output.
function renderView(view, targets, session) {
  targets.summary.textContent = "";
  const line = el("p");
  line.appendChild(el("strong", null, view.format));
  line.appendChild(document.createTextNode(
    " · preset " + view.preset + " · " + view.tokens_before + " → " + view.tokens_after + " tokens (" +
    view.tokenizer + ")" + saved(view.tokens_before, view.tokens_after) + " · " + view.items.length +
    " items, " + view.receipts.length + " retired or rewritten"));
  targets.summary.appendChild(line);
  for (const warning of view.warnings) targets.summary.appendChild(el("p", "muted", "warning: " + warning));

  const receipts = new Map(view.receipts.map((r) => [r.id, r]));
  targets.items.textContent = "";
  for (const item of view.items) {
    const li = el("li", "item " + item.action);
    li.dataset.id = item.id;
    const head = el("div", "item-head", item.id);
    if (item.action !== "keep") {
      head.appendChild(el("span", "badge " + item.action, item.action + " · " + (item.reason || "")));
      if (item.by && item.by.length) head.appendChild(el("span", "by", "by " + item.by.join(", ")));
    }
    if (item.note) head.appendChild(el("span", "note", item.note));
    li.appendChild(head);
    if (item.original !== undefined) li.appendChild(el("pre", null, item.original));
    const receipt = receipts.get(item.id);
    if (receipt) {
      li.classList.add("clickable");
      li.title = "Show the pass's documentation and the receipt";
      li.addEventListener("click", () => openReceipt(receipt, session).catch(showError));
    }
    targets.items.appendChild(li);
  }
  targets.output.textContent = prettyOutput(view);
}

function renderPresets(presets) {
  const table = $("presets");
  table.textContent = "";
  if (!presets.length) {
    table.appendChild(el("caption", "muted", "Presets shape message transcripts; an event trace compiles the same under each."));
    return;
  }
  const head = el("tr");
  for (const h of ["preset", "tokens before", "tokens after", "saved", "replayed cost", "vs full", "read from cache"]) {
    head.appendChild(el("th", null, h));
  }
  table.appendChild(head);
  for (const p of presets) {
    const row = el("tr");
    row.appendChild(el("td", null, p.preset));
    row.appendChild(el("td", null, p.tokens_before));
    row.appendChild(el("td", null, p.tokens_after));
    row.appendChild(el("td", null, saved(p.tokens_before, p.tokens_after).replace(/[()]/g, "").trim()));
    const r = p.replayed;
    if (r) {
      row.appendChild(el("td", null, r.cost.toFixed(1)));
      row.appendChild(el("td", null, r.relative_to_full == null ? "–" : r.relative_to_full.toFixed(3)));
      row.appendChild(el("td", null, r.cached_share == null ? "–" : (100 * r.cached_share).toFixed(1) + "%"));
    } else {
      const cell = el("td", "muted", "not replayable");
      cell.colSpan = 3;
      cell.title = p.replay_error || "";
      row.appendChild(cell);
    }
    table.appendChild(row);
  }
  table.prepend(el("caption", "muted",
    "Replayed cost: one request before each agent turn through a prompt cache, in uncached-input-token units " +
    "(cache reads 0.1×, writes 1.25×), priced as ctxgc bench prices it."));
}

function renderRegister(register) {
  const target = $("register");
  target.textContent = "";
  if (!register.length) return;
  target.appendChild(el("h2", null, "Register (live declared state)"));
  const table = el("table");
  const head = el("tr");
  for (const h of ["key", "value", "status", "supported by"]) head.appendChild(el("th", null, h));
  table.appendChild(head);
  for (const entry of register) {
    const row = el("tr");
    row.appendChild(el("td", null, entry.key));
    row.appendChild(el("td", null, JSON.stringify(entry.value)));
    row.appendChild(el("td", null, entry.status));
    row.appendChild(el("td", null, entry.support));
    table.appendChild(row);
  }
  target.appendChild(table);
}

// The detail panel: the pass's doc and the receipt's exact bytes.
async function openReceipt(receipt, session) {
  if (!passes) passes = await api("/api/passes");
  const pass = passes.find((p) => p.code === receipt.reason);
  let original = receipt.original;
  if (session) {
    const stored = await api("/api/receipts/" + encodeURIComponent(receipt.id) + "?session=" + encodeURIComponent(session));
    original = stored.utf8 ? stored.original : "(not UTF-8; base64) " + stored.original_base64;
  }
  $("detail-title").textContent = receipt.id + ": " + receipt.action + " [" + receipt.reason + "]";
  $("detail-meta").textContent = (receipt.by && receipt.by.length ? "by " + receipt.by.join(", ") + " · " : "") +
    receipt.bytes + " bytes · blake3 " + receipt.hash;
  $("detail-doc").textContent = pass ? pass.doc || pass.summary : "(no documentation for " + receipt.reason + ")";
  $("detail-original").textContent = original === undefined || original === null ? "(original not available)" : original;
  $("detail").hidden = false;
  document.body.dataset.receipt = receipt.id;
}

$("close").addEventListener("click", () => { $("detail").hidden = true; });

// Sessions.
const sessionFormats = new Map();

async function loadSessions() {
  const list = await api("/api/sessions");
  const table = $("session-list");
  table.textContent = "";
  $("savings-totals").textContent = "";
  if (!list.store) {
    $("store").textContent = "No store open: start with ctxgc serve --db PATH|URL (or set CTXGC_DB).";
    return;
  }
  $("store").textContent = list.store.backend + ": " + list.store.location + " · " + list.sessions.length + " session(s)";
  const savings = await api("/api/savings");
  renderSavingsTotals(savings.totals, $("savings-totals"), "Saved by the gateway and the proxy (all sessions)");
  const saved = new Map(savings.sessions.map((s) => [s.context_id, s.totals.reduce((n, t) => n + t.tokens_saved, 0)]));
  const head = el("tr");
  for (const h of ["session", "format", "items", "tokens saved"]) head.appendChild(el("th", null, h));
  table.appendChild(head);
  for (const s of list.sessions) {
    sessionFormats.set(s.context_id, s.format);
    const row = el("tr");
    const cell = el("td");
    const link = el("button", null, s.context_id);
    link.type = "button";
    link.addEventListener("click", () => showSession(s.context_id).catch(showError));
    cell.appendChild(link);
    row.appendChild(cell);
    row.appendChild(el("td", null, s.format || ""));
    row.appendChild(el("td", null, s.items));
    row.appendChild(el("td", null, saved.has(s.context_id) ? saved.get(s.context_id) : ""));
    table.appendChild(row);
  }
}

// Totals per source: what the gateway compiled away and the proxy trimmed, as recorded.
function renderSavingsTotals(totals, target, title) {
  target.textContent = "";
  if (!totals.length) {
    target.appendChild(el("p", "muted", "No savings recorded: the gateway and the proxy record theirs when they use this store (--db)."));
    return;
  }
  target.appendChild(el("h2", null, title));
  const table = el("table", "savings-totals");
  const head = el("tr");
  for (const h of ["source", "records", "tokens before", "tokens after", "tokens saved", "with provider usage", "input", "cache read", "cache write", "output"]) {
    head.appendChild(el("th", null, h));
  }
  table.appendChild(head);
  for (const t of totals) {
    const row = el("tr");
    for (const v of [t.source, t.records, t.tokens_before, t.tokens_after, t.tokens_saved, t.with_usage,
      t.usage.input_tokens, t.usage.cache_read_tokens, t.usage.cache_write_tokens, t.usage.output_tokens]) {
      row.appendChild(el("td", null, v));
    }
    table.appendChild(row);
  }
  target.appendChild(table);
}

// One session's savings records, oldest first.
async function showSavings(id) {
  const target = $("session-savings");
  target.textContent = "";
  const answer = await api("/api/sessions/" + encodeURIComponent(id) + "/savings");
  if (!answer.records.length) return answer;
  renderSavingsTotals(answer.totals, target, "Saved in " + id);
  const table = el("table", "savings-records");
  const head = el("tr");
  for (const h of ["when", "source", "ordinal", "endpoint or tool", "tokens before", "tokens after", "saved", "provider input", "cache read", "cache write", "output"]) {
    head.appendChild(el("th", null, h));
  }
  table.appendChild(head);
  for (const r of answer.records) {
    const row = el("tr");
    const u = r.usage;
    for (const v of [new Date(r.at_ms).toISOString(), r.source, r.ordinal, r.tool, r.tokens_before, r.tokens_after,
      Math.max(0, r.tokens_before - r.tokens_after), u ? u.input_tokens : "-", u ? u.cache_read_tokens : "-",
      u ? u.cache_write_tokens : "-", u ? u.output_tokens : "-"]) {
      row.appendChild(el("td", null, v));
    }
    table.appendChild(row);
  }
  target.appendChild(table);
  return answer;
}

async function showSession(id) {
  document.body.dataset.session = id;
  await showSavings(id);
  // A session that holds only receipts (the proxy's originals) has nothing to compile.
  if (sessionFormats.has(id) && !sessionFormats.get(id)) {
    $("session-result").hidden = true;
    return { receipts: [] };
  }
  const query = new URLSearchParams({ preset: $("preset").value });
  const answer = await api("/api/sessions/" + encodeURIComponent(id) + "?" + query.toString());
  renderView(answer.compiled, { items: $("session-items"), output: $("session-output"), summary: $("session-summary") }, id);
  $("session-result").hidden = false;
  document.body.dataset.session = id;
  await showSteps(id, answer.compiled.format);
  return answer.compiled;
}

// A chat session's growth and its cache-stable compaction steps (event traces take none).
async function showSteps(id, format) {
  const target = $("session-steps");
  target.textContent = "";
  if (format === "events") return;
  const steps = await api("/api/sessions/" + encodeURIComponent(id) + "/steps");
  target.appendChild(el("h2", null, "Growth and compaction steps (cache-stable)"));
  const s = steps.session;
  target.appendChild(el("p", "muted", s.messages + " messages: " + s.tokens_before + " tokens stored, " +
    s.tokens_after + " compiled cache-stable · " + steps.steps.length + " compaction step(s)"));
  if (!steps.steps.length) return;
  const table = el("table");
  const head = el("tr");
  for (const h of ["at message", "items compacted", "tokens before", "tokens after", "saved per request", "cache misses caused", "estimated net"]) {
    head.appendChild(el("th", null, h));
  }
  table.appendChild(head);
  for (const step of steps.steps) {
    const row = el("tr");
    row.appendChild(el("td", null, step.at));
    const items = el("td", null, step.items.length + " (" + step.items.join(", ") + ")");
    row.appendChild(items);
    row.appendChild(el("td", null, step.tokens_before));
    row.appendChild(el("td", null, step.tokens_after));
    row.appendChild(el("td", null, step.tokens_saved));
    row.appendChild(el("td", null, step.prefix_tokens_invalidated));
    row.appendChild(el("td", null, step.estimated_net.toFixed(0)));
    table.appendChild(row);
  }
  target.appendChild(table);
}

// Reports.
async function loadReports() {
  const list = await api("/api/reports");
  const target = $("report-list");
  target.textContent = "";
  $("reports-folder").textContent = list.folder
    ? "Report pages in " + list.folder
    : "No reports folder: start with ctxgc serve --reports DIR (pages of ctxgc bench --output html and ctxgc report).";
  for (const report of list.reports) {
    const li = el("li");
    const a = el("a", null, report.name);
    a.href = withToken(report.href);
    a.target = "_blank";
    a.rel = "noopener";
    li.appendChild(a);
    li.appendChild(document.createTextNode(" (" + report.bytes + " bytes)"));
    target.appendChild(li);
  }
}

// Start: examples, then what the address asks for (?example=NAME&preset=P&receipt=first,
// ?session=ID&receipt=first, ?tab=sessions|reports).
async function start() {
  await loadExamples();
  if (params.get("preset")) $("preset").value = params.get("preset");
  const example = params.get("example");
  if (example) {
    $("example").value = example;
    await loadExample(example);
    const view = await compile();
    if (params.get("receipt") === "first" && view.receipts.length) await openReceipt(view.receipts[0], null);
  }
  const session = params.get("session");
  if (session) {
    await showTabLoaded("sessions");
    const view = await showSession(session);
    if (params.get("receipt") === "first" && view.receipts.length) await openReceipt(view.receipts[0], session);
  } else if (params.get("tab")) {
    await showTabLoaded(params.get("tab"));
  }
  document.body.dataset.ready = "true";
}

start().catch(showError);
