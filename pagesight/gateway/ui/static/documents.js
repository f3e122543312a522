// Documents: upload (drag and drop, several files) with each job's progress, the list, one
// document's detail (pages, versions), delete with confirmation.

import { api, ApiError, enc, forgetDocument } from "./api.js";
import { $, clear, h, shortId } from "./dom.js";
import { openViewer, pageFigure } from "./pages.js";
import { scopedHref } from "./scope.js";
import { fileNameOf, rememberDocuments } from "./search.js";

const STAGES = ["PENDING", "RENDERING", "PARSING", "EMBEDDING", "INDEXING", "READY"];
const POLL_MS = 500;
const PAGES_SHOWN = 24;

let notify = () => {};

export function documentName(doc) {
  return doc.title || fileNameOf(doc) || doc.doc_id;
}

export function initDocuments(notice) {
  notify = notice;
  const drop = $("drop");
  const input = $("upload-input");
  input.addEventListener("change", () => {
    uploadAll(input.files);
    input.value = "";
  });
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
  }
  for (const name of ["dragleave", "drop"]) {
    drop.addEventListener(name, () => drop.classList.remove("over"));
  }
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    uploadAll(event.dataTransfer.files);
  });
  $("documents-refresh").addEventListener("click", () => listDocuments());
}

function uploadAll(files) {
  for (const file of Array.from(files || [])) upload(file);
}

// -- uploads and their jobs -------------------------------------------------------------------------

async function upload(file) {
  const stages = h(
    "ol",
    { class: "stages", "aria-label": `Stages of ${file.name}` },
    STAGES.map((s) => h("li", { "data-stage": s }, s)),
  );
  const state = h("span", { class: "state" }, "uploading");
  const message = h("p", { class: "job-message" });
  const item = h(
    "li",
    { class: "job", "data-file": file.name },
    h("p", { class: "job-head" }, h("strong", {}, file.name), " — ", state),
    stages,
    message,
  );
  $("jobs").prepend(item);
  const form = new FormData();
  form.append("file", file, file.name);
  if ($("upload-replace").checked) form.append("replace", "true");
  let accepted;
  try {
    accepted = await api("/documents", { method: "POST", body: form });
  } catch (error) {
    fail(item, state, message, error.code, error.stage, error.message);
    return;
  }
  item.dataset.jobId = accepted.job_id;
  item.dataset.docId = accepted.doc_id;
  if (accepted.outcome !== "created") message.textContent = `Outcome: ${accepted.outcome}.`;
  await follow(accepted.job_id, item, stages, state, message);
}

async function follow(jobId, item, stages, state, message) {
  for (;;) {
    let job;
    try {
      job = await api(`/jobs/${enc(jobId)}`);
    } catch (error) {
      fail(item, state, message, error.code, error.stage, error.message);
      return;
    }
    showStage(stages, job.state);
    state.textContent = job.state;
    item.dataset.state = job.state;
    if (job.state === "READY") {
      const note = job.unchanged ? " (already indexed: unchanged)" : "";
      message.textContent = `Ready: ${job.pages} pages, ${job.chunks} chunks${note}.`;
      message.append(" ", h("a", { href: `#/documents/${enc(job.doc_id)}` }, "Open document"));
      listDocuments();
      return;
    }
    if (job.state === "FAILED") {
      fail(item, state, message, job.error_code, job.error_stage, job.error_message);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function showStage(stages, current) {
  const at = STAGES.indexOf(current);
  for (const [i, li] of Array.from(stages.children).entries()) {
    li.classList.toggle("done", i < at || current === "READY");
    if (i === at) li.setAttribute("aria-current", "step");
    else li.removeAttribute("aria-current");
  }
}

function fail(item, state, message, code, stage, text) {
  item.dataset.state = "FAILED";
  item.classList.add("failed");
  state.textContent = "FAILED";
  const where = stage ? ` (stage ${stage})` : "";
  clear(message).append(h("strong", { class: "code" }, code || "FAILED"), `${where}: ${text || ""}`);
  message.classList.add("error");
}

// -- the list --------------------------------------------------------------------------------------

export async function listDocuments() {
  const table = $("documents-table");
  let docs;
  try {
    docs = (await api("/documents")).documents;
  } catch (error) {
    notify(`Could not list documents: ${error.describe ? error.describe() : error}`);
    return;
  }
  rememberDocuments(docs);
  const body = clear(table.tBodies[0]);
  $("documents-empty").hidden = docs.length > 0;
  table.hidden = docs.length === 0;
  for (const doc of docs) {
    const name = documentName(doc);
    const file = fileNameOf(doc);
    body.append(
      h(
        "tr",
        { "data-doc-id": doc.doc_id },
        h(
          "td",
          {},
          h("a", { href: `#/documents/${enc(doc.doc_id)}` }, name),
          file && file !== name ? h("span", { class: "file-name" }, ` — ${file}`) : null,
        ),
        h("td", {}, String(doc.page_count)),
        h("td", {}, h("code", { title: doc.version }, shortId(doc.version))),
        h("td", {}, stateBadge(doc)),
        h("td", {}, h("code", {}, doc.doc_id)),
        h(
          "td",
          {},
          h(
            "button",
            {
              type: "button",
              class: "danger",
              "aria-label": `Delete ${name}`,
              onclick: () => confirmDelete(doc, name),
            },
            "Delete",
          ),
        ),
      ),
    );
  }
}

// READY: searchable; MISSING: a re-index left it out (its file was gone or changed), so search
// never finds it until the file is uploaded or ingested again (or a rollback restores it).
const STATE_HELP = {
  READY: "in the live index: searchable",
  MISSING:
    "left out by a re-index (its file was gone or changed): not searchable until the file " +
    "is ingested again",
};

function stateBadge(doc) {
  const state = doc.state || "READY";
  return h(
    "span",
    { class: `doc-state ${state.toLowerCase()}`, title: STATE_HELP[state] || state },
    state,
  );
}

function confirmDelete(doc, name) {
  const dialog = $("confirm");
  $("confirm-text").textContent =
    `Delete “${name}” (${doc.doc_id}): its pages, index entries, jobs and traces? ` +
    "This cannot be undone.";
  dialog.returnValue = "";
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue !== "ok") return;
      try {
        await api(`/documents/${enc(doc.doc_id)}`, { method: "DELETE" });
        forgetDocument(doc.doc_id);
        if (location.hash.startsWith("#/documents/")) {
          const moved = new Promise((resolve) =>
            window.addEventListener("hashchange", resolve, { once: true }),
          );
          location.hash = "#/documents";
          await moved; // the router clears the notice on navigation: say it after
        } else {
          listDocuments();
        }
        notify(`Deleted “${name}”.`, "info");
      } catch (error) {
        notify(`Delete failed: ${error.describe ? error.describe() : error}`);
      }
    },
    { once: true },
  );
  dialog.showModal();
  $("confirm-cancel").focus();
}

// -- one document ----------------------------------------------------------------------------------

export async function showDocument(docId) {
  const title = $("document-title");
  const body = clear($("document-body"));
  title.textContent = "Document";
  let detail;
  try {
    detail = await api(`/documents/${enc(docId)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      title.textContent = "Document not found";
      body.append(
        h(
          "p",
          { class: "error" },
          `Document “${docId}” was not found: it does not exist, or this key may not read it.`,
        ),
      );
    } else {
      body.append(h("p", { class: "error" }, error.describe ? error.describe() : String(error)));
    }
    return;
  }
  const doc = detail.document;
  const name = documentName(doc);
  title.textContent = name;
  const facts = [
    ["Document id", doc.doc_id],
    ["Current version", doc.version],
    ["State", `${doc.state || "READY"} — ${STATE_HELP[doc.state || "READY"] || ""}`],
    ["Pages", String(detail.pages)],
    ["File", fileNameOf(doc) || "–"],
    ["Format", doc.source_format],
    ["Source", doc.source_uri],
    ["Size", `${(doc.size_bytes / 1024).toFixed(0)} KiB`],
    ["Ingested", detail.ingested_at ? new Date(detail.ingested_at).toLocaleString() : "–"],
    ["Readable by", doc.acl.length ? doc.acl.join(", ") : "everyone in the tenant"],
    ["Valid until", doc.valid_until ? new Date(doc.valid_until).toLocaleString() : "–"],
  ];
  body.append(
    h(
      "dl",
      { class: "facts" },
      facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
    ),
    h(
      "p",
      { class: "doc-actions" },
      h("a", { href: scopedHref("search", doc.doc_id), class: "button" }, "Search in this document"),
      h("a", { href: scopedHref("answer", doc.doc_id), class: "button" }, "Ask this document"),
      h(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: () => confirmDelete(doc, name),
        },
        "Delete this document",
      ),
    ),
  );
  const versions = h("section", { "aria-labelledby": "versions-title" },
    h("h2", { id: "versions-title" }, "Versions"));
  const pages = h("section", { "aria-labelledby": "pages-title" },
    h("h2", { id: "pages-title" }, `Pages (${detail.pages})`));
  body.append(versions, pages);
  showPages(pages, doc, name, Math.min(detail.pages, PAGES_SHOWN), detail.pages);
  showVersions(versions, doc);
}

function showPages(section, doc, name, shown, total) {
  const grid = h("ul", { class: "page-grid" });
  for (let n = 1; n <= shown; n++) grid.append(pageTile(doc, name, n));
  section.append(grid);
  if (shown < total) {
    const more = h(
      "button",
      {
        type: "button",
        onclick: () => {
          for (let n = shown + 1; n <= total; n++) grid.append(pageTile(doc, name, n));
          more.remove();
        },
      },
      `Show all ${total} pages`,
    );
    section.append(more);
  }
}

function pageTile(doc, name, n) {
  const open = () => openViewer({ docId: doc.doc_id, page: n, boxes: [], title: `${name}, page ${n}` });
  return h(
    "li",
    {},
    h(
      "button",
      { type: "button", class: "thumb", onclick: open },
      pageFigure({ docId: doc.doc_id, page: n, alt: `Page ${n} of ${name}` }),
    ),
    h("span", { class: "page-no" }, `Page ${n}`),
  );
}

async function showVersions(section, doc) {
  const list = h("ol", { class: "versions" },
    h("li", {}, h("code", {}, doc.version), " (current)"));
  section.append(list);
  let entries = [];
  try {
    entries = (await api(`/audit?doc_id=${enc(doc.doc_id)}`)).entries;
  } catch (error) {
    section.append(h("p", { class: "error" }, `Version history unavailable: ${error.message}`));
    return;
  }
  for (const entry of entries.filter((e) => e.action === "replace" && e.version)) {
    list.append(
      h(
        "li",
        {},
        h("code", {}, entry.version),
        ` replaced ${new Date(entry.at).toLocaleString()} by ${entry.actor}`,
      ),
    );
  }
}
