// The Memory dialog: the agent's notes (GET /api/memory), edited as one bullet list (PUT, refused
// with 413 over the budget: the stored notes stay and the editor keeps the user's text), and a
// "Dream now" button (POST /api/memory/dream) that reports the note counts and sizes it changed.

import { api } from "./api.js";
import { button, el, t } from "./panels-strings.js";

/** Build the dialog for `agentName()`'s notes; call `.open()` to show it. */
export function createMemoryDialog(agentName) {
  const dialog = el("dialog", "memory-dialog");
  dialog.id = "memory-dialog";
  dialog.dataset.testid = "memory-dialog";
  dialog.setAttribute("aria-labelledby", "memory-title");
  const title = el("h2", "memory-title", t("memory.title"));
  title.id = "memory-title";
  const help = el("p", "memory-help", t("memory.help"));
  const notes = el("textarea", "memory-notes");
  notes.dataset.testid = "memory-notes";
  notes.rows = 12;
  notes.spellcheck = false;
  notes.setAttribute("aria-label", t("memory.title"));
  const meterRow = el("div", "memory-meter-row");
  const meter = el("meter", "memory-meter-bar");
  const meterText = el("span", "memory-meter");
  meterText.dataset.testid = "memory-meter";
  const dreamedAt = el("span", "memory-dreamed");
  dreamedAt.dataset.testid = "memory-dreamed";
  meterRow.append(meter, meterText, dreamedAt);
  const status = el("p", "memory-status");
  status.dataset.testid = "memory-status";
  status.setAttribute("role", "status");
  status.hidden = true;
  const buttons = el("div", "memory-buttons");
  const dream = button("", t("memory.dream"), "memory-dream");
  const save = button("primary", t("memory.save"), "memory-save");
  const close = button("", t("memory.close"), "memory-close");
  buttons.append(dream, el("span", "memory-spacer"), close, save);
  dialog.append(title, help, notes, meterRow, status, buttons);

  let saved = null; // the last notes the server reported

  const query = () => `?agent=${encodeURIComponent(agentName())}`;

  function say(text, kind) {
    status.textContent = text || "";
    status.dataset.kind = kind || "";
    status.hidden = !text;
  }

  function show(data) {
    saved = data;
    notes.value = data.content;
    meter.max = Math.max(data.budget, 1);
    meter.high = data.budget * 0.9;
    meter.value = Math.min(data.used, data.budget);
    meterText.textContent = t("memory.meter", { used: data.used, budget: data.budget });
    dreamedAt.textContent = data.dreamed_at
      ? t("memory.dreamedAt", { when: new Date(data.dreamed_at * 1000).toLocaleString() })
      : t("memory.neverDreamed");
    syncButtons();
  }

  function syncButtons(busy = false) {
    const dirty = saved !== null && notes.value !== saved.content;
    save.disabled = busy || saved === null || !dirty;
    dream.disabled = busy || saved === null || dirty; // a dream rewrites the notes: unsaved edits would be lost
    dream.title = dirty ? t("memory.dreamDirty") : t("memory.dreamTitle");
  }

  async function guarded(work) {
    syncButtons(true);
    try {
      await work();
    } catch (error) {
      say(String(error.message || error), "error");
    } finally {
      syncButtons(false);
    }
  }

  notes.oninput = () => syncButtons();
  save.onclick = () =>
    guarded(async () => {
      say("");
      show(await api("PUT", `/api/memory${query()}`, { content: notes.value }));
      say(t("memory.saved"), "ok");
    });
  dream.onclick = () =>
    guarded(async () => {
      const usedBefore = saved.used;
      say(t("memory.dreaming"), "busy");
      const data = await api("POST", `/api/memory/dream${query()}`);
      show(data);
      say(t("memory.dreamed", { before: data.before, after: data.after, usedBefore, usedAfter: data.used }), "ok");
    });
  close.onclick = () => dialog.close();

  document.body.append(dialog);
  return {
    element: dialog,
    async open() {
      saved = null;
      notes.value = "";
      say(t("memory.loading"), "busy");
      syncButtons();
      if (!dialog.open) dialog.showModal();
      await guarded(async () => {
        show(await api("GET", `/api/memory${query()}`));
        say("");
      });
    },
  };
}
