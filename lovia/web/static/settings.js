// Settings dialog: model profiles (add, edit, duplicate, test, delete, use for chat) and skill
// directories. Shown only when /api/info reports features.model_config (the CLI's default agent).
// Keys are write-only: the server sends {set, hint}; a key typed here is sent once and cleared.

import { api } from "./api.js";
import { t } from "./i18n.js";
import { servedPart } from "./parts.js";

const el = (tag, props = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "testid") node.dataset.testid = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node[key] = value;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
};

const view = { config: null, editing: null, configured: null, dialog: null };

function message(text, kind = "info") {
  const box = view.dialog.querySelector("[data-testid=settings-status]");
  box.textContent = text;
  box.className = `settings-status ${kind}`;
}

async function run(action) {
  try {
    await action();
  } catch (error) {
    message(error.message || String(error), "error");
  }
}

// After a change: the header shows the new model; a first configuration reloads the page so the
// composer and the notice follow.
async function refreshInfo() {
  const info = await api("GET", "/api/info");
  if (view.configured === false && info.configured) {
    window.location.reload();
    return;
  }
  view.configured = info.configured;
  const agents = await api("GET", "/api/agents");
  const agent = agents.find((a) => a.name === (info.default_agent ?? agents[0]?.name));
  const label = document.getElementById("model");
  if (label) label.textContent = agent && agent.model ? agent.model : "";
}

async function changed(config, note) {
  view.config = config;
  renderModels();
  message(note, "ok");
  await refreshInfo();
}

// ------------------------------------------------------------------ models

function roleBadges(profile) {
  const roles = view.config.roles;
  const badges = [];
  if (profile.id === view.config.default_model) badges.push("chat");
  if (roles.vision === profile.id) badges.push("vision");
  if (roles.aux === profile.id) badges.push("aux");
  return badges.map((b) => el("span", { class: "settings-badge", testid: `role-${b}` }, { chat: t("settings.badge.chat"), vision: t("settings.badge.vision"), aux: t("settings.badge.aux") }[b]));
}

function modelRow(profile) {
  const key = profile.api_key.set ? t("settings.key", { hint: profile.api_key.hint }) : t("settings.noKey");
  const isDefault = profile.id === view.config.default_model;
  const result = el("div", { class: "settings-test", testid: "model-test-result" });
  const test = async () => {
    result.textContent = t("settings.testing");
    const out = await api("POST", "/api/config/test", { profile_id: profile.id });
    result.textContent = testLine(out);
    result.dataset.outcome = out.outcome;
  };
  return el(
    "li",
    { class: "settings-model", testid: "model-row" },
    el(
      "div",
      { class: "settings-model-head" },
      el("strong", { testid: "model-name" }, profile.display_name),
      ...roleBadges(profile),
      profile.usable ? null : el("span", { class: "settings-badge warn" }, t("settings.incomplete")),
    ),
    el("div", { class: "settings-meta" }, `${profile.flavor}:${profile.model} · ${profile.base_url || t("settings.defaultEndpoint")} · ${key}`),
    el(
      "div",
      { class: "settings-actions" },
      isDefault
        ? null
        : el("button", { type: "button", testid: "model-use", onclick: () => run(() => useForChat(profile.id)) }, t("settings.useForChat")),
      el("button", { type: "button", testid: "model-edit", onclick: () => openForm(profile) }, t("settings.edit")),
      el("button", { type: "button", testid: "model-duplicate", onclick: () => run(() => duplicate(profile.id)) }, t("settings.duplicate")),
      el("button", { type: "button", testid: "model-test", onclick: () => run(test) }, t("settings.test")),
      isDefault
        ? null
        : el("button", { type: "button", class: "danger", testid: "model-delete", onclick: () => run(() => remove(profile.id)) }, t("settings.delete")),
    ),
    result,
  );
}

function testLine(out) {
  const parts = [`${out.outcome}: ${out.detail}`];
  if (out.context_window) parts.push(t(out.window_from_endpoint ? "settings.windowReported" : "settings.window", { n: out.context_window }));
  if (out.note) parts.push(out.note);
  return parts.join(" · ");
}

function renderRoles() {
  const box = view.dialog.querySelector("[data-testid=roles]");
  const roles = view.config.roles;
  const choices = (role, noneLabel) => {
    const select = el("select", { name: role, testid: `roles-${role}` }, el("option", { value: "" }, noneLabel));
    for (const m of view.config.models) select.append(el("option", { value: m.id }, m.display_name));
    select.value = (role === "chat" ? view.config.default_model : roles[role]) || "";
    return select;
  };
  const save = async () => {
    const value = (role) => box.querySelector(`[name=${role}]`).value || null;
    const body = { chat: value("chat"), vision: value("vision"), aux: value("aux") };
    await changed(await api("PUT", "/api/config/roles", body), t("settings.rolesSaved"));
  };
  box.replaceChildren(
    field(t("settings.role.chat"), choices("chat", t("settings.role.firstProfile"))),
    field(t("settings.images"), choices("vision", t("settings.role.chatModel"))),
    field(t("settings.role.aux"), choices("aux", t("settings.role.chatModel"))),
    el("div", { class: "settings-actions" }, el("button", { type: "button", testid: "roles-save", onclick: () => run(save) }, t("settings.saveRoles"))),
  );
}

function renderModels() {
  renderRoles();
  const list = view.dialog.querySelector("[data-testid=model-list]");
  const models = view.config.models;
  const outside = view.config.model_from_outside; // --model or LOVIA_MODEL: in use, though not saved here
  const empty = outside
    ? el("li", { class: "settings-empty", testid: "settings-outside-model" }, t("settings.outsideModel", outside))
    : el("li", { class: "settings-empty" }, t("settings.noModels"));
  list.replaceChildren(...(models.length ? models.map(modelRow) : [empty]));
  const where = view.dialog.querySelector("[data-testid=settings-where]");
  where.textContent = t("settings.where", { scope: view.config.scope, path: view.config.path });
}

async function useForChat(id) {
  const roles = { ...view.config.roles, chat: id };
  await changed(await api("PUT", "/api/config/roles", roles), t("settings.switched"));
}

async function duplicate(id) {
  await changed(await api("POST", `/api/config/models/${encodeURIComponent(id)}/duplicate`), t("settings.duplicated"));
}

async function remove(id) {
  await changed(await api("DELETE", `/api/config/models/${encodeURIComponent(id)}`), t("settings.deleted"));
}

function field(label, input) {
  return el("label", { class: "settings-field" }, el("span", {}, label), input);
}

function formValues(form) {
  const get = (name) => form.elements[name].value.trim();
  const body = {
    name: get("name") || null,
    model: get("model"),
    flavor: get("flavor"),
    base_url: get("base_url") || null,
    context_window: get("context_window") ? Number(get("context_window")) : null,
    vision: get("vision"),
  };
  const extra = get("extra_body");
  if (extra) {
    try {
      body.extra_body = JSON.parse(extra);
    } catch (_e) {
      throw new Error(t("settings.extraInvalid"));
    }
  } else body.extra_body = {};
  const key = form.elements.api_key.value;
  const clear = form.elements.clear_key.checked;
  body.api_key = clear ? "" : key ? key : null; // null keeps the stored key
  return body;
}

function openForm(profile = null) {
  view.editing = profile;
  const form = view.dialog.querySelector("[data-testid=model-form]");
  form.hidden = false;
  form.reset();
  form.querySelector("h3").textContent = profile ? t("settings.editTitle", { name: profile.display_name }) : t("settings.addTitle");
  for (const name of ["name", "model", "base_url", "context_window"]) {
    form.elements[name].value = profile && profile[name] != null ? profile[name] : "";
  }
  form.elements.flavor.value = profile ? profile.flavor : "openai";
  form.elements.vision.value = profile ? profile.vision : "auto";
  form.elements.extra_body.value = profile && Object.keys(profile.extra_body).length ? JSON.stringify(profile.extra_body) : "";
  form.elements.api_key.placeholder = profile && profile.api_key.set ? t("settings.keyUnchanged", { hint: profile.api_key.hint }) : t("settings.keyNone");
  form.querySelector("[data-testid=clear-key-row]").hidden = !(profile && profile.api_key.set);
  form.querySelector("[data-testid=form-test-result]").textContent = "";
  form.elements.model.focus();
}

function closeForm() {
  const form = view.dialog.querySelector("[data-testid=model-form]");
  form.reset(); // the typed key leaves the page with the form
  form.hidden = true;
  view.editing = null;
}

async function saveForm(form) {
  const body = formValues(form);
  const editing = view.editing;
  const config = editing
    ? await api("PUT", `/api/config/models/${encodeURIComponent(editing.id)}`, body)
    : await api("POST", "/api/config/models", body);
  closeForm();
  await changed(config, editing ? t("settings.saved") : t("settings.added"));
}

async function testForm(form) {
  const body = formValues(form);
  const out = form.querySelector("[data-testid=form-test-result]");
  out.textContent = t("settings.testing");
  const request = { model: body.model, flavor: body.flavor, base_url: body.base_url, context_window: body.context_window };
  if (view.editing) request.profile_id = view.editing.id;
  if (body.api_key !== null) request.api_key = body.api_key;
  const result = await api("POST", "/api/config/test", request);
  out.textContent = testLine(result);
  out.dataset.outcome = result.outcome;
}

function modelForm() {
  const select = (name, options, labels = {}) => el("select", { name }, ...options.map((o) => el("option", { value: o }, labels[o] || o)));
  const form = el(
    "form",
    { class: "settings-form", testid: "model-form", hidden: true },
    el("h3", {}, t("settings.addTitle")),
    field(t("settings.name"), el("input", { name: "name", placeholder: t("settings.namePlaceholder"), testid: "form-name" })),
    field(t("settings.model"), el("input", { name: "model", required: true, placeholder: t("settings.modelPlaceholder"), testid: "form-model" })),
    field(t("settings.dialect"), select("flavor", ["openai", "anthropic"])),
    field(t("settings.baseUrl"), el("input", { name: "base_url", placeholder: t("settings.baseUrlPlaceholder"), testid: "form-base-url" })),
    field(t("settings.apiKey"), el("input", { name: "api_key", type: "password", autocomplete: "off", testid: "form-api-key" })),
    el(
      "label",
      { class: "settings-check", testid: "clear-key-row" },
      el("input", { type: "checkbox", name: "clear_key" }),
      ` ${t("settings.clearKey")}`,
    ),
    field(t("settings.contextWindow"), el("input", { name: "context_window", type: "number", min: "1", placeholder: t("settings.contextWindowPlaceholder") })),
    field(t("settings.images"), select("vision", ["auto", "on", "off"], { auto: t("settings.vision.auto"), on: t("settings.vision.on"), off: t("settings.vision.off") })),
    field(t("settings.extra"), el("textarea", { name: "extra_body", rows: 2, placeholder: '{"reasoning_effort": "medium"}' })),
    el(
      "div",
      { class: "settings-actions" },
      el("button", { type: "submit", class: "primary", testid: "form-save" }, t("settings.save")),
      el("button", { type: "button", testid: "form-test", onclick: () => run(() => testForm(form)) }, t("settings.testConnection")),
      el("button", { type: "button", testid: "form-cancel", onclick: closeForm }, t("settings.cancel")),
    ),
    el("div", { class: "settings-test", testid: "form-test-result" }),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run(() => saveForm(form));
  });
  return form;
}

// ------------------------------------------------------------------ skills

function rootItem(root) {
  const lines = [];
  if (!root.exists) lines.push(el("div", { class: "settings-meta" }, t("settings.missingDir")));
  for (const skill of root.skills) {
    lines.push(el("div", { class: "settings-meta", testid: "skill-item" }, `${skill.name}${skill.shadowed ? ` ${t("settings.shadowed")}` : ""} — ${skill.description}`));
  }
  for (const problem of root.problems) {
    lines.push(el("div", { class: "settings-meta warn", testid: "skill-problem" }, `${problem.dir}: ${problem.error}`));
  }
  if (root.exists && !root.skills.length && !root.problems.length) lines.push(el("div", { class: "settings-meta" }, t("settings.noSkills")));
  return el("li", { class: "settings-model", testid: "skill-root" }, el("strong", {}, `${root.path} `), el("span", { class: "settings-badge" }, root.kind), ...lines);
}

async function loadSkills() {
  const skills = await api("GET", "/api/config/skills");
  renderSkills(skills);
}

function renderSkills(skills) {
  view.dialog.querySelector("[data-testid=skill-dirs]").value = skills.dirs.join("\n");
  view.dialog.querySelector("[data-testid=skill-roots]").replaceChildren(...skills.roots.map(rootItem));
}

async function saveSkills() {
  const dirs = view.dialog
    .querySelector("[data-testid=skill-dirs]")
    .value.split("\n")
    .map((d) => d.trim())
    .filter(Boolean);
  renderSkills(await api("PUT", "/api/config/skills", { dirs }));
  message(t("settings.skillsSaved"), "ok");
}

// ------------------------------------------------------------------ the dialog

function buildDialog() {
  const dialog = el(
    "dialog",
    { class: "settings", testid: "settings-dialog" },
    el(
      "div",
      { class: "settings-top" },
      el("h2", {}, t("settings.title")),
      el("button", { type: "button", class: "icon", testid: "settings-close", ariaLabel: t("settings.close"), onclick: () => dialog.close() }, "✕"),
    ),
    el("div", { class: "settings-status", testid: "settings-status" }),
    el("h3", {}, t("settings.models")),
    el("div", { class: "settings-meta", testid: "settings-where" }),
    el("ul", { class: "settings-list", testid: "model-list" }),
    el("button", { type: "button", class: "primary", testid: "model-add", onclick: () => openForm(null) }, t("settings.addModel")),
    modelForm(),
    el("h3", {}, t("settings.roles")),
    el("div", { class: "settings-form", testid: "roles" }),
    el("h3", {}, t("settings.skills")),
    el("p", { class: "settings-meta" }, t("settings.skillsHelp")),
    el("textarea", { class: "settings-dirs", rows: 3, testid: "skill-dirs", ariaLabel: t("settings.skillDirs") }),
    el("button", { type: "button", testid: "skills-save", onclick: () => run(saveSkills) }, t("settings.saveDirs")),
    el("ul", { class: "settings-list", testid: "skill-roots" }),
  );
  dialog.addEventListener("close", closeForm);
  document.body.append(dialog);
  return dialog;
}

async function openDialog() {
  view.config = await api("GET", "/api/config");
  renderModels();
  message("");
  view.dialog.showModal();
  await loadSkills();
}

async function init() {
  let info;
  try {
    info = await api("GET", "/api/info");
  } catch (_e) {
    return; // no token yet, or the server is down: the page itself says so
  }
  if (!info.features || !info.features.model_config) return;
  view.configured = info.configured;
  view.dialog = buildDialog();
  // The served page has the button (hidden until now); a page of your own without it gets one.
  const button = servedPart("settings") || el("button", { type: "button", class: "settings-open", testid: "settings-open" });
  button.textContent = t("settings.open");
  button.dataset.part = "settings";
  button.onclick = () => run(openDialog);
  button.hidden = false;
  const bar = document.querySelector(".topbar");
  if (bar && !button.isConnected) bar.append(button);
  offerInNotice();
}

// The page's "No model configured" notice speaks of LOVIA_MODEL; here a model can be added in
// the page instead, so the notice gets a button for that whenever it is (re)drawn.
function offerInNotice() {
  const notice = document.getElementById("notice");
  if (!notice) return;
  const add = () => {
    if (view.configured || notice.hidden || notice.querySelector("[data-testid=notice-settings]")) return;
    const button = el("button", { type: "button", class: "primary", testid: "notice-settings", onclick: () => run(openFirstModel) }, t("settings.noticeButton"));
    notice.append(el("p", {}, t("settings.noticeText")), button);
  };
  new MutationObserver(add).observe(notice, { childList: true, attributes: true, attributeFilter: ["hidden"] });
  add();
}

async function openFirstModel() {
  await openDialog();
  openForm(null);
}

init();
