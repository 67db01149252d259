// The agent's own views in the page. First: ask_human questions, shown as a prompt in the chat;
// the answer goes to POST /api/chat/answer and the run carries on from the tool call.

import { t } from "./i18n.js";

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

// Remove any prompt still on the page (answered, timed out, or its run ended).
export function clearQuestion(root = document) {
  for (const n of root.querySelectorAll(".question-prompt")) n.remove();
}

// Show `data` (a `question` frame) at the end of the live answer; `send(text)` answers it.
export function showQuestion(transcript, data, send) {
  clearQuestion();
  const box = node("form", "question-prompt");
  box.dataset.testid = "question";
  box.dataset.questionId = data.id;
  box.append(node("p", "question-text", data.question));
  const picked = new Set();
  const submit = async (text) => {
    if (!text.trim()) return;
    for (const b of box.querySelectorAll("button, textarea")) b.disabled = true;
    const ok = await send(text);
    if (ok) box.remove();
    else for (const b of box.querySelectorAll("button, textarea")) b.disabled = false;
  };
  if (data.options?.length) {
    const row = node("div", "question-options");
    for (const option of data.options) {
      const chip = node("button", "question-option", option.label);
      chip.type = "button";
      chip.dataset.testid = "question-option";
      if (option.description) chip.title = option.description;
      chip.onclick = () => {
        if (!data.multi_select) return submit(option.label);
        if (picked.has(option.label)) picked.delete(option.label);
        else picked.add(option.label);
        chip.classList.toggle("picked", picked.has(option.label));
      };
      row.append(chip);
    }
    box.append(row);
  }
  const input = node("textarea", "question-input");
  input.rows = 1;
  input.placeholder = data.options?.length ? t("question.ownAnswer") : t("question.placeholder");
  input.dataset.testid = "question-input";
  input.setAttribute("aria-label", t("question.label"));
  const go = node("button", "primary", t("question.submit"));
  go.type = "submit";
  go.dataset.testid = "question-submit";
  box.append(input, go);
  box.onsubmit = (event) => {
    event.preventDefault();
    const text = input.value.trim() || [...picked].join("\n");
    submit(text);
  };
  input.onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      box.requestSubmit();
    }
  };
  transcript.assistant().body.append(box);
  transcript.scroll?.();
  input.focus();
}

// ------------------------------------------------------------------ the todo list

const MARKS = { pending: "○", in_progress: "◐", completed: "●" };

function todoPanel() {
  let panel = document.getElementById("todo-panel"); // the served page has it (empty)
  if (!panel) {
    panel = node("aside", "todo-panel");
    panel.id = "todo-panel";
    panel.dataset.testid = "todo-panel";
    panel.dataset.part = "todo-panel";
    panel.setAttribute("aria-label", t("todo.label"));
    panel.hidden = true;
    const wrap = document.querySelector(".messages-wrap");
    wrap.parentNode.insertBefore(panel, wrap);
  }
  return panel;
}

// Draw the agent's todo list (hidden while it is empty).
export function showTodos(items) {
  const panel = todoPanel();
  panel.replaceChildren();
  panel.hidden = !items?.length;
  if (!items?.length) return;
  const done = items.filter((i) => i.status === "completed").length;
  panel.append(node("h2", "todo-title", t("todo.title", { done, total: items.length })));
  const list = node("ol", "todo-items");
  for (const item of items) {
    const label = item.status === "in_progress" && item.active_form ? item.active_form : item.content;
    const li = node("li", `todo-item ${item.status}`);
    li.dataset.testid = "todo-item";
    li.dataset.status = item.status;
    li.append(node("span", "todo-mark", MARKS[item.status] || "○"), node("span", "todo-label", label));
    list.append(li);
  }
  panel.append(list);
}

// Fetch and draw a stored chat's list; `api` is the page's JSON client.
export async function loadTodos(api, sessionId) {
  if (!sessionId) return showTodos([]);
  const data = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}/todos`);
  showTodos(data.todos);
}
