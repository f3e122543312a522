// PageSight web UI: the API key, the hash router and the notice line. Views are in their own
// modules; every data call goes to the public /v1 API with the key as a Bearer header.

import { api, forgetKey, getKey, setKey } from "./api.js";
import { initAnswer } from "./answer.js";
import { $, clear } from "./dom.js";
import { initDocuments, listDocuments, showDocument } from "./documents.js";
import { initViewer } from "./pages.js";
import { enterScope, fillRoutes, initSearch, routeNames } from "./search.js";
import { initTrace, showTrace } from "./trace.js";

const VIEWS = ["key", "documents", "document", "search", "answer", "trace"];

function notice(text, kind = "error") {
  const el = $("notice");
  el.textContent = text || "";
  el.className = `notice ${kind}`;
  el.hidden = !text;
}

function show(view) {
  for (const name of VIEWS) $(`view-${name}`).hidden = name !== view;
  const section = view === "document" ? "documents" : view;
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.view === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  $("key-status").hidden = view === "key";
  document.title = `PageSight · ${view === "key" ? "API key" : section}`;
}

function askForKey(message) {
  show("key");
  const error = $("key-error");
  error.textContent = message || "";
  error.hidden = !message;
  $("key-input").focus();
}

async function route(focus) {
  const hash = location.hash.startsWith("#/") ? location.hash : "#/documents";
  if (!getKey()) {
    askForKey();
    return;
  }
  const [view, ...rest] = hash.slice(2).split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : "";
  $("viewer").close();
  switch (view) {
    case "documents":
      if (arg) {
        show("document");
        await showDocument(arg);
      } else {
        show("documents");
        await listDocuments();
      }
      break;
    case "search":
    case "answer":
      show(view);
      await enterScope(view, arg); // #/search/<doc id>: in that document only
      break;
    case "trace":
      show("trace");
      await showTrace(arg);
      break;
    default:
      location.replace("#/documents");
      return;
  }
  if (focus) {
    const heading = document.querySelector(".view:not([hidden]) h1");
    heading?.setAttribute("tabindex", "-1");
    heading?.focus();
  }
}

async function useKey(event) {
  event.preventDefault();
  const input = $("key-input");
  const key = input.value.trim();
  if (!key) return;
  setKey(key);
  try {
    await api("/documents");
  } catch (error) {
    forgetKey();
    if (error.status === 401) {
      askForKey(
        `This API key was not accepted (${error.code}: ${error.message}). ` +
          "Check that you pasted the whole key, and that it has not been revoked.",
      );
    } else {
      askForKey(`Could not check the key: ${error.describe()}`);
    }
    return;
  }
  input.value = "";
  $("key-error").hidden = true;
  notice("");
  await route(true);
}

function init() {
  $("key-form").addEventListener("submit", useKey);
  // The skip link moves focus to the content without touching the hash (the router's).
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    $("main").focus();
  });
  $("key-forget").addEventListener("click", () => {
    forgetKey();
    clear($("search-results"));
    clear($("answer-output"));
    clear($("answer-details"));
    notice("");
    askForKey("The key was removed from this tab.");
  });
  window.addEventListener("pagesight:unauthorized", (event) => {
    forgetKey();
    askForKey(
      `The gateway refused the API key (${event.detail.code}: ${event.detail.message}). ` +
        "Paste a valid key.",
    );
  });
  window.addEventListener("hashchange", () => {
    notice("");
    route(true);
  });
  initViewer();
  initDocuments(notice);
  initSearch();
  initAnswer();
  initTrace();
  routeNames().then((names) => {
    fillRoutes($("search-route"), names);
    fillRoutes($("answer-route"), names);
  });
  route(false);
}

init();
