// Helpers of the Files panel, the Memory dialog and the follow-up chips. Their strings live in
// i18n.js with the rest of the page's (English and Chinese built in; ChatUI(messages=...) changes
// them); `t` here is i18n.js's.

import { BUILTIN, t } from "./i18n.js";

export { t };

/** The English strings (i18n.js's table; kept under this name for existing callers). */
export const STRINGS = BUILTIN.en;

/** An element with a class and text (text is always set as text, never parsed as HTML). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A `type="button"` button with its test id. */
export function button(cls, text, testid) {
  const b = el("button", cls, text);
  b.type = "button";
  if (testid) b.dataset.testid = testid;
  return b;
}
