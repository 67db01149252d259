// The Schedules dialog: list, create, pause/resume, run now, delete, and a schedule's fire history.
// Everything goes through /api/schedules; the server validates triggers and its error message
// (with its hint) is shown as is.

import { t } from "./i18n.js";
import { servedPart } from "./parts.js";

// Read when the form is drawn, so the strings are in the page's language.
const kinds = () => ({
  cron: { label: t("schedules.kind.cron"), placeholder: t("schedules.placeholder.cron") },
  every: { label: t("schedules.kind.every"), placeholder: t("schedules.placeholder.every") },
  at: { label: t("schedules.kind.at"), placeholder: t("schedules.placeholder.at") },
});

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(text, testid, onclick, cls = "") {
  const b = el("button", cls, text);
  b.type = "button";
  b.dataset.testid = testid;
  b.onclick = onclick;
  return b;
}

function when(epoch) {
  return epoch ? new Date(epoch * 1000).toLocaleString() : "—";
}

function triggerText(row) {
  if (row.trigger_kind === "every") return t("schedules.trigger.every", { expr: row.trigger_expr });
  if (row.trigger_kind === "at") return t("schedules.trigger.at", { expr: row.trigger_expr });
  return t("schedules.trigger.cron", { expr: row.trigger_expr });
}

function statusText(row) {
  if (row.active) return t("schedules.next", { when: when(row.next_fire) });
  return row.finished_reason === "paused" || !row.finished_reason
    ? t("schedules.paused")
    : t("schedules.finished", { reason: row.finished_reason });
}

// `deps`: api(method, path, body), info() (the /api/info payload), sessionId() (the open chat or
// null), openSession(id).
export function initSchedules(deps) {
  const dialog = buildDialog();
  const open = servedPart("schedules") || el("button", "schedules-open"); // the served page has it (hidden)
  open.textContent = t("schedules.open");
  open.type = "button";
  open.dataset.testid = "schedules-open";
  open.dataset.part = "schedules";
  open.title = t("schedules.openTitle");
  open.hidden = false;
  // Beside the other panel buttons when the page has them, else at the end of the top bar.
  if (!open.isConnected) (document.querySelector(".topbar .panel-buttons") || document.querySelector(".topbar")).append(open);
  const view = new SchedulesView(dialog, deps);
  open.onclick = () => view.show().catch((e) => view.showError(e));
  return view;
}

function buildDialog() {
  const dialog = el("dialog", "schedules-dialog");
  dialog.dataset.testid = "schedules-dialog";
  document.body.append(dialog);
  return dialog;
}

class SchedulesView {
  constructor(dialog, deps) {
    this.dialog = dialog;
    this.deps = deps;
    this.armed = null; // the schedule whose Delete was clicked once
    this.historyOf = null;
  }

  // A lifecycle event from /api/events: a fire (or the end of its run) changes the open list;
  // `hello` (the stream opened again) may follow fires nobody heard.
  notify(event) {
    if (!this.dialog.open || !["hello", "schedule_fired", "run_finished"].includes(event)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh().catch((e) => this.showError(e)), 100);
  }

  async show() {
    this.render();
    if (!this.dialog.open) this.dialog.showModal();
    await this.refresh();
  }

  render() {
    const head = el("div", "schedules-head");
    head.append(el("h2", "", t("schedules.title")), button("✕", "schedules-close", () => this.dialog.close(), "icon"));
    this.list = el("ul", "schedules-list");
    this.list.dataset.testid = "schedules-list";
    this.history = el("section", "schedules-history");
    this.history.dataset.testid = "schedule-history";
    this.history.hidden = true;
    this.error = el("div", "schedules-error");
    this.error.dataset.testid = "schedules-error";
    this.error.setAttribute("role", "alert");
    this.error.hidden = true;
    this.dialog.replaceChildren(head, this.error, this.list, this.history, this.form());
  }

  form() {
    const form = el("form", "schedules-form");
    form.dataset.testid = "schedule-form";
    form.append(el("h3", "", t("schedules.new")));
    const kind = el("select");
    kind.name = "kind";
    kind.dataset.testid = "schedule-kind";
    const KINDS = kinds();
    for (const [value, spec] of Object.entries(KINDS)) kind.append(Object.assign(el("option", "", spec.label), { value }));
    const expr = el("input");
    expr.name = "expr";
    expr.dataset.testid = "schedule-expr";
    expr.required = true;
    expr.setAttribute("aria-label", t("schedules.trigger"));
    const placeholder = () => { expr.placeholder = KINDS[kind.value].placeholder; };
    kind.onchange = placeholder;
    kind.value = "every";
    placeholder();
    const message = el("textarea");
    message.name = "message";
    message.rows = 2;
    message.required = true;
    message.placeholder = t("schedules.messagePlaceholder");
    message.dataset.testid = "schedule-message";
    message.setAttribute("aria-label", t("schedules.message"));
    const agent = el("select");
    agent.name = "agent";
    agent.dataset.testid = "schedule-agent";
    const info = this.deps.info();
    for (const a of info.agents) agent.append(Object.assign(el("option", "", a.name), { value: a.name }));
    agent.value = info.default_agent;
    const target = el("select");
    target.name = "target";
    target.dataset.testid = "schedule-target";
    target.append(Object.assign(el("option", "", t("schedules.target.new")), { value: "" }));
    const current = this.deps.sessionId();
    if (current) {
      target.append(Object.assign(el("option", "", t("schedules.target.this")), { value: current }));
      target.value = current;
    }
    const row = (label, field) => {
      const line = el("label", "schedules-field");
      line.append(el("span", "", label), field);
      return line;
    };
    const submit = el("button", "primary", t("schedules.create"));
    submit.type = "submit";
    submit.dataset.testid = "schedule-create";
    form.append(
      row(t("schedules.trigger"), kind),
      row(t("schedules.value"), expr),
      row(t("schedules.message"), message),
      row(t("schedules.agent"), agent),
      row(t("schedules.runsIn"), target),
      submit,
    );
    form.onsubmit = (event) => {
      event.preventDefault();
      const body = {
        input: message.value.trim(),
        trigger_kind: kind.value,
        trigger_expr: expr.value.trim(),
        agent: agent.value || null,
        session_id: target.value || null,
      };
      this.act(async () => {
        await this.deps.api("POST", "/api/schedules", body);
        expr.value = "";
        message.value = "";
      });
    };
    return form;
  }

  // Run one request; show the server's message on failure, then reload the list either way.
  async act(fn) {
    this.showError(null);
    try {
      await fn();
    } catch (error) {
      this.showError(error);
    }
    await this.refresh().catch((e) => this.showError(e));
  }

  showError(error) {
    if (!this.error) return;
    this.error.hidden = !error;
    this.error.textContent = error ? String(error.message || error) : "";
  }

  async refresh() {
    const rows = await this.deps.api("GET", "/api/schedules");
    this.list.replaceChildren(...rows.map((r) => this.item(r)));
    if (!rows.length) this.list.append(el("li", "schedules-empty", t("schedules.empty")));
    if (this.historyOf) await this.showHistory(rows.find((r) => r.id === this.historyOf) || null);
  }

  item(row) {
    const li = el("li", "schedule-item" + (row.active ? "" : " paused"));
    li.dataset.testid = "schedule-item";
    li.dataset.scheduleId = row.id;
    const text = el("div", "schedule-text");
    text.append(el("strong", "schedule-message", row.input));
    const meta = el("div", "schedule-meta");
    const status = el("span", "schedule-status", statusText(row));
    status.dataset.testid = "schedule-status";
    meta.append(el("span", "", triggerText(row)), el("span", "", " · "), status, el("span", "", " · "));
    if (row.session_id) {
      meta.append(button(t("schedules.inChat"), "schedule-chat", () => {
        this.dialog.close();
        this.deps.openSession(row.session_id);
      }, "link schedule-chat"));
    } else {
      meta.append(el("span", "", t("schedules.newChatEachFire")));
    }
    meta.append(el("span", "", ` · ${t("schedules.fired", { count: row.fire_count })}`));
    if (row.last_error) meta.append(el("span", "schedule-last-error", ` · ${t("schedules.lastError", { error: row.last_error })}`));
    text.append(meta);
    const id = encodeURIComponent(row.id);
    const actions = el("div", "schedule-actions");
    actions.append(
      button(row.active ? t("schedules.pause") : t("schedules.resume"), "schedule-toggle", () => this.act(() => this.deps.api("PATCH", `/api/schedules/${id}`, { active: !row.active }))),
      button(t("schedules.runNow"), "schedule-run", () => this.act(() => this.deps.api("POST", `/api/schedules/${id}/run`))),
      button(t("schedules.history"), "schedule-history-open", () => {
        this.historyOf = row.id;
        this.showHistory(row).catch((e) => this.showError(e));
      }),
      button(this.armed === row.id ? t("schedules.confirmDelete") : t("schedules.delete"), "schedule-delete", (event) => {
        if (this.armed !== row.id) {
          this.armed = row.id; // a second click confirms (kept across list refreshes)
          event.target.textContent = t("schedules.confirmDelete");
          return;
        }
        this.armed = null;
        if (this.historyOf === row.id) this.historyOf = null;
        this.act(() => this.deps.api("DELETE", `/api/schedules/${id}`));
      }, "danger"),
    );
    li.append(text, actions);
    return li;
  }

  async showHistory(row) {
    if (!row) {
      this.historyOf = null;
      this.history.hidden = true;
      return;
    }
    const fires = await this.deps.api("GET", `/api/schedules/${encodeURIComponent(row.id)}/runs`);
    const head = el("div", "schedules-head");
    head.append(el("h3", "", t("schedules.historyTitle", { input: row.input })), button(t("schedules.hide"), "schedule-history-close", () => {
      this.historyOf = null;
      this.history.hidden = true;
    }, "link"));
    const list = el("ol", "schedule-fires");
    for (const fire of fires) {
      const li = el("li", "schedule-fire" + (fire.error ? " failed" : ""));
      li.dataset.testid = "schedule-fire";
      li.append(el("span", "", when(fire.fired_at || fire.claimed_at)));
      if (fire.error) li.append(el("span", "schedule-fire-error", ` · ${t("schedules.fireFailed", { error: fire.error })}`));
      if (fire.session_id) {
        const link = button(t("schedules.openChat"), "schedule-fire-open", () => {
          this.dialog.close();
          this.deps.openSession(fire.session_id);
        }, "link");
        li.append(el("span", "", " · "), link);
      }
      list.append(li);
    }
    if (!fires.length) list.append(el("li", "schedules-empty", t("schedules.notFired")));
    this.history.replaceChildren(head, list);
    this.history.hidden = false;
  }
}
