// The public /v1 API, called with the API key from sessionStorage as a Bearer header.
// The key never goes into a URL: page images are fetched with the header and shown as blob URLs.

const KEY_ITEM = "pagesight.apiKey";
const ROOT = (document.querySelector('meta[name="pagesight-root"]')?.content || "").replace(
  /\/$/,
  "",
);
export const API = `${ROOT}/v1`;

export function getKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

export function setKey(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_ITEM);
  clearImages();
  structures.clear();
}

/** An error answer of the API: its status and the body's code, stage and message. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || `HTTP_${status}`;
    this.stage = error?.stage || "";
    this.traceId = error?.trace_id || null;
  }

  /** What a person reads: the code, what went wrong, where. */
  describe() {
    const stage = this.stage ? ` (stage ${this.stage})` : "";
    return `${this.code}${stage}: ${this.message}`;
  }
}

function headers(extra = {}) {
  const key = getKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = new ApiError(response.status, body?.error);
  if (response.status === 401) {
    window.dispatchEvent(new CustomEvent("pagesight:unauthorized", { detail: error }));
  }
  return error;
}

/** JSON from the API; ApiError on any non-2xx answer (or a network failure). */
export async function api(path, { method = "GET", json, body, signal } = {}) {
  const init = { method, headers: headers(), signal };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.body = body;
  }
  let response;
  try {
    response = await fetch(`${API}${path}`, init);
  } catch (exc) {
    if (exc.name === "AbortError") throw exc;
    throw new ApiError(0, { code: "NETWORK", message: `the gateway did not answer (${exc})` });
  }
  if (!response.ok) throw await failure(response);
  return response.json();
}

export const enc = encodeURIComponent;

// -- page images: fetched once per (document, page), kept as blob URLs ------------------------

const images = new Map();
//: Image fetches in flight at once: a page of thumbnails must stay under the key's
//: concurrency limit (429 otherwise), next to the job polls and searches of the same key.
const IMAGE_SLOTS = 4;
const RETRIES = 3;
let imagesInFlight = 0;
const waiting = [];

async function slot(work) {
  if (imagesInFlight >= IMAGE_SLOTS) await new Promise((resolve) => waiting.push(resolve));
  imagesInFlight += 1;
  try {
    return await work();
  } finally {
    imagesInFlight -= 1;
    waiting.shift()?.();
  }
}

async function fetchImage(path) {
  for (let attempt = 0; ; attempt++) {
    const response = await slot(() => fetch(`${API}${path}`, { headers: headers() }));
    if (response.status === 429 && attempt < RETRIES) {
      const seconds = Number(response.headers.get("Retry-After")) || 1;
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    if (!response.ok) throw await failure(response);
    return URL.createObjectURL(await response.blob());
  }
}

/** A blob URL of the page image (no highlight: the UI draws the boxes itself). */
export function pageImage(docId, pageNumber) {
  const path = `/documents/${enc(docId)}/pages/${pageNumber}/image?format=jpeg`;
  let pending = images.get(path);
  if (!pending) {
    pending = fetchImage(path);
    pending.catch(() => images.delete(path));
    images.set(path, pending);
  }
  return pending;
}

export function clearImages() {
  for (const pending of images.values()) {
    pending.then(URL.revokeObjectURL, () => {});
  }
  images.clear();
}

// -- page sizes (points), for scaling boxes to the rendered image --------------------------------

const structures = new Map();

export function structure(docId) {
  let pending = structures.get(docId);
  if (!pending) {
    pending = api(`/documents/${enc(docId)}/structure`);
    pending.catch(() => structures.delete(docId));
    structures.set(docId, pending);
  }
  return pending;
}

export async function pageSize(docId, pageNumber) {
  const found = await structure(docId);
  const page = found.pages.find((p) => p.page_number === pageNumber);
  return page && page.width > 0 && page.height > 0 ? page : null;
}

export function forgetDocument(docId) {
  structures.delete(docId);
  for (const [path, pending] of images) {
    if (path.startsWith(`/documents/${enc(docId)}/`)) {
      pending.then(URL.revokeObjectURL, () => {});
      images.delete(path);
    }
  }
}

// -- streamed answers (server-sent events over a POST) ----------------------------------------------

/**
 * POST /v1/answer with stream: true. Calls onToken(text) for each token event as it arrives;
 * resolves with the final answer (the authority); rejects with ApiError on an error event.
 */
export async function answerStream(question, onToken, signal) {
  let response;
  try {
    response = await fetch(`${API}/answer`, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ ...question, stream: true }),
      signal,
    });
  } catch (exc) {
    if (exc.name === "AbortError") throw exc;
    throw new ApiError(0, { code: "NETWORK", message: `the gateway did not answer (${exc})` });
  }
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const frame = parseFrame(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (frame.event === "token") onToken(frame.data.text);
      else if (frame.event === "answer") return frame.data;
      else if (frame.event === "error") throw new ApiError(200, frame.data.error);
      end = buffer.indexOf("\n\n");
    }
  }
  throw new ApiError(0, { code: "INTERNAL", message: "the answer stream ended without an answer" });
}

function parseFrame(text) {
  let event = "message";
  const data = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  return { event, data: JSON.parse(data.join("\n") || "null") };
}
