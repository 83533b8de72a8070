// The page to watch a run: start one, follow its events live, read its report.
// Text from the server goes in through textContent only; the one exception is the report,
// which the server renders with raw HTML off.
"use strict";

const $ = (selector) => document.querySelector(selector);
let following = null; // the AbortController of the stream being read
// The run on show: its state as the last event or status said, and its times (ms).
const run = { id: null, status: "", iteration: 0, spent: "", startedAt: 0, endedAt: 0 };
let ticker = null; // ticks the elapsed time while the run on show is running

function headers(extra = {}) {
  const token = $("#token").value.trim();
  sessionStorage.setItem("token", token);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try {
      message = (await response.json()).error.message;
    } catch (_) { /* not our JSON error */ }
    throw new Error(message);
  }
  return response;
}

// Each cell is named by its column's heading: on a narrow screen a row is a block of
// "heading: value" lines (app.css), so nothing scrolls sideways.
function labelled(td) {
  const heading = td.closest("table").tHead.rows[0].cells[td.cellIndex];
  if (heading) td.dataset.label = heading.textContent;
  return td;
}

function cell(row, text, className) {
  const td = labelled(row.insertCell());
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function showNode(event) {
  const data = event.data;
  let row = document.getElementById(`node-${event.node_id}`);
  if (!row) {
    row = $("#tree tbody").insertRow();
    row.id = `node-${event.node_id}`;
    row.dataset.node = event.node_id;
    for (let i = 0; i < 5; i++) labelled(row.insertCell());
  }
  const [id, status, source, cost, question] = row.cells;
  id.textContent = event.node_id;
  status.textContent = data.status;
  status.className = `status ${data.status}`;
  source.textContent = data.source_hint;
  cost.textContent = `$${Number(data.cost_usd).toFixed(4)}`;
  question.textContent = data.question + (data.error ? ` — ${data.error}` : "");
}

function log(text) {
  const item = document.createElement("li");
  item.textContent = text;
  $("#log").prepend(item);
}

async function showReport(sessionId) {
  const response = await api(`/research/${sessionId}/report`, { headers: { Accept: "text/html" } });
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const main = page.querySelector("main");
  // A source opens in a new tab, and learns nothing of this page (no opener, no referrer).
  for (const link of main ? main.querySelectorAll("a[href]") : []) {
    if (link.getAttribute("href").startsWith("#")) continue;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  $("#report").replaceChildren(...(main ? main.childNodes : []));
}

function clock(ms) {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor(seconds / 60) % 60;
  const s = String(seconds % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

// One line: running · iteration 2 · 1:05 elapsed · spent $0.0123 · 4,321 tokens
function showState() {
  const parts = [run.status || "starting"];
  if (run.iteration) parts.push(`iteration ${run.iteration}`);
  if (run.startedAt) parts.push(`${clock((run.endedAt || Date.now()) - run.startedAt)} elapsed`);
  if (run.spent) parts.push(`spent ${run.spent}`);
  const line = $("#run-status");
  line.textContent = parts.join(" · ");
  line.className = `status ${run.status}`;
  line.dataset.status = run.status;
}

function tick(on) {
  clearInterval(ticker);
  ticker = on ? setInterval(showState, 1000) : null;
}

// The run's status and iteration, asked again after what may change them; requests do not
// pile up while a finished run's events replay at once.
let asking = null;
let askAgain = false;
async function askStatus(sessionId) {
  if (asking) {
    askAgain = true;
    return;
  }
  asking = sessionId;
  try {
    do {
      askAgain = false;
      const state = await (await api(`/research/${sessionId}`)).json();
      if (run.id !== sessionId) return;
      run.iteration = state.iteration;
      if (!run.endedAt) run.status = state.status;
      showState();
    } while (askAgain && run.id === sessionId);
  } catch (error) {
    log(error.message);
  } finally {
    asking = null;
  }
}

function handle(sessionId, event) {
  if (event.type === "node") showNode(event);
  else if (event.type === "spend") run.spent = event.message;
  else if (event.type === "report") showReport(sessionId).catch((e) => log(e.message));
  else if (event.type === "start") {
    Object.assign(run, { status: "running", startedAt: Date.parse(event.at), endedAt: 0 });
    delete $("#run").dataset.ended;
    tick(true);
  }
  if (event.type !== "node") log(event.message);
  if (event.type === "end") {
    Object.assign(run, { status: event.data.status, endedAt: Date.parse(event.at) });
    tick(false);
    $("#run").dataset.ended = event.data.status;
    loadSessions();
  }
  if (["start", "node", "stop", "end"].includes(event.type)) askStatus(sessionId);
  showState();
}

// Server-Sent Events read with fetch, so that the bearer token can be sent (EventSource
// cannot send headers). Reconnects with Last-Event-ID until the run's end event.
async function follow(sessionId) {
  if (following) following.abort();
  const controller = new AbortController();
  following = controller;
  let lastId = null;
  let ended = false;
  while (!ended && !controller.signal.aborted) {
    const extra = { Accept: "text/event-stream" };
    if (lastId !== null) extra["Last-Event-ID"] = lastId;
    try {
      const response = await api(`/research/${sessionId}/events`, {
        headers: extra, signal: controller.signal,
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
          const fields = {};
          for (const line of block.split(/\r?\n/)) {
            if (line.startsWith(":")) continue;
            const at = line.indexOf(":");
            const name = at < 0 ? line : line.slice(0, at);
            fields[name] = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
          }
          if (fields.data === undefined) continue;
          if (fields.id !== undefined) lastId = fields.id;
          const event = JSON.parse(fields.data);
          handle(sessionId, event);
          if (event.type === "end") ended = true;
        }
      }
      ended = true; // the server closes the stream once the run has ended
    } catch (error) {
      if (controller.signal.aborted) return;
      log(`connection lost (${error.message}); reconnecting`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

function open(sessionId, question) {
  $("#error").textContent = "";
  $("#run").hidden = false;
  delete $("#run").dataset.ended;
  tick(false);
  Object.assign(run, { id: sessionId, status: "", iteration: 0, spent: "", startedAt: 0, endedAt: 0 });
  $("#run-title").textContent = question;
  showState();
  $("#tree tbody").replaceChildren();
  $("#log").replaceChildren();
  $("#report").replaceChildren();
  follow(sessionId);
}

// A session's address is its id after #: opening /#<id> (or following a link to it) shows
// that session. Other fragments are the report's own (#source-1, a section's heading).
const SESSION_ID = /^[0-9a-f]{4,32}$/;

async function openFromHash() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (!SESSION_ID.test(id) || id === run.id || document.getElementById(id)) return;
  try {
    const state = await (await api(`/research/${id}`)).json();
    if (decodeURIComponent(location.hash.slice(1)) === id) open(state.session_id, state.question);
  } catch (error) {
    $("#error").textContent = `session ${id}: ${error.message}`;
  }
}

// "2026-11-26 20:47", in the reader's time zone.
function when(iso) {
  const at = new Date(iso);
  const two = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ` +
    `${two(at.getHours())}:${two(at.getMinutes())}`;
}

// Started, and when it was last saved if that is another minute: "2026-11-26 20:47 – 20:52".
function dates(td, row) {
  const started = document.createElement("time");
  started.dateTime = row.created_at;
  started.textContent = when(row.created_at);
  td.append(started);
  const [begun, saved] = [when(row.created_at), when(row.updated_at)];
  if (saved !== begun) {
    const updated = document.createElement("time");
    updated.dateTime = row.updated_at;
    updated.className = "muted";
    updated.title = "last saved";
    updated.textContent = saved.slice(0, 10) === begun.slice(0, 10) ? saved.slice(11) : saved;
    td.append(" – ", updated);
  }
}

async function loadSessions() {
  try {
    const rows = await (await api("/sessions")).json();
    const body = $("#sessions tbody");
    body.replaceChildren();
    for (const row of rows) {
      const tr = body.insertRow();
      tr.dataset.session = row.session_id;
      const link = document.createElement("a");
      link.href = `#${row.session_id}`;
      link.className = "session";
      link.textContent = row.session_id;
      // The address is this session's already (no hashchange): open it all the same.
      link.addEventListener("click", () => {
        if (location.hash === link.hash) openFromHash();
      });
      labelled(tr.insertCell()).append(link);
      dates(cell(tr, "", "when"), row);
      cell(tr, row.status, `status ${row.status}`);
      cell(tr, (row.stop_reason ?? "").replaceAll("_", " "), "stop");
      cell(tr, `$${Number(row.cost_usd ?? 0).toFixed(4)}`, "cost");
      cell(tr, row.question);
    }
  } catch (error) {
    $("#error").textContent = error.message;
  }
}

// What this server allows a run to spend, and the preset it runs unless told: GET /limits.
function dollars(usd) {
  return `$${Number(usd).toFixed(2)}`;
}

async function loadLimits() {
  try {
    const limits = await (await api("/limits")).json();
    const cost = $("#max-cost");
    cost.max = String(limits.max_cost_usd);
    cost.placeholder = dollars(limits.default_max_cost_usd);
    $("#cap").textContent =
      `Empty: at most ${dollars(limits.default_max_cost_usd)}. This server's cap: ` +
      `${dollars(limits.max_cost_usd)} a run, ${dollars(limits.daily_budget_usd)} a day.`;
    const preset = $("#preset");
    if (!preset.dataset.chosen) preset.value = limits.preset;
  } catch (error) {
    $("#cap").textContent = `This server's cap is unknown: ${error.message}.`;
  }
}

// One start at a time: each start is a paid run, and the server may take a while to accept
// one (it checks the models first).
let starting = false;
$("#start").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  if (starting) return;
  starting = true;
  const button = $("#go");
  button.disabled = true;
  button.textContent = "Starting…";
  $("#error").textContent = "";
  const question = $("#question").value;
  const body = { question, preset: $("#preset").value };
  const scope = $("#scope").value;
  if (scope === "kb") body.kb_only = true;
  if (scope === "web") body.web_only = true;
  const cost = parseFloat($("#max-cost").value);
  if (!Number.isNaN(cost)) body.max_cost_usd = cost;
  try {
    const response = await api("/research", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const started = await response.json();
    open(started.session_id, question);
    location.hash = started.session_id; // its address, to come back to
    loadSessions();
  } catch (error) {
    $("#error").textContent = error.message;
  } finally {
    starting = false;
    button.disabled = false;
    button.textContent = "Research";
  }
});

$("#token").value = sessionStorage.getItem("token") || "";
$("#token").addEventListener("change", () => {
  $("#error").textContent = "";
  loadSessions();
  loadLimits();
  openFromHash();
});
$("#preset").addEventListener("change", () => { $("#preset").dataset.chosen = "yes"; });
window.addEventListener("hashchange", openFromHash);
loadSessions();
loadLimits();
openFromHash();
