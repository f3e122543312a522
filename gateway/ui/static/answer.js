// Answer: the streamed text as it is written, then the checked answer (the authority): its
// sentences with [n] buttons that open the cited page (or image block) with that citation's
// boxes, the sentences the citation check withheld, or the abstention; the trace link.

import { answerStream, enc } from "./api.js";
import { $, clear, fmt, h } from "./dom.js";
import { openViewer } from "./pages.js";
import { documentTitles, titleOf } from "./search.js";

let running = null;

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
  clear(output).append(renderAnswer(answer));
  details.append(...renderDetails(answer));
}

function renderAnswer(answer) {
  if (answer.abstained) {
    return h(
      "div",
      { class: "abstained", id: "answer-final", "data-abstained": "true" },
      h("p", {}, h("strong", {}, "Abstained: "), answer.answer),
      answer.reason ? h("p", { class: "muted" }, `Why: ${answer.reason}`) : null,
    );
  }
  const byN = new Map(answer.citations.map((c) => [c.n, c]));
  const text = h("p", { class: "answer-text", id: "answer-final" });
  for (const sentence of answer.sentences) {
    text.append(h("span", { class: "sentence" }, sentence.text));
    for (const n of sentence.citations) {
      const citation = byN.get(n);
      if (citation) text.append(" ", citeButton(citation));
    }
    text.append(" ");
  }
  return text;
}

function citeButton(citation) {
  const name = titleOf(citation.doc_id);
  const what = citation.kind === "image" ? "image block" : "passage";
  return h(
    "button",
    {
      type: "button",
      class: "cite",
      "data-n": citation.n,
      "aria-label": `Citation ${citation.n}: ${what} on page ${citation.page_number} of ${name}`,
      onclick: () => openCitation(citation),
    },
    `[${citation.n}]`,
  );
}

function openCitation(citation) {
  const name = titleOf(citation.doc_id);
  const what = citation.kind === "image" ? "image block" : "passage";
  openViewer({
    docId: citation.doc_id,
    page: citation.page_number,
    boxes: citation.bboxes,
    boxClass: `cited cite-${citation.n}`,
    wholePage: citation.kind === "image",
    title: `[${citation.n}] ${name}, page ${citation.page_number} (${what})`,
    caption: citation.quote,
  });
}

function renderDetails(answer) {
  const parts = [];
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
              h("strong", {}, titleOf(c.doc_id)),
              `, page ${c.page_number}${c.kind === "image" ? " (image block)" : ""}: `,
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
