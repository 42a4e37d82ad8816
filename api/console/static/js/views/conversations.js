// The tenant's conversations, newest first (or oldest), filtered by
// metadata, archived state and time, a page at a time with the listing's
// cursors. The filters live in the address (#/conversations/<query>), so a
// view can be bookmarked or shared — never the key.

import { getJson } from "../api.js";
import { badge, field, h, options, replace, route, when } from "../dom.js";

const PAGE_SIZES = ["25", "50", "100", "200"];

// A datetime-local value as RFC 3339 in UTC, or "" (the listing wants a zone).
function instant(local) {
  if (!local) return "";
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

function filterForm(filters, onApply) {
  const metadata = h("input", {
    id: "filter-metadata",
    placeholder: '{"project": "billing"}',
    value: filters.get("metadata") || "",
    size: 28,
  });
  const archived = h(
    "select",
    { id: "filter-archived" },
    options([["", "any"], ["false", "not archived"], ["true", "archived"]], filters.get("archived") || ""),
  );
  const from = h("input", { id: "filter-from", type: "datetime-local", value: filters.get("from_local") || "" });
  const to = h("input", { id: "filter-to", type: "datetime-local", value: filters.get("to_local") || "" });
  const order = h(
    "select",
    { id: "filter-order" },
    options([["newest", "newest first"], ["oldest", "oldest first"]], filters.get("order") || "newest"),
  );
  const size = h("select", { id: "filter-limit" }, options(PAGE_SIZES.map((n) => [n]), filters.get("limit") || "50"));
  const form = h(
    "form",
    { class: "filters", id: "conversation-filters" },
    field("metadata contains (JSON)", metadata),
    field("archived", archived),
    field("created from", from),
    field("created before", to),
    field("order", order),
    field("page size", size),
    h("button", { type: "submit", class: "primary" }, "Apply"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    const set = (name, value) => value && chosen.set(name, value);
    set("metadata", metadata.value.trim());
    set("archived", archived.value);
    set("from_local", from.value);
    set("to_local", to.value);
    set("order", order.value === "newest" ? "" : order.value);
    set("limit", size.value === "50" ? "" : size.value);
    onApply(chosen);
  });
  return form;
}

function row(conversation) {
  const metadata = JSON.stringify(conversation.metadata || {});
  return h(
    "tr",
    { dataset: { conversation: conversation.id } },
    h("td", { class: "mono" }, h("a", { href: route("c", conversation.id) }, conversation.id)),
    h("td", {}, when(conversation.started_at)),
    h("td", {}, when(conversation.updated_at)),
    h("td", {}, String(conversation.next_seq - 1)),
    h("td", {}, String(conversation.current_batch)),
    h("td", {}, conversation.archived ? badge("archived", "archived") : ""),
    h("td", { class: "mono" }, metadata === "{}" ? "" : metadata),
  );
}

export async function showConversations(page, filters) {
  const query = {
    metadata: filters.get("metadata"),
    archived: filters.get("archived"),
    created_from: instant(filters.get("from_local")),
    created_to: instant(filters.get("to_local")),
    order: filters.get("order") || "newest",
    limit: filters.get("limit") || "50",
  };
  const body = h("tbody", { id: "conversations" });
  const position = h("span", { class: "muted" });
  const previous = h("button", { type: "button", id: "previous-page" }, "← Previous");
  const next = h("button", { type: "button", id: "next-page" }, "Next →");
  // Cursors of the pages shown so far: the first page's is null.
  const cursors = [null];

  async function load() {
    const cursor = cursors[cursors.length - 1];
    const listing = await getJson("/conversations", { ...query, cursor });
    replace(body, listing.items.map(row));
    if (!listing.items.length) {
      replace(body, h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No conversations match.")));
    }
    previous.disabled = cursors.length === 1;
    next.disabled = !listing.next_cursor;
    next.dataset.cursor = listing.next_cursor || "";
    position.textContent = `page ${cursors.length}`;
  }

  previous.addEventListener("click", () => {
    cursors.pop();
    load().catch(page.failed);
  });
  next.addEventListener("click", () => {
    cursors.push(next.dataset.cursor);
    load().catch(page.failed);
  });

  replace(
    page.view,
    h("h1", {}, "Conversations"),
    filterForm(filters, (chosen) => {
      location.hash = `#/conversations/${chosen.toString()}`;
    }),
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h("tr", {}, ["id", "started", "last written", "messages", "batch", "", "metadata"].map((name) => h("th", {}, name))),
      ),
      body,
    ),
    h("div", { class: "pager" }, previous, position, next),
  );
  await load();
}
