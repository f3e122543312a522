// DOM building without HTML parsing: every piece of text becomes a text node, so anything a
// document says (titles, snippets, quotes, file names) is shown as text, never run as markup.
// Nothing in the UI assigns innerHTML.

/**
 * h("a", {href: "#/x", class: "c", onclick: fn}, "text", child, [more]) -> element.
 * Attributes are set with setAttribute (on* keys become event listeners); children are
 * nodes, strings (text nodes), arrays of either, or null/undefined/false (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function $(id) {
  return document.getElementById(id);
}

export function fmt(value, digits = 3) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "–";
}

export function shortId(id, length = 12) {
  return id && id.length > length ? `${id.slice(0, length)}…` : id || "";
}
