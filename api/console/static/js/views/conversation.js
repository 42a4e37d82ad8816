// One conversation: its timeline by seq a page at a time (the listing's
// keyset cursors, so the 100,000th message costs what the first does), its
// batches and compaction summaries, its tool blocks, a live tail of what
// is appended while it is open, and its export as JSON Lines.

import { download, getJson, send, streamEvents } from "../api.js";
import { badge, field, h, options, replace, route, when } from "../dom.js";
import { messageCard } from "./message.js";

const PAGE = 100;
// How long the live tail waits before connecting again after a break.
const RECONNECT_MS = 2_000;
// Tool blocks shown at most: the table is for reading, the export has them all.
const MAX_TOOL_BLOCK_ROWS = 500;
const ROLES = ["", "system", "user", "assistant", "tool"];
const KINDS = ["", "input", "output", "reminder", "summary"];
const path = (id, ...rest) => ["/conversations", encodeURIComponent(id), ...rest].join("/");

function header(conversation, identity, actions) {
  return h(
    "div",
    { class: "toolbar" },
    h("h1", { id: "conversation-id" }, conversation.id),
    conversation.archived ? badge("archived", "archived") : null,
    h(
      "span",
      { class: "muted", id: "conversation-facts" },
      `version ${conversation.version} · ${conversation.next_seq - 1} messages · batch ${conversation.current_batch} · started ${when(conversation.started_at)}`,
    ),
    Object.keys(conversation.metadata || {}).length
      ? h("span", { class: "mono" }, JSON.stringify(conversation.metadata))
      : null,
    h("a", { href: route("c", conversation.id, "payload"), id: "open-payload" }, "Payload preview"),
    actions.export,
    actions.live,
    identity.read_only ? null : actions.writes,
  );
}

function batchesSection(batches) {
  const items = batches.map((batch) =>
    h(
      "li",
      { dataset: { batch: batch.number } },
      h("strong", {}, `batch ${batch.number}`),
      ` ${batch.operation} from ${batch.boundary}`,
      batch.agent_id ? ` (agent ${batch.agent_id})` : "",
      batch.summary_seq ? h("span", {}, " · summary ", h("span", { class: "mono" }, `#${batch.summary_seq}`)) : "",
      batch.retained.length ? ` · keeps ${batch.retained.length}` : "",
      h("div", { class: "muted" }, when(batch.started_at)),
    ),
  );
  return h("section", { id: "batches" }, h("h2", {}, "Batches"), h("ol", {}, items));
}

function toolBlocksSection(id, signal, failed) {
  const pendingOnly = h("input", { type: "checkbox", id: "pending-only" });
  const body = h("div", { id: "tool-blocks" }, h("p", { class: "muted" }, "Not loaded."));
  const load = h("button", { type: "button", id: "load-tool-blocks" }, "Load");
  load.addEventListener("click", async () => {
    try {
      const blocks = await getJson(path(id, "tool-blocks"), { pending_only: pendingOnly.checked });
      const shown = blocks.slice(0, MAX_TOOL_BLOCK_ROWS);
      replace(
        body,
        h("p", { class: "muted" }, `${blocks.length} tool block(s)` + (blocks.length > shown.length ? `, the first ${shown.length} shown` : "")),
        h(
          "table",
          {},
          shown.map((block) =>
            h(
              "tr",
              { dataset: { call: block.call_id } },
              h("td", { class: "mono" }, block.tool_name),
              h("td", {}, badge(block.status, block.status), block.is_error ? badge("error", "error") : null),
              h("td", { class: "mono" }, `#${block.assistant_seq}` + (block.result_seq ? ` → #${block.result_seq}` : "")),
            ),
          ),
        ),
      );
    } catch (error) {
      if (!signal.aborted) failed(error);
    }
  });
  return h(
    "section",
    {},
    h("h2", {}, "Tool blocks"),
    h("div", { class: "toolbar" }, h("label", {}, pendingOnly, " pending only"), load),
    body,
  );
}

export async function showConversation(page, id) {
  const { identity, signal, failed, say } = page;
  const [conversation, batches] = await Promise.all([
    getJson(path(id)),
    getJson(path(id, "batches")),
  ]);
  const timeline = h("div", { id: "timeline" });
  const live = h("div", { id: "live" });
  const position = h("span", { class: "muted", id: "page-position" });
  const filters = {
    role: h("select", { id: "filter-role" }, options(ROLES.map((r) => [r, r || "any"]), "")),
    agent: h("input", { id: "filter-agent", placeholder: "any", size: 10 }),
    kind: h("select", { id: "filter-kind" }, options(KINDS.map((k) => [k, k || "any"]), "")),
    scope: h("select", { id: "filter-scope" }, options([["history", "whole history"], ["visible", "visible window"]], "history")),
  };
  const goTo = h("input", { id: "go-to-seq", type: "number", min: 1, placeholder: "seq", size: 8 });
  const buttons = {
    first: h("button", { type: "button", id: "first-page" }, "⇤ First"),
    previous: h("button", { type: "button", id: "previous-page" }, "← Previous"),
    next: h("button", { type: "button", id: "next-page" }, "Next →"),
    last: h("button", { type: "button", id: "last-page" }, "Last ⇥"),
  };
  let shown = [];

  function writeActions(message) {
    if (identity.read_only) return [];
    const pin = h("button", { type: "button", dataset: { write: "pin" } }, message.pinned ? "Unpin" : "Pin");
    pin.addEventListener("click", async () => {
      try {
        await send(message.pinned ? "DELETE" : "PUT", path(id, "messages", message.seq, "pin"));
        message.pinned = !message.pinned;
        pin.closest("article").replaceWith(messageCard(message, writeActions(message)));
      } catch (error) {
        failed(error);
      }
    });
    return [pin];
  }

  // Loads a page: `where` is {after}, {before} or {last: true}.
  async function load(where, scroll = true) {
    const descending = where.before !== undefined || where.last;
    const answer = await getJson(path(id, "messages"), {
      after_seq: where.after,
      before_seq: where.before,
      order: descending ? "desc" : "asc",
      limit: PAGE,
      role: filters.role.value,
      agent_id: filters.agent.value.trim(),
      kind: filters.kind.value,
      scope: filters.scope.value,
    });
    const items = descending ? [...answer.items].reverse() : answer.items;
    if (!items.length && !where.last && where.after !== 0) {
      say("No more messages that way.", "info");
      return;
    }
    say("");
    shown = items;
    replace(timeline, items.length ? items.map((m) => messageCard(m, writeActions(m))) : h("p", { class: "muted" }, "No messages match."));
    const atStart = where.after === 0 || (descending && answer.next_before_seq === null);
    const atEnd = where.last || (!descending && answer.next_after_seq === null);
    buttons.first.disabled = buttons.previous.disabled = atStart;
    buttons.next.disabled = buttons.last.disabled = atEnd;
    position.textContent = items.length ? `#${items[0].seq} – #${items[items.length - 1].seq}` : "";
    if (scroll) timeline.scrollIntoView({ block: "start" });
  }

  const reload = (where) => load(where).catch(failed);
  buttons.first.addEventListener("click", () => reload({ after: 0 }));
  buttons.last.addEventListener("click", () => reload({ last: true }));
  buttons.next.addEventListener("click", () => reload({ after: shown[shown.length - 1].seq }));
  buttons.previous.addEventListener("click", () => reload({ before: shown[0].seq }));
  const toolbar = h(
    "form",
    { class: "filters", id: "timeline-filters" },
    field("role", filters.role),
    field("agent", filters.agent),
    field("kind", filters.kind),
    field("scope", filters.scope),
    h("button", { type: "submit" }, "Apply"),
    field("go to seq", goTo),
  );
  toolbar.addEventListener("submit", (event) => {
    event.preventDefault();
    const seq = Number.parseInt(goTo.value, 10);
    reload({ after: Number.isFinite(seq) && seq > 0 ? seq - 1 : 0 });
  });
  goTo.addEventListener("change", () => toolbar.requestSubmit());

  const actions = {
    export: h("button", { type: "button", id: "export" }, "Export JSONL"),
    live: h("label", {}, h("input", { type: "checkbox", id: "live-tail" }), " Live tail"),
    writes: archiveAndDelete(conversation, failed),
  };
  actions.export.addEventListener("click", async () => {
    try {
      const bytes = await download(path(id, "export"), {}, `${id}.jsonl`);
      say(`Exported ${bytes} bytes.`, "info");
    } catch (error) {
      failed(error);
    }
  });
  actions.live.querySelector("input").addEventListener("change", (event) => {
    if (event.target.checked) tail(id, conversation, live, signal, event.target, failed);
    else event.target.dispatchEvent(new Event("stop"));
  });

  replace(
    page.view,
    header(conversation, identity, actions),
    h(
      "div",
      { class: "columns" },
      h(
        "div",
        {},
        toolbar,
        h("div", { class: "pager" }, buttons.first, buttons.previous, position, buttons.next, buttons.last),
        timeline,
        h("div", { class: "pager" }, h("span", { class: "muted", id: "live-state" }, "")),
        live,
      ),
      h("aside", {}, batchesSection(batches), toolBlocksSection(id, signal, failed)),
    ),
  );
  await load({ after: 0 }, false);
}

function archiveAndDelete(conversation, failed) {
  const id = conversation.id;
  const archive = h(
    "button",
    { type: "button", dataset: { write: "archive" } },
    conversation.archived ? "Unarchive" : "Archive",
  );
  archive.addEventListener("click", async () => {
    try {
      await send("POST", path(id, conversation.archived ? "unarchive" : "archive"));
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (error) {
      failed(error);
    }
  });
  const remove = h("button", { type: "button", class: "danger", dataset: { write: "delete" } }, "Delete…");
  remove.addEventListener("click", async () => {
    if (!window.confirm(`Delete conversation ${id}? Its content is purged; this cannot be undone.`)) return;
    try {
      await send("DELETE", path(id));
      location.hash = "#/conversations";
    } catch (error) {
      failed(error);
    }
  });
  return h("span", { class: "write-actions" }, archive, " ", remove);
}

// Follows the tenant's live feed (GET /events/stream, read with fetch so the
// key stays in a header) and, for each event of this conversation, shows
// the messages stored after the last one seen.
function tail(id, conversation, live, signal, toggle, failed) {
  const state = document.getElementById("live-state");
  const stop = new AbortController();
  signal.addEventListener("abort", () => stop.abort());
  toggle.addEventListener("stop", () => stop.abort(), { once: true });
  // After what the live list shows already (the tail may be turned off and on).
  let lastSeq = live.lastElementChild ? Number(live.lastElementChild.dataset.seq) : conversation.next_seq - 1;
  let reading = null;
  let again = false;

  async function catchUp() {
    if (reading) {
      again = true;
      return;
    }
    reading = (async () => {
      let more;
      do {
        again = false;
        const page = await getJson(path(id, "messages"), { after_seq: lastSeq, limit: PAGE });
        for (const message of page.items) {
          const card = messageCard(message);
          card.classList.add("live");
          live.append(card);
          lastSeq = message.seq;
        }
        more = page.next_after_seq !== null;
      } while ((again || more) && !stop.signal.aborted);
    })();
    try {
      await reading;
    } finally {
      reading = null;
    }
  }

  let revoked = false;
  const onEvent = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (message.event === "error") {
      revoked = true; // the key was revoked or expired: the stream ends, no retry
      failed(new Error(event.detail || "the live tail ended"));
      return;
    }
    if (event.conversation_id === id) catchUp().catch(failed);
  };
  const show = (text, name) => {
    state.textContent = text;
    state.dataset.state = name;
  };

  // Connects, and connects again a little later when the stream breaks off
  // (a server restart, a network blip); on each connection the messages
  // stored meanwhile are read by seq, so none is missed.
  async function follow() {
    for (let attempt = 0; !stop.signal.aborted && !revoked; attempt += 1) {
      show(attempt ? "reconnecting…" : "connecting…", "connecting");
      try {
        await streamEvents("/events/stream", { heartbeat: 15 }, onEvent, stop.signal, () => {
          show("live: new messages appear below", "listening");
          if (attempt) catchUp().catch(failed);
        });
      } catch (error) {
        if (stop.signal.aborted) break;
        if (error.status === 401 || error.status === 403) {
          failed(error);
          break;
        }
      }
      await new Promise((resume) => setTimeout(resume, RECONNECT_MS));
    }
    show(stop.signal.aborted ? "live tail off" : "the live tail ended", "ended");
  }
  follow();
}
