// Search: query, route, results as page thumbnails with their evidence boxes, snippet and
// route scores; a click opens the page large with the same boxes.

import { api, API, enc } from "./api.js";
import { $, clear, fmt, h } from "./dom.js";
import { openViewer, pageFigure } from "./pages.js";

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

let titles = new Map();

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

/** doc id -> title, for hits and citations (refreshed with each search or answer). */
export async function documentTitles() {
  try {
    const docs = (await api("/documents")).documents;
    titles = new Map(docs.map((d) => [d.doc_id, d.title || d.source_uri.split("/").pop()]));
  } catch {
    // titles stay as they were; ids are shown instead
  }
  return titles;
}

export function titleOf(docId, fallback) {
  return fallback || titles.get(docId) || docId;
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
  const name = titleOf(hit.doc_id, hit.title);
  const label = `${name}, page ${hit.page_number}`;
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
      h("h2", { class: "hit-title" }, `${hit.rank}. `, name, h("span", { class: "muted" },
        ` — page ${hit.page_number}`)),
      h("p", { class: "snippet" }, hit.snippet || "(no text on this page)"),
      h(
        "p",
        { class: "scores" },
        h("span", {}, `score ${fmt(hit.score, 4)}`),
        scores.map(([route, score]) => h("span", {}, `${route} ${fmt(score)}`)),
        hit.kinds.length ? h("span", {}, hit.kinds.join(", ")) : null,
      ),
    ),
  );
}
