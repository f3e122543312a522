// Trace view: what a search or answer did. Route candidates and scores, the fused order, the
// rerank, the steps of a multi-step search, the corrective round, LLM attempts, timings.

import { api, ApiError, enc } from "./api.js";
import { $, clear, fmt, h, shortId } from "./dom.js";

const SHOWN = 20;

export function initTrace() {
  $("trace-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("trace-input").value.trim();
    if (id) location.hash = `#/trace/${enc(id)}`;
  });
}

export async function showTrace(traceId) {
  const body = clear($("trace-body"));
  $("trace-input").value = traceId || "";
  if (!traceId) {
    body.append(h("p", {}, "Open a trace from a search or an answer, or paste its id."));
    return;
  }
  let trace;
  try {
    trace = (await api(`/traces/${enc(traceId)}`)).trace;
  } catch (error) {
    const text =
      error instanceof ApiError && error.status === 404
        ? `Trace “${traceId}” was not found (traces are kept per tenant, and purged with ` +
          "their documents)."
        : `Could not load the trace: ${error.describe()}`;
    body.append(h("p", { class: "error" }, text));
    return;
  }
  body.append(
    summary(trace),
    timings(trace),
    routes(trace),
    pairs("fused-title", "Fused order", trace.fused, "Candidate", "Fused score"),
  );
  if (trace.multistep) body.append(multistep(trace.multistep));
  if (trace.answer) body.append(...answerParts(trace.answer));
  body.append(
    h(
      "details",
      { class: "raw" },
      h("summary", {}, "Raw trace (JSON)"),
      h("pre", {}, JSON.stringify(trace, null, 2)),
    ),
  );
}

function section(id, title, ...children) {
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

function facts(rows) {
  return h(
    "dl",
    { class: "facts" },
    rows.filter(([, v]) => v !== null && v !== undefined && v !== "").map(([k, v]) => [
      h("dt", {}, k),
      h("dd", {}, String(v)),
    ]),
  );
}

function table(caption, headers, rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))),
    ),
  );
}

function summary(trace) {
  return section(
    "trace-summary-title",
    "Summary",
    facts([
      ["Trace id", trace.trace_id],
      ["Query", trace.query],
      ["Route requested", trace.requested_route],
      ["Route run", trace.route],
      ["Elapsed", `${fmt(trace.elapsed_ms, 1)} ms`],
      ["Index version", trace.index_version],
      ["Documents", trace.doc_ids?.length ? trace.doc_ids.join(", ") : null],
    ]),
  );
}

function timings(trace) {
  const rows = Object.entries(trace.stages_ms).map(([k, v]) => [k, fmt(v, 1)]);
  for (const [k, v] of Object.entries(trace.answer?.stages_ms || {})) {
    rows.push([`answer: ${k}`, fmt(v, 1)]);
  }
  for (const [k, v] of Object.entries(trace.answer?.corrective?.stages_ms || {})) {
    rows.push([`corrective: ${k}`, fmt(v, 1)]);
  }
  return section("trace-timings-title", "Timings", table("Stage timings", ["Stage", "ms"], rows));
}

function routes(trace) {
  const parts = trace.routes.map((r, i) => {
    const title = `${r.route} (weight ${fmt(r.weight, 2)})`;
    const id = `trace-route-${i}`;
    if (r.skipped) return h("div", {}, h("h3", { id }, title), h("p", {}, `Skipped: ${r.skipped}`));
    return h(
      "div",
      {},
      h("h3", { id }, `${title}: ${r.candidates.length} candidates`),
      ranked(`Candidates of ${r.route}`, r.candidates, "Candidate", "Score"),
    );
  });
  if (!parts.length) parts.push(h("p", {}, "No route ran."));
  return section("trace-routes-title", "Route candidates", ...parts);
}

function ranked(caption, items, what, score) {
  const rows = items.slice(0, SHOWN).map(([id, s], i) => [String(i + 1), id, fmt(s, 4)]);
  const more = items.length > SHOWN ? h("p", { class: "muted" }, `and ${items.length - SHOWN} more`) : null;
  return [table(caption, ["#", what, score], rows), more];
}

function pairs(id, title, items, what, score) {
  return section(id, title, items.length ? ranked(title, items, what, score) : h("p", {}, "Empty."));
}

function pageList(pages) {
  return pages.map(([doc, n]) => `${shortId(doc, 8)} p.${n}`).join(", ");
}

function multistep(ms) {
  return section(
    "trace-multistep-title",
    "Multi-step search",
    facts([
      ["Planner", ms.planner],
      ["Plan", ms.plan_kind],
      ["Sub-queries", ms.sub_queries.join(" | ")],
      ["Note", ms.plan_note],
      ["Stopped because", ms.stop_reason],
      ["Budget", `${ms.max_steps} steps, ${fmt(ms.time_budget_ms, 0)} ms`],
    ]),
    table(
      "Steps",
      ["Step", "Action", "Query", "Scope", "Pages", "New pages", "ms"],
      ms.steps.map((s) => [
        String(s.step),
        s.action,
        s.sub_query || "",
        s.scope,
        pageList(s.pages),
        pageList(s.new_pages),
        fmt(s.elapsed_ms, 1),
      ]),
    ),
  );
}

function answerParts(a) {
  const parts = [
    section(
      "trace-rerank-title",
      "Rerank",
      facts([
        ["Ranker", a.ranker],
        ["Visual ranker", a.visual_ranker],
        ["Candidates", a.candidates],
      ]),
      a.reranked.length ? ranked("Reranked", a.reranked, "Passage", "Score") : h("p", {}, "Empty."),
    ),
    section(
      "trace-llm-title",
      "Answer generation",
      facts([
        ["Mode", a.mode],
        ["Context blocks", a.context.join(", ")],
        ["Context tokens", a.context_tokens],
        ["Prompt tokens", a.prompt_tokens],
        ["Completion tokens", a.completion_tokens],
        ["Cited", a.cited.join(", ")],
        ["Confidence", fmt(a.confidence, 2)],
        ["Abstained", a.abstained ? `yes: ${a.reason || ""}` : "no"],
        ["Images", a.vision ? `${a.vision.setting}: ${a.vision.reason}` : null],
      ]),
      h("h3", { id: "trace-attempts-title" }, `LLM attempts (${a.attempts.length})`),
      a.attempts.length
        ? h("ol", { class: "attempts" }, a.attempts.map((t) => h("li", {}, t)))
        : h("p", {}, "None (extractive answer)."),
    ),
  ];
  const c = a.corrective;
  if (c) {
    parts.push(
      section(
        "trace-corrective-title",
        "Corrective retrieval",
        facts([
          ["Grader", c.grader],
          ["Decision", c.decision],
          ["Action", c.action],
          ["Used", c.used],
          ["Rewritten query", c.rewritten_query],
          ["Abstained", c.abstained ? `yes: ${c.reason || ""}` : "no"],
        ]),
        c.steps.length ? h("ol", {}, c.steps.map((s) => h("li", {}, s))) : null,
      ),
    );
  }
  return parts;
}
