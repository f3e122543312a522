// Search: query, route, results as page thumbnails with their evidence boxes, title and file
// name, snippet and route scores; a click opens the page large with the same boxes. Also the
// documents' names (title, file name) that hits, citations and the document list show.

import { api, API, enc } from "./api.js";
import { $, clear, fmt, h } from "./dom.js";
import { openViewer, pageFigure } from "./pages.js";
import { scopedHref, scopeFilters, scopeOf, setScope } from "./scope.js";

//: The routes when the schema cannot be read; otherwise they come from /openapi.json, so
//: routes added to the API appear here without a change to the UI.
const FALLBACK_ROUTES = ["auto", "text", "keyword", "visual", "hybrid", "agentic"];
const ROUTE_HELP = {
  auto: "auto (the service picks)",
  text: "text (dense)",
  keyword: "keyword (BM25)",
  visual: "visual (page images)",
  hybrid: "hybrid (text + visual)",
  agentic: "agentic (multi-step)",
};

//: doc id -> {title, file}, for hits and citations (refreshed with each search or answer).
let known = new Map();

export async function routeNames() {
  try {
    const response = await fetch(`${API.replace(/\/v1$/, "")}/openapi.json`);
    const names = (await response.json()).components.schemas.RouteName.enum;
    if (Array.isArray(names) && names.length) return names;
  } catch {
    // the fallback below
  }
  return FALLBACK_ROUTES;
}

export function fillRoutes(select, names) {
  clear(select).append(...names.map((n) => h("option", { value: n }, ROUTE_HELP[n] || n)));
  select.value = "auto";
}

/**
 * A document's file name: ``source_name`` where the API gives one, else the last segment of
 * its ``source_uri`` ("upload:report.pdf", "/data/in/report.pdf", "https://h/x/report.pdf?v=2").
 */
export function fileNameOf({ source_name: sourceName, source_uri: sourceUri } = {}) {
  if (sourceName) return sourceName;
  let uri = (sourceUri || "").replace(/^upload:/, "");
  const remote = /^[a-z][a-z0-9+.-]*:\/\//i.test(uri);
  if (remote) uri = uri.split(/[?#]/)[0];
  const name = uri.slice(Math.max(uri.lastIndexOf("/"), uri.lastIndexOf("\\")) + 1);
  if (!remote) return name;
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** Remember the title and file name of each of ``docs`` (the documents API's entries). */
export function rememberDocuments(docs) {
  known = new Map(docs.map((d) => [d.doc_id, { title: d.title || "", file: fileNameOf(d) }]));
}

/** doc id -> {title, file}, for hits and citations (refreshed with each search or answer). */
export async function documentTitles() {
  try {
    rememberDocuments((await api("/documents")).documents);
  } catch {
    // names stay as they were; what the hit or citation carries is shown instead
  }
  return known;
}

/**
 * {title, file} of a document: what a hit or citation carries (``title``, ``source_name`` or
 * ``source_uri``), else what the documents list said. Either may be "".
 */
export function namesOf(docId, given = {}) {
  const seen = known.get(docId) || {};
  const title = given.title || seen.title || "";
  const file = fileNameOf(given) || seen.file || "";
  return { title, file };
}

/** "Title — file.pdf" (one of them when the other is missing or the same); the id only when
 * neither is known. */
export function docLabel(docId, given = {}) {
  const { title, file } = namesOf(docId, given);
  if (title && file && title !== file) return `${title} — ${file}`;
  return title || file || docId;
}

/** The title and the file name next to it ("Title — file.pdf"), as nodes; the id only when
 * neither is known. */
export function docNameNodes(docId, given = {}) {
  const { title, file } = namesOf(docId, given);
  if (!title && !file) return [h("code", {}, docId)];
  if (!title || title === file) return [h("span", { class: "doc-title" }, title || file)];
  return [
    h("span", { class: "doc-title" }, title),
    h("span", { class: "file-name" }, ` — ${file}`),
  ];
}

/**
 * Open ``view`` ("search" or "answer") scoped to ``docId`` ("" = every document), naming the
 * document by its title and file; a search already typed runs again in the new scope.
 */
export async function enterScope(view, docId) {
  const label = docId ? docLabel(docId, {}) : "";
  const changed = setScope(view, docId, label);
  if (docId && label === docId) {
    await documentTitles(); // names it once the documents list is in
    setScope(view, docId, docLabel(docId, {}));
  }
  if (changed && view === "search" && $("search-query").value.trim()) runSearch();
}

export function initSearch() {
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
  });
}

async function runSearch() {
  const status = $("search-status");
  const results = clear($("search-results"));
  const query = $("search-query").value;
  const body = {
    query,
    route: $("search-route").value,
    top_k: Number($("search-topk").value) || 10,
    ...scopeFilters("search"),
  };
  status.textContent = "Searching…";
  results.setAttribute("aria-busy", "true");
  let found;
  try {
    [found] = await Promise.all([api("/search", { method: "POST", json: body }), documentTitles()]);
  } catch (error) {
    status.textContent = "";
    results.removeAttribute("aria-busy");
    results.append(h("li", { class: "error" }, `Search failed: ${error.describe()}`));
    return;
  }
  results.removeAttribute("aria-busy");
  clear(status).append(
    `${found.hits.length} page${found.hits.length === 1 ? "" : "s"} · route ${found.route} · `,
    `${found.elapsed_ms.toFixed(0)} ms · `,
    h("a", { href: `#/trace/${enc(found.trace_id)}` }, "trace"),
  );
  if (!found.hits.length) results.append(h("li", {}, "Nothing matched."));
  for (const hit of found.hits) results.append(hitItem(hit));
}

function hitItem(hit) {
  const given = { title: hit.title, source_name: hit.source_name, source_uri: hit.source_uri };
  const label = `${docLabel(hit.doc_id, given)}, page ${hit.page_number}`;
  const open = () =>
    openViewer({
      docId: hit.doc_id,
      page: hit.page_number,
      boxes: hit.evidence,
      title: label,
      caption: hit.snippet,
    });
  const scores = Object.entries(hit.route_scores);
  return h(
    "li",
    { class: "hit", "data-doc-id": hit.doc_id, "data-page": hit.page_number },
    h(
      "button",
      { type: "button", class: "thumb", onclick: open, "aria-label": `Open ${label} large` },
      pageFigure({ docId: hit.doc_id, page: hit.page_number, boxes: hit.evidence, alt: "" }),
    ),
    h(
      "div",
      { class: "hit-text" },
      h(
        "h2",
        { class: "hit-title" },
        `${hit.rank}. `,
        docNameNodes(hit.doc_id, given),
        h("span", { class: "muted" }, `, page ${hit.page_number}`),
      ),
      h("p", { class: "snippet" }, hit.snippet || "(no text on this page)"),
      h(
        "p",
        { class: "scores" },
        h("span", {}, `score ${fmt(hit.score, 4)}`),
        scores.map(([route, score]) => h("span", {}, `${route} ${fmt(score)}`)),
        hit.kinds.length ? h("span", {}, hit.kinds.join(", ")) : null,
      ),
      scopeOf("search") === hit.doc_id
        ? null
        : h(
            "p",
            { class: "hit-actions" },
            h(
              "a",
              {
                href: scopedHref("search", hit.doc_id),
                class: "search-in",
                "aria-label": `Search in ${docLabel(hit.doc_id, given)} only`,
              },
              "Search in this document",
            ),
          ),
    ),
  );
}
