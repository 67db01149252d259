// Rich tool views: a tool's `lovia_ui` envelope drawn as a chart or a table, and the images a
// tool returned. Every string from the model or a tool is written with textContent, never as HTML.

import { api } from "./api.js";
import { t } from "./i18n.js";
import { onThemeChange } from "./theme.js";

const ENVELOPE_KEY = "lovia_ui";
const PAGE_ROWS = 20;
const MAX_ROWS = 10000;
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const MAX_IMAGE_CHARS = 8 * 1024 * 1024;
const renderers = new Map();

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function registerRenderer(kind, renderer) {
  renderers.set(String(kind), renderer);
}

export function getRenderer(kind) {
  return renderers.get(String(kind));
}

window.lovia = Object.assign(window.lovia || {}, { registerRenderer, getRenderer });

function parseJson(text) {
  if (typeof text !== "string" || !text.startsWith("{")) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// The envelope's props: given inline, or taken from the call's arguments (all of them, or one field).
function envelopeProps(envelope, argsText) {
  if (envelope.props !== undefined) return envelope.props;
  const args = parseJson(argsText || "{}") || {};
  if (envelope.from_args === true) return args;
  if (typeof envelope.from_args === "string") return args[envelope.from_args];
  return undefined;
}

// -------------------------------------------------------------------------------- charts

// ECharts is loaded on first use only, so chats without charts never fetch its megabyte.
let echartsModule = null;
function loadEcharts() {
  if (!echartsModule) echartsModule = import("./vendor/echarts.esm.min.js");
  return echartsModule;
}

const DROPPED_KEYS = new Set(["graphic", "toolbox", "link", "sublink", "formatter", "rich", "image"]);

// Remove what could fetch, link or run markup: images, links, graphic/toolbox, HTML tooltips.
function sanitize(value) {
  if (Array.isArray(value)) return value.map(sanitize);
  if (typeof value === "string") return /^\s*image:\/\//i.test(value) ? "circle" : value;
  if (!value || typeof value !== "object") return value;
  const out = {};
  for (const [key, inner] of Object.entries(value)) {
    if (DROPPED_KEYS.has(key) || key === "__proto__") continue;
    out[key] = sanitize(inner);
  }
  return out;
}

function chartTitle(option) {
  const title = Array.isArray(option.title) ? option.title[0] : option.title;
  return title && typeof title.text === "string" ? title.text : "";
}

function cssVar(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

function themed(option) {
  const palette = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => cssVar(`--chart-${i}`, ""));
  const out = { ...option };
  delete out.title;
  if (!out.color && palette.every(Boolean)) out.color = palette;
  out.tooltip = { ...(typeof out.tooltip === "object" && out.tooltip ? out.tooltip : {}), renderMode: "richText" };
  out.textStyle = { color: cssVar("--chart-text", "#333"), ...(out.textStyle || {}) };
  const axis = cssVar("--chart-axis", "");
  const grid = cssVar("--chart-grid", "");
  for (const key of ["xAxis", "yAxis"]) {
    if (out[key] && typeof out[key] === "object") out[key] = inked(out[key], axis, grid);
  }
  out.animation = false;
  return out;
}

// An axis (or a list of them) with the theme's axis-line and grid-line colors, unless it sets its own.
function inked(axes, axis, grid) {
  const one = (a) => {
    if (!a || typeof a !== "object") return a;
    const line = { ...(a.axisLine || {}), lineStyle: { ...(axis ? { color: axis } : {}), ...((a.axisLine || {}).lineStyle || {}) } };
    const split = { ...(a.splitLine || {}), lineStyle: { ...(grid ? { color: grid } : {}), ...((a.splitLine || {}).lineStyle || {}) } };
    return { ...a, axisLine: line, splitLine: split };
  };
  return Array.isArray(axes) ? axes.map(one) : one(axes);
}

// The colours are read from the tokens when a chart is drawn: a theme switch draws them again.
const drawn = new Set(); // { chart, option, box }
onThemeChange(() => {
  for (const entry of [...drawn]) {
    if (!entry.box.isConnected) {
      drawn.delete(entry);
      entry.chart.dispose();
    } else entry.chart.setOption(themed(entry.option), { notMerge: true });
  }
});

async function renderChart(view, props) {
  if (!props || typeof props !== "object" || Array.isArray(props)) throw new Error("the chart option is not an object");
  const option = sanitize(props);
  const title = chartTitle(option);
  if (title) view.append(el("div", "view-title", title));
  const box = el("div", "chart-box");
  box.dataset.testid = "chart";
  view.append(box);
  const echarts = await loadEcharts();
  const chart = echarts.init(box, null, { renderer: "canvas" });
  chart.setOption(themed(option));
  drawn.add({ chart, option, box });
  const resize = new ResizeObserver(() => chart.resize());
  resize.observe(box);
  view.dataset.rendered = "chart";
}

// -------------------------------------------------------------------------------- tables

function compareCells(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

function cellText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

class TableView {
  constructor(view, props) {
    this.columns = props.columns.map(cellText);
    const rows = props.rows.filter((r) => Array.isArray(r));
    this.truncated = rows.length > MAX_ROWS ? rows.length : 0;
    this.rows = rows.slice(0, MAX_ROWS);
    this.order = this.rows.map((_, i) => i);
    this.sort = { col: -1, dir: 0 };
    this.page = 0;
    if (typeof props.title === "string" && props.title) view.append(el("div", "view-title", props.title));
    this.table = el("table", "ui-table");
    this.table.dataset.testid = "ui-table";
    this.pager = el("div", "pager");
    view.append(el("div", "table-scroll"), this.pager);
    view.lastChild.previousSibling.append(this.table);
    if (this.truncated) view.append(el("div", "view-note", t("table.truncated", { max: MAX_ROWS, total: this.truncated })));
    this.draw();
  }

  toggle(col) {
    const dir = this.sort.col === col ? (this.sort.dir + 1) % 3 : 1;
    this.sort = { col, dir };
    this.order = this.rows.map((_, i) => i);
    if (dir) this.order.sort((x, y) => (dir === 1 ? 1 : -1) * compareCells(this.rows[x][col], this.rows[y][col]) || x - y);
    this.page = 0;
    this.draw();
  }

  header() {
    const tr = el("tr");
    this.columns.forEach((name, col) => {
      const th = el("th", "", name);
      th.dataset.testid = "ui-table-header";
      th.tabIndex = 0;
      if (this.sort.col === col && this.sort.dir) th.dataset.sort = this.sort.dir === 1 ? "asc" : "desc";
      th.onclick = () => this.toggle(col);
      th.onkeydown = (e) => { if (e.key === "Enter") this.toggle(col); };
      tr.append(th);
    });
    return tr;
  }

  draw() {
    const head = el("thead");
    head.append(this.header());
    const body = el("tbody");
    const start = this.page * PAGE_ROWS;
    for (const index of this.order.slice(start, start + PAGE_ROWS)) {
      const tr = el("tr");
      this.columns.forEach((_, col) => {
        const value = this.rows[index][col];
        tr.append(el("td", typeof value === "number" ? "num" : "", cellText(value)));
      });
      body.append(tr);
    }
    this.table.replaceChildren(head, body);
    this.drawPager();
  }

  drawPager() {
    const pages = Math.ceil(this.rows.length / PAGE_ROWS);
    this.pager.replaceChildren();
    if (pages <= 1) return;
    const prev = el("button", "", t("table.prev"));
    const next = el("button", "", t("table.next"));
    prev.type = next.type = "button";
    prev.dataset.testid = "ui-table-prev";
    next.dataset.testid = "ui-table-next";
    prev.disabled = this.page === 0;
    next.disabled = this.page >= pages - 1;
    prev.onclick = () => { this.page -= 1; this.draw(); };
    next.onclick = () => { this.page += 1; this.draw(); };
    const info = el("span", "", t("table.page", { page: this.page + 1, pages, rows: this.rows.length }));
    info.dataset.testid = "ui-table-page";
    this.pager.append(prev, info, next);
  }
}

function renderTable(view, props) {
  if (!props || !Array.isArray(props.columns) || !Array.isArray(props.rows)) throw new Error("the table needs columns and rows");
  new TableView(view, props);
  view.dataset.rendered = "table";
}

registerRenderer("chart", { render: (view, props) => renderChart(view, props) });
registerRenderer("table", { render: (view, props) => renderTable(view, props) });

// -------------------------------------------------------------------------------- images

function imageParts(frame) {
  const raw = frame.parts || frame.result;
  const list = Array.isArray(raw) ? raw : raw && typeof raw === "object" ? [raw] : [];
  return list.filter((p) => p && typeof p.data === "string" && IMAGE_TYPES.has(p.mime_type) && (p.type === undefined || p.type === "image"));
}

function renderImages(view, parts) {
  for (const part of parts) {
    if (part.data.length > MAX_IMAGE_CHARS) {
      view.append(el("div", "view-note", t("render.imageTooLarge")));
      continue;
    }
    const img = el("img", "tool-image");
    img.dataset.testid = "tool-image";
    img.alt = t("render.imageAlt");
    img.src = `data:${part.mime_type};base64,${part.data.replace(/[^A-Za-z0-9+/=]/g, "")}`;
    view.append(img);
  }
}

// -------------------------------------------------------------------------------- entry point

function failed(view, message) {
  view.replaceChildren(el("div", "view-note error", t("render.failed", { message })));
}

// Bulk data: an envelope with `data` (a put_ui_data ref) is drawn from the full props stored with
// the chat. One fetch per ref per page load (views are drawn again when a run ends). When the
// data is gone the card says so and draws the preview, if there is one.
const fullData = new Map();
function withData(view, envelope, preview, sessionId) {
  if (typeof envelope.data !== "string" || !envelope.data || !sessionId) return Promise.resolve(preview);
  const key = `${sessionId}/${envelope.data}`;
  if (!fullData.has(key)) {
    const path = `/api/sessions/${encodeURIComponent(sessionId)}/ui-data/${encodeURIComponent(envelope.data)}`;
    fullData.set(key, api("GET", path).catch((err) => { fullData.delete(key); throw err; }));
  }
  return fullData.get(key).catch((err) => {
    const gone = err && err.status === 404;
    const note = el("div", "view-note", gone ? t("render.dataGone") : t("render.dataFailed", { message: err.message || err }));
    note.dataset.testid = "ui-data-missing";
    view.append(note);
    return preview === null || preview === undefined ? undefined : preview;
  });
}

// A send(text) that works only during a real click or key press (user activation), else false.
function gatedSend(send) {
  return (text) => {
    if (typeof send !== "function" || !(navigator.userActivation && navigator.userActivation.isActive)) return false;
    send(String(text));
    return true;
  };
}

// Draw the rich view of a finished tool call below its card (`node`); returns nothing.
// `ctx` (from the transcript): sessionId, live, send — handed on to the renderer.
export function renderToolView(node, frame, ctx = {}) {
  const id = node.dataset.callId;
  (node.closest(".body") || node.parentNode)?.querySelectorAll(".tool-view").forEach((v) => { if (v.dataset.viewFor === id) v.remove(); });
  if (frame.is_error) return;
  const view = el("div", "tool-view");
  view.dataset.viewFor = id;
  view.dataset.testid = "tool-view";
  const images = imageParts(frame);
  const envelope = parseJson(frame.output)?.[ENVELOPE_KEY];
  if (!images.length && !(envelope && typeof envelope === "object")) return;
  node.after(view);
  if (images.length) renderImages(view, images);
  if (!envelope || typeof envelope !== "object") return;
  const renderer = getRenderer(envelope.kind);
  if (!renderer) {
    view.append(el("div", "view-note", t("render.noRenderer", { kind: String(envelope.kind) })));
    return;
  }
  const props = envelopeProps(envelope, node.dataset.args);
  const context = { ...ctx, callId: id, live: Boolean(ctx.live), send: gatedSend(ctx.send) };
  withData(view, envelope, props, ctx.sessionId)
    .then((full) => (full === undefined && envelope.data ? undefined : renderer.render(view, full, context)))
    .catch((err) => failed(view, err && err.message ? err.message : String(err)));
}
