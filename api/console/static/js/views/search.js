// Search across the tenant's conversations (GET /messages/search): words in
// any language (mode=text) or the characters as typed (mode=substring),
// newest first, each hit's snippet with the API's highlights marked.

import { getJson } from "../api.js";
import { badge, field, h, highlighted, options, replace, route, when } from "../dom.js";

const ROLES = ["", "system", "user", "assistant", "tool"];

function hitRow(hit) {
  return h(
    "div",
    { class: "hit", dataset: { conversation: hit.conversation_id, seq: hit.seq } },
    h(
      "div",
      { class: "meta muted" },
      h("a", { href: route("c", hit.conversation_id), class: "mono" }, hit.conversation_id),
      ` #${hit.seq} · `,
      badge(hit.role),
      ` ${hit.agent_id} · ${hit.kind} · batch ${hit.batch} · ${when(hit.recorded_at)}`,
      hit.edited ? badge("edited", "pending") : null,
    ),
    h("div", { class: "snippet" }, highlighted(hit.snippet, hit.highlights)),
  );
}

export async function showSearch(page, params) {
  const q = h("input", { id: "search-q", type: "search", value: params.get("q") || "", size: 40, placeholder: "deploy failed, 北京…" });
  const mode = h(
    "select",
    { id: "search-mode" },
    options([["text", "words"], ["substring", "characters as typed"]], params.get("mode") || "text"),
  );
  const role = h("select", { id: "search-role" }, options(ROLES.map((r) => [r, r || "any"]), params.get("role") || ""));
  const conversation = h("input", { id: "search-conversation", value: params.get("conversation_id") || "", placeholder: "any", size: 16 });
  const results = h("div", { id: "search-results" });
  const more = h("button", { type: "button", id: "more-hits", hidden: true }, "More results");
  const form = h(
    "form",
    { class: "filters", id: "search-form" },
    field("search", q),
    field("match", mode),
    field("role", role),
    field("conversation", conversation),
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const [name, value] of [["q", q.value.trim()], ["mode", mode.value], ["role", role.value], ["conversation_id", conversation.value.trim()]]) {
      if (value) chosen.set(name, value);
    }
    location.hash = `#/search/${chosen.toString()}`;
  });
  replace(page.view, h("h1", {}, "Search"), form, results, more);
  q.focus();
  const query = params.get("q");
  if (!query) return;

  let cursor = null;
  let count = 0;
  async function fetchPage() {
    const answer = await getJson("/messages/search", {
      q: query,
      mode: params.get("mode") || "text",
      role: params.get("role"),
      conversation_id: params.get("conversation_id"),
      cursor,
    });
    count += answer.hits.length;
    results.append(...answer.hits.map(hitRow));
    cursor = answer.next_cursor;
    more.hidden = !cursor;
    results.dataset.count = String(count);
    if (!count) replace(results, h("p", { class: "muted", id: "no-hits" }, "Nothing found."));
  }
  more.addEventListener("click", () => fetchPage().catch(page.failed));
  await fetchPage();
}
