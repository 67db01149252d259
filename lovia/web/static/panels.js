// The page's side views over the server's own APIs: the Files panel (panels-files.js), the
// Memory dialog (panels-memory.js), follow-up suggestion chips under the last answer, and a
// refresh of the todo list after each run. app.js creates it once and tells it two things:
// the server's /api/info (`setInfo`) and that a run ended (`runFinished`).

import { api } from "./api.js";
import { loadTodos } from "./agentviews.js";
import { createFilesPanel } from "./panels-files.js";
import { createMemoryDialog } from "./panels-memory.js";
import { createProcessesSection } from "./panels-processes.js";
import { servedPart } from "./parts.js";
import { button, el, t } from "./panels-strings.js";

/**
 * `page.sessionId()` is the open chat (or null), `page.send(text)` sends a message as the user.
 * Returns `{ setInfo(info), runFinished(sessionId, ok) }`.
 */
export function initPanels(page) {
  // The served page carries the buttons (hidden); a page of your own without them gets new ones.
  const topbar = document.querySelector(".topbar");
  const tools = topbar.querySelector(".panel-buttons") || topbar.appendChild(el("span", "panel-buttons"));
  const filesToggle = servedPart("files-toggle") || button("", "", "files-toggle");
  filesToggle.textContent = t("files.toggle");
  filesToggle.title = t("files.toggleTitle");
  filesToggle.setAttribute("aria-controls", "files-panel");
  filesToggle.setAttribute("aria-pressed", "false");
  filesToggle.dataset.part = "files-toggle";
  filesToggle.hidden = true;
  const memoryOpen = servedPart("memory") || button("", "", "memory-open");
  memoryOpen.textContent = t("memory.open");
  memoryOpen.title = t("memory.openTitle");
  memoryOpen.dataset.part = "memory";
  memoryOpen.hidden = true;
  for (const made of [memoryOpen, filesToggle]) if (!made.isConnected) tools.append(made);

  let agentName = null;
  const files = createFilesPanel(page);
  if (!files.element.isConnected) document.getElementById("app").append(files.element);
  const processes = createProcessesSection(page);
  files.element.querySelector(".files-browse").append(processes.element);
  const memory = createMemoryDialog(() => agentName);

  function setFilesOpen(open) {
    filesToggle.setAttribute("aria-pressed", String(open));
    document.getElementById("app").classList.toggle("files-open", open);
    if (open) files.open().catch(() => {});
    else files.close();
    if (open) processes.start();
    else processes.stop();
  }
  filesToggle.onclick = () => setFilesOpen(!files.isOpen());
  files.onClose(() => setFilesOpen(false));
  memoryOpen.onclick = () => memory.open();

  const followups = initFollowups(page);

  let serverInfo = null;
  let probe = 0; // the newest workspace probe; an older answer arriving late is dropped

  // Memory and Files follow the agent on screen: the server's default until the user picks
  // another in the switcher or opens a chat of another agent.
  function setAgent(name) {
    if (!serverInfo) return;
    agentName = name || serverInfo.default_agent;
    const agent = serverInfo.agents.find((a) => a.name === agentName) || {};
    memoryOpen.hidden = !agent.memory;
    // The agent's own flag when the server sends one; else ask the workspace route itself,
    // which answers 404 for an agent without a local folder.
    const maybe = "workspace" in agent ? agent.workspace : Boolean(serverInfo.features?.workspace);
    const mine = ++probe;
    if (!maybe) {
      filesToggle.hidden = true;
      if (files.isOpen()) setFilesOpen(false);
      return;
    }
    api("GET", `/api/workspace?agent=${encodeURIComponent(agentName)}`)
      .then(() => {
        if (mine === probe) filesToggle.hidden = false;
      })
      .catch(() => {
        if (mine === probe) filesToggle.hidden = true;
      });
  }

  return {
    setInfo(info) {
      serverInfo = info;
      setAgent(info.default_agent);
    },
    setAgent,
    runFinished(sessionId, ok) {
      if (!sessionId) return;
      loadTodos(api, sessionId).catch(() => {});
      files.refresh();
      processes.refresh();
      if (ok) followups.ask(sessionId);
    },
  };
}

// ------------------------------------------------------------------ follow-up suggestions

// The chips sit under the last answer until the user types, sends, or the transcript is redrawn
// (which drops them with everything else in #messages). A failed or empty request shows nothing.
function initFollowups(page) {
  const messages = document.getElementById("messages");
  const composer = document.getElementById("composer");
  let asked = 0; // the newest request; an older answer arriving late is dropped

  const idle = () => (document.body.dataset.phase || "idle") === "idle";

  function clear() {
    asked += 1;
    messages.dataset.followups = "none";
    for (const n of messages.querySelectorAll(".followups")) n.remove();
  }

  composer.addEventListener("input", clear);
  new MutationObserver(() => {
    if (!idle()) clear();
  }).observe(document.body, { attributes: true, attributeFilter: ["data-phase"] });

  function show(items) {
    const row = el("div", "followups");
    row.dataset.testid = "followups";
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", t("followups.label"));
    for (const text of items) {
      const chip = button("followup", text, "followup");
      chip.onclick = () => {
        clear();
        page.send(text);
      };
      row.append(chip);
    }
    messages.append(row);
    row.scrollIntoView({ block: "nearest" });
  }

  return {
    // `data-followups` on #messages says how the last ask ended: "asking", "shown" or "none".
    async ask(sessionId) {
      clear();
      const mine = asked;
      messages.dataset.followups = "asking";
      let items = [];
      try {
        const data = await api("POST", `/api/sessions/${encodeURIComponent(sessionId)}/followups`);
        items = Array.isArray(data?.followups) ? data.followups.filter((s) => typeof s === "string" && s.trim()) : [];
      } catch (_error) {
        items = []; // suggestions are never load-bearing: a failed ask shows nothing
      }
      if (mine !== asked) return; // the user moved on, or a newer ask is under way
      const last = messages.lastElementChild;
      const fits = idle() && !composer.value.trim() && page.sessionId() === sessionId && last?.matches(".msg.assistant");
      if (items.length && fits) show(items);
      messages.dataset.followups = items.length && fits ? "shown" : "none";
    },
  };
}
