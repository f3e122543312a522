// "Search in this document": the search and answer views can be scoped to one document
// (#/search/<doc id>, #/answer/<doc id>; the plain #/search and #/answer search everything).
// The scope travels as the API's own filter (filters.doc_ids), so the service applies it with
// the key's tenant and ACL like any search; a document the key may not read finds nothing.

import { enc } from "./api.js";
import { $, clear, h } from "./dom.js";

//: view ("search" | "answer") -> the doc id it is scoped to, or "".
const scoped = { search: "", answer: "" };

/** The doc id ``view`` is scoped to ("" = every document). */
export function scopeOf(view) {
  return scoped[view] || "";
}

/** The request's ``filters`` for ``view``: only its document, when it has one. */
export function scopeFilters(view) {
  const docId = scopeOf(view);
  return docId ? { filters: { doc_ids: [docId] } } : {};
}

/** Where a link to "search in this document" goes. */
export function scopedHref(view, docId) {
  return `#/${view}/${enc(docId)}`;
}

/**
 * Scope ``view`` to ``docId`` ("" = everything) and say so above its results, with a link
 * back to every document; ``label`` names the document. Returns whether the scope changed.
 */
export function setScope(view, docId, label) {
  const changed = scoped[view] !== docId;
  scoped[view] = docId;
  const line = scopeLine(view);
  clear(line);
  line.hidden = !docId;
  if (docId) {
    line.append(
      "Only in ",
      h("strong", { class: "scope-name" }, label || docId),
      " · ",
      h("a", { href: `#/${view}`, class: "scope-clear" }, "search all documents"),
    );
  }
  return changed;
}

/** The line under ``view``'s form that names its scope (made once, beside the form). */
function scopeLine(view) {
  let line = $(`${view}-scope`);
  if (!line) {
    line = h("p", { id: `${view}-scope`, class: "scope", hidden: true });
    $(`${view}-form`).after(line);
  }
  return line;
}
