// The lovia chat page: sessions sidebar, streamed answers, stop, edit-and-resend, regenerate.

import { AuthError, api, captureToken, setToken, streamFrames } from "./api.js";
import { Transcript } from "./render.js";

const $ = (id) => document.getElementById(id);
const DEMO_KEY = "lovia_demo_ok";

const state = {
  info: null,
  sessionId: null,
  running: false,
  abort: null,
  generation: 0,
  armedDelete: null,
  streamReady: false, // the current stream has said which chat it runs in (its `session` frame)
  stopPending: false, // stop was clicked before that: cancel as soon as it arrives
  renaming: false, // a rename box is open: notifications must not re-render the list under it
  refreshTimer: null,
};

const transcript = new Transcript($("messages"), {
  onEdit: (turn, text) => resend(turn, text).catch(fail),
  onRegenerate: () => {
    const last = transcript.lastUser();
    if (last) resend(last.turn, last.text).catch(fail);
  },
});

// ------------------------------------------------------------------ helpers

function fail(error) {
  if (error instanceof AuthError) return showTokenForm();
  if (error && error.name === "AbortError") return undefined;
  console.error(error);
  transcript.error({ type: "Error", message: String(error.message || error) });
  return undefined;
}

function setRunning(running) {
  state.running = running;
  $("stop").hidden = !running;
  transcript.setControls(running);
}

// Show the run as live from the click on (stop visible) until its stream has ended, so a hidden
// stop button always means "finished", never "not started yet".
function markStarting() {
  state.running = true;
  state.streamReady = false;
  $("stop").hidden = false;
}

function composerEnabled() {
  return state.info && (state.info.configured || localStorage.getItem(DEMO_KEY) === "1");
}

function showTokenForm() {
  const form = $("token-form").content.firstElementChild.cloneNode(true);
  form.onsubmit = (event) => {
    event.preventDefault();
    setToken(form.elements.token.value.trim());
    window.location.reload();
  };
  $("messages").replaceChildren(form);
}

// ------------------------------------------------------------------ info and notice

function showNotice() {
  const notice = $("notice");
  const info = state.info;
  $("demo-badge").hidden = info.configured || localStorage.getItem(DEMO_KEY) !== "1";
  if (info.configured || localStorage.getItem(DEMO_KEY) === "1") {
    notice.hidden = true;
    return;
  }
  notice.replaceChildren();
  const h = document.createElement("h2");
  h.textContent = "No model configured";
  const p = document.createElement("p");
  p.textContent = "Set LOVIA_MODEL (and the vendor's key or base URL) and restart the server, for example:";
  const pre = document.createElement("pre");
  pre.textContent = "export LOVIA_MODEL=openai:gpt-4.1-mini\nexport OPENAI_API_KEY=sk-...\nlovia web\n\n# any OpenAI-compatible server:\nexport LOVIA_MODEL=openai:llama3.1 OPENAI_BASE_URL=http://localhost:11434/v1\n\n# Anthropic:\nexport LOVIA_MODEL=anthropic:claude-sonnet-4-5 ANTHROPIC_API_KEY=...";
  const button = document.createElement("button");
  button.className = "primary";
  button.dataset.testid = "use-demo";
  button.textContent = "Try the offline demo model (canned replies, not an LLM)";
  button.onclick = () => {
    localStorage.setItem(DEMO_KEY, "1");
    showNotice();
    $("composer").disabled = false;
    $("composer").focus();
  };
  notice.append(h, p, pre, button);
  notice.hidden = false;
}

async function loadInfo() {
  state.info = await api("GET", "/api/info");
  document.title = state.info.title;
  $("title").textContent = state.info.title;
  const agent = state.info.agents.find((a) => a.name === state.info.default_agent);
  $("model").textContent = agent && agent.model ? agent.model : "";
  transcript.canRewind = Boolean(state.info.features.rewind);
  showNotice();
  $("composer").disabled = !composerEnabled();
}

// ------------------------------------------------------------------ sidebar

function sessionItem(meta) {
  const li = document.createElement("li");
  li.className = "session" + (meta.id === state.sessionId ? " active" : "");
  li.dataset.testid = "session-item";
  li.dataset.sessionId = meta.id;
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = meta.title || "Untitled chat";
  if (meta.damaged) {
    li.classList.add("damaged"); // listed, not hidden: its id and what to do
    name.textContent = `⚠ damaged chat ${meta.id}`;
    li.title = meta.damaged;
  }
  const actions = document.createElement("span");
  actions.className = "actions";
  const pin = document.createElement("button");
  pin.className = "link pin";
  pin.textContent = meta.pinned ? "★" : "☆";
  pin.title = meta.pinned ? "Unpin" : "Pin to the top";
  pin.dataset.testid = "pin";
  pin.setAttribute("aria-pressed", String(Boolean(meta.pinned)));
  const rename = document.createElement("button");
  rename.className = "link";
  rename.textContent = "✎";
  rename.title = "Rename";
  rename.dataset.testid = "rename";
  const del = document.createElement("button");
  del.className = "link";
  del.textContent = "×";
  del.title = "Delete";
  del.dataset.testid = "delete";
  actions.append(pin, rename, del);
  if (meta.pinned) li.classList.add("pinned");
  if (meta.live) li.append(Object.assign(document.createElement("span"), { className: "live-dot", title: "running" }));
  li.append(name, actions);
  li.onclick = () => openSession(meta.id).catch(fail);
  rename.onclick = (event) => {
    event.stopPropagation();
    startRename(li, name, meta);
  };
  pin.onclick = (event) => {
    event.stopPropagation();
    api("PATCH", `/api/sessions/${encodeURIComponent(meta.id)}`, { pinned: !meta.pinned })
      .then(() => refreshSessions())
      .catch(fail);
  };
  if (state.armedDelete === meta.id) del.textContent = "Delete?";
  del.onclick = (event) => {
    event.stopPropagation();
    if (state.armedDelete !== meta.id) {
      state.armedDelete = meta.id; // a second click confirms (kept across list refreshes)
      del.textContent = "Delete?";
      return;
    }
    state.armedDelete = null;
    deleteSession(meta.id).catch(fail);
  };
  return li;
}

function startRename(li, name, meta) {
  const input = document.createElement("input");
  input.value = meta.title || "";
  input.dataset.testid = "rename-input";
  name.replaceWith(input);
  state.renaming = true;
  input.focus();
  input.onclick = (event) => event.stopPropagation();
  let finished = false;
  const finish = async (save) => {
    if (finished) return;
    finished = true;
    state.renaming = false;
    if (save && input.value.trim()) await api("PATCH", `/api/sessions/${encodeURIComponent(meta.id)}`, { title: input.value.trim() });
    await refreshSessions();
  };
  input.onkeydown = (event) => {
    if (event.key === "Enter") finish(true).catch(fail);
    if (event.key === "Escape") finish(false).catch(fail);
  };
  input.onblur = () => finish(true).catch(fail);
}

async function refreshSessions() {
  // Re-rendering would pull an open rename box away under the user's fingers: try again later.
  if (state.renaming) return scheduleRefresh();
  const q = $("search").value.trim();
  const data = await api("GET", `/api/sessions${q ? `?q=${encodeURIComponent(q)}` : ""}`);
  if (state.renaming) return scheduleRefresh();
  $("sessions").replaceChildren(...data.sessions.map(sessionItem));
  return undefined;
}

// ------------------------------------------------------------------ notifications

// Keep the sidebar in step with other tabs and clients: /api/events says when chats appear,
// change, go away, or start and finish running. There is no replay, so (re)connecting reloads
// the list first.
async function watchEvents() {
  for (;;) {
    try {
      await streamFrames("/api/events", null, onNotification, undefined, "GET");
    } catch (error) {
      if (error instanceof AuthError) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function onNotification(event, data) {
  if (event === "session_deleted" && data.session_id === state.sessionId && !state.running) newChat();
  else if (event === "sessions_cleared" && !state.running) newChat();
  else if (event === "run_started" && data.session_id === state.sessionId && !state.running) {
    openSession(state.sessionId).catch(fail); // another tab or client started a run in this chat: follow it
  }
  scheduleRefresh();
}

function scheduleRefresh() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(() => refreshSessions().catch(fail), 100);
}

async function deleteSession(id) {
  await api("DELETE", `/api/sessions/${encodeURIComponent(id)}`);
  if (id === state.sessionId) newChat();
  await refreshSessions();
}

// ------------------------------------------------------------------ chat

function newChat() {
  state.stopPending = false;
  state.abort?.abort();
  state.generation += 1;
  state.sessionId = null;
  history.replaceState(null, "", window.location.pathname + window.location.search);
  setRunning(false);
  transcript.render([], [], false);
  refreshSessions().catch(fail);
  $("composer").focus();
}

async function openSession(id) {
  state.abort?.abort();
  const generation = ++state.generation;
  state.sessionId = id;
  state.stopPending = false;
  history.replaceState(null, "", `#/chat/${encodeURIComponent(id)}`);
  $("app").classList.remove("sidebar-open");
  const data = await api("GET", `/api/sessions/${encodeURIComponent(id)}`);
  if (generation !== state.generation) return;
  transcript.render(data.entries, data.runs, false);
  setRunning(false);
  refreshSessions().catch(fail);
  if (data.live || data.active_run_id) await runStream(`/api/chat/reconnect?session_id=${encodeURIComponent(id)}`, null);
}

function onFrame(event, data) {
  switch (event) {
    case "session":
      state.streamReady = true;
      if (state.stopPending) queueMicrotask(() => stop().catch(fail)); // after sessionId is set below
      if (state.sessionId !== data.session_id) {
        state.sessionId = data.session_id;
        history.replaceState(null, "", `#/chat/${encodeURIComponent(data.session_id)}`);
        refreshSessions().catch(fail);
      }
      break;
    case "snapshot":
      transcript.render(data.entries, [], data.status === "running");
      setRunning(data.status === "running");
      break;
    case "turn_started": break;
    case "text_delta": transcript.textDelta(data.delta); break;
    case "reasoning_delta": transcript.reasoningDelta(data.delta); break;
    case "output_discarded": transcript.discardLive(); break;
    case "message_completed": transcript.messageCompleted(data.message); break;
    case "user_injected": transcript.userInjected(data.content); break;
    case "tool_call": transcript.toolCall(data); break;
    case "tool_result": transcript.toolResult(data); break;
    case "approval_required": transcript.approval(data, decide); break;
    case "error": transcript.error(data); break;
    case "done": transcript.done(data); break;
    default: break;
  }
}

async function decide(callId, decision) {
  await api("POST", "/api/chat/approve", { session_id: state.sessionId, call_id: callId, decision }).catch(fail);
}

async function runStream(path, body) {
  state.abort?.abort();
  const controller = new AbortController();
  state.abort = controller;
  state.streamReady = false;
  const generation = ++state.generation;
  try {
    await streamFrames(path, body, (event, data) => {
      if (generation === state.generation) onFrame(event, data);
    }, controller.signal);
  } catch (error) {
    if (generation === state.generation) fail(error);
  }
  if (generation !== state.generation) return;
  state.abort = null;
  state.streamReady = false;
  state.stopPending = false;
  // Re-render from the stored transcript before showing the run as finished, so "idle" always
  // shows what the server kept (e.g. after a stop, calls without results are gone).
  if (state.sessionId) {
    const data = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`).catch(fail);
    if (data && generation === state.generation) transcript.render(data.entries, data.runs, false);
  }
  if (generation === state.generation) setRunning(false);
  refreshSessions().catch(fail);
}

async function send(text) {
  const message = text.trim();
  if (!message || !composerEnabled()) return;
  $("composer").value = "";
  if (!state.running) markStarting();
  await runStream("/api/chat/stream", { message, session_id: state.sessionId });
}

async function resend(turn, text) {
  if (state.running || !state.sessionId) return;
  markStarting();
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/rewind`, { user_turn: turn });
  } catch (error) {
    state.running = false;
    $("stop").hidden = true;
    throw error;
  }
  await runStream("/api/chat/stream", { message: text, session_id: state.sessionId });
}

async function stop() {
  // Clicked before the server has started the run (or, in a new chat, before its id is known):
  // a cancel now would find nothing to stop, so cancel once the stream's session frame arrives.
  if (!state.streamReady || !state.sessionId) {
    if (state.running) state.stopPending = true;
    return;
  }
  state.stopPending = false;
  $("stop").disabled = true;
  try {
    await api("POST", `/api/chat/cancel?session_id=${encodeURIComponent(state.sessionId)}`);
  } finally {
    $("stop").disabled = false;
  }
}

// ------------------------------------------------------------------ wiring

function bind() {
  $("composer-form").onsubmit = (event) => {
    event.preventDefault();
    send($("composer").value).catch(fail);
  };
  $("composer").onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send($("composer").value).catch(fail);
    }
  };
  $("stop").onclick = () => stop().catch(fail);
  $("new-chat").onclick = () => newChat();
  let searchTimer = null;
  $("search").oninput = () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => refreshSessions().catch(fail), 150);
  };
  $("open-sidebar").onclick = () => $("app").classList.add("sidebar-open");
  $("close-sidebar").onclick = () => $("app").classList.remove("sidebar-open");
}

async function start() {
  captureToken();
  bind();
  try {
    await loadInfo();
    await refreshSessions();
    const match = window.location.hash.match(/^#\/chat\/(.+)$/);
    if (match) await openSession(decodeURIComponent(match[1]));
    else transcript.render([], [], false);
  } catch (error) {
    fail(error);
  }
  watchEvents();
}

start();
