// The blobledger page: documents, uploads and operations over the service's own API.
// Every name and value from the service is set with textContent (never parsed as HTML); the
// token lives in sessionStorage and travels only in the Authorization header (a download
// follows a short-lived link the service signs, which never holds the token). The pipeline
// view and the thumbnails are pipeline.js.

import { pipelineView } from "./pipeline.js";

const TOKEN_KEY = "blobledger.token";
const CHUNK = 8 * 1024 * 1024;
// uploads retry network errors and 5xx answers only (waiting at least their Retry-After);
// any 4xx is a refusal, shown at once with the service's problem detail
const RETRY_DELAYS = [0, 1000, 3000, 5000, 10000];
// where a long name or content type may wrap (it never breaks inside a word)
const SEPARATORS = /([/\-_.+;,:=@ ]+)/;
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);
const state = { scopes: [], tokens: false, cursors: [null], page: 0, next: null, tus: null,
                opsTimer: null, opsLoads: 0, replacing: null, listFailed: false,
                opsFailed: false };

// -- helpers ---------------------------------------------------------------------------------

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

function when(iso) {
  if (!iso) return "";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC");
}

// a cell with a time: the list's columns say UTC, the tooltip has it whole
function whenCell(iso, label) {
  const cell = labelled(el("td", when(iso).replace(" UTC", ""), "when"), label);
  cell.title = when(iso);
  return cell;
}

function age(seconds) {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }

function authHeaders(extra) {
  const headers = new Headers(extra || {});
  const t = token();
  if (t) headers.set("Authorization", `Bearer ${t}`);
  return headers;
}

function can(scope) { return state.scopes.includes(scope); }

// Each view has its own banner (inside its section: it is seen with its view only); the one
// outside the views (#message) speaks of the token and the service as a whole.
function say(view, text, isError) {
  const box = $(view ? `${view}-message` : "message");
  box.textContent = text;
  box.classList.toggle("error", Boolean(isError));
  box.hidden = !text;
}

// A name (or content type) that wraps only after a separator, whole in its tooltip; a part
// too long for its column is cut with an ellipsis.
function wrapping(tag, text, cls) {
  const node = el(tag, null, cls);
  const value = text === null || text === undefined ? "" : String(text);
  const inner = el("span", null, "wrap");
  for (const part of value.split(SEPARATORS)) {
    if (!part) continue;
    inner.append(document.createTextNode(part));
    if (SEPARATORS.test(part)) inner.append(document.createElement("wbr"));
  }
  node.title = value;
  node.append(inner);
  return node;
}

function labelled(node, label) {
  node.dataset.label = label;
  return node;
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(method, path, { body, headers, raw } = {}) {
  const response = await fetch(path, { method, body, headers: authHeaders(headers),
                                       cache: "no-store" });
  if (response.status === 401) {
    askForToken(token() ? "That token is not valid." : "");
  }
  if (!response.ok) {
    let problem = null;
    try { problem = await response.json(); } catch (_) { problem = null; }
    throw new ApiError(response.status, problem);
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

const pipeline = pipelineView({ $, el, api, say, can, wrapping, when, age, authHeaders });

// -- token and scopes ------------------------------------------------------------------------

function askForToken(reason) {
  $("token-view").hidden = false;
  document.querySelectorAll(".view").forEach((v) => { v.hidden = true; });
  if (reason) say(null, reason, true);
  $("token-input").focus();
}

async function whoami() {
  try {
    const who = await api("GET", "/ops/whoami");
    state.scopes = who.scopes;
    state.tokens = who.tokens;
  } catch (err) {
    if (err.status === 401) return false;
    throw err;
  }
  $("token-view").hidden = true;
  $("who-scopes").textContent = state.tokens ? `token: ${state.scopes.join(", ") || "no scope"}`
                                             : "no tokens configured";
  $("sign-out").hidden = !state.tokens;
  document.querySelectorAll("[data-needs]").forEach((node) => {
    node.hidden = !can(node.dataset.needs);
  });
  return true;
}

// -- views -----------------------------------------------------------------------------------

function show(view) {
  const name = ["documents", "upload", "operations", "pipeline"].includes(view) ? view : "documents";
  const target = name === "upload" && !can("write") ? "documents" : name;
  document.querySelectorAll(".view").forEach((v) => { v.hidden = v.id !== target; });
  document.querySelectorAll("nav a").forEach((a) => {
    a.classList.toggle("active", a.dataset.view === target);
  });
  say(null, "");
  say(target, "");  // what a view said last time is stale now
  clearInterval(state.opsTimer);
  if (target === "documents") loadPage();
  if (target === "operations") {
    loadOps();
    state.opsTimer = setInterval(loadOps, 5000);
  }
  if (target === "pipeline") {
    pipeline.load();
    state.opsTimer = setInterval(pipeline.load, 5000);
  }
}

// -- documents -------------------------------------------------------------------------------

let loads = 0;

// the bucket the documents view lists and uploads to (docs/buckets.md): "default" is the
// one of today's routes, /documents; another one's are /buckets/{bucket}/documents
function bucketPath() {
  const bucket = $("bucket").value || "default";
  return bucket === "default" ? "/documents" : `/buckets/${encodeURIComponent(bucket)}/documents`;
}

async function loadBuckets() {
  let found;
  try {
    found = await api("GET", "/buckets");
  } catch (_) {
    return;  // an older service, or a token without read: the default bucket alone
  }
  const chosen = $("bucket").value;
  $("bucket").replaceChildren(...found.items.map((b) => {
    const option = document.createElement("option");
    option.value = b.name;
    option.textContent = b.name;
    option.selected = b.name === chosen;
    return option;
  }));
}

async function loadPage() {
  const params = new URLSearchParams({ limit: $("limit").value });
  const prefix = $("prefix").value;
  if (prefix) params.set("prefix", prefix);
  const cursor = state.cursors[state.page];
  if (cursor) params.set("cursor", cursor);
  const ticket = ++loads;  // only the latest request's answer is shown
  let page;
  try {
    page = await api("GET", `${bucketPath()}?${params}`);
  } catch (err) {
    if (err.status !== 401 && ticket === loads) {
      say("documents", `Could not list documents: ${err.message}`, true);
      state.listFailed = true;
    }
    return;
  }
  if (ticket !== loads) return;
  if (state.listFailed) { say("documents", ""); state.listFailed = false; }
  state.next = page.next_cursor;
  const rows = $("doc-rows");
  pipeline.releaseThumbnails();
  rows.replaceChildren(...page.items.map(docRow));
  $("doc-empty").hidden = page.items.length > 0;
  $("prev-page").disabled = state.page === 0;
  $("first-page").disabled = state.page === 0;
  $("next-page").disabled = !state.next;
  $("page-number").textContent = `page ${state.page + 1}`;
}

function docRow(doc) {
  const tr = el("tr");
  tr.dataset.id = doc.id;
  const name = wrapping("td", doc.name, "name");
  const thumb = pipeline.thumbnail(doc);
  if (thumb) name.append(thumb);
  tr.append(name,
            labelled(el("td", bytes(doc.size), "num size"), "Size"),
            labelled(wrapping("td", doc.content_type, "mono type"), "Type"),
            labelled(el("td", doc.version, "num version"), "Version"));
  const sum = labelled(el("td", doc.sha256 ? doc.sha256.slice(0, 12) + "…" : "", "mono sha"),
                       "SHA-256");
  if (doc.sha256) sum.title = doc.sha256;
  tr.append(sum, whenCell(doc.created_at, "Created"), whenCell(doc.updated_at, "Updated"));
  const actions = el("td", null, "actions");
  actions.append(downloadLink(doc));
  const view = viewLink(doc);
  if (view) actions.append(view);
  if (can("write")) {
    const replace = el("button", "Replace");
    replace.type = "button";
    replace.addEventListener("click", () => { state.replacing = doc; $("replace-file").click(); });
    const remove = el("button", "Delete");
    remove.type = "button";
    remove.addEventListener("click", () => confirmDelete(doc));
    actions.append(replace, remove);
  }
  tr.append(actions);
  return tr;
}

// A plain link to the content: the browser streams it to disk with its own progress (the
// file's name comes from the service's Content-Disposition). With tokens, a click first asks
// the service for a short-lived link to this document (GET /documents/{id}/link), then
// follows it. A "View" link opens, in a tab of its own, the types the service sends inline
// (raster images, PDF, plain text, audio, video: they cannot script, and the service keeps
// its sandbox policy on them); every other type is only downloaded.
const INLINE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif",
                        "image/bmp", "application/pdf", "text/plain"]);

function shownInline(type) {
  const essence = String(type || "").split(";")[0].trim().toLowerCase();
  return INLINE.has(essence) || essence.startsWith("audio/") || essence.startsWith("video/");
}

function contentLink(doc, label, view) {
  const a = el("a", label, "button");
  a.href = `/documents/${encodeURIComponent(doc.id)}/content`;
  if (view) {
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  } else {
    a.download = "";
  }
  a.addEventListener("click", async (e) => {
    if (!state.tokens || Number(a.dataset.until || 0) > Date.now()) {
      if (!view) say("documents", `Downloading ${doc.name}: the browser shows its progress.`);
      return;
    }
    e.preventDefault();
    try {
      const link = await api("GET", `/documents/${encodeURIComponent(doc.id)}/link`);
      a.href = link.url;
      a.dataset.until = String(Date.now() + Math.max(0, (link.expires_in || 0) - 10) * 1000);
    } catch (err) {
      say("documents", `Could not open ${doc.name}: ${err.message}`, true);
      return;
    }
    a.click();
  });
  return a;
}

function downloadLink(doc) { return contentLink(doc, "Download", false); }

function viewLink(doc) { return shownInline(doc.content_type) ? contentLink(doc, "View", true) : null; }

async function replaceDoc(doc, file) {
  say("documents", `Replacing ${doc.name}…`);
  try {
    const updated = await api("PUT", `/documents/${encodeURIComponent(doc.id)}/content`, {
      body: file,
      headers: { "If-Match": `"${doc.version}"`,
                 "Content-Type": file.type || "application/octet-stream" },
    });
    say("documents", `Replaced ${updated.name}: now version ${updated.version}.`);
  } catch (err) {
    if (err.status === 412) {
      const now = err.problem.current_version;
      say("documents", `Not replaced: ${doc.name} was changed by someone else since this list was loaded `
          + `(you had version ${doc.version}${now ? `, it is now at version ${now}` : ""}). `
          + "The list is refreshed; replace it again if you still want to.", true);
    } else {
      say("documents", `Could not replace ${doc.name}: ${err.message}`, true);
    }
  }
  loadPage();
}

function confirmDelete(doc) {
  const dialog = $("confirm-delete");
  $("delete-name").replaceChildren(wrapping("span", doc.name));
  $("delete-version").textContent = String(doc.version);
  dialog.returnValue = "";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "delete") return;
    try {
      await api("DELETE", `/documents/${encodeURIComponent(doc.id)}`,
                { headers: { "If-Match": `"${doc.version}"` } });
      say("documents", `Deleted ${doc.name}.`);
    } catch (err) {
      const why = err.status === 412
        ? "it was changed by someone else since this list was loaded; look again"
        : err.message;
      say("documents", `Not deleted: ${doc.name}: ${why}`, true);
    }
    loadPage();
  };
  dialog.showModal();
}

// -- uploads ---------------------------------------------------------------------------------

async function detectTus() {
  try {
    const response = await fetch("/files/", { method: "OPTIONS", headers: authHeaders() });
    state.tus = response.ok && response.headers.get("Tus-Resumable") === "1.0.0"
      && typeof window.tus !== "undefined" && window.tus.isSupported;
  } catch (_) {
    state.tus = false;
  }
  $("transport").textContent = state.tus
    ? "Resumable uploads (tus 1.0): pause, resume and retry continue where they stopped."
    : "This server has no resumable upload endpoint (/files/): uploads go through "
      + "POST /documents and start over when paused or retried.";
}

const items = [];

function addFiles(files) {
  for (const file of files) {
    const item = { file, upload: null, xhr: null, status: "queued", documentId: null,
                   key: crypto.randomUUID(), keyName: null, attempts: 0, timer: null,
                   network: false };
    const li = el("li");
    li.dataset.file = file.name;
    const name = el("input");
    name.type = "text";
    name.value = file.name;
    name.setAttribute("aria-label", "document name");
    const progress = el("progress");
    progress.max = 100;
    progress.value = 0;
    const buttons = el("div");
    const mk = (label, fn) => {
      const b = el("button", label);
      b.type = "button";
      b.dataset.action = label.toLowerCase();
      b.addEventListener("click", fn);
      buttons.append(b);
      return b;
    };
    item.buttons = {
      start: mk("Start", () => start(item)),
      pause: mk("Pause", () => pause(item)),
      resume: mk("Resume", () => start(item)),
      retry: mk("Retry", () => start(item)),
      remove: mk("Remove", () => removeItem(item)),
    };
    const status = el("div", `${bytes(file.size)} queued`, "state");
    li.append(name, progress, buttons, status);
    Object.assign(item, { li, name, progress, statusLine: status });
    items.push(item);
    $("queue").append(li);
    setStatus(item, "queued", `${bytes(file.size)}, queued`);
  }
}

function setStatus(item, status, text, cls) {
  item.status = status;
  item.li.dataset.state = status;
  item.statusLine.textContent = text;
  item.statusLine.className = `state ${cls || ""}`;
  const b = item.buttons;
  b.start.hidden = status !== "queued";
  b.pause.hidden = status !== "uploading";
  b.resume.hidden = status !== "paused";
  b.retry.hidden = status !== "failed";
  b.remove.hidden = status === "uploading";
  // the name can change until the service holds an upload under it
  item.name.disabled = status === "uploading" || status === "done"
    || Boolean(item.upload && item.upload.url);
}

function progressed(item, sent, total) {
  const pct = total ? (sent / total) * 100 : 100;
  item.progress.value = pct;
  item.sent = sent;
  item.statusLine.textContent = `${bytes(sent)} of ${bytes(total)} (${pct.toFixed(0)}%)`;
}

function finished(item, id) {
  item.documentId = id;
  item.progress.value = 100;
  item.li.dataset.documentId = id || "";
  setStatus(item, "done", `Uploaded as ${item.name.value}`, "done");
  if (!$("documents").hidden) loadPage();
}

// The Retry-After of an answer, in milliseconds (seconds or an HTTP date), or 0.
function retryAfter(value) {
  if (!value) return 0;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : 0;
}

// A failed request: retried later when the network failed or the service answered 5xx (while
// attempts remain), else the upload fails. A 4xx is a refusal: it is never retried. One 409
// is not a refusal: tus's offset mismatch on a part (the service got more of an interrupted
// part than the page knew); the page then asks the offset and goes on from there.
function answerFailed(item, status, problem, wait, message) {
  clearTimeout(item.timer);
  const mismatch = status === 409 && Boolean(item.upload && item.upload.url)
    && String((problem && problem.type) || "").endsWith(":offset-mismatch");
  const retryable = (status === 0 || status >= 500 || mismatch) && navigator.onLine
    && item.attempts < RETRY_DELAYS.length && item.status === "uploading";
  if (retryable) {
    const delay = Math.max(RETRY_DELAYS[item.attempts], retryAfter(wait));
    item.attempts += 1;
    const why = status === 0 ? `Connection lost at ${bytes(item.sent || 0)}`
      : mismatch ? "The service holds more of this upload than the page knew"
      : `The service answered ${status}${problem && problem.detail ? ` (${problem.detail})` : ""}`;
    item.statusLine.textContent = `${why}; resuming in ${Math.ceil(delay / 1000)} s `
      + `(attempt ${item.attempts + 1})…`;
    item.timer = setTimeout(() => {
      if (item.status === "uploading") { if (state.tus) item.upload.start(); else sendXhr(item); }
    }, delay);
    return;
  }
  failed(item, { status, problem, message });
}

function failed(item, { status, problem, message }) {
  item.network = status === 0;
  if (status === 0 || status >= 500) {
    const text = !navigator.onLine || status === 0
      ? "Connection lost; it resumes when the network is back (or press Retry)."
      : `The service could not take the upload (${status}): `
        + `${(problem && problem.detail) || message || "it failed"}. Press Retry to resume.`;
    setStatus(item, "failed", text, "error");
    return;
  }
  // a refusal (a taken name, a file too large, a part that does not match): never retried by
  // itself. Before the service opened an upload, Retry starts anew under the name in the
  // field, which can be changed now; an opened upload is kept, and Retry resumes it from the
  // offset the service holds (Remove ends it).
  const opened = Boolean(item.upload && item.upload.url);
  if (!opened) {
    item.upload = null;
    item.key = crypto.randomUUID();
  }
  const detail = (problem && problem.detail) || message || `HTTP ${status}`;
  setStatus(item, "failed", `Refused (${status}): ${detail}`
    + (opened ? " Retry resumes the upload; Remove ends it." : ""), "error");
}

function start(item) {
  if (item.status === "uploading" || item.status === "done") return;
  item.attempts = 0;
  if (state.tus) startTus(item); else startXhr(item);
}

function pause(item) {
  clearTimeout(item.timer);
  if (item.upload) item.upload.abort(false);
  if (item.xhr) { item.xhr.abort(); item.xhr = null; }
  setStatus(item, "paused", state.tus
    ? `Paused at ${bytes(item.sent || 0)}`
    : "Paused (this server restarts the upload from the beginning)");
}

function removeItem(item) {
  clearTimeout(item.timer);
  if (item.upload && item.status !== "done") item.upload.abort(true).catch(() => {});
  item.li.remove();
  items.splice(items.indexOf(item), 1);
}

function startTus(item) {
  // an upload the service has not opened yet is made again if its name was changed
  if (item.upload && !item.upload.url && item.upload.options.metadata.name !== item.name.value) {
    item.upload = null;
  }
  if (!item.upload) {
    item.upload = new window.tus.Upload(item.file, {
      endpoint: "/files/",
      chunkSize: CHUNK,
      retryDelays: null,  // answerFailed decides, and waits
      metadata: { name: item.name.value, filetype: item.file.type || "application/octet-stream",
                  bucket: $("bucket").value || "default" },
      headers: token() ? { Authorization: `Bearer ${token()}` } : {},
      storeFingerprintForResuming: false,
      onProgress: (sent, total) => progressed(item, sent, total),
      onChunkComplete: () => { item.attempts = 0; },
      onAfterResponse: (_req, res) => {
        const id = res.getHeader("Blobledger-Document");
        if (id) item.documentId = id;
      },
      onSuccess: () => finished(item, item.documentId),
      onError: (err) => {
        const res = err.originalResponse;
        let problem = null;
        if (res) {
          try { problem = JSON.parse(res.getBody()); } catch (_) { problem = null; }
        }
        answerFailed(item, res ? res.getStatus() : 0, problem,
                     res ? res.getHeader("Retry-After") : null, err.message);
      },
    });
  }
  setStatus(item, "uploading", "Starting…");
  item.upload.start();
}

function startXhr(item) {
  setStatus(item, "uploading", "Starting…");
  sendXhr(item);
}

function sendXhr(item) {
  if (item.keyName !== item.name.value) {  // a key names one request: a new name, a new key
    item.key = crypto.randomUUID();
    item.keyName = item.name.value;
  }
  const xhr = new XMLHttpRequest();
  item.xhr = xhr;
  const query = new URLSearchParams({ name: item.name.value });
  xhr.open("POST", `${bucketPath()}?${query}`);
  const t = token();
  if (t) xhr.setRequestHeader("Authorization", `Bearer ${t}`);
  xhr.setRequestHeader("Content-Type", item.file.type || "application/octet-stream");
  xhr.setRequestHeader("Idempotency-Key", item.key);
  xhr.upload.onprogress = (e) => progressed(item, e.loaded, e.total || item.file.size);
  xhr.onload = () => {
    item.xhr = null;
    let body = null;
    try { body = JSON.parse(xhr.responseText); } catch (_) { body = null; }
    if (xhr.status === 201 && body) finished(item, body.id);
    else answerFailed(item, xhr.status, body, xhr.getResponseHeader("Retry-After"), null);
  };
  xhr.onerror = () => { item.xhr = null; answerFailed(item, 0, null, null, null); };
  xhr.send(item.file);
}

window.addEventListener("online", () => {
  for (const item of items) if (item.status === "failed" && item.network) start(item);
});

// -- operations ------------------------------------------------------------------------------

function summary(target, data, fields) {
  const dl = $(target);
  if (!data) { dl.replaceChildren(el("dt", "none yet"), el("dd", "(in this process)")); return; }
  const nodes = [el("dt", "ended"), el("dd", new Date(data.at * 1000).toISOString().replace("T", " ").replace(/\..*/, " UTC"))];
  for (const [key, label] of fields) {
    if (data[key] === undefined || data[key] === null) continue;
    nodes.push(el("dt", label), el("dd", data[key]));
  }
  dl.replaceChildren(...nodes);
}

function barChart(target, bars) {
  const w = 320; const h = 120; const pad = 18;
  const max = Math.max(1, ...bars.map((b) => b.count));
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "pending intents by age" });
  const bw = (w - 10) / bars.length;
  bars.forEach((b, i) => {
    const bh = ((h - 2 * pad) * b.count) / max;
    root.append(svg("rect", { class: "bar", x: 5 + i * bw + 4, y: h - pad - bh, width: bw - 8, height: bh }));
    const label = svg("text", { x: 5 + i * bw + bw / 2, y: h - 4, "text-anchor": "middle" });
    label.textContent = b.age;
    const count = svg("text", { x: 5 + i * bw + bw / 2, y: h - pad - bh - 3, "text-anchor": "middle" });
    count.textContent = String(b.count);
    root.append(label, count);
  });
  $(target).replaceChildren(root);
}

function lineChart(title, points, key) {
  const w = 300; const h = 90; const pad = 6;
  const box = el("div", null, "chart");
  box.dataset.series = key;
  const values = points.map((p) => p[key]);
  const last = values.length ? values[values.length - 1] : 0;
  box.append(el("h4", `${title}: ${last}`));
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": title });
  root.append(svg("line", { class: "axis", x1: 0, y1: h - pad, x2: w, y2: h - pad }));
  if (points.length > 1) {
    const t0 = points[0].t; const t1 = points[points.length - 1].t;
    const lo = Math.min(...values); const hi = Math.max(lo + 1, ...values);
    const xy = points.map((p) => [((p.t - t0) / Math.max(t1 - t0, 1)) * w,
                                  h - pad - ((p[key] - lo) / (hi - lo)) * (h - 2 * pad)]);
    root.append(svg("polyline", { class: "line", points: xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }));
  }
  box.append(root);
  return box;
}

const TITLES = { creates: "Documents created", sweeps: "Sweeps", guard_refusals: "Guard refusals",
                 errors: "Errors (5xx, failed sweeps and steps)" };

async function loadOps() {
  const load = ++state.opsLoads;  // only the latest load may speak: answers can cross
  let ops;
  let history;
  try {
    [ops, history] = await Promise.all([api("GET", "/ops/overview"), api("GET", "/ops/metrics")]);
  } catch (err) {
    if (load !== state.opsLoads) return;
    if (err.status !== 401) {
      say("operations", `Could not load the operations view: ${err.message}`, true);
      state.opsFailed = true;
    }
    return;
  }
  if (load !== state.opsLoads) return;
  if (state.opsFailed) { say("operations", ""); state.opsFailed = false; }
  $("ops-time").textContent = `as of ${when(ops.now)}`;
  $("pending-count").textContent = `(${ops.pending.count})`;
  $("deleting-count").textContent = `(${ops.deleting.count})`;
  barChart("pending-chart", ops.pending.by_age);
  $("pending-rows").replaceChildren(...ops.pending.oldest.map((r) => {
    const tr = el("tr");
    tr.append(wrapping("td", r.document_name || r.document_id, "name"), el("td", r.kind),
              el("td", age(r.age_seconds)), el("td", r.lease_expired ? "expired" : "held"));
    return tr;
  }));
  $("deleting-rows").replaceChildren(...ops.deleting.oldest.map((r) => {
    const tr = el("tr");
    tr.append(wrapping("td", r.blob, "name mono"),
              wrapping("td", r.document_name || r.document_id, "name"),
              el("td", age(r.age_seconds)));
    return tr;
  }));
  const workers = ops.workers || [];
  $("workers-none").hidden = workers.length > 0;
  $("worker-rows").replaceChildren(...workers.map((w) => {
    const tr = el("tr");
    tr.title = w.problem || w.last_error || "";
    tr.append(el("td", w.name), el("td", w.state, w.state === "running" ? "ok" : "bad"),
              el("td", String(w.restarts)),
              el("td", w.seconds_since_success === null ? "never" : `${age(w.seconds_since_success)} ago`));
    return tr;
  }));
  summary("sweep-summary", ops.sweep, [
    ["claimed", "claimed"], ["swept", "swept"], ["rolled_forward", "rolled forward"],
    ["moved_to_deleting", "moved to deleting"], ["deleted", "deleted"], ["absent", "absent"],
    ["refused", "guard refusals"], ["errors", "errors"], ["seconds", "seconds"], ["aborted", "aborted"]]);
  summary("reconcile-summary", ops.reconcile, [
    ["blobs", "blobs"], ["rows", "rows"], ["orphan", "orphans"], ["missing", "missing"],
    ["missing_ready", "missing (ready)"], ["mismatch", "mismatches"], ["awaiting_deletion", "awaiting deletion"],
    ["uncommitted", "uncommitted"], ["errors", "errors"], ["seconds", "seconds"]]);
  $("charts").replaceChildren(...history.series.map((key) => lineChart(TITLES[key] || key, history.points, key)));
}

async function runCheck() {
  const out = $("check-result");
  out.replaceChildren(el("p", "Checking…"));
  try {
    const settled = $("check-settled").checked ? "?settled=true" : "";
    const report = await api("POST", `/ops/check${settled}`);
    const head = el("p", report.ok ? "No violations." : `${report.violations.length} violation(s)`,
                    report.ok ? "ok" : "bad");
    head.id = "check-verdict";
    const facts = el("p", `${report.ready_documents} ready, ${report.pending_documents} pending, `
      + `${report.stored_blobs} stored blobs (${report.orphan_blobs} without a row)`, "note");
    const list = el("ul");
    for (const v of report.violations) list.append(el("li", `${v.invariant} ${v.subject}: ${v.detail}`));
    out.replaceChildren(head, facts, list);
  } catch (err) {
    out.replaceChildren(el("p", `The check could not run: ${err.message}`, "bad"));
  }
}

async function runReconcile() {
  try {
    await api("POST", "/ops/reconcile");
    await loadOps();
  } catch (err) {
    say("operations", `Reconcile could not run: ${err.message}`, true);
  }
}

async function runDoctor() {
  $("doctor-verdict").textContent = "Probing the store…";
  try {
    const report = await api("POST", "/ops/doctor");
    $("doctor-rows").replaceChildren(...report.checks.map((c) => {
      const tr = el("tr");
      tr.append(el("td", c.name), el("td", c.must ? "yes" : "no"),
                el("td", c.status.toUpperCase(), c.failed ? "bad" : ""), el("td", c.detail));
      return tr;
    }));
    $("doctor-verdict").textContent = report.ok ? `${report.store}: all must-have checks passed`
                                                : `${report.store}: a must-have check failed`;
    $("doctor-verdict").className = report.ok ? "ok" : "bad";
  } catch (err) {
    $("doctor-verdict").textContent = `The doctor could not run: ${err.message}`;
    $("doctor-verdict").className = "bad";
  }
}

// -- wiring ----------------------------------------------------------------------------------

function wire() {
  $("token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    $("token-input").value = "";
    say(null, "");
    await boot();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    window.location.reload();
  });
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.cursors = [null];
    state.page = 0;
    loadPage();
  });
  $("limit").addEventListener("change", () => { state.cursors = [null]; state.page = 0; loadPage(); });
  $("bucket").addEventListener("change", () => { state.cursors = [null]; state.page = 0; loadPage(); });
  $("next-page").addEventListener("click", () => {
    if (!state.next) return;
    state.cursors[state.page + 1] = state.next;
    state.page += 1;
    loadPage();
  });
  $("prev-page").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); loadPage(); });
  $("first-page").addEventListener("click", () => { state.page = 0; loadPage(); });
  $("replace-file").addEventListener("change", () => {
    const file = $("replace-file").files[0];
    const doc = state.replacing;
    $("replace-file").value = "";
    if (file && doc) replaceDoc(doc, file);
  });
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    addFiles(e.dataTransfer.files);
  });
  $("pick").addEventListener("change", () => { addFiles($("pick").files); $("pick").value = ""; });
  $("start-all").addEventListener("click", () => items.forEach((i) => { if (i.status === "queued") start(i); }));
  $("clear-done").addEventListener("click", () => items.filter((i) => i.status === "done").forEach(removeItem));
  $("ops-refresh").addEventListener("click", loadOps);
  $("run-check").addEventListener("click", runCheck);
  $("run-reconcile").addEventListener("click", runReconcile);
  $("run-doctor").addEventListener("click", runDoctor);
  pipeline.wire();
  window.addEventListener("hashchange", () => show(window.location.hash.slice(1)));
}

async function boot() {
  try {
    if (!(await whoami())) return;
  } catch (err) {
    say(null, `The service did not answer: ${err.message}`, true);
    return;
  }
  await Promise.all([detectTus(), pipeline.configure(), loadBuckets()]);
  show(window.location.hash.slice(1));
  document.body.dataset.ready = "true";
}

wire();
boot();
