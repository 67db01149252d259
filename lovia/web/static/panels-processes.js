// The Processes section of the Files panel: the chat's background processes (the ones its agent
// started with shell(background=true)), the recent output of the one you open, and a Kill button.
//
// Everything here is passive for the agent: the output comes from a tail kept for viewers, and a
// kill leaves the final output to the model's next read. Output and commands are set as text.

import { api } from "./api.js";
import { button, el, t } from "./panels-strings.js";

const LIST_EVERY = 3000; // ms between list refreshes while the panel is open
const OUTPUT_EVERY = 1000; // ms between output refreshes while an opened process runs

/** Build the section; `page.sessionId()` is the open chat. Returns `{element, start, stop, refresh}`. */
export function createProcessesSection(page) {
  const section = el("section", "procs");
  section.dataset.testid = "processes";
  const title = el("h3", "files-subtitle", t("procs.title"));
  const status = el("p", "files-status");
  status.dataset.testid = "processes-status";
  status.setAttribute("role", "status");
  status.hidden = true;
  const list = el("ul", "files-list procs-list");
  list.dataset.testid = "processes-list";
  const output = el("div", "procs-output");
  output.hidden = true;
  const outputHead = el("div", "procs-output-head");
  const outputName = el("span", "procs-output-name");
  const hide = button("link", t("procs.hide"), "process-output-close");
  outputHead.append(outputName, hide);
  const pre = el("pre", "files-code procs-text");
  pre.dataset.testid = "process-output";
  output.append(outputHead, pre);
  section.append(title, status, list, output);

  let running = false; // the panel is open
  let timer = null;
  let watched = null; // the process whose output is open
  let outputTimer = null;
  let shownFor = null; // the chat the list was drawn for
  let generation = 0;

  // Kill and output act on the chat the list was drawn for, even if the page moved on since.
  const base = (sid = shownFor) => `/api/sessions/${encodeURIComponent(sid)}/processes`;

  function say(text, kind) {
    status.textContent = text || "";
    status.dataset.kind = kind || "";
    status.hidden = !text;
  }

  function item(p) {
    const li = el("li", `file-entry proc ${p.status}`);
    li.dataset.testid = "process";
    li.dataset.processId = p.process_id;
    li.dataset.status = p.status;
    const open = button("link file-open", "", "process-open");
    open.title = p.command;
    open.append(el("span", "proc-id", p.process_id), el("span", "file-name proc-command", p.command));
    open.onclick = () => watch(p.process_id, p.command);
    const state = p.status === "exited" ? t("procs.exited", { code: p.exit_code ?? "?" }) : t(`procs.${p.status}`);
    const badge = el("span", `proc-status ${p.status}`, state);
    badge.dataset.testid = "process-status";
    li.append(open, badge);
    if (p.status === "running") {
      const kill = button("proc-kill", t("procs.kill"), "process-kill");
      kill.title = t("procs.killTitle");
      kill.onclick = () => killIt(p.process_id, kill);
      li.append(kill);
    }
    return li;
  }

  async function load() {
    const sid = page.sessionId();
    const mine = ++generation;
    if (!sid) {
      draw([], sid);
      return;
    }
    const processes = await api("GET", base(sid));
    if (mine !== generation || sid !== page.sessionId()) return;
    draw(processes, sid);
  }

  function draw(processes, sid) {
    if (shownFor !== sid) unwatch(); // another chat: its processes are not this one's
    shownFor = sid;
    list.replaceChildren(...processes.map(item));
    if (!processes.length) list.append(el("li", "files-empty", t("procs.none")));
  }

  async function killIt(processId, kill) {
    kill.disabled = true;
    say("");
    try {
      await api("POST", `${base()}/${encodeURIComponent(processId)}/kill`);
      say(t("procs.killDone", { id: processId }), "ok");
    } catch (error) {
      kill.disabled = false;
      say(String(error.message || error), "error");
    }
    await load().catch(() => {});
    if (watched === processId) showOutput().catch(() => {});
  }

  function unwatch() {
    watched = null;
    clearTimeout(outputTimer);
    output.hidden = true;
    pre.textContent = "";
  }

  function watch(processId, command) {
    unwatch();
    watched = processId;
    outputName.textContent = `${processId} · ${command}`;
    pre.textContent = t("procs.loading");
    output.hidden = false;
    showOutput().catch((error) => {
      pre.textContent = String(error.message || error);
    });
  }

  async function showOutput() {
    const processId = watched;
    clearTimeout(outputTimer);
    if (!processId || !running) return;
    const data = await api("GET", `${base()}/${encodeURIComponent(processId)}/output`);
    if (processId !== watched) return;
    const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    const text = (data.truncated ? `${t("procs.truncated")}\n` : "") + data.output;
    pre.textContent = text || t("procs.noOutput");
    pre.dataset.status = data.status;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
    if (data.status === "running") {
      outputTimer = setTimeout(() => showOutput().catch(() => {}), OUTPUT_EVERY);
    }
  }

  function tick() {
    clearTimeout(timer);
    if (!running) return;
    if (document.hidden) {
      timer = setTimeout(tick, LIST_EVERY); // a background tab asks nothing until it is looked at
      return;
    }
    load()
      .catch((error) => say(String(error.message || error), "error"))
      .finally(() => {
        if (running) timer = setTimeout(tick, LIST_EVERY);
      });
  }

  hide.onclick = unwatch;

  return {
    element: section,
    start() {
      running = true;
      tick();
    },
    stop() {
      running = false;
      clearTimeout(timer);
      unwatch();
    },
    // After a run: the agent may have started or killed processes.
    refresh() {
      if (running) tick();
    },
  };
}
