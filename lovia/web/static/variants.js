// Answer variants: after a regenerate, the answers a user message had before stay reachable with
// "‹ 1/2 ›" arrows on the answer. The server keeps them (the rewind's `keep_answer`, listed as the
// chat's `variants`), so a reload shows them too. Earlier answers are read-only: the chat goes on
// from the latest one (branch from it, or regenerate again, to take another direction).

import { t } from "./i18n.js";
import { Transcript } from "./render.js";

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// One stored answer drawn the way the transcript draws a finished one (copy button included).
function earlierAnswer(answer) {
  const scratch = el("div");
  new Transcript(scratch, {}).render(answer.entries || [], [], false);
  const node = scratch.querySelector(".msg.assistant") || el("div", "msg assistant");
  node.classList.add("variant-old");
  node.dataset.testid = "variant-answer";
  return node;
}

export function initVariants(transcript) {
  const previous = transcript.hooks.controls;
  const shown = new Map(); // user turn -> index of the answer on screen, while the same render lasts
  const shownVersions = new Map(); // user turn -> index of the version on screen
  let renderedFrom = null;
  transcript.hooks.controls = (root) => {
    root.querySelectorAll(".msg.variant-old, .msg.version-old").forEach((n) => n.remove()); // redrawn below
    root.querySelectorAll(".version-hidden").forEach((n) => n.classList.remove("version-hidden"));
    root.querySelectorAll(".version-pager").forEach((n) => n.remove());
    previous?.(root);
    if (transcript.variants !== renderedFrom) {
      renderedFrom = transcript.variants;
      shown.clear(); // a new render starts on the latest answers
      shownVersions.clear();
    }
    for (const { user_turn: turn, answers } of transcript.variants || []) {
      // An edit keeps whole earlier versions (they start with the message); a regenerate, answers.
      const versions = answers.filter(isVersion);
      decorate(root, turn, answers.filter((a) => !isVersion(a)), shown);
      decorateVersions(root, turn, versions, shownVersions);
    }
  };
}

function isVersion(kept) {
  const first = (kept.entries || [])[0];
  return Boolean(first && first.type === "input");
}

// An earlier version of a turn, drawn read-only: the message as it was, and the answer it got.
function earlierVersion(kept) {
  const scratch = el("div");
  new Transcript(scratch, {}).render(kept.entries || [], [], false);
  const nodes = [...scratch.querySelectorAll(".msg.user, .msg.assistant")];
  for (const node of nodes) {
    node.classList.add("version-old");
    // Not the chat's messages: scripts and tests that count those (message-user/-assistant) skip them.
    node.dataset.testid = node.matches(".msg.user") ? "version-message" : "version-answer";
    node.querySelectorAll(".toolbar button").forEach((button) => button.remove()); // nothing to act on
  }
  return nodes;
}

// One "‹ i/n ›" pager at the front of `bar`, for the i-th of `total` entries: the arrows call
// `show` with the neighbour's index. `labels` holds the caller's translated texts (earlier,
// later, readOnly); the test ids are `<name>-pager`, `<name>-prev`, `<name>-next`, `<name>-count`.
function prependPager(bar, className, name, i, total, show, labels) {
  const pager = el("span", className);
  pager.dataset.testid = `${name}-pager`;
  const prev = el("button", "link", "‹");
  const next = el("button", "link", "›");
  prev.type = next.type = "button";
  prev.dataset.testid = `${name}-prev`;
  next.dataset.testid = `${name}-next`;
  prev.setAttribute("aria-label", labels.earlier);
  next.setAttribute("aria-label", labels.later);
  prev.disabled = i === 0;
  next.disabled = i === total - 1;
  prev.onclick = () => show(i - 1);
  next.onclick = () => show(i + 1);
  const count = el("span", "variant-count", `${i + 1}/${total}`);
  count.dataset.testid = `${name}-count`;
  if (i < total - 1) count.title = labels.readOnly;
  pager.append(prev, count, next);
  bar.prepend(pager);
}

// The message's versions, oldest first and the one on screen last, switched by "‹ 1/2 ›" arrows
// on the message. Only the latest is live: the chat goes on from it (edit it again to branch off).
function decorateVersions(root, turn, versions, shownVersions) {
  const user = root.querySelector(`.msg.user:not(.version-old)[data-user-turn="${turn}"]`);
  if (!user || !versions.length) return;
  const latest = [user];
  for (let node = user.nextElementSibling; node && !node.matches(".msg.user:not(.version-old)"); node = node.nextElementSibling) {
    latest.push(node);
  }
  const groups = versions.map(earlierVersion);
  for (const group of groups) group.forEach((node) => user.before(node));
  groups.push(latest);
  const show = (index) => {
    shownVersions.set(turn, index);
    groups.forEach((group, i) => group.forEach((node) => node.classList.toggle("version-hidden", i !== index)));
  };
  groups.forEach((group, i) => {
    const message = group.find((node) => node.matches(".msg.user"));
    if (!message) return;
    const bar = message.querySelector(":scope > .toolbar") || message.appendChild(el("div", "toolbar"));
    const labels = { earlier: t("versions.earlier"), later: t("versions.later"), readOnly: t("versions.readOnly") };
    prependPager(bar, "variant-pager version-pager", "edit", i, groups.length, show, labels);
  });
  show(Math.min(shownVersions.has(turn) ? shownVersions.get(turn) : groups.length - 1, groups.length - 1));
}

function decorate(root, turn, answers, shown) {
  const user = root.querySelector(`.msg.user[data-user-turn="${turn}"]`);
  const current = user && user.nextElementSibling;
  if (!current || !current.matches(".msg.assistant") || !answers.length) return;
  const nodes = answers.map(earlierAnswer);
  nodes.forEach((node) => current.before(node));
  nodes.push(current); // oldest first, the latest last
  const show = (index) => {
    shown.set(turn, index);
    nodes.forEach((node, i) => {
      node.style.display = i === index ? "" : "none";
    });
  };
  nodes.forEach((node, i) => {
    const bar = node.querySelector(":scope > .toolbar") || node.appendChild(el("div", "toolbar"));
    const labels = { earlier: t("variants.earlier"), later: t("variants.later"), readOnly: t("variants.readOnly") };
    prependPager(bar, "variant-pager", "variant", i, nodes.length, show, labels);
  });
  show(Math.min(shown.has(turn) ? shown.get(turn) : nodes.length - 1, nodes.length - 1));
}
