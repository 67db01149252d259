// Renders a transcript (stored entries) and applies live SSE frames on top of it.
// All model- or user-provided text goes through textContent or the safe Markdown renderer.

import { renderToolView } from "./charts.js";
import { renderCallView } from "./diffview.js";
import { copyButton, enhance, renderMarkdown } from "./markdown.js";
import { applyI18n, t } from "./i18n.js";
import { messageActions, onMessageActionsChange, onToolViewsChange, toast, toolSummary, toolViewField } from "./extensions.js";

const HANDOFF_PREFIX = "transfer_to_"; // lovia.handoff.HANDOFF_TOOL_PREFIX
const FOLLOW_SLACK = 48; // px from the bottom that still counts as "at the bottom"

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter((p) => p && p.type === "text").map((p) => p.text).join("");
  return content == null ? "" : JSON.stringify(content);
}

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch (_e) {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

// The call's arguments on one line, as the model wrote them but readable: JSON re-serialized so
// escapes such as \u4e2d show as the characters they stand for.
function compactArgs(args) {
  if (!args || args === "{}") return "";
  try {
    return JSON.stringify(JSON.parse(args));
  } catch (_e) {
    return args;
  }
}

function usageText(usage) {
  if (!usage || (!usage.input_tokens && !usage.output_tokens)) return "";
  return t("chat.usage", { input: usage.input_tokens || 0, output: usage.output_tokens || 0 });
}

const MAX_ARGS_CHARS = 256 * 1024;
const TOOL_STATUS = { pending: "running", running: "running", awaiting: "awaiting", done: "done", failed: "error", dropped: "error" };
// Built-in icons for message actions: stroke paths on a 24×24 grid.
const ICONS = {
  "thumbs-up": "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3",
  "thumbs-down": "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17",
  flag: "M4 15s1-1 4-1 5 2 8 2 4-1 4-1V3s-1 1-4 1-5-2-8-2-4 1-4 1zM4 22v-7",
  bookmark: "M19 21l-7-5-7 5V5a2 2 0 0 1 2-2h10a2 2 0 0 1 2 2z",
  copy: "M9 9h11v11H9zM5 15H4a2 2 0 0 1-2-2V4a2 2 0 0 1 2-2h9a2 2 0 0 1 2 2v1",
  quote: "M5 7h5v6l-2 4H6l2-4H5zM14 7h5v6l-2 4h-2l2-4h-3z",
  star: "M12 2l3.09 6.26L22 9.27l-5 4.87 1.18 6.88L12 17.77l-6.18 3.25L7 14.14 2 9.27l6.91-1.01z",
};

function builtinIcon(name) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("fill", "none");
  svg.setAttribute("stroke", "currentColor");
  svg.setAttribute("stroke-width", "2");
  svg.setAttribute("stroke-linecap", "round");
  svg.setAttribute("stroke-linejoin", "round");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", ICONS[name]);
  svg.append(path);
  return svg;
}

// The blank chat's content: the page's `welcome` block (its template), in the page's language.
function welcome() {
  const tpl = document.getElementById("welcome-template");
  if (!tpl || !tpl.content.firstElementChild) return el("div", "empty", t("welcome.title"));
  const node = tpl.content.firstElementChild.cloneNode(true);
  applyI18n(node);
  return node;
}

// One message of the transcript ([data-part="turn"], data-role "user" or "assistant"): a copy of
// the served page's <template id="turn-template"> element for the role, or the same markup made
// here when the page has no such template (a page of your own).
function turnNode(role) {
  const made = document.getElementById("turn-template")?.content.querySelector(`[data-role="${role}"]`);
  if (made) return made.cloneNode(true);
  const node = el("div", `msg ${role}`);
  node.dataset.testid = `message-${role}`;
  node.dataset.part = "turn";
  node.dataset.role = role;
  node.append(el("div", "body"));
  return node;
}

function iconNode(icon, label) {
  const span = el("span", "action-icon");
  if (!icon) span.textContent = label;
  else if (Object.hasOwn(ICONS, icon)) span.append(builtinIcon(icon));
  else if (/^\s*<svg[\s>]/i.test(icon)) {
    const svg = new DOMParser().parseFromString(icon, "image/svg+xml").documentElement;
    if (svg && svg.nodeName.toLowerCase() === "svg") span.append(document.importNode(svg, true));
    else span.textContent = label;
  } else span.textContent = icon;
  return span;
}

// ---------------------------------------------------------------- activity folds

// Two or more consecutive reasoning / tool steps of a reply fold under one summary line
// ([data-part="activity"], data-open "true" / "false"). A fold is open while its steps come in
// and closes once the reply's text starts after it; one the reader opened again stays open. A
// closed fold clips its steps to no height and makes them inert, rather than dropping them from
// the layout as a closed <details> would: their text still reads (innerText) for scripts and tests. A card awaiting the user
// (an approval) is not a step: it stays outside, so a closed fold never hides it, and so does a
// tool's rich view (a chart, a table, a page), which sits between cards.
const isFold = (node) => node.dataset?.part === "activity";
const isStep = (node) => node.matches?.("details.reasoning") || (node.dataset?.part === "tool" && node.dataset.status !== "awaiting");

// Make `parent`'s element children start with `wanted`, in order, moving only what is out of place.
function arrange(parent, wanted) {
  wanted.forEach((node, i) => {
    const at = parent.children[i];
    if (at !== node) parent.insertBefore(node, at || null);
  });
}

const stepsOf = (fold) => fold.lastElementChild;

function setFoldOpen(fold, open) {
  fold.dataset.open = String(open);
  fold.firstElementChild.setAttribute("aria-expanded", String(open));
  stepsOf(fold).inert = !open;
}

function foldSummary(fold, steps) {
  const names = [...new Set(steps.filter((s) => s.dataset.part === "tool").map((s) => s.dataset.tool))];
  const statuses = steps.filter((s) => s.dataset.part === "tool").map((s) => s.dataset.status);
  fold.dataset.status = statuses.includes("running") ? "running" : statuses.includes("error") ? "error" : "done";
  fold.dataset.steps = String(steps.length);
  const summary = fold.firstElementChild;
  summary.querySelector(".activity-count").textContent = t("chat.activity", { n: steps.length });
  summary.querySelector(".activity-names").textContent = `· ${names.length ? names.join(", ") : t("chat.reasoning")}`;
}

function newFold() {
  const fold = el("div", "activity");
  fold.dataset.part = "activity";
  fold.dataset.testid = "activity";
  const summary = el("button", "activity-summary");
  summary.type = "button";
  summary.append(el("span", "activity-count"), el("span", "activity-names"));
  summary.onclick = () => setFoldOpen(fold, fold.dataset.open !== "true");
  fold.append(summary, el("div", "activity-steps"));
  setFoldOpen(fold, true);
  return fold;
}

/** Fold the runs of steps in a reply's body (idempotent: call it after any change to the body). */
export function foldActivity(body) {
  if (!body) return;
  const items = [];
  for (const child of [...body.children]) {
    if (isFold(child)) items.push(...stepsOf(child).children);
    else items.push(child);
  }
  const top = [];
  let run = [];
  const flush = () => {
    if (run.length >= 2) top.push(run);
    else top.push(...run);
    run = [];
  };
  for (const item of items) {
    if (isStep(item)) run.push(item);
    else {
      flush();
      top.push(item);
    }
  }
  flush();
  const used = new Set();
  const wanted = top.map((entry) => {
    if (!Array.isArray(entry)) return entry;
    const holders = entry.map((step) => step.parentNode?.parentNode);
    let fold = holders.find((p) => p && p !== body && isFold(p) && p.parentNode === body && !used.has(p));
    if (!fold) fold = newFold();
    used.add(fold);
    arrange(stepsOf(fold), entry);
    foldSummary(fold, entry);
    return fold;
  });
  arrange(body, wanted);
  while (body.children.length > wanted.length) body.lastElementChild.remove(); // emptied folds
  let textAfter = false;
  for (let i = wanted.length - 1; i >= 0; i -= 1) {
    const node = wanted[i];
    if (node.classList?.contains("md")) textAfter = true;
    else if (isFold(node) && textAfter && !node._closed) {
      setFoldOpen(node, false); // the reply's text started: fold its steps away (once)
      node._closed = true;
    }
  }
}

// What happened, in words for the person at the page, from the error's type and message; the
// exact type, message and hint stay one click away under "Details" for whoever runs the server.
function plainError(data) {
  const type = data.type || "";
  const text = data.message || "";
  if (/MaxTurns/.test(type)) return "error.plain.turns";
  if (/Budget/.test(type)) return "error.plain.budget";
  if (/ContextOverflow/.test(type)) return "error.plain.tooLong";
  if (/Guardrail|Tripwire/.test(type)) return "error.plain.guardrail";
  if (/HTTP 40[13]\b|api[ _-]?key|unauthori[sz]ed/i.test(text)) return "error.plain.key";
  if (/HTTP 429\b|rate.?limit/i.test(text)) return "error.plain.busy";
  if (/HTTP 5\d\d\b/.test(text)) return "error.plain.server";
  if (/connection (failed|cut|refused)|connect|timed out|unreachable/i.test(text)) return "error.plain.unreachable";
  if (/Provider|Model/.test(type)) return "error.plain.model";
  return "error.plain.other";
}

function errorCard(data, onRetry) {
  const card = el("div", "error-card");
  card.setAttribute("role", "alert");
  card.dataset.testid = "error-card";
  if (data.run_id) card.dataset.runId = data.run_id;
  card.append(el("div", "error-plain", t(plainError(data))));
  if (onRetry) {
    const row = el("div", "error-actions");
    row.append(el("span", "error-retry-note", t("error.tryAgain")));
    const retry = el("button", "link error-retry", t("error.retry"));
    retry.type = "button";
    retry.dataset.testid = "retry";
    retry.dataset.action = "retry";
    retry.onclick = () => onRetry();
    row.append(retry);
    card.append(row);
  }
  const details = el("details", "error-details");
  details.dataset.testid = "error-details";
  details.append(el("summary", null, t("error.details")));
  const head = el("div", "error-title");
  head.append(el("strong", "error-type", data.type || t("error.type")), el("span", "error-message", data.message || ""));
  details.append(head);
  if (data.hint) details.append(el("div", "error-hint", t("error.hint", { hint: data.hint })));
  card.append(details);
  return card;
}

export class Transcript {
  constructor(root, { onEdit, onRegenerate, onRetry, jump }) {
    this.root = root;
    this.onEdit = onEdit;
    this.onRegenerate = onRegenerate;
    this.onRetry = onRetry || null;
    this.canRewind = false;
    this.hooks = {}; // optional page extensions: userContent(msgEl, content), controls(root), viewContext()
    this.liveCalls = new Set(); // tool calls whose result arrived live in this page: their views run at once
    this.replaying = false;
    this.follow = true; // the reader is at the bottom: keep them there as the answer grows
    this.lastTop = 0; // scrollTop at the last scroll event, to tell "scrolled up" from "content grew"
    this.jump = jump || null;
    this.retryTimer = null;
    root.addEventListener("scroll", () => this.onScroll(), { passive: true });
    onToolViewsChange(() => this.refreshToolViews());
    onMessageActionsChange(() => this.drawActions());
    if (this.jump) this.jump.onclick = () => this.jumpToLatest();
    this.reset();
  }

  atBottom() {
    const box = this.root;
    return box.scrollHeight - box.scrollTop - box.clientHeight <= FOLLOW_SLACK;
  }

  // Scroll events arrive a frame late: one caused by our own move to the bottom can be read
  // after more text has landed, when the box is no longer at the bottom. So only a move
  // upward (the reader scrolling away) stops following; reaching the bottom resumes it.
  onScroll() {
    const top = this.root.scrollTop;
    if (this.atBottom()) this.follow = true;
    else if (top < this.lastTop - 1) this.follow = false;
    this.lastTop = top;
    this.updateJump();
  }

  updateJump() {
    if (this.jump) this.jump.hidden = this.follow || this.root.scrollHeight <= this.root.clientHeight;
  }

  jumpToLatest() {
    this.follow = true;
    this.root.scrollTop = this.root.scrollHeight;
    this.updateJump();
  }

  reset() {
    clearInterval(this.retryTimer);
    this.retryTimer = null;
    this.root.replaceChildren();
    this.current = null;
    this.userCount = 0;
    this.nextRef = null;
    this.lastRef = null;
    this.live = null; // { text, textEl, reasoning, reasoningEl }
    this.pendingPaint = false;
  }

  // ---------------------------------------------------------------- full render

  // Re-render from stored entries, keeping the reader's place: at the bottom if they were
  // following, else at the same offset (never a jump to the top).
  render(entries, runs, running, variants) {
    const top = this.root.scrollTop;
    const follow = this.follow;
    this.reset();
    this.variants = variants || []; // earlier answers kept by regenerate: [{user_turn, answers}]
    const ends = new Map((runs || []).map((r) => [r.start + r.count, r]));
    // Refs as the server names them (lovia.web.serialization.user_turn_refs): "<run_id>:<n>",
    // the n-th user message of that run.
    const runOf = (index) => (runs || []).find((r) => index >= r.start && index < r.start + r.count);
    const usersIn = new Map();
    this.replaying = true;
    entries.forEach((entry, index) => {
      if (entry.type === "input" && entry.role === "user") {
        const run = runOf(index);
        const n = run ? usersIn.get(run.run_id) || 0 : 0;
        if (run) usersIn.set(run.run_id, n + 1);
        this.nextRef = run && run.run_id ? `${run.run_id}:${n}` : null;
      }
      this.addEntry(entry);
      if (entry.type === "input" && entry.role === "user") this.markSource(runOf(index));
      const run = ends.get(index + 1);
      if (run) this.endRun(run);
    });
    this.replaying = false;
    if (!running) this.root.querySelectorAll(".tool.pending").forEach((t) => this.setToolState(t, "dropped"));
    this.root.querySelectorAll(".msg.assistant > .body").forEach((body) => foldActivity(body));
    if (!entries.length) this.root.append(welcome());
    this.setControls(running);
    this.follow = follow;
    if (follow) this.root.scrollTop = this.root.scrollHeight;
    else this.root.scrollTop = top;
    this.updateJump();
  }

  endRun(run) {
    if (run.error) {
      const msg = this.assistant();
      msg.node.append(errorCard({ ...run.error, run_id: run.run_id }, this.onRetry));
    }
    if (this.current) this.setFooter(this.current, run.usage, run.stopped);
    this.current = null;
  }

  hasErrorFor(runId) {
    return [...this.root.querySelectorAll(".error-card")].some((c) => !runId || c.dataset.runId === runId);
  }

  // Re-fold the reply `node` is in (the current one by default); not while a stored chat replays.
  fold(node) {
    if (this.replaying) return;
    const body = node ? node.closest(".body") : this.current?.body;
    if (body) foldActivity(body);
  }

  addEntry(entry) {
    if (entry.type === "input") {
      if (entry.role === "user") {
        // Not folded into `hooks.userContent?.(...)`: without a hook that would skip addUser too.
        const msg = this.addUser(contentText(entry.content));
        this.hooks.userContent?.(msg, entry.content);
      }
      return;
    }
    const msg = this.assistant();
    if (entry.type === "reasoning") msg.body.append(this.reasoningBlock(entry.content));
    else if (entry.type === "assistant_text") {
      msg.body.append(this.textBlock(entry.content));
      msg.node._texts = [...(msg.node._texts || []), entry.content];
    }
    else if (entry.type === "tool_call") this.storedCall(msg, entry);
    else if (entry.type === "tool_result") this.toolResult({ id: entry.call_id, output: entry.output, is_error: entry.is_error, parts: entry.parts });
    this.fold();
  }

  storedCall(msg, entry) {
    const known = this.findTool(entry.call_id);
    if (known) return; // already shown live (its handoff note too)
    msg.body.append(this.toolBlock(entry.call_id, entry.name, entry.arguments));
    if (entry.name.startsWith(HANDOFF_PREFIX)) this.note(t("chat.handedOver", { name: entry.name.slice(HANDOFF_PREFIX.length) }), "handoff");
  }

  addUser(text) {
    this.root.querySelector(".empty")?.remove();
    const msg = turnNode("user");
    msg.dataset.userTurn = String(this.userCount++);
    msg.querySelector(".body").textContent = text;
    msg.dataset.text = text;
    if (this.nextRef) msg.dataset.ref = this.nextRef;
    this.lastRef = this.nextRef || null;
    this.nextRef = null;
    this.root.append(msg);
    this.current = null;
    this.scroll();
    return msg;
  }

  assistant() {
    if (this.current) return this.current;
    this.root.querySelector(".empty")?.remove();
    const node = turnNode("assistant");
    if (this.lastRef) node.dataset.ref = this.lastRef;
    const body = node.querySelector(".body");
    this.root.append(node);
    this.current = { node, body };
    return this.current;
  }

  textBlock(text) {
    const block = el("div", "md");
    block.innerHTML = renderMarkdown(text); // safe: raw HTML is escaped and the result sanitized
    enhance(block);
    return block;
  }

  reasoningBlock(text) {
    const details = el("details", "reasoning");
    details.append(el("summary", "", t("chat.reasoning")), el("div", "", text));
    return details;
  }

  toolBlock(id, name, args) {
    const existing = this.findTool(id);
    if (existing) return existing;
    const details = el("details", "tool pending");
    details.dataset.testid = "tool-call";
    details.dataset.callId = id;
    details.dataset.args = args || "{}";
    details.dataset.part = "tool";
    details.dataset.tool = name;
    details.dataset.status = "running";
    const summary = el("summary");
    summary.append(el("span", "tool-name", name), el("span", "tool-args", compactArgs(args)), el("span", "tool-summary"), el("span", "status"));
    details.append(summary, el("pre", "tool-input", `${t("tool.arguments")} ${pretty(args || "{}")}`));
    renderCallView(details, name, args);
    this.applyToolView(details);
    return details;
  }

  findTool(id) {
    return [...this.root.querySelectorAll(".tool")].find((t) => t.dataset.callId === id) || null;
  }

  setToolState(node, state) {
    node.classList.remove("pending", "running", "done", "failed", "dropped");
    node.classList.add(state);
    node.dataset.status = TOOL_STATUS[state] || "running";
    this.applyToolView(node);
  }

  // A frozen snapshot of a tool card's call, for the registered tool views.
  toolSnapshot(node) {
    let args;
    const raw = node.dataset.args || "{}";
    if (raw.length <= MAX_ARGS_CHARS) {
      try {
        args = JSON.parse(raw);
      } catch (_e) {
        args = undefined;
      }
    }
    const frame = node._result || null;
    const result = frame ? (frame.output !== undefined && frame.output !== null ? frame.output : pretty(frame.result)) : undefined;
    return Object.freeze({
      id: node.dataset.callId,
      name: node.dataset.tool,
      args,
      status: node.dataset.status,
      result,
      isError: Boolean(frame && frame.is_error),
      images: frame && Array.isArray(frame.parts) ? frame.parts.filter((p) => p && p.type === "image") : [],
    });
  }

  // Apply the registered tool views to one card: its summary line and, with a render, its body.
  applyToolView(node) {
    if (!node.dataset.tool) return;
    const tool = this.toolSnapshot(node);
    const line = toolSummary(tool);
    const summary = node.querySelector(":scope > summary");
    if (summary) {
      summary.classList.toggle("summarized", line !== null);
      summary.querySelector(".tool-summary").textContent = line ?? "";
      summary.title = line !== null ? `${tool.name}(${node.dataset.args || ""})` : "";
    }
    const render = toolViewField(tool.name, "render");
    let body = node.querySelector(":scope > .tool-body");
    if (typeof node._cleanup === "function") {
      try { node._cleanup(); } catch (error) { console.error(error); }
    }
    node._cleanup = null;
    if (!render) {
      body?.remove();
      node.classList.remove("has-view");
      return;
    }
    if (!body) {
      body = el("div", "tool-body");
      body.dataset.testid = "tool-body";
      const source = el("button", "link tool-source-toggle", t("tool.source"));
      source.type = "button";
      source.onclick = () => node.classList.toggle("show-source");
      summary.after(body, source);
    }
    node.classList.add("has-view");
    try {
      const out = render(body, tool, { callId: tool.id });
      Promise.resolve(out).then((cleanup) => { if (typeof cleanup === "function") node._cleanup = cleanup; }, (error) => {
        body.replaceChildren(el("div", "view-note error", t("render.failed", { message: error?.message || String(error) })));
      });
    } catch (error) {
      body.replaceChildren(el("div", "view-note error", t("render.failed", { message: error?.message || String(error) })));
    }
  }

  refreshToolViews() {
    this.root.querySelectorAll('[data-part="tool"]').forEach((node) => this.applyToolView(node));
  }

  setFooter(msg, usage, stopped) {
    msg.node.querySelector(".usage")?.remove();
    const footer = el("div", "usage");
    if (stopped) {
      const mark = el("span", "stopped-mark", t("chat.stopped"));
      mark.dataset.testid = "stopped-mark";
      mark.title = t("chat.stoppedTitle");
      footer.append(mark);
    }
    const text = usageText(usage);
    if (text) footer.append(el("span", "", stopped ? ` · ${text}` : text));
    if (footer.childNodes.length) msg.node.append(footer);
  }

  // ---------------------------------------------------------------- live frames

  ensureLive() {
    if (!this.live) this.live = { text: "", textEl: null, reasoning: "", reasoningEl: null };
    return this.live;
  }

  textDelta(delta) {
    this.clearRetry();
    const live = this.ensureLive();
    if (!live.textEl) {
      this.dropSuperseded();
      live.textEl = el("div", "md cursor");
      this.assistant().body.append(live.textEl);
      this.fold();
    }
    live.text += delta;
    this.paint();
  }

  reasoningDelta(delta) {
    const live = this.ensureLive();
    if (!live.reasoningEl) {
      live.reasoningEl = this.reasoningBlock("");
      live.reasoningEl.open = true;
      this.assistant().body.append(live.reasoningEl);
      this.fold();
    }
    live.reasoning += delta;
    live.reasoningEl.querySelector("div").textContent = live.reasoning;
  }

  // Re-render the streamed answer at most once per frame, and less often when a render is slow
  // (a long answer): the wait before the next paint is about the last paint's own cost.
  paint() {
    if (this.pendingPaint) return;
    this.pendingPaint = true;
    const wait = Math.min(250, this.lastPaintMs || 0);
    setTimeout(() => requestAnimationFrame(() => {
      this.pendingPaint = false;
      const started = performance.now();
      if (this.live && this.live.textEl) {
        this.live.textEl.innerHTML = renderMarkdown(this.live.text);
        enhance(this.live.textEl);
      }
      this.lastPaintMs = performance.now() - started;
      this.scroll();
    }), wait);
  }

  // A message a schedule sent, not the user: marked on its turn so it does not pass for typed.
  markSource(run) {
    const source = (run && run.source) || "";
    if (!source.startsWith("schedule:")) return;
    const turns = this.root.querySelectorAll('.msg.user[data-part="turn"]');
    const msg = turns[turns.length - 1];
    if (!msg || msg.querySelector(".source-mark")) return;
    msg.dataset.source = "schedule";
    const mark = el("div", "source-mark", t("chat.scheduled"));
    mark.dataset.testid = "scheduled-mark";
    msg.prepend(mark);
  }

  // From the click on Send until the run's first output: the message as typed, and a "Working…"
  // line where the answer will come (the server's snapshot redraws both once it starts the run).
  pending(text) {
    if (text) this.addUser(text);
    this.showWorking();
  }

  showWorking() {
    if (this.root.querySelector(".working")) return;
    const line = el("div", "working", t("chat.working"));
    line.dataset.part = "working";
    line.dataset.testid = "working";
    line.setAttribute("role", "status");
    this.assistant().body.append(line);
    this.scroll();
  }

  hideWorking() {
    this.root.querySelectorAll(".working").forEach((n) => n.remove());
  }

  // The server is at its live-run limit and the run waits in line (`run_waiting`): one status
  // line where the answer will come, with the chat's place; it gives way to "Working…" once the
  // run has a slot (hideWaiting says whether it was there).
  showWaiting(position) {
    this.hideWorking();
    let line = this.root.querySelector(".waiting");
    if (!line) {
      line = el("div", "waiting", "");
      line.dataset.part = "waiting";
      line.dataset.testid = "waiting";
      line.setAttribute("role", "status");
      this.assistant().body.append(line);
    }
    line.dataset.position = String(position);
    line.textContent = t("chat.waiting", { position });
    this.scroll();
  }

  hideWaiting() {
    const lines = this.root.querySelectorAll(".waiting");
    lines.forEach((n) => n.remove());
    return lines.length > 0;
  }

  // A model call failed after streaming some text and is being retried: that text is void, but
  // it stays on screen, dimmed and marked, until the retry's own text (or the run's end) replaces it.
  supersedeLive() {
    if (!this.live) return;
    for (const node of [this.live.textEl, this.live.reasoningEl]) {
      if (!node) continue;
      node.classList.remove("cursor");
      node.classList.add("superseded");
      node.dataset.testid = "superseded";
      node.title = t("chat.superseded");
    }
    this.live = null;
  }

  dropSuperseded() {
    this.root.querySelectorAll(".superseded").forEach((n) => n.remove());
  }

  discardLive() {
    this.dropSuperseded();
    if (!this.live) return;
    this.live.textEl?.remove();
    this.live.reasoningEl?.remove();
    this.live = null;
    this.fold();
  }

  messageCompleted(message) {
    this.clearRetry();
    this.discardLive();
    for (const entry of message.entries || []) this.addEntry(entry);
    this.scroll();
  }

  toolCall(frame) {
    let node = this.findTool(frame.id);
    if (!node) {
      node = this.toolBlock(frame.id, frame.name, frame.arguments);
      this.assistant().body.append(node);
    }
    this.setToolState(node, "running");
    this.fold(node);
  }

  toolResult(frame) {
    const node = this.findTool(frame.id);
    if (!node) return;
    node.querySelector(".tool-output")?.remove();
    node.querySelector(".approval")?.remove();
    const shown = frame.output !== undefined && frame.output !== null ? frame.output : pretty(frame.result);
    node.append(el("pre", "tool-output", `${t("tool.result")} ${shown}`));
    node._result = frame;
    this.setToolState(node, frame.is_error ? "failed" : "done");
    if (!this.replaying) this.liveCalls.add(frame.id);
    renderToolView(node, frame, { ...this.hooks.viewContext?.(), live: this.liveCalls.has(frame.id) });
    this.fold(node);
  }

  approval(frame, decide) {
    let node = this.findTool(frame.id);
    if (!node) {
      node = this.toolBlock(frame.id, frame.name, frame.arguments);
      this.assistant().body.append(node);
    }
    node.open = true;
    node.querySelector(".approval")?.remove();
    node.dataset.status = "awaiting";
    const bar = el("div", "approval");
    const yes = el("button", "primary", t("approval.approve"));
    const no = el("button", "", t("approval.deny"));
    yes.type = no.type = "button";
    yes.dataset.testid = "approve";
    no.dataset.testid = "deny";
    yes.onclick = () => decide(frame.id, "approve");
    no.onclick = () => decide(frame.id, "deny");
    bar.append(el("span", "", t("approval.needed")), yes, no);
    node.append(bar);
    this.fold(node); // awaiting the user: out of any fold
  }

  userInjected(content) {
    this.discardLive();
    this.addUser(contentText(content));
  }

  // A failed run (or request): a card with the error's type, message and hint. A tool's failure
  // is only a note: the model got the error as the tool's result and the run goes on.
  error(data) {
    this.clearRetry();
    const msg = this.assistant();
    if (data.scope === "tool") msg.node.append(el("div", "error", `${data.type || t("error.type")}: ${data.message || ""}`));
    else {
      this.keepPartial();
      msg.node.append(errorCard(data, this.onRetry));
    }
    this.scroll();
  }

  // Keep the text streamed so far (the server stores it with the failed or stopped run too).
  keepPartial() {
    if (this.live && this.live.textEl) this.live.textEl.classList.remove("cursor");
    this.live = null;
  }

  retrying(data) {
    this.clearRetry();
    const msg = this.assistant();
    const line = el("div", "retry-status");
    line.dataset.testid = "retry-status";
    line.setAttribute("role", "status");
    msg.node.append(line);
    const until = Date.now() + (data.delay || 0) * 1000;
    const tick = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      const attempt = t("chat.attempt", { n: data.attempt + 1, max: data.max_attempts });
      const vars = { seconds: left, reason: data.reason, attempt };
      line.textContent = left > 0 ? t("chat.retryIn", vars) : t("chat.retryNow", vars);
      line.title = data.message || "";
    };
    tick();
    this.retryTimer = setInterval(tick, 250);
    this.scroll();
  }

  clearRetry() {
    clearInterval(this.retryTimer);
    this.retryTimer = null;
    this.root.querySelectorAll(".retry-status").forEach((n) => n.remove());
  }

  note(text, testid) {
    const line = el("div", "note", text);
    line.dataset.testid = testid;
    this.assistant().body.append(line);
    this.fold();
    this.scroll();
  }

  handoff(data) {
    const line = t("chat.handedOver", { name: data.to });
    const notes = this.assistant().body.querySelectorAll('[data-testid="handoff"]');
    if (notes.length && notes[notes.length - 1].textContent === line) return; // drawn from its transfer call
    this.note(line, "handoff");
  }

  compacted(data) {
    const what = data.reason ? ` (${data.reason})` : "";
    this.note(t("chat.compacted", { reason: what, before: data.entries_before, after: data.entries_after }), "context-compacted");
  }

  done(data) {
    this.clearRetry();
    if (data.stopped) this.keepPartial();
    this.discardLive();
    if (data.stopped) this.root.querySelectorAll(".tool.pending, .tool.running").forEach((t) => this.setToolState(t, "dropped"));
    this.fold();
    if (this.current) this.setFooter(this.current, data.usage, data.stopped);
  }

  // ---------------------------------------------------------------- controls

  setControls(running) {
    this.running = running;
    this.root.querySelectorAll(".msg .toolbar").forEach((t) => t.remove());
    if (running) return;
    for (const msg of this.root.querySelectorAll(".msg.assistant")) {
      const answer = () => [...msg.querySelectorAll(".body > .md")].map((b) => b.textContent.trim()).join("\n\n");
      if (!answer().trim()) continue;
      const bar = el("div", "toolbar");
      bar.append(copyButton(answer, t("actions.copyAnswer"), "copy-answer"));
      msg.append(bar);
    }
    this.hooks.controls?.(this.root);
    this.drawActions();
    if (!this.canRewind) return;
    for (const msg of this.root.querySelectorAll(".msg.user")) {
      const bar = el("div", "toolbar");
      const edit = el("button", "link", t("actions.edit"));
      edit.type = "button";
      edit.dataset.testid = "edit";
      edit.onclick = () => this.openEditor(msg);
      bar.append(edit);
      msg.append(bar);
    }
    const assistants = this.root.querySelectorAll(".msg.assistant");
    const last = assistants[assistants.length - 1];
    if (last && this.userCount > 0 && last === this.root.lastElementChild) {
      const bar = last.querySelector(".toolbar") || last.appendChild(el("div", "toolbar"));
      const regen = el("button", "link", t("actions.regenerate"));
      regen.type = "button";
      regen.dataset.testid = "regenerate";
      regen.onclick = () => this.onRegenerate();
      bar.append(regen);
    }
  }

  // The message snapshot the actions get: sessionId, role, text (Markdown) and ref.
  messageSnapshot(msg) {
    const role = msg.classList.contains("user") ? "user" : "assistant";
    const text = role === "user" ? msg.dataset.text || "" : (msg._texts || []).join("\n\n");
    return Object.freeze({ sessionId: this.hooks.sessionId?.() ?? null, role, text, ref: msg.dataset.ref || null });
  }

  // The registered message actions, in each settled message's footer (not while a run streams).
  drawActions() {
    this.root.querySelectorAll('[data-part="message-actions"]').forEach((n) => {
      const parent = n.parentNode;
      n.remove();
      if (parent?.classList.contains("toolbar") && !parent.childElementCount) parent.remove();
    });
    if (this.running) return;
    const ids = messageActions.keys();
    if (!ids.length) return;
    for (const node of this.root.querySelectorAll(".msg.user, .msg.assistant")) {
      const msg = this.messageSnapshot(node);
      if (msg.role === "assistant" && !msg.text.trim()) continue;
      const bar = el("div", "message-actions");
      bar.dataset.part = "message-actions";
      for (const id of ids) {
        const action = messageActions.get(id);
        try {
          if (typeof action.when === "function" && !action.when(msg)) continue;
        } catch (error) {
          console.error(`lovia: message action ${id}: when() failed`, error);
          continue;
        }
        const label = String(action.label || id);
        const button = el("button", "link message-action");
        button.type = "button";
        button.dataset.action = id;
        button.title = label;
        button.setAttribute("aria-label", label);
        let pressed = false;
        try { pressed = typeof action.pressed === "function" && Boolean(action.pressed(msg)); } catch (error) { console.error(error); }
        if (typeof action.pressed === "function") button.setAttribute("aria-pressed", String(pressed));
        button.append(iconNode(action.icon, label));
        button.onclick = async (event) => {
          event.stopPropagation();
          button.disabled = true;
          try {
            await action.run(msg);
          } catch (error) {
            toast(error?.message || String(error), { type: "error" });
          } finally {
            button.disabled = false;
          }
        };
        bar.append(button);
      }
      if (!bar.childElementCount) continue;
      // Beside copy in the message's footer; a footer of their own where there is none.
      const toolbar = node.querySelector(":scope > .toolbar");
      const copy = toolbar?.querySelector(":scope > .copy");
      if (copy) copy.after(bar);
      else if (toolbar) toolbar.prepend(bar);
      else {
        const own = el("div", "toolbar");
        own.append(bar);
        node.append(own);
      }
    }
  }

  openEditor(msg) {
    if (msg.querySelector(".edit-box")) return;
    const body = msg.querySelector(".body");
    const toolbar = msg.querySelector(".toolbar");
    const box = el("textarea", "edit-box");
    box.dataset.testid = "edit-box";
    box.value = msg.dataset.text || "";
    const save = el("button", "primary", t("edit.save"));
    save.type = "button";
    save.dataset.testid = "save-edit";
    const cancel = el("button", "", t("edit.cancel"));
    cancel.type = "button";
    const bar = el("div", "toolbar");
    bar.append(cancel, save);
    body.hidden = true;
    if (toolbar) toolbar.hidden = true;
    msg.append(box, bar);
    box.focus();
    cancel.onclick = () => {
      box.remove();
      bar.remove();
      body.hidden = false;
      if (toolbar) toolbar.hidden = false;
    };
    save.onclick = () => {
      const text = box.value.trim();
      if (text) this.onEdit(Number(msg.dataset.userTurn), text);
    };
  }

  lastUser() {
    const users = this.root.querySelectorAll(".msg.user");
    const last = users[users.length - 1];
    return last ? { turn: Number(last.dataset.userTurn), text: last.dataset.text || "" } : null;
  }

  scroll() {
    if (this.follow) this.root.scrollTop = this.root.scrollHeight;
    this.updateJump();
  }
}
