// The pipeline view and the documents' thumbnails, over /ops/pipeline, /ops/events,
// /ops/held and the variants' route: the latest events and the dead ones (with Replay), the
// signed-in writer's own held and rejected documents with each processor's state, and a
// thumbnail (a configured variant) beside each image in the list. A thumbnail is fetched
// with the token in the Authorization header and shown from a blob: URL (never a URL that
// carries the token). Every value from the service is set as text.

// raster types the service makes variants of (anything else gets no thumbnail)
const RASTER = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp",
                        "image/tiff"]);
const STATES = ["pending", "delivered", "dead"];

export function pipelineView(kit) {
  const { $, el, api, say, can, wrapping, when, age, authHeaders } = kit;
  const view = { settings: null, loads: 0, failed: false, urls: [] };

  // the variant a thumbnail shows: the one named "thumb", else the smallest box
  function thumbVariant() {
    const variants = (view.settings && view.settings.variants) || [];
    if (!variants.length) return null;
    const named = variants.find((v) => v.name === "thumb");
    if (named) return named;
    return [...variants].sort((a, b) => a.width * a.height - b.width * b.height)[0];
  }

  async function configure() {
    try {
      view.settings = await api("GET", "/ops/pipeline");
    } catch (_) {
      view.settings = null;  // a service without the pipeline routes: no thumbnails
    }
  }

  // the object URLs of the last list's thumbnails, released when the list is drawn again
  function releaseThumbnails() {
    for (const url of view.urls) URL.revokeObjectURL(url);
    view.urls = [];
  }

  function thumbnail(doc) {
    const variant = thumbVariant();
    const essence = String(doc.content_type || "").split(";")[0].trim().toLowerCase();
    if (!variant || !RASTER.has(essence)) return null;
    const img = el("img", null, "thumb");
    img.alt = `${variant.name} of ${doc.name}`;
    img.width = Math.min(variant.width, 64);
    img.dataset.variant = variant.name;
    img.dataset.state = "loading";
    const path = `/documents/${encodeURIComponent(doc.id)}/variants/${encodeURIComponent(variant.name)}`;
    fetch(path, { headers: authHeaders(), cache: "no-store" }).then(async (response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const url = URL.createObjectURL(await response.blob());
      view.urls.push(url);
      img.addEventListener("load", () => { img.dataset.state = "shown"; }, { once: true });
      img.src = url;
    }).catch((err) => {
      img.dataset.state = "failed";
      img.title = `no ${variant.name}: ${err.message}`;
      img.hidden = true;
    });
    return img;
  }

  function documentOf(event) {
    const data = event.data || {};
    return data.name || data.filename || event.subject || "";
  }

  function eventRow(event, withReplay) {
    const tr = el("tr");
    tr.dataset.id = event.id;
    tr.dataset.state = event.state;
    tr.append(el("td", event.seq, "num"), el("td", event.type, "mono"),
              wrapping("td", documentOf(event), "name"),
              el("td", event.state, event.state === "dead" ? "bad" : event.state === "delivered" ? "ok" : ""),
              el("td", event.attempts, "num"), el("td", when(event.created_at)));
    const error = wrapping("td", event.last_error || "", "error-text");
    tr.append(error);
    if (withReplay) {
      const cell = el("td", null, "actions");
      if (can("write")) {
        const button = el("button", "Replay");
        button.type = "button";
        button.addEventListener("click", () => replay(event));
        cell.append(button);
      }
      tr.append(cell);
    }
    return tr;
  }

  function processorsCell(processors) {
    const cell = el("td", null, "processors");
    const entries = Object.entries(processors || {});
    if (!entries.length) cell.textContent = "none";
    for (const [name, verdict] of entries) {
      const item = el("span", `${name}: ${verdict}`,
                      `verdict ${verdict === "rejected" ? "bad" : verdict === "accepted" ? "ok" : ""}`);
      item.dataset.processor = name;
      item.dataset.verdict = verdict;
      cell.append(item);
    }
    return cell;
  }

  function heldRow(doc) {
    const tr = el("tr");
    tr.dataset.id = doc.id;
    tr.dataset.status = doc.status;
    tr.append(wrapping("td", doc.name, "name"), el("td", doc.version, "num"),
              el("td", doc.status, doc.status === "rejected" ? "bad" : ""),
              processorsCell(doc.processors), wrapping("td", doc.reason || "", "error-text"));
    return tr;
  }

  function summary(settings) {
    const q = settings.events;
    const nodes = [];
    const add = (label, value) => nodes.push(el("dt", label), el("dd", value));
    for (const s of STATES) add(s, String(q[s] || 0));
    add("oldest pending", q.lag_seconds === null ? "none" : age(q.lag_seconds));
    add("webhook targets", settings.webhook_targets ? String(settings.webhook_targets) : "none (events are kept, not sent)");
    add("held now", String(settings.held.count));
    add("processors", settings.processors.length ? settings.processors.join(", ") : "none");
    add("hold", settings.hold + (settings.hold_prefixes.length ? ` (and under ${settings.hold_prefixes.join(", ")})` : ""));
    add("variants", settings.variants.length
      ? settings.variants.map((v) => `${v.name} ${v.width}x${v.height}`).join(", ") : "none");
    $("pipeline-summary").replaceChildren(...nodes);
  }

  async function load() {
    const ticket = ++view.loads;  // only the latest load may speak: answers can cross
    const state = $("event-state").value;
    const latest = new URLSearchParams({ limit: "25" });
    if (state) latest.set("state", state);
    let settings; let dead; let recent; let held;
    try {
      [settings, dead, recent, held] = await Promise.all([
        api("GET", "/ops/pipeline"), api("GET", "/ops/events?state=dead&limit=50"),
        api("GET", `/ops/events?${latest}`), api("GET", "/ops/held")]);
    } catch (err) {
      if (ticket !== view.loads) return;
      if (err.status !== 401) {
        say("pipeline", `Could not load the pipeline view: ${err.message}`, true);
        view.failed = true;
      }
      return;
    }
    if (ticket !== view.loads) return;
    if (view.failed) { say("pipeline", ""); view.failed = false; }
    view.settings = settings;
    summary(settings);
    $("dead-count").textContent = `(${settings.events.dead})`;
    $("dead-rows").replaceChildren(...dead.items.map((e) => eventRow(e, true)));
    $("dead-none").hidden = dead.items.length > 0;
    $("event-rows").replaceChildren(...recent.items.map((e) => eventRow(e, false)));
    $("events-none").hidden = recent.items.length > 0;
    $("held-count").textContent = `(${held.items.length})`;
    $("held-rows").replaceChildren(...held.items.map(heldRow));
    $("held-none").hidden = held.items.length > 0;
  }

  async function replay(event) {
    try {
      await api("POST", `/ops/events/${encodeURIComponent(event.id)}/replay`);
      say("pipeline", `Replayed ${event.id}: it is sent again to every target.`);
    } catch (err) {
      say("pipeline", `Could not replay ${event.id}: ${err.message}`, true);
    }
    await load();
  }

  function wire() {
    $("pipeline-refresh").addEventListener("click", load);
    $("event-state").addEventListener("change", load);
  }

  return { configure, load, thumbnail, releaseThumbnails, wire };
}
