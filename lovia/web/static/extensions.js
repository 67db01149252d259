// The registries behind `window.lovia` (see docs/web.md, "Extension scripts"): events, tool
// views, message actions, views and component renderers. The page (app.js, render.js) reads
// them; extension scripts write them through `window.lovia`.
//
// Every register* returns an undo function. A key keeps a stack of registrations, so undoing
// brings back whatever the undone one replaced, in whatever order the undos come.

import { getRenderer as chartRenderer, registerRenderer as setChartRenderer } from "./charts.js";
import { t } from "./i18n.js";

export const EVENTS = ["session", "agent", "run-start", "run-end", "theme", "view"];
const listeners = new Map(EVENTS.map((name) => [name, new Set()]));

/** Listen for one of EVENTS; returns the function that stops listening. */
export function on(event, fn) {
  const set = listeners.get(event);
  if (!set) throw new Error(`lovia.on: unknown event "${event}" (one of ${EVENTS.join(", ")})`);
  if (typeof fn !== "function") throw new TypeError("lovia.on: the listener must be a function");
  const entry = (payload) => fn(payload);
  set.add(entry);
  return () => set.delete(entry);
}

/** Tell the listeners of `event`; one that throws is logged and the others still run. */
export function emit(event, payload) {
  for (const fn of [...(listeners.get(event) || [])]) {
    try {
      fn(Object.freeze({ ...payload }));
    } catch (error) {
      console.error(`lovia: a "${event}" listener failed`, error);
    }
  }
}

class Registry {
  constructor(onChange) {
    this.stacks = new Map();
    this.onChange = onChange || (() => {});
  }

  register(key, value) {
    const token = { value };
    const stack = this.stacks.get(key) || [];
    stack.push(token);
    this.stacks.set(key, stack);
    this.onChange(key);
    return () => {
      const list = this.stacks.get(key) || [];
      const at = list.indexOf(token);
      if (at < 0) return;
      list.splice(at, 1);
      if (!list.length) this.stacks.delete(key);
      this.onChange(key);
    };
  }

  get(key) {
    const stack = this.stacks.get(key);
    return stack ? stack[stack.length - 1].value : undefined;
  }

  keys() {
    return [...this.stacks.keys()];
  }
}

// ------------------------------------------------------------------ component renderers

const builtinRenderers = new Map();
const renderers = new Registry((kind) => {
  const top = renderers.get(kind);
  setChartRenderer(kind, top || builtinRenderers.get(kind));
});

export function registerRenderer(kind, renderer) {
  kind = String(kind);
  if (kind.startsWith("lovia.")) throw new Error(`lovia.registerRenderer: kinds starting "lovia." are reserved`);
  if (!renderer || typeof renderer.render !== "function") throw new TypeError("lovia.registerRenderer: the renderer needs render(el, props, ctx)");
  if (!builtinRenderers.has(kind)) builtinRenderers.set(kind, chartRenderer(kind));
  return renderers.register(kind, renderer);
}

export const getRenderer = (kind) => chartRenderer(kind);

// ------------------------------------------------------------------ tool views

let toolViewsChanged = () => {};
export const toolViews = new Registry(() => toolViewsChanged());

/** The page's hook: called after any tool view is registered or removed (redraw the cards). */
export function onToolViewsChange(fn) {
  toolViewsChanged = fn;
}

export function registerToolView(name, view) {
  if (!view || typeof view !== "object") throw new TypeError("lovia.registerToolView: the view is an object { summary, render, snapshot }");
  return toolViews.register(String(name), view);
}

// The field of the view for `name`, else of the '*' view (field by field).
export function toolViewField(name, field) {
  const own = toolViews.get(name);
  if (own && typeof own[field] === "function") return own[field];
  const star = toolViews.get("*");
  if (star && typeof star[field] === "function") return star[field];
  return null;
}

// lovia's own tools read as a line rather than name(args): [message key, argument shown].
const OWN_LINES = {
  read_file: ["tool.readFile", "path"],
  write_file: ["tool.writeFile", "path"],
  edit_file: ["tool.editFile", "path"],
  view_image: ["tool.viewImage", "path"],
  list_files: ["tool.listFiles", "path"],
  grep_files: ["tool.grepFiles", "pattern"],
  shell: ["tool.shell", "command"],
  web_search: ["tool.webSearch", "query"],
  web_fetch: ["tool.webFetch", "url"],
};

function ownLine(tool) {
  const spec = OWN_LINES[tool.name];
  const value = spec && tool.args && typeof tool.args === "object" ? tool.args[spec[1]] : undefined;
  if (typeof value !== "string" || !value) return null;
  return t(spec[0], { value: value.length > 120 ? `${value.slice(0, 119)}…` : value });
}

/**
 * The one-line summary for `tool`: the view registered for its name, else the '*' view, else
 * lovia's own line for its built-in tools; null keeps name(args).
 */
export function toolSummary(tool) {
  for (const view of [toolViews.get(tool.name), toolViews.get("*")]) {
    if (!view || typeof view.summary !== "function") continue;
    try {
      const text = view.summary(tool);
      if (text !== null && text !== undefined) return String(text);
    } catch (error) {
      console.error(`lovia: the tool view summary for ${tool.name} failed`, error);
    }
  }
  return ownLine(tool);
}

// ------------------------------------------------------------------ message actions

let actionsChanged = () => {};
export const messageActions = new Registry(() => actionsChanged());

export function onMessageActionsChange(fn) {
  actionsChanged = fn;
}

export function registerMessageAction(id, action) {
  if (!action || typeof action.run !== "function") throw new TypeError("lovia.registerMessageAction: the action needs run(msg)");
  return messageActions.register(String(id), action);
}

export function refreshMessageActions() {
  actionsChanged();
}

// ------------------------------------------------------------------ views

const VIEW_ID = /^[a-z0-9-]+$/;
let viewsChanged = () => {};
export const views = new Registry((id) => viewsChanged(id));

export function onViewsChange(fn) {
  viewsChanged = fn;
}

export function registerView(id, view) {
  id = String(id);
  if (!VIEW_ID.test(id)) throw new Error(`lovia.registerView: "${id}" is not a view id (a-z, 0-9 and -)`);
  if (id.startsWith("lovia")) throw new Error(`lovia.registerView: ids starting "lovia" are reserved`);
  if (!view || typeof view.render !== "function") throw new TypeError("lovia.registerView: the view needs render(el, ctx)");
  return views.register(id, view);
}

// ------------------------------------------------------------------ toasts

/** A notice at the bottom of the page for a few seconds; `type` is "info" or "error". */
export function toast(text, { type = "info" } = {}) {
  let box = document.getElementById("toasts");
  if (!box) {
    box = document.createElement("div");
    box.id = "toasts";
    box.className = "toasts";
    box.setAttribute("role", "status");
    document.body.append(box);
  }
  const item = document.createElement("div");
  item.className = `toast ${type === "error" ? "error" : "info"}`;
  item.dataset.testid = "toast";
  item.textContent = String(text);
  box.append(item);
  setTimeout(() => item.remove(), type === "error" ? 8000 : 4000);
}

// ------------------------------------------------------------------ extension scripts

const SCRIPT_WAIT_MS = 5000;

/**
 * Import each script URL; resolves once all have loaded or failed, or after 5 seconds for any
 * still loading (it keeps loading and registers when it lands). A failure shows a toast.
 */
export async function loadScripts(urls) {
  const loads = (urls || []).map((src) =>
    import(src).catch((error) => {
      console.error(`lovia: could not load ${src}`, error);
      toast(t("ext.scriptFailed", { script: src }), { type: "error" });
    }),
  );
  let timer;
  const limit = new Promise((resolve) => { timer = setTimeout(resolve, SCRIPT_WAIT_MS); });
  await Promise.race([Promise.all(loads), limit]);
  clearTimeout(timer);
}
