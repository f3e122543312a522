// Answer: the streamed text as it is written, then the checked answer (the authority). The
// direct answer (``lead``) comes first, its value marked, with [n] buttons that open the page
// the quote is printed on with boxes around exactly the quote (a quote that runs across a page
// break: both pages, one after the other); then the supporting quotes, collapsed. An abstention
// shows its reason and the nearest passages (``related``). Answers without a lead (older
// servers) are shown as their sentences. Then the citations, withheld sentences, the trace link.

import { answerStream, enc } from "./api.js";
import { $, clear, fmt, h } from "./dom.js";
import { openViewer } from "./pages.js";
import { scopeFilters } from "./scope.js";
import { docLabel, docNameNodes, documentTitles, namesOf } from "./search.js";

let running = null;

const KIND_SOURCE = {
  table_cell: "Quoted from a table in ",
  list_item: "Quoted from a list in ",
  sentence: "Quoted from ",
};

export function initAnswer() {
  $("answer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    ask();
  });
}

async function ask() {
  running?.abort();
  const controller = new AbortController();
  running = controller;
  const status = $("answer-status");
  const output = clear($("answer-output"));
  const details = clear($("answer-details"));
  const question = {
    query: $("answer-query").value,
    route: $("answer-route").value,
    policy: $("answer-policy").value,
    ...scopeFilters("answer"),
  };
  const stream = h("p", { class: "streaming", id: "answer-stream" });
  output.append(stream);
  output.setAttribute("aria-busy", "true");
  status.textContent = "Retrieving and writing…";
  documentTitles();
  let answer;
  try {
    answer = await answerStream(question, (text) => stream.append(text), controller.signal);
  } catch (error) {
    if (error.name === "AbortError") return;
    output.removeAttribute("aria-busy");
    status.textContent = "";
    output.append(h("p", { class: "error" }, `Answer failed: ${error.describe()}`));
    return;
  } finally {
    if (running === controller) running = null;
  }
  await documentTitles();
  output.removeAttribute("aria-busy");
  status.textContent = answer.abstained ? "No answer." : "Answer complete.";
  clear(output).append(...renderAnswer(answer));
  details.append(...renderDetails(answer));
}

// -- where a quote is printed -----------------------------------------------------------------------

/** The quote per page it is printed on: ``parts``, else the citation's page and boxes. */
function partsOf(citation) {
  if (citation.parts?.length) return citation.parts;
  return [{ page_number: citation.page_number, bboxes: citation.bboxes, text: citation.quote }];
}

/** "p. 7", or "pp. 7–8" for a quote that runs across a page break. */
function pagesLabel(citation) {
  const pages = [...new Set(partsOf(citation).map((p) => p.page_number))];
  return pages.length > 1 ? `pp. ${pages[0]}–${pages[pages.length - 1]}` : `p. ${pages[0]}`;
}

function namesGiven(citation) {
  return { title: citation.title, source_name: citation.source_name };
}

/** Open part ``i`` of the citation's quote: its page, boxes around exactly its characters. */
function openCitation(citation, i = 0) {
  const parts = partsOf(citation);
  const part = parts[i];
  const what = citation.kind === "image" ? "image block" : "passage";
  const of = parts.length > 1 ? `, part ${i + 1} of ${parts.length}` : "";
  const nav = [];
  if (i > 0) {
    nav.push({
      label: `← Starts on p. ${parts[i - 1].page_number}`,
      ariaLabel: `Citation ${citation.n}: the part on page ${parts[i - 1].page_number}`,
      open: () => openCitation(citation, i - 1),
    });
  }
  if (i < parts.length - 1) {
    nav.push({
      label: `Continues on p. ${parts[i + 1].page_number} →`,
      ariaLabel: `Citation ${citation.n}: continues on page ${parts[i + 1].page_number}`,
      open: () => openCitation(citation, i + 1),
    });
  }
  openViewer({
    docId: citation.doc_id,
    page: part.page_number,
    boxes: part.bboxes || [],
    boxClass: `cited cite-${citation.n}`,
    wholePage: citation.kind === "image",
    title:
      `[${citation.n}] ${docLabel(citation.doc_id, namesGiven(citation))}, ` +
      `page ${part.page_number} (${what}${of})`,
    caption: citation.quote,
    nav,
  });
}

function citeButton(citation) {
  const name = docLabel(citation.doc_id, namesGiven(citation));
  const what = citation.kind === "image" ? "image block" : "passage";
  return h(
    "button",
    {
      type: "button",
      class: "cite",
      "data-n": citation.n,
      "aria-label": `Citation ${citation.n}: ${what} on page ${partsOf(citation)[0].page_number} of ${name}`,
      onclick: () => openCitation(citation),
    },
    `[${citation.n}]`,
  );
}

function citeButtons(numbers, byN) {
  return numbers.map((n) => byN.get(n)).filter(Boolean).map((c) => [" ", citeButton(c)]);
}

/** A "continues on p. N" button for a quote printed across a page break (nothing otherwise). */
function continuesButton(citation) {
  const parts = partsOf(citation);
  if (parts.length < 2) return null;
  return h(
    "button",
    {
      type: "button",
      class: "as-link continues",
      "aria-label": `Citation ${citation.n} continues on page ${parts[1].page_number}`,
      onclick: () => openCitation(citation, 1),
    },
    `continues on p. ${parts[1].page_number}`,
  );
}

// -- the answer -------------------------------------------------------------------------------------

/** ``text`` with the unit's one value marked, where it is printed in it. */
function withValue(text, value, kind) {
  if (!value) return [text];
  const at = kind === "table_cell" ? text.lastIndexOf(value) : text.indexOf(value);
  if (at < 0) return [text];
  return [
    text.slice(0, at),
    h("mark", { class: "value" }, value),
    text.slice(at + value.length),
  ];
}

function renderAnswer(answer) {
  if (answer.abstained) {
    return [
      h(
        "div",
        { class: "abstained", id: "answer-final", "data-abstained": "true" },
        h("p", {}, h("strong", {}, "Abstained: "), answer.answer),
        answer.reason ? h("p", { class: "muted" }, `Why: ${answer.reason}`) : null,
      ),
    ];
  }
  const byN = new Map(answer.citations.map((c) => [c.n, c]));
  if (!answer.lead) return [sentencesOf(answer.sentences, byN, "answer-final")];
  const lead = answer.lead;
  const shown = h(
    "div",
    { class: "answer-final", id: "answer-final" },
    h(
      "p",
      { class: "lead", id: "answer-lead", "data-kind": lead.kind },
      h("span", { class: "lead-text" }, withValue(lead.text, lead.value, lead.kind)),
      citeButtons(lead.citations, byN),
    ),
  );
  const source = byN.get(lead.citations[0]);
  if (source) {
    const continues = continuesButton(source);
    shown.append(
      h(
        "p",
        { class: "lead-source" },
        answer.mode === "extractive" ? KIND_SOURCE[lead.kind] || "Quoted from " : "Source: ",
        docNameNodes(source.doc_id, namesGiven(source)),
        `, ${pagesLabel(source)}`,
        continues ? [" (", continues, ")"] : null,
      ),
    );
  }
  // An LLM's answer: the lead is its first sentence; the others follow it as written.
  const rest = answer.mode === "extractive" ? [] : afterLead(answer.sentences, lead);
  if (rest.length) shown.append(sentencesOf(rest, byN, null));
  const parts = [shown];
  if (answer.supporting?.length) {
    parts.push(
      h(
        "details",
        { class: "supporting", id: "answer-supporting" },
        h("summary", {}, `Supporting quotes (${answer.supporting.length})`),
        h(
          "ul",
          {},
          answer.supporting.map((unit) =>
            h(
              "li",
              { "data-kind": unit.kind },
              h("q", {}, unit.text),
              citeButtons(unit.citations, byN),
            ),
          ),
        ),
      ),
    );
  }
  return parts;
}

function afterLead(sentences, lead) {
  const at = sentences.findIndex((s) => s.text === lead.text);
  return sentences.filter((_, i) => i !== (at >= 0 ? at : 0));
}

function sentencesOf(sentences, byN, id) {
  const text = h("p", { class: "answer-text", id });
  for (const sentence of sentences) {
    text.append(h("span", { class: "sentence" }, sentence.text));
    text.append(...citeButtons(sentence.citations, byN).flat());
    text.append(" ");
  }
  return text;
}

// -- below the answer --------------------------------------------------------------------------------

function relatedSection(related) {
  return h(
    "section",
    { class: "related", "aria-labelledby": "related-title" },
    h("h2", { id: "related-title" }, "Nearest passages"),
    h("p", {}, "The documents do not say this; these passages come closest:"),
    h(
      "ul",
      {},
      related.map((c) => {
        const { title, file } = namesOf(c.doc_id, namesGiven(c));
        const names = title || file ? [title, file === title ? "" : file] : [c.doc_id];
        const label = [...names, pagesLabel(c)].filter(Boolean).join(" · ");
        return h(
          "li",
          { "data-doc-id": c.doc_id, "data-page": partsOf(c)[0].page_number },
          h(
            "button",
            {
              type: "button",
              class: "as-link related-link",
              "aria-label": `Open ${label}`,
              onclick: () => openCitation(c),
            },
            label,
          ),
          c.quote ? [" ", h("q", { class: "muted" }, shorten(c.quote, 240))] : null,
        );
      }),
    ),
  );
}

function shorten(text, max) {
  const flat = text.split(/\s+/).join(" ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

function renderDetails(answer) {
  const parts = [];
  if (answer.abstained && answer.related?.length) parts.push(relatedSection(answer.related));
  if (answer.withheld.length) {
    parts.push(
      h(
        "section",
        { class: "withheld", "aria-labelledby": "withheld-title" },
        h("h2", { id: "withheld-title" }, "Withheld sentences"),
        h(
          "p",
          {},
          "These sentences were streamed, then failed the citation check: they are not part " +
            "of the answer.",
        ),
        h(
          "ul",
          {},
          answer.withheld.map((w) =>
            h("li", {}, h("s", {}, w.text), h("span", { class: "muted" }, ` — withheld: ${w.reason}`)),
          ),
        ),
      ),
    );
  }
  if (answer.citations.length) {
    parts.push(
      h(
        "section",
        { "aria-labelledby": "citations-title" },
        h("h2", { id: "citations-title" }, "Citations"),
        h(
          "ol",
          { class: "citations" },
          answer.citations.map((c) =>
            h(
              "li",
              { "data-n": c.n },
              citeButton(c),
              " ",
              h("span", { class: "cited-doc" }, docNameNodes(c.doc_id, namesGiven(c))),
              `, ${pagesLabel(c)}${c.kind === "image" ? " (image block)" : ""}: `,
              h("q", {}, c.quote || "(the page image)"),
            ),
          ),
        ),
      ),
    );
  }
  const meta = [
    `mode ${answer.mode}`,
    `confidence ${fmt(answer.confidence, 2)}`,
    answer.reason && !answer.abstained ? answer.reason : null,
  ].filter(Boolean);
  parts.push(
    h(
      "p",
      { class: "answer-meta" },
      meta.join(" · "),
      " · ",
      h("a", { href: `#/trace/${enc(answer.trace_id)}` }, `trace ${answer.trace_id}`),
    ),
  );
  return parts;
}
