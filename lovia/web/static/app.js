// The lovia chat page: sessions sidebar, streamed answers, stop, edit-and-resend, regenerate.

import { AuthError, api, authHeaders, captureToken, check, setToken, streamFrames, url } from "./api.js";
import { FRAMES } from "./frames.js";
import { Transcript } from "./render.js";
import "./pages.js";
import { initUploads } from "./uploads.js";
import { clearQuestion, loadTodos, showQuestion, showTodos } from "./agentviews.js";
import { initSchedules } from "./schedules.js";
import { initVariants } from "./variants.js";
import { initLineage } from "./subagents.js";
import { CONFIG, LANG, applyI18n, chosenLang, languageName, languages, setLang, t } from "./i18n.js";
import * as ext from "./extensions.js";
import { initPanels } from "./panels.js";
import { initAgentSwitcher } from "./agentswitch.js";
import { initExportMenu } from "./exportmenu.js";
import { bindThemePicker, currentTheme, onThemeChange } from "./theme.js";
import { initRing } from "./ring.js";

const $ = (id) => document.getElementById(id);
const DEMO_KEY = "lovia_demo_ok";

// The run lifecycle, one value:
//   idle      no run: the composer sends, the stop button is hidden
//   starting  a send was clicked; the stream has not yet said which chat it runs in
//   streaming the run is live in this chat (its `session` frame arrived)
//   stopping  stop was clicked; the cancel goes out as soon as the chat is known
const PHASES = ["idle", "starting", "streaming", "stopping", "reconnecting"];

const state = {
  info: null,
  sessionId: null,
  agent: null, // the agent of the chat on screen (a new chat: the one the switcher shows)
  phase: "idle",
  abort: null,
  generation: 0,
  armedDelete: null,
  streamError: null, // the last run-level `error` frame of the current stream (kept across the final re-render)
  renaming: false, // a rename box is open: notifications must not re-render the list under it
  refreshTimer: null,
  lateRun: null, // { sessionId, runId }: a run of the open chat that started while a stream was still shown
};

const transcript = new Transcript($("messages"), {
  jump: $("jump"),
  onEdit: (turn, text) => resend(turn, text, false, true).catch(fail), // the earlier version stays reachable
  onRegenerate: () => {
    const last = transcript.lastUser();
    if (last) resend(last.turn, last.text, true).catch(fail); // true: keep this answer as a variant
  },
  // An error card's Retry: the last message again, in place of the failed answer.
  onRetry: () => {
    const last = transcript.lastUser();
    if (last && !busy()) resend(last.turn, last.text).catch(fail);
  },
});

let schedules = null; // the Schedules dialog, once /api/info is in
transcript.hooks.viewContext = () => ({ sessionId: state.sessionId, send: (text) => send(text).catch(fail) });

let creatingSession = null; // the POST /api/sessions in flight, if any
const uploads = initUploads(transcript, {
  sessionId: () => state.sessionId,
  ensureSession: async () => {
    if (state.sessionId) return state.sessionId;
    // Files attached together (a drop of several, a paste during an upload) share one new chat.
    if (!creatingSession) {
      creatingSession = api("POST", "/api/sessions", newChatAgent())
        .then((meta) => {
          setSession(meta.id);
          history.replaceState(null, "", `#/chat/${encodeURIComponent(meta.id)}`);
          refreshSessions().catch(fail);
          return meta.id;
        })
        .finally(() => {
          creatingSession = null;
        });
    }
    return creatingSession;
  },
  openSession: (id) => openSession(id),
  busy: () => busy(),
  fail: (error) => fail(error),
});
initVariants(transcript); // after initUploads: it chains the controls hook
const lineage = initLineage({ api, sessionId: () => state.sessionId, openSession: (id) => openSession(id).catch(fail), fail: (error) => fail(error) });
const panels = initPanels({ sessionId: () => state.sessionId, send: (text) => send(text).catch(fail) });
const switcher = initAgentSwitcher((name) => pickAgent(name));
initExportMenu({
  sessionId: () => state.sessionId,
  title: () => document.querySelector("#sessions .session.active:not(.damaged) .name")?.textContent || null,
  fail: (error) => fail(error),
});
const ring = initRing($("context-ring"), { agents: () => state.info?.agents, defaultAgent: () => state.info?.default_agent });

// ------------------------------------------------------------------ helpers

function fail(error) {
  if (error instanceof AuthError) return error.code && error.code !== "server_token" ? showSignedOut() : showTokenForm();
  if (error && error.name === "AbortError") return undefined;
  // While the page waits for the server to come back, every other request fails the same way:
  // the one status line says so, instead of a stack of "Failed to fetch" boxes.
  if (state.phase === "reconnecting" && lostConnection(error)) return undefined;
  console.error(error);
  state.streamError = { type: "Error", message: String(error.message || error) };
  transcript.error(state.streamError);
  return undefined;
}

const busy = () => state.phase !== "idle";

// The stop button shows from the click on until the stream has ended, so a hidden stop button
// always means "finished", never "not started yet".
function setPhase(phase) {
  if (!PHASES.includes(phase)) throw new Error(`unknown phase ${phase}`);
  const was = state.phase;
  state.phase = phase;
  document.body.dataset.phase = phase;
  $("stop").hidden = phase === "idle" || phase === "reconnecting";
  $("stop").disabled = phase === "stopping";
  if ((was === "idle") !== (phase === "idle")) transcript.setControls(phase !== "idle");
}

function composerEnabled() {
  return state.info && (state.info.configured || localStorage.getItem(DEMO_KEY) === "1");
}

function showSignedOut() {
  state.signedOut = true;
  const p = document.createElement("p");
  p.className = "signed-out";
  p.dataset.testid = "signed-out";
  p.textContent = t("auth.signedOut");
  $("messages").replaceChildren(p);
}

function showTokenForm() {
  state.signedOut = true;
  const form = $("token-form").content.firstElementChild.cloneNode(true);
  applyI18n(form);
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
  h.textContent = t("notice.noModel");
  const p = document.createElement("p");
  p.textContent = t("notice.setModel");
  const pre = document.createElement("pre");
  pre.textContent = "export LOVIA_MODEL=openai:gpt-4.1-mini\nexport OPENAI_API_KEY=sk-...\nlovia web\n\n# any OpenAI-compatible server:\nexport LOVIA_MODEL=openai:llama3.1 OPENAI_BASE_URL=http://localhost:11434/v1\n\n# Anthropic:\nexport LOVIA_MODEL=anthropic:claude-sonnet-4-5 ANTHROPIC_API_KEY=...";
  const button = document.createElement("button");
  button.className = "primary";
  button.dataset.testid = "use-demo";
  button.textContent = t("notice.useDemo");
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
  // /api/info names the agents; /api/agents describes them (model, tools, workspace, memory).
  const [info, described] = await Promise.all([api("GET", "/api/info"), api("GET", "/api/agents")]);
  // Serving several agents, the server names no default: the page starts with the first one.
  state.info = { ...info, agents: described, default_agent: info.default_agent ?? (described[0] ? described[0].name : null) };
  document.title = state.info.title;
  $("title").textContent = state.info.title;
  showAgent(switcher.setInfo(state.info));
  transcript.canRewind = Boolean(state.info.features.rewind);
  showNotice();
  $("composer").disabled = !composerEnabled();
  panels.setInfo(state.info);
}

// ------------------------------------------------------------------ agents

// Show `name` as the current agent: the switcher and the model label in the top bar.
function showAgent(name) {
  state.agent = name || state.info?.default_agent || null;
  switcher.show(state.agent);
  panels.setAgent(state.agent);
  const agent = state.info?.agents.find((a) => a.name === state.agent);
  $("model").textContent = agent && agent.model ? agent.model : "";
}

// The user picked an agent in the switcher: a new chat with it.
function pickAgent(name) {
  views.close();
  newChat();
  showAgent(name);
  switcher.remember(name);
  ext.emit("agent", { agent: name });
}

// The `agent` of a request that creates a chat (only when there is a choice of agents).
const newChatAgent = () => (switcher.enabled && state.agent ? { agent: state.agent } : {});

// ------------------------------------------------------------------ sidebar

function sessionItem(meta) {
  const li = document.createElement("li");
  li.className = "session" + (meta.id === state.sessionId ? " active" : "");
  li.dataset.testid = "session-item";
  li.dataset.sessionId = meta.id;
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = meta.title || t("session.untitled");
  name.title = name.textContent; // the whole title, where the row cuts it
  if (meta.origin_kind === "fork" && !meta.damaged) {
    // A branch shares its source's title: the mark stays in view however much of the name is cut.
    const mark = document.createElement("span");
    mark.className = "branch-mark";
    mark.dataset.testid = "session-branch";
    mark.textContent = "⑂";
    mark.title = t("session.branch");
    li.classList.add("branch");
    li.append(mark);
  }
  if (meta.damaged) {
    li.classList.add("damaged"); // listed, not hidden: its id and what to do
    name.textContent = t("session.damaged", { id: meta.id });
    li.title = meta.damaged;
  }
  const actions = document.createElement("span");
  actions.className = "actions";
  const pin = document.createElement("button");
  pin.className = "link pin";
  pin.textContent = meta.pinned ? "★" : "☆";
  pin.title = meta.pinned ? t("session.unpin") : t("session.pin");
  pin.dataset.testid = "pin";
  pin.setAttribute("aria-pressed", String(Boolean(meta.pinned)));
  const rename = document.createElement("button");
  rename.className = "link";
  rename.textContent = "✎";
  rename.title = t("session.rename");
  rename.dataset.testid = "rename";
  const del = document.createElement("button");
  del.className = "link";
  del.textContent = "×";
  del.title = t("session.delete");
  del.dataset.testid = "delete";
  actions.append(pin, rename, del);
  if (meta.pinned) li.classList.add("pinned");
  if (meta.live) li.append(Object.assign(document.createElement("span"), { className: "live-dot", title: t("session.running") }));
  li.append(name, actions);
  li.onclick = () => {
    views.close();
    openSession(meta.id).catch(fail);
  };
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
  if (state.armedDelete === meta.id) del.textContent = t("session.confirmDelete");
  del.onclick = (event) => {
    event.stopPropagation();
    if (state.armedDelete !== meta.id) {
      state.armedDelete = meta.id; // a second click confirms (kept across list refreshes)
      del.textContent = t("session.confirmDelete");
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
  const rows = await api("GET", `/api/sessions${q ? `?q=${encodeURIComponent(q)}` : ""}`);
  if (state.renaming) return scheduleRefresh();
  $("sessions").replaceChildren(...rows.map(sessionItem));
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
  if (event === "session_deleted" && data.session_id === state.sessionId && !busy()) newChat();
  else if (event === "sessions_cleared" && !busy()) newChat();
  else if (event === "run_started" && data.session_id === state.sessionId) {
    // Another tab or client started a run in this chat: follow it. While a stream is still shown
    // (the chat's next run, on messages the last one left unread), follow it once that ends.
    if (!busy()) openSession(state.sessionId).catch(fail);
    else state.lateRun = { sessionId: data.session_id, runId: data.run_id };
  }
  lineage.notify(event);
  schedules?.notify(event);
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

function setSession(id) {
  if (state.sessionId === id) return;
  state.sessionId = id;
  ext.emit("session", { sessionId: id });
}

function newChat() {
  state.abort?.abort();
  state.generation += 1;
  setSession(null);
  history.replaceState(null, "", window.location.pathname + window.location.search);
  setPhase("idle");
  transcript.render([], [], false);
  ring.hide();
  lineage.show(null, null);
  showTodos([]);
  refreshSessions().catch(fail);
  $("composer").focus();
}

async function openSession(id) {
  state.abort?.abort();
  const generation = ++state.generation;
  setSession(id);
  history.replaceState(null, "", `${window.location.pathname}${window.location.search}#/chat/${encodeURIComponent(id)}`);
  $("app").classList.remove("sidebar-open");
  transcript.liveCalls.clear(); // a reopened chat's pages wait for a click on Run
  const data = await api("GET", `/api/sessions/${encodeURIComponent(id)}`);
  if (generation !== state.generation) return;
  transcript.render(data.transcript, data.runs, false, data.variants);
  if (state.info) showAgent(data.agent);
  ring.show(data);
  lineage.show(id, data);
  loadTodos(api, id).catch(fail);
  setPhase("idle");
  refreshSessions().catch(fail);
  if (data.live || data.active_run_id) await runStream(`/api/chat/reconnect?session_id=${encodeURIComponent(id)}`, null);
}

// One handler per frame name; FRAMES (frames.js) is the list the server sends.
const HANDLERS = {
  session: (data) => {
    const stopNow = state.phase === "stopping";
    if (!stopNow) setPhase("streaming");
    if (state.sessionId !== data.session_id) {
      setSession(data.session_id);
      history.replaceState(null, "", `#/chat/${encodeURIComponent(data.session_id)}`);
      refreshSessions().catch(fail);
      lineage.refresh();
    }
    if (stopNow) sendCancel().catch(fail);
  },
  snapshot: (data) => {
    transcript.render(data.transcript, [], data.status === "running");
    if (data.status === "running" && state.phase !== "stopping") setPhase("streaming");
    else if (data.status !== "running") setPhase("idle");
    if (data.status === "running") transcript.showWorking(); // until its first output arrives
  },
  run_waiting: (data) => transcript.showWaiting(data.position), // at the run limit: in line for a slot
  turn_started: () => {},
  text_delta: (data) => transcript.textDelta(data.delta),
  reasoning_delta: (data) => transcript.reasoningDelta(data.delta),
  output_discarded: () => transcript.supersedeLive(),
  message_completed: (data) => transcript.messageCompleted(data.message),
  user_injected: (data) => transcript.userInjected(data.content),
  tool_call: (data) => transcript.toolCall(data),
  tool_result: (data) => {
    if (data.name === "ask_human") clearQuestion();
    transcript.toolResult(data);
  },
  approval_required: (data) => {
    transcript.approval(data, decide);
    if (views.current) ext.toast(t("view.waiting"));
  },
  question: (data) => {
    showQuestion(transcript, data, answerQuestion);
    if (views.current) ext.toast(t("view.waiting"));
  },
  todo: (data) => {
    transcript.toolResult({ id: data.call_id, name: data.name, result: data.todos, is_error: false });
    showTodos(data.todos);
  },
  handoff: (data) => transcript.handoff(data),
  context_compacted: (data) => transcript.compacted(data),
  retrying: (data) => transcript.retrying(data),
  error: (data) => {
    if (data.scope !== "tool") state.streamError = data;
    transcript.error(data);
  },
  refs: () => {}, // the reload after the run reads the refs from the chat's detail
  timing: () => {},
  done: (data) => transcript.done(data),
};

const missing = FRAMES.filter((name) => !(name in HANDLERS));
if (missing.length) throw new Error(`the page handles no ${missing.join(", ")} frame`);

// Frames that say nothing the reader sees yet keep the "Working…" line; any other one ends it.
const QUIET_FRAMES = new Set(["session", "snapshot", "turn_started", "timing", "refs", "retrying", "output_discarded"]);

function onFrame(event, data) {
  // Any frame after the waiting ones means the run got its slot: "Working…" until its output.
  if (event !== "run_waiting" && transcript.hideWaiting() && QUIET_FRAMES.has(event)) transcript.showWorking();
  if (!QUIET_FRAMES.has(event)) transcript.hideWorking();
  const handler = HANDLERS[event];
  if (handler) handler(data);
}

async function decide(callId, decision) {
  await api("POST", "/api/chat/approve", { session_id: state.sessionId, call_id: callId, decision }).catch(fail);
}

async function answerQuestion(answer) {
  const res = await api("POST", "/api/chat/answer", { session_id: state.sessionId, answer }).catch(fail);
  return Boolean(res);
}

async function runStream(path, body) {
  state.abort?.abort();
  const controller = new AbortController();
  state.abort = controller;
  state.streamError = null;
  const generation = ++state.generation;
  let started = false;
  let lost = false; // the server went away mid-stream: a shutdown frame, or the connection broke
  let outcome = { status: "detached", usage: null };
  const runs = new Set(); // the runs this stream showed
  try {
    await streamFrames(path, body, (event, data) => {
      if (generation !== state.generation) return;
      if (typeof data?.run_id === "string") runs.add(data.run_id);
      if (event === "error" && data.type === "ServerShutdown" && data.resumable) {
        lost = true; // the run is kept for the next server: no error card, the page reconnects
        return;
      }
      if (event === "done") outcome = { status: data.stopped ? "cancelled" : "done", usage: data.stopped ? null : data.usage || null };
      if (event === "error" && data.scope !== "tool") outcome = { status: "error", usage: null };
      onFrame(event, data); // a `session` frame first makes the chat current, then the run starts in it
      if (event === "session" && !started) {
        started = true;
        ext.emit("run-start", { sessionId: data.session_id });
      }
    }, controller.signal);
  } catch (error) {
    if (generation === state.generation && lostConnection(error)) lost = true;
    // run_not_found: the run a reconnect was for ended meanwhile; the chat is re-read below.
    else if (generation === state.generation && error.code !== "run_not_found") fail(error);
  }
  if (lost && generation === state.generation && state.sessionId) {
    transcript.keepPartial(); // what had arrived stays on screen until the run is read again
    await reconnect(generation);
    return;
  }
  if (started) ext.emit("run-end", { sessionId: state.sessionId, ...outcome });
  if (generation !== state.generation) return;
  state.abort = null;
  // Re-render from the stored transcript before showing the run as finished, so "idle" always
  // shows what the server kept (after a stop: the partial answer, marked; after a failure: the
  // error card). An error the server could not store stays shown.
  const shown = state.streamError;
  if (state.sessionId) {
    const data = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`).catch(fail);
    if (data && generation === state.generation) {
      transcript.render(data.transcript, data.runs, false, data.variants);
      ring.show(data);
    }
  }
  if (generation !== state.generation) return;
  if (shown && !transcript.hasErrorFor(shown.run_id)) transcript.error(shown);
  setPhase("idle");
  refreshSessions().catch(fail);
  panels.runFinished(state.sessionId, !shown);
  const late = state.lateRun;
  state.lateRun = null;
  if (late && late.sessionId === state.sessionId && !runs.has(late.runId)) openSession(late.sessionId).catch(fail);
}

// A request that never got an answer (the server is down or restarting), as opposed to an
// answer that says no: fetch rejects with a TypeError, a cut stream's read too.
function lostConnection(error) {
  return error instanceof TypeError;
}

// The server went away while a run was shown: one status line, retries with backoff (0.5 s,
// doubling to 5 s) until the server answers, then the chat as it now is: the live run (resumed by
// the new server on its own) streams on, or the finished one is drawn from the store. Opening
// another chat or starting a new one ends the wait (the generation moves on).
async function reconnect(generation) {
  setPhase("reconnecting");
  const line = document.createElement("div");
  line.className = "reconnecting";
  line.dataset.part = "reconnecting";
  line.setAttribute("role", "status");
  $("messages").append(line);
  transcript.scroll();
  try {
    for (let attempt = 0; generation === state.generation; attempt++) {
      const wait = Math.min(500 * 2 ** attempt, 5000);
      const until = Date.now() + wait;
      while (Date.now() < until && generation === state.generation) {
        const left = Math.ceil((until - Date.now()) / 1000);
        line.textContent = left > 0 ? t("chat.reconnectIn", { seconds: left }) : t("chat.reconnectNow");
        await new Promise((resolve) => setTimeout(resolve, Math.min(250, until - Date.now())));
      }
      if (generation !== state.generation) return;
      line.textContent = t("chat.reconnectNow");
      let data;
      try {
        data = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`);
      } catch (error) {
        if (lostConnection(error)) continue;
        line.remove();
        setPhase("idle");
        fail(error);
        return;
      }
      if (generation !== state.generation) return;
      line.remove();
      transcript.render(data.transcript, data.runs, false, data.variants);
      ring.show(data);
      if (data.live || data.active_run_id) {
        setPhase("streaming");
        await runStream(`/api/chat/reconnect?session_id=${encodeURIComponent(state.sessionId)}`, null);
      } else {
        setPhase("idle");
        refreshSessions().catch(fail);
        panels.runFinished(state.sessionId, true);
      }
      return;
    }
  } finally {
    line.remove();
  }
}

// `fromComposer`: the composer's own text (cleared, with its attachments); otherwise a script's
// lovia.send, which leaves the user's draft and attachments where they are.
async function send(text, { fromComposer = true } = {}) {
  const message = text.trim();
  const attachments = busy() || !fromComposer ? [] : uploads.take();
  if ((!message && !attachments.length) || !composerEnabled()) return;
  if (fromComposer) $("composer").value = "";
  transcript.jumpToLatest();
  if (!busy()) {
    setPhase("starting");
    transcript.pending(message); // shown at once, before the server has answered at all
  }
  const agent = state.sessionId ? {} : newChatAgent();
  await runStream("/api/chat/stream", { message, session_id: state.sessionId, attachments, ...agent });
}

// keepAnswer: a regenerate keeps the answer as a variant; keepQuestion: an edit keeps the earlier
// version of the turn (message and answer) for the version pager.
async function resend(turn, text, keepAnswer = false, keepQuestion = false) {
  if (busy() || !state.sessionId) return;
  setPhase("starting");
  try {
    const body = { user_turn: turn, keep_answer: keepAnswer, keep_question: keepQuestion };
    await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/rewind`, body);
  } catch (error) {
    setPhase("idle");
    throw error;
  }
  await runStream("/api/chat/stream", { message: text, session_id: state.sessionId });
}

// Clicked before the server has started the run (or, in a new chat, before its id is known):
// a cancel now would find nothing to stop, so the `session` frame sends it (phase "stopping").
async function stop() {
  if (state.phase === "idle" || state.phase === "stopping") return;
  const known = state.phase === "streaming" && state.sessionId;
  setPhase("stopping");
  if (known) await sendCancel();
}

async function sendCancel() {
  try {
    await api("POST", `/api/chat/cancel?session_id=${encodeURIComponent(state.sessionId)}`);
  } catch (error) {
    if (error.code !== "run_not_found") throw error; // it ended on its own meanwhile
  }
}

// ------------------------------------------------------------------ views

// One view at a time covers the chat; the chat stays current underneath. Its target
// ("<id>[/<path>]") lives in the URL's ?view= beside the chat's #/chat/<id>.
const views = {
  current: null, // { id, path, target }
  cleanup: null,
  draws: 0,
  title: null,

  parse(target) {
    const text = String(target || "");
    const cut = text.indexOf("/");
    return cut < 0 ? { id: text, path: "" } : { id: text.slice(0, cut), path: text.slice(cut + 1) };
  },

  setUrl(target) {
    const url = new URL(window.location.href);
    if (target) url.searchParams.set("view", target);
    else url.searchParams.delete("view");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  },

  markLinks() {
    for (const a of document.querySelectorAll('[data-part="sidebar-nav"] a[href]')) {
      const target = new URL(a.href, window.location.href).searchParams.get("view");
      const current = this.current && target !== null && this.parse(target).id === this.current.id;
      if (current) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  },

  // Open `target`; an unknown id throws, or (from a link or the URL) shows a notice.
  open(target, { fromUrl = false } = {}) {
    const { id, path } = this.parse(target);
    const view = ext.views.get(id);
    if (!view && !fromUrl) throw new Error(`lovia.openView: no view "${id}"`);
    const box = $("view");
    if (this.title === null) this.title = $("title").textContent;
    this.current = { id, path, target: String(target) };
    document.body.dataset.view = id;
    box.hidden = false;
    $("app").classList.remove("sidebar-open");
    this.setUrl(this.current.target);
    this.markLinks();
    if (!view) {
      this.runCleanup();
      $("title").textContent = this.title;
      const note = document.createElement("p");
      note.className = "view-note error";
      note.dataset.testid = "view-unknown";
      note.textContent = t("view.unknown", { id });
      box.replaceChildren(note);
    } else this.draw(view);
    ext.emit("view", { view: this.current.target });
  },

  runCleanup() {
    const cleanup = this.cleanup;
    this.cleanup = null;
    if (typeof cleanup === "function") {
      try { cleanup(); } catch (error) { console.error("lovia: a view's cleanup failed", error); }
    }
  },

  async draw(view) {
    this.runCleanup();
    const box = $("view");
    const draw = ++this.draws;
    box.replaceChildren();
    $("title").textContent = view.title ? String(view.title) : this.title;
    try {
      const cleanup = await view.render(box, Object.freeze({ path: this.current.path }));
      if (draw !== this.draws) {
        if (typeof cleanup === "function") cleanup(); // left (or redrawn) while it rendered
      } else this.cleanup = cleanup;
    } catch (error) {
      if (draw !== this.draws) return;
      console.error(error);
      const note = document.createElement("p");
      note.className = "view-note error";
      note.dataset.testid = "view-error";
      note.textContent = t("render.failed", { message: error?.message || String(error) });
      box.replaceChildren(note);
    }
  },

  close() {
    if (!this.current) return;
    this.draws += 1;
    this.runCleanup();
    this.current = null;
    delete document.body.dataset.view;
    $("view").hidden = true;
    $("view").replaceChildren();
    if (this.title !== null) $("title").textContent = this.title;
    this.setUrl(null);
    this.markLinks();
    ext.emit("view", { view: null });
  },
};

// Registering an open view's id again redraws it; removing it shows the one it replaced, or closes.
ext.onViewsChange((id) => {
  if (!views.current || views.current.id !== id) return;
  const view = ext.views.get(id);
  if (view) views.draw(view);
  else views.close();
});

// A plain click on a link to ?view=<id>[/<path>] (outside messages) opens the view in place.
function onLinkClick(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const link = event.target.closest?.("a[href]");
  if (!link || link.closest("#messages") || (link.target && link.target !== "_self")) return;
  const href = new URL(link.href, window.location.href);
  if (href.origin !== window.location.origin || href.pathname !== window.location.pathname) return;
  if (!href.searchParams.has("view")) return;
  event.preventDefault();
  const target = href.searchParams.get("view");
  if (!target) views.close();
  else views.open(target, { fromUrl: true });
}

// ------------------------------------------------------------------ window.lovia

// <html data-theme> carries the theme (theme.js; the page's head sets it before the first paint);
// the design tokens are keyed on it.
const theme = currentTheme;

function setDraft(text) {
  const box = $("composer");
  box.value = String(text);
  box.focus();
}

let resolveReady;
const ready = new Promise((resolve) => { resolveReady = resolve; });

async function appFetch(path, init = {}) {
  if (typeof path !== "string" || !path.startsWith("/")) throw new TypeError("lovia.fetch: the path starts with /");
  const response = await fetch(url(path), { ...init, headers: authHeaders({ ...(init.headers || {}) }) });
  if (response.status === 401) {
    try {
      await check(response.clone());
    } catch (error) {
      fail(error);
    }
  }
  return response;
}

window.lovia = Object.assign(window.lovia || {}, {
  version: CONFIG.version || null,
  ready,
  on: ext.on,
  send: (text) => {
    send(String(text), { fromComposer: false }).catch(fail);
  },
  setDraft,
  newChat: () => {
    views.close();
    newChat();
  },
  openSession: (id) => {
    views.close();
    return openSession(String(id)).catch(fail);
  },
  toast: ext.toast,
  fetch: appFetch,
  url,
  t,
  registerRenderer: ext.registerRenderer,
  getRenderer: ext.getRenderer,
  registerToolView: ext.registerToolView,
  registerMessageAction: ext.registerMessageAction,
  refreshMessageActions: ext.refreshMessageActions,
  registerView: ext.registerView,
  openView: (target) => views.open(target),
  closeView: () => views.close(),
});

// A getter (Object.assign would copy one value): each read is the current snapshot.
Object.defineProperty(window.lovia, "state", {
  configurable: true,
  enumerable: true,
  get() {
    const agent = state.agent || (state.info ? state.info.default_agent : null);
    const view = views.current ? views.current.target : null;
    return Object.freeze({ sessionId: state.sessionId, agent, theme: theme(), lang: LANG, busy: busy(), view });
  },
});

transcript.hooks.sessionId = () => state.sessionId;

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
  $("new-chat").onclick = () => {
    views.close();
    newChat();
  };
  $("messages").addEventListener("click", (event) => {
    const example = event.target.closest?.("[data-example]");
    if (example && $("messages").contains(example)) setDraft(example.dataset.example);
  });
  const picker = $("language");
  const auto = new Option(t("settings.automatic"), "");
  picker.append(auto, ...languages().map((code) => new Option(languageName(code), code)));
  picker.value = chosenLang() || "";
  picker.onchange = () => setLang(picker.value || null);
  document.addEventListener("click", onLinkClick);
  bindThemePicker($("theme"), t);
  onThemeChange((value) => ext.emit("theme", { theme: value }));
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
  applyI18n();
  setPhase("idle");
  bind();
  await ext.loadScripts(CONFIG.scripts);
  try {
    await loadInfo();
    schedules = initSchedules({ api, info: () => state.info, sessionId: () => state.sessionId, openSession: (id) => openSession(id).catch(fail) });
    await refreshSessions();
    const match = window.location.hash.match(/^#\/chat\/(.+)$/);
    if (match) await openSession(decodeURIComponent(match[1]));
    else transcript.render([], [], false);
  } catch (error) {
    fail(error);
  }
  const target = new URL(window.location.href).searchParams.get("view");
  if (target) views.open(target, { fromUrl: true });
  watchEvents();
  if (!state.signedOut) resolveReady();
}

start();
