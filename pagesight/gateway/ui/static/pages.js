// Page images with boxes drawn over them (thumbnails and the large viewer).
//
// Boxes come from the API in PDF points; a box is placed in percent of the page's size in
// points (from the structure API), so it lands on the same spot of the image at any rendered
// size: x0 / page width of the image's rendered width, and so on.

import { pageImage, pageSize } from "./api.js";
import { $, clear, h } from "./dom.js";

/**
 * A page image with ``boxes`` over it. The image loads in the background; the frame's
 * data-state becomes "ready" (image decoded, boxes placed) or "error".
 * boxClass: the class of the boxes ("evidence", "cited"); wholePage: draw one box around the
 * page when there are no boxes (an image block that is the whole page).
 */
export function pageFigure({ docId, page, boxes = [], alt, boxClass = "evidence", wholePage }) {
  const frame = h("span", {
    class: "page-frame",
    "data-state": "loading",
    "data-doc-id": docId,
    "data-page": page,
  });
  const img = h("img", { class: "page-img", alt });
  frame.append(img);
  Promise.all([pageImage(docId, page), pageSize(docId, page).catch(() => null)])
    .then(async ([url, size]) => {
      img.src = url;
      await img.decode().catch(() => {});
      if (size) {
        const drawn = boxes.length ? boxes : wholePage ? [fullPage(size)] : [];
        for (const box of drawn) frame.append(boxElement(box, size, boxClass));
      }
      frame.dataset.state = "ready";
    })
    .catch((error) => {
      frame.dataset.state = "error";
      frame.append(
        h("span", { class: "page-error" }, `Page image unavailable: ${describe(error)}`),
      );
    });
  return frame;
}

function fullPage(size) {
  return { x0: 0, y0: 0, x1: size.width, y1: size.height };
}

function boxElement(box, size, boxClass) {
  const el = h("span", {
    class: `box ${boxClass}`,
    "aria-hidden": "true",
    "data-bbox": [box.x0, box.y0, box.x1, box.y1].join(","),
  });
  // CSSOM, not a style attribute: the Content-Security-Policy allows no inline styles.
  el.style.left = `${(box.x0 / size.width) * 100}%`;
  el.style.top = `${(box.y0 / size.height) * 100}%`;
  el.style.width = `${((box.x1 - box.x0) / size.width) * 100}%`;
  el.style.height = `${((box.y1 - box.y0) / size.height) * 100}%`;
  return el;
}

function describe(error) {
  return typeof error?.describe === "function" ? error.describe() : String(error);
}

/**
 * Open the page large in the viewer dialog, with ``boxes`` drawn. ``nav``: buttons shown above
 * the page ([{label, ariaLabel, open}]), e.g. to the page a quote continues on.
 */
export function openViewer({ docId, page, boxes, title, caption, boxClass, wholePage, nav = [] }) {
  const dialog = $("viewer");
  $("viewer-title").textContent = title;
  $("viewer-caption").textContent = caption || "";
  $("viewer-caption").hidden = !caption;
  const links = clear($("viewer-nav"));
  links.hidden = nav.length === 0;
  for (const item of nav) {
    links.append(
      h(
        "button",
        { type: "button", class: "as-link", "aria-label": item.ariaLabel, onclick: item.open },
        item.label,
      ),
    );
  }
  const holder = clear($("viewer-page"));
  holder.append(
    pageFigure({
      docId,
      page,
      boxes,
      boxClass,
      wholePage,
      alt: `${title}: page ${page}, enlarged`,
    }),
  );
  if (!dialog.open) dialog.showModal();
  $("viewer-close").focus();
}

export function initViewer() {
  const dialog = $("viewer");
  $("viewer-close").addEventListener("click", () => dialog.close()); // Escape closes it too
}
