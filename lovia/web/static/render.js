// Renders a transcript (stored entries) and applies live SSE frames on top of it.
// All model- or user-provided text goes through textContent or the safe Markdown renderer.

import { renderMarkdown } from "./markdown.js";

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

function usageText(usage) {
  if (!usage) return "";
  return `${usage.input_tokens || 0} in · ${usage.output_tokens || 0} out tokens`;
}

export class Transcript {
  constructor(root, { onEdit, onRegenerate }) {
    this.root = root;
    this.onEdit = onEdit;
    this.onRegenerate = onRegenerate;
    this.canRewind = false;
    this.reset();
  }

  reset() {
    this.root.replaceChildren();
    this.current = null;
    this.userCount = 0;
    this.live = null; // { text, textEl, reasoning, reasoningEl }
    this.pendingPaint = false;
  }

  // ---------------------------------------------------------------- full render

  render(entries, runs, running) {
    this.reset();
    const ends = new Map((runs || []).map((r) => [r.start + r.count, r]));
    entries.forEach((entry, index) => {
      this.addEntry(entry);
      const run = ends.get(index + 1);
      if (run && this.current) this.setFooter(this.current, run.usage, run.stopped);
    });
    if (!running) this.root.querySelectorAll(".tool.pending").forEach((t) => this.setToolState(t, "dropped"));
    if (!entries.length) this.root.append(el("div", "empty", "Start a conversation."));
    this.setControls(running);
  }

  addEntry(entry) {
    if (entry.type === "input") {
      if (entry.role === "user") this.addUser(contentText(entry.content));
      return;
    }
    const msg = this.assistant();
    if (entry.type === "reasoning") msg.body.append(this.reasoningBlock(entry.content));
    else if (entry.type === "assistant_text") msg.body.append(this.textBlock(entry.content));
    else if (entry.type === "tool_call") msg.body.append(this.toolBlock(entry.call_id, entry.name, entry.arguments));
    else if (entry.type === "tool_result") this.toolResult({ id: entry.call_id, output: entry.output, is_error: entry.is_error });
  }

  addUser(text) {
    this.root.querySelector(".empty")?.remove();
    const msg = el("div", "msg user");
    msg.dataset.testid = "message-user";
    msg.dataset.userTurn = String(this.userCount++);
    const body = el("div", "body", text);
    msg.append(body);
    msg.dataset.text = text;
    this.root.append(msg);
    this.current = null;
    this.scroll();
    return msg;
  }

  assistant() {
    if (this.current) return this.current;
    this.root.querySelector(".empty")?.remove();
    const node = el("div", "msg assistant");
    node.dataset.testid = "message-assistant";
    const body = el("div", "body");
    node.append(body);
    this.root.append(node);
    this.current = { node, body };
    return this.current;
  }

  textBlock(text) {
    const block = el("div", "md");
    block.innerHTML = renderMarkdown(text); // safe: the renderer escapes all source text first
    return block;
  }

  reasoningBlock(text) {
    const details = el("details", "reasoning");
    details.append(el("summary", "", "Reasoning"), el("div", "", text));
    return details;
  }

  toolBlock(id, name, args) {
    const existing = this.findTool(id);
    if (existing) return existing;
    const details = el("details", "tool pending");
    details.dataset.testid = "tool-call";
    details.dataset.callId = id;
    const summary = el("summary");
    summary.append(el("span", "tool-name", name), el("span", "tool-args", args && args !== "{}" ? args : ""), el("span", "status"));
    details.append(summary, el("pre", "tool-input", `arguments: ${pretty(args || "{}")}`));
    return details;
  }

  findTool(id) {
    return [...this.root.querySelectorAll(".tool")].find((t) => t.dataset.callId === id) || null;
  }

  setToolState(node, state) {
    node.classList.remove("pending", "running", "done", "failed", "dropped");
    node.classList.add(state);
  }

  setFooter(msg, usage, stopped) {
    msg.node.querySelector(".usage")?.remove();
    const text = [usageText(usage), stopped ? "stopped" : ""].filter(Boolean).join(" · ");
    if (text) msg.node.append(el("div", "usage", text));
  }

  // ---------------------------------------------------------------- live frames

  ensureLive() {
    if (!this.live) this.live = { text: "", textEl: null, reasoning: "", reasoningEl: null };
    return this.live;
  }

  textDelta(delta) {
    const live = this.ensureLive();
    if (!live.textEl) {
      live.textEl = el("div", "md cursor");
      this.assistant().body.append(live.textEl);
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
    }
    live.reasoning += delta;
    live.reasoningEl.querySelector("div").textContent = live.reasoning;
  }

  paint() {
    if (this.pendingPaint) return;
    this.pendingPaint = true;
    requestAnimationFrame(() => {
      this.pendingPaint = false;
      if (this.live && this.live.textEl) this.live.textEl.innerHTML = renderMarkdown(this.live.text);
      this.scroll();
    });
  }

  discardLive() {
    if (!this.live) return;
    this.live.textEl?.remove();
    this.live.reasoningEl?.remove();
    this.live = null;
  }

  messageCompleted(message) {
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
  }

  toolResult(frame) {
    const node = this.findTool(frame.id);
    if (!node) return;
    node.querySelector(".tool-output")?.remove();
    node.querySelector(".approval")?.remove();
    const shown = frame.output !== undefined && frame.output !== null ? frame.output : pretty(frame.result);
    node.append(el("pre", "tool-output", `result: ${shown}`));
    this.setToolState(node, frame.is_error ? "failed" : "done");
  }

  approval(frame, decide) {
    let node = this.findTool(frame.id);
    if (!node) {
      node = this.toolBlock(frame.id, frame.name, frame.arguments);
      this.assistant().body.append(node);
    }
    node.open = true;
    node.querySelector(".approval")?.remove();
    const bar = el("div", "approval");
    const yes = el("button", "primary", "Approve");
    const no = el("button", "", "Deny");
    yes.type = no.type = "button";
    yes.dataset.testid = "approve";
    no.dataset.testid = "deny";
    yes.onclick = () => decide(frame.id, "approve");
    no.onclick = () => decide(frame.id, "deny");
    bar.append(el("span", "", "Needs approval:"), yes, no);
    node.append(bar);
  }

  userInjected(content) {
    this.discardLive();
    this.addUser(contentText(content));
  }

  error(data) {
    const msg = this.assistant();
    msg.node.append(el("div", "error", `${data.type || "Error"}: ${data.message || ""}`));
    this.scroll();
  }

  done(data) {
    this.discardLive();
    if (data.stopped) this.root.querySelectorAll(".tool.pending, .tool.running").forEach((t) => this.setToolState(t, "dropped"));
    if (this.current) this.setFooter(this.current, data.usage, data.stopped);
  }

  // ---------------------------------------------------------------- controls

  setControls(running) {
    this.root.querySelectorAll(".msg .toolbar").forEach((t) => t.remove());
    if (running || !this.canRewind) return;
    for (const msg of this.root.querySelectorAll(".msg.user")) {
      const bar = el("div", "toolbar");
      const edit = el("button", "link", "Edit");
      edit.type = "button";
      edit.dataset.testid = "edit";
      edit.onclick = () => this.openEditor(msg);
      bar.append(edit);
      msg.append(bar);
    }
    const assistants = this.root.querySelectorAll(".msg.assistant");
    const last = assistants[assistants.length - 1];
    if (last && this.userCount > 0 && last === this.root.lastElementChild) {
      const bar = el("div", "toolbar");
      const regen = el("button", "link", "Regenerate");
      regen.type = "button";
      regen.dataset.testid = "regenerate";
      regen.onclick = () => this.onRegenerate();
      bar.append(regen);
      last.append(bar);
    }
  }

  openEditor(msg) {
    if (msg.querySelector(".edit-box")) return;
    const body = msg.querySelector(".body");
    const toolbar = msg.querySelector(".toolbar");
    const box = el("textarea", "edit-box");
    box.dataset.testid = "edit-box";
    box.value = msg.dataset.text || "";
    const save = el("button", "primary", "Save & send");
    save.type = "button";
    save.dataset.testid = "save-edit";
    const cancel = el("button", "", "Cancel");
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
    const box = this.root;
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 200) box.scrollTop = box.scrollHeight;
  }
}
