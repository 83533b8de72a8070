// The page to watch a run: start one, follow its events live, read its report.
// Text from the server goes in through textContent only; the one exception is the report,
// which the server renders with raw HTML off.
"use strict";

const $ = (selector) => document.querySelector(selector);
let following = null; // the AbortController of the stream being read

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

function cell(row, text, className) {
  const td = row.insertCell();
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
    for (let i = 0; i < 5; i++) row.insertCell();
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
  $("#report").replaceChildren(...(main ? main.childNodes : []));
}

function handle(sessionId, event) {
  if (event.type === "node") showNode(event);
  else if (event.type === "spend") $("#run-status").textContent = `spent ${event.message}`;
  else if (event.type === "report") showReport(sessionId).catch((e) => log(e.message));
  if (event.type !== "node") log(event.message);
  if (event.type === "end") {
    $("#run").dataset.ended = event.data.status;
    loadSessions();
  }
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
  $("#run").hidden = false;
  delete $("#run").dataset.ended;
  $("#run-title").textContent = question;
  $("#run-status").textContent = "";
  $("#tree tbody").replaceChildren();
  $("#log").replaceChildren();
  $("#report").replaceChildren();
  follow(sessionId);
}

async function loadSessions() {
  try {
    const rows = await (await api("/sessions")).json();
    const body = $("#sessions tbody");
    body.replaceChildren();
    for (const row of rows) {
      const tr = body.insertRow();
      const link = document.createElement("a");
      link.href = `#${row.session_id}`;
      link.className = "session";
      link.textContent = row.session_id;
      link.addEventListener("click", () => open(row.session_id, row.question));
      tr.insertCell().append(link);
      cell(tr, row.status, `status ${row.status}`);
      cell(tr, `$${Number(row.cost_usd ?? 0).toFixed(4)}`);
      cell(tr, row.question);
    }
  } catch (error) {
    $("#error").textContent = error.message;
  }
}

$("#start").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  $("#error").textContent = "";
  const question = $("#question").value;
  const body = { question };
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
    loadSessions();
  } catch (error) {
    $("#error").textContent = error.message;
  }
});

$("#token").value = sessionStorage.getItem("token") || "";
loadSessions();
