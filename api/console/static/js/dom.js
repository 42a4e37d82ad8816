// Building the page from data without ever parsing it as HTML: every string
// becomes a text node, attributes are set one by one, and a link's target
// must be one of the console's own (#/...) routes.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "on") {
      for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    } else if (name === "href") element.setAttribute("href", internalHref(value));
    else if (name.startsWith("on")) throw new Error(`event handlers go in {on: ...}, not ${name}`);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function internalHref(value) {
  const text = String(value);
  if (!text.startsWith("#/")) throw new Error(`not a console link: ${text}`);
  return text;
}

function append(element, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

// A route link: "#/c/<id>" with each part encoded.
export function route(...parts) {
  return "#/" + parts.map((part) => encodeURIComponent(String(part))).join("/");
}

export function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

// A labelled form field.
export function field(label, control) {
  return h("label", {}, label, control);
}

export function options(values, selected) {
  return values.map(([value, label]) =>
    h("option", { value, selected: value === selected }, label ?? value),
  );
}

// Text with the [start, end) ranges marked. The API counts characters as
// Python does (code points), so the text is cut by code points, not by
// JavaScript's UTF-16 units.
export function highlighted(text, ranges) {
  const chars = Array.from(text);
  const cut = (start, end) => chars.slice(start, end).join("");
  const nodes = [];
  let at = 0;
  for (const [start, end] of [...ranges].sort((a, b) => a[0] - b[0])) {
    if (start < at || end <= start) continue;
    nodes.push(cut(at, start), h("mark", {}, cut(start, end)));
    at = end;
  }
  nodes.push(cut(at));
  return nodes.filter((node) => node !== "");
}
