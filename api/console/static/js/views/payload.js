// The payload preview (POST /conversations/{id}/assemble): pick the format,
// the agent and where the special block goes, and see the exact request
// body an agent's next call would send, with its diagnostics — where the
// special block went, what was repaired, the token estimate and the
// stable prefix's fingerprint (what a provider's prompt cache keys on).

import { postJson } from "../api.js";
import { field, h, json, options, replace, route } from "../dom.js";

const FORMATS = ["openai-chat", "openai-responses", "anthropic", "gemini", "xml-tools"];
const POLICIES = ["after_tool_result", "before_assistant", "from_end", "after_system", "tail"];

function diagnosticsList(diagnostics) {
  const rows = [
    ["format", diagnostics.format],
    ["agent", diagnostics.agent_id],
    ["system prompt from", diagnostics.system_prompt_source ?? "none"],
    ["special block", json(diagnostics.special_block)],
    ["repairs", diagnostics.repairs.length ? json(diagnostics.repairs) : "none"],
    ["token estimate", String(diagnostics.token_estimate)],
    ["messages", String(diagnostics.message_count)],
    ["stable prefix", json(diagnostics.stable_prefix)],
    ["cache breakpoints", diagnostics.cache_breakpoints.join(", ") || "none"],
    ["dropped by budget", diagnostics.dropped_by_budget ? json(diagnostics.dropped_by_budget) : "none"],
  ];
  return h(
    "dl",
    { class: "diagnostics", id: "diagnostics" },
    rows.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { class: "mono", dataset: { name } }, value)]),
  );
}

export async function showPayload(page, id) {
  const format = h("select", { id: "payload-format" }, options(FORMATS.map((f) => [f])));
  const agent = h("input", { id: "payload-agent", value: "main", size: 12 });
  const policy = h("select", { id: "payload-policy" }, options(POLICIES.map((p) => [p])));
  const n = h("input", { id: "payload-n", type: "number", min: 1, value: 2, size: 4 });
  const repair = h("input", { id: "payload-repair", type: "checkbox", checked: true });
  const output = h("div", { id: "payload-output" });
  const form = h(
    "form",
    { class: "filters", id: "payload-form" },
    field("format", format),
    field("agent", agent),
    field("special block placement", policy),
    field("n (from_end)", n),
    h("label", {}, repair, " repair"),
    h("button", { type: "submit", class: "primary" }, "Assemble"),
  );
  async function assemble() {
    const options = { policy: policy.value, repair: repair.checked };
    if (policy.value === "from_end") options.n = Number.parseInt(n.value, 10) || 1;
    const assembled = await postJson(`/conversations/${encodeURIComponent(id)}/assemble`, {
      agent_id: agent.value.trim() || "main",
      format: format.value,
      options,
    });
    replace(
      output,
      h("h2", {}, "Diagnostics"),
      diagnosticsList(assembled.diagnostics),
      h("h2", {}, "Payload"),
      h("pre", { id: "payload", class: "mono" }, json(assembled.payload)),
    );
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    assemble().catch(page.failed);
  });
  replace(
    page.view,
    h("h1", {}, "Payload preview: ", h("a", { href: route("c", id) }, id)),
    form,
    output,
  );
  await assemble();
}
