// The console's shell: sign-in, who is signed in, and the routes.
//
//   #/conversations      the tenant's conversations (views/conversations.js)
//   #/c/<id>             one conversation's timeline (views/conversation.js)
//   #/c/<id>/payload     its payload preview (views/payload.js)
//   #/search             search across the tenant (views/search.js)

import { ApiError, describeKey, forgetKey, keepKey, storedKey } from "./api.js";
import { h, replace } from "./dom.js";
import { showConversations } from "./views/conversations.js";
import { showConversation } from "./views/conversation.js";
import { showPayload } from "./views/payload.js";
import { showSearch } from "./views/search.js";

const view = document.getElementById("view");
const statusLine = document.getElementById("status");
// What the signed-in key allows (GET /me), or null.
let identity = null;
// Aborted when the page changes: live tails and slow reads stop.
let leaving = new AbortController();

export function say(text, kind = "error") {
  statusLine.hidden = !text;
  statusLine.className = kind;
  statusLine.textContent = text || "";
}

export function failed(error) {
  if (error.name === "AbortError") return;
  if (error instanceof ApiError && error.status === 401) {
    signOut("The key is no longer valid: sign in again.");
    return;
  }
  const problem = error instanceof ApiError ? error.problem : null;
  say(problem ? `${problem.title}: ${problem.detail}` : String(error.message || error));
}

function showIdentity() {
  const signedIn = identity !== null;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("identity").hidden = !signedIn;
  if (!signedIn) return;
  document.getElementById("tenant").textContent = identity.tenant;
  const scope = document.getElementById("scope");
  scope.textContent = identity.read_only ? "read-only" : "read-write";
  scope.className = `badge ${identity.scope}`;
  document.getElementById("expiry").textContent = identity.expires_at
    ? `expires ${new Date(identity.expires_at).toLocaleString()}`
    : "";
}

// Forgets the key. The page stays where it was, so signing in again returns there.
function signOut(reason) {
  forgetKey();
  identity = null;
  leaving.abort();
  showIdentity();
  showSignIn(reason);
}

function showSignIn(reason) {
  const input = h("input", {
    type: "password",
    id: "key",
    name: "key",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "cs_…",
    required: true,
  });
  const form = h(
    "form",
    { class: "signin", id: "sign-in" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "An API key of your tenant (convo keys create --read-only …)."),
    h("label", { for: "key" }, "API key"),
    input,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    keepKey(input.value.trim());
    try {
      identity = await describeKey();
    } catch (error) {
      forgetKey();
      say(error instanceof ApiError && error.status === 401 ? "That key is unknown, revoked or expired." : String(error.message));
      return;
    }
    say("");
    showIdentity();
    if (!location.hash || location.hash === "#/") location.hash = "#/conversations";
    else render();
  });
  replace(view, form);
  say(reason || "", "info");
  input.focus();
}

async function render() {
  leaving.abort();
  leaving = new AbortController();
  if (identity === null) return;
  // "#/c/<id>/payload" (each part encoded), or "#/search/<query string>".
  const [head, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const id = rest.length ? decodeURIComponent(rest[0]) : "";
  const page = { view, identity, signal: leaving.signal, say, failed };
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", location.hash.startsWith(link.getAttribute("href")));
  }
  say("");
  try {
    if (head === "c" && id && rest[1] === "payload") await showPayload(page, id);
    else if (head === "c" && id) await showConversation(page, id);
    else if (head === "search") await showSearch(page, new URLSearchParams(rest.join("/")));
    else await showConversations(page, new URLSearchParams(rest.join("/")));
  } catch (error) {
    failed(error);
  }
}

async function start() {
  document.getElementById("sign-out").addEventListener("click", () => {
    history.replaceState(null, "", location.pathname);
    signOut("Signed out.");
  });
  window.addEventListener("hashchange", render);
  if (!storedKey()) {
    showSignIn();
    return;
  }
  try {
    identity = await describeKey();
  } catch (error) {
    forgetKey();
    showSignIn(error instanceof ApiError && error.status === 401 ? "The key is no longer valid: sign in again." : String(error.message));
    return;
  }
  showIdentity();
  await render();
}

start();
