// The API of the server that serves the console, with the signed-in key.
//
// The key lives in this tab's sessionStorage (gone when the tab closes) and
// is sent as the X-API-Key header: never in a URL, so no log, history entry
// or Referer ever holds it. Errors are the API's problem details, thrown as
// ApiError so views can show their title and detail.

const KEY_STORAGE = "convo-store.console.key";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function keepKey(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
}

function headers(extra = {}) {
  const key = storedKey();
  return key ? { "X-API-Key": key, ...extra } : { ...extra };
}

// "/path" with the query's set values (undefined, null and "" left out).
export function url(path, query = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

async function problemOf(response) {
  try {
    return await response.json();
  } catch {
    return { title: response.statusText, status: response.status };
  }
}

// The response of `method path`, after checking it succeeded.
export async function send(method, path, { query, body, signal } = {}) {
  const init = { method, headers: headers(), signal, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url(path, query), init);
  if (!response.ok) throw new ApiError(response.status, await problemOf(response));
  return response;
}

export async function getJson(path, query) {
  return (await send("GET", path, { query })).json();
}

export async function postJson(path, body) {
  return (await send("POST", path, { body })).json();
}

// What the key allows: {tenant, scope, read_only, expires_at}.
export function describeKey() {
  return getJson("/me");
}

// Server-Sent Events read with fetch(), since EventSource cannot send the
// key's header. Calls onOpen() once the server answered (its resume point
// is fixed then), and onEvent({id, event, data}) for each message until
// `signal` aborts or the stream ends.
export async function streamEvents(path, query, onEvent, signal, onOpen = () => {}) {
  const response = await send("GET", path, { query, signal });
  onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message = { id: null, event: "message", data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") message.data += (message.data ? "\n" : "") + text;
        else if (field === "event") message.event = text;
        else if (field === "id") message.id = text;
      }
      if (message.data) onEvent(message);
    }
  }
}

// Save a response's body as a file, named `name`.
export async function download(path, query, name) {
  const response = await send("GET", path, { query });
  const blob = await response.blob();
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  return blob.size;
}
