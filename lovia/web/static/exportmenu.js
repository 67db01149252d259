// The top bar's Export menu (data-part="export"): download the open chat as Markdown, JSON,
// text or HTML from GET /api/sessions/{id}/export. The request goes through fetch with the
// page's bearer token (a plain link would carry no token), and the reply is saved from a Blob.
// The button is disabled while the chat is new (nothing stored to export yet).

import { authHeaders, check, url } from "./api.js";
import * as ext from "./extensions.js";

const EXTENSIONS = { md: "md", json: "json", txt: "txt", html: "html" };

// A file name from the chat's title (letters, digits, dashes), else its id.
function fileName(title, sessionId, format) {
  const base = String(title || "")
    .normalize("NFKC")
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60);
  return `${base || sessionId}.${EXTENSIONS[format]}`;
}

async function download(sessionId, format, title) {
  const path = `/api/sessions/${encodeURIComponent(sessionId)}/export?format=${encodeURIComponent(format)}`;
  const response = await check(await fetch(url(path), { headers: authHeaders() }));
  const blob = await response.blob();
  const href = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = href;
  link.download = fileName(title, sessionId, format);
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(href), 60_000);
}

/**
 * `page.sessionId()` is the open chat or null; `page.title()` its title, if known;
 * `page.fail(error)` shows an error the way the page does.
 */
export function initExportMenu(page) {
  const box = document.querySelector('[data-part="export"]');
  if (!box) return;
  const toggle = box.querySelector("[data-testid=export]");
  const menu = box.querySelector("[role=menu]");
  const items = () => [...menu.querySelectorAll("[role=menuitem]")];

  function setOpen(open, { focusToggle = false } = {}) {
    menu.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) items()[0]?.focus();
    else if (focusToggle) toggle.focus();
  }

  toggle.addEventListener("click", () => setOpen(menu.hidden));
  toggle.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" && menu.hidden && !toggle.disabled) {
      event.preventDefault();
      setOpen(true);
    }
  });
  menu.addEventListener("keydown", (event) => {
    const list = items();
    const at = list.indexOf(document.activeElement);
    if (event.key === "Escape") {
      event.preventDefault();
      setOpen(false, { focusToggle: true });
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      list[(at + step + list.length) % list.length]?.focus();
    } else if (event.key === "Home" || event.key === "End") {
      event.preventDefault();
      list[event.key === "Home" ? 0 : list.length - 1]?.focus();
    } else if (event.key === "Tab") {
      setOpen(false);
    }
  });
  menu.addEventListener("click", (event) => {
    const item = event.target.closest?.("[data-format]");
    if (!item) return;
    setOpen(false, { focusToggle: true });
    const id = page.sessionId();
    if (id) download(id, item.dataset.format, page.title()).catch(page.fail);
  });
  // A click elsewhere closes the menu.
  document.addEventListener("click", (event) => {
    if (!menu.hidden && !box.contains(event.target)) setOpen(false);
  });

  const update = (sessionId) => {
    toggle.disabled = !sessionId;
    if (!sessionId) setOpen(false);
  };
  ext.on("session", ({ sessionId }) => update(sessionId));
  update(page.sessionId());
}
