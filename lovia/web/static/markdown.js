// Markdown for model output: marked (CommonMark + GFM) -> DOMPurify -> highlight.js.
//
// Safety: raw HTML in the source is shown as text (the `html` renderer escapes it), and the
// produced HTML is still passed through DOMPurify with a fixed tag and attribute list, so model
// output can never run a script, add an event handler or link to a javascript:/data: URL.
// The libraries are vendored in ./vendor (see vendor/VENDORED.md); the page loads nothing else.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";
import hljs from "./vendor/highlight.min.js";
import { t } from "./i18n.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

const ALLOWED_TAGS = [
  "p", "br", "hr", "code", "pre", "strong", "em", "del", "a", "blockquote",
  "ul", "ol", "li", "input", "table", "thead", "tbody", "tr", "th", "td",
  "h1", "h2", "h3", "h4", "h5", "h6", "span",
];
const ALLOWED_ATTR = ["href", "title", "start", "type", "checked", "disabled", "class", "align"];
const SAFE_URL = /^(?:https?:|mailto:|#|\/(?!\/)|\.{0,2}\/|[^:/?#]*(?:[/?#]|$))/i;

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html: ({ text }) => escapeHtml(text), // raw HTML from the model is text, never markup
    link(token) {
      // A javascript:, data: or other non-web link is shown as its text, not as a dead link.
      if (!SAFE_URL.test(token.href || "")) return this.parser.parseInline(token.tokens);
      return false; // marked's own rendering
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_URL.test(href)) node.removeAttribute("href");
    else if (/^https?:/i.test(href)) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  }
  if (node.tagName === "INPUT" && node.getAttribute("type") !== "checkbox") node.remove();
  if (node.tagName === "INPUT") node.setAttribute("disabled", "");
});

/** Markdown source -> sanitized HTML string (no highlighting yet: see `enhance`). */
export function renderMarkdown(source) {
  const html = marked.parse(String(source ?? ""), { async: false });
  return DOMPurify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: [...ALLOWED_ATTR, "target", "rel"],
    ALLOW_DATA_ATTR: false,
  });
}

/** Highlight the code blocks under `root` and give each a copy button (idempotent). */
export function enhance(root) {
  for (const code of root.querySelectorAll("pre > code")) {
    const pre = code.parentElement;
    if (pre.dataset.enhanced) continue;
    pre.dataset.enhanced = "1";
    const lang = (code.className.match(/language-([\w+#-]+)/) || [])[1];
    if (lang && hljs.getLanguage(lang)) hljs.highlightElement(code);
    else code.classList.add("hljs");
    pre.append(copyButton(() => code.textContent, t("actions.copyCode"), "copy-code"));
  }
}

/** A button that copies `text()` to the clipboard and says so. */
export function copyButton(text, label, testid) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "link copy";
  button.textContent = t("actions.copy");
  button.title = label;
  button.setAttribute("aria-label", label);
  button.dataset.testid = testid;
  button.onclick = async (event) => {
    event.stopPropagation();
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = t("actions.copied");
    } catch (_e) {
      button.textContent = t("actions.copyFailed");
    }
    setTimeout(() => { button.textContent = t("actions.copy"); }, 1500);
  };
  return button;
}
