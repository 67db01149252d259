// Where a chat came from, and the chats it started: a line above the conversation links a branch,
// a spawned chat or a background subagent task back to its origin, and a panel lists the chats
// this one's agent started (subagent tasks and start_session chats) with their live status.
// Opening one follows its run live, like any chat.

import { t } from "./i18n.js";
import { servedPart } from "./parts.js";

// Read when drawn, so the strings are in the page's language.
const originText = () => ({
  fork: t("subagents.origin.fork"),
  spawn: t("subagents.origin.spawn"),
  subagent: t("subagents.origin.subagent"),
});
const statusText = () => ({
  running: t("subagents.status.running"),
  completed: t("subagents.status.completed"),
  failed: t("subagents.status.failed"),
  cancelled: t("subagents.status.cancelled"),
  interrupted: t("subagents.status.interrupted"),
  idle: t("subagents.status.idle"),
});

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// `deps`: api(method, path, body), sessionId() (the chat shown, or null), openSession(id), fail(error).
export function initLineage(deps) {
  const panel = servedPart("tasks") || el("section", "lineage"); // the served page has it (empty)
  panel.dataset.testid = "lineage";
  panel.dataset.part = "tasks";
  panel.hidden = true;
  if (!panel.isConnected) {
    const wrap = document.querySelector(".messages-wrap");
    wrap.parentNode.insertBefore(panel, wrap);
  }
  let shownFor = null; // the chat whose origin and children are drawn
  let origin = null;
  let children = [];
  let timer = null;

  function draw() {
    panel.replaceChildren();
    if (origin) {
      const line = el("div", "lineage-origin");
      line.dataset.testid = "origin";
      line.dataset.kind = origin.kind;
      line.append(el("span", "", `${originText()[origin.kind] || t("subagents.origin.other")} `));
      if (origin.exists) {
        const link = el("button", "link lineage-link", origin.title || t("subagents.aChat"));
        link.type = "button";
        link.dataset.testid = "origin-link";
        link.onclick = () => deps.openSession(origin.session_id);
        line.append(link);
      } else {
        line.append(el("em", "", t("subagents.deleted", { title: origin.title || t("subagents.aChat") })));
      }
      panel.append(line);
    }
    if (children.length) {
      const box = el("div", "lineage-children");
      box.append(el("span", "lineage-label", t("subagents.children")));
      const list = el("ul", "");
      for (const child of children) {
        const li = el("li", `lineage-child ${child.status}`);
        li.dataset.testid = "child-chat";
        li.dataset.sessionId = child.id;
        li.dataset.status = child.status;
        const open = el("button", "link lineage-link", child.title || t("subagents.untitled"));
        open.type = "button";
        open.onclick = () => deps.openSession(child.id);
        const status = el("span", "lineage-status", statusText()[child.status] || child.status);
        status.dataset.testid = "child-status";
        if (child.live) li.append(Object.assign(el("span", "live-dot"), { title: t("subagents.status.running") }));
        li.append(open, status, el("span", "lineage-kind", child.kind === "subagent" ? t("subagents.kind.subagent") : t("subagents.kind.chat")));
        list.append(li);
      }
      box.append(list);
      panel.append(box);
    }
    panel.hidden = !origin && !children.length;
  }

  let asked = 0; // loads overlap (an open, then events): only the newest one's answer is drawn
  async function loadChildren() {
    const id = deps.sessionId();
    if (!id) return;
    const mine = ++asked;
    const data = await deps.api("GET", `/api/sessions/${encodeURIComponent(id)}/children`);
    if (mine !== asked || id !== deps.sessionId()) return;
    if (id !== shownFor) origin = null; // a chat the page started itself: it came from nowhere
    shownFor = id;
    children = data.children;
    draw();
  }

  return {
    // A chat was opened (its detail, with `origin`) or closed (null).
    show(id, detail) {
      shownFor = id;
      // A fork or a spawn is the chat's origin; a background task names its parent as task_of.
      origin = detail ? detail.origin || (detail.task_of ? { ...detail.task_of, kind: "subagent" } : null) : null;
      children = [];
      draw();
      if (id) loadChildren().catch(deps.fail);
    },
    // A lifecycle event from /api/events: children appear, start and finish. `hello` opens the
    // stream, also after a reconnect: whatever happened before it was not heard, so look again.
    notify(event) {
      if (["hello", "session_created", "session_deleted", "run_started", "run_finished"].includes(event)) this.refresh();
    },
    // Look for the shown chat's children again soon (also when the page has just learnt the id of
    // a chat it started: the chat's events and its run stream travel apart, so what the agent
    // started may have been announced before the page knew which chat was its own).
    refresh() {
      if (!deps.sessionId()) return;
      clearTimeout(timer);
      timer = setTimeout(() => loadChildren().catch(deps.fail), 100);
    },
  };
}
