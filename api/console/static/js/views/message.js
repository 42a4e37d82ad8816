// One stored message as a card: seq, role, agent, kind, batch, edits, pins,
// its text, tool calls and reasoning — every value put on the page as text.

import { badge, h, json, when } from "../dom.js";

function contentNodes(content) {
  if (typeof content === "string") return content ? [h("div", { class: "content" }, content)] : [];
  return (content || []).map((part) =>
    part.type === "text"
      ? h("div", { class: "content" }, part.text)
      : h("pre", { class: "content muted" }, `[${part.type}] ${json({ ...part, data: part.data ? "…" : undefined })}`),
  );
}

function toolCalls(message) {
  return (message.tool_calls || []).map((call) =>
    h(
      "div",
      { class: "tool-call mono" },
      `→ ${call.name}(${JSON.stringify(call.arguments)})`,
      h("span", { class: "muted" }, `  ${call.id}`),
    ),
  );
}

function reasoning(message) {
  return (message.reasoning || []).map((item) =>
    h(
      "details",
      {},
      h("summary", { class: "muted" }, `reasoning (${item.provider}${item.redacted ? ", redacted" : ""})`),
      h("div", { class: "content" }, item.text || item.data || ""),
    ),
  );
}

// `actions`: nodes for the card's corner (write actions; none for a read-only key).
export function messageCard(message, actions = []) {
  const meta = h(
    "div",
    { class: "meta" },
    h("strong", { class: "mono" }, `#${message.seq}`),
    badge(message.role),
    message.agent_id !== "main" ? badge(`agent ${message.agent_id}`) : h("span", {}, "agent main"),
    badge(message.kind),
    h("span", {}, `batch ${message.batch}`),
    message.edited ? badge("edited", "pending") : null,
    message.pinned ? badge("pinned", "complete") : null,
    message.is_error ? badge("error", "error") : null,
    message.tool_call_id ? h("span", { class: "mono" }, `result of ${message.tool_call_id}`) : null,
    h("span", {}, when(message.recorded_at)),
    actions.length ? h("span", { class: "actions" }, actions) : null,
  );
  return h(
    "article",
    {
      class: `message role-${message.role} kind-${message.kind}`,
      dataset: { seq: message.seq },
    },
    meta,
    contentNodes(message.content),
    toolCalls(message),
    reasoning(message),
  );
}
