// The "html" kind: a page the model wrote (show_html), run in a sandboxed frame inside its card.
//
// Isolation. The frame is <iframe sandbox="allow-scripts"> loading static/pages-frame.html, so the
// page runs in an opaque origin: no cookies, no storage, no access to this window. That host
// document carries its own Content-Security-Policy (inline script and style, no requests at all)
// and writes the page into itself; the chat's own policy (frame-src 'self') also keeps the frame
// from being navigated anywhere else. A srcdoc frame would inherit the chat's policy, which
// forbids inline scripts, hence the host document.
//
// Messages. The host's bootstrap runs before the page's code and hands this window a private
// MessagePort; everything the frame says (its height, a lovia.send) arrives on that port only. A
// second "page-frame" hello from the same frame means a new document was loaded into it (the page
// navigated or reloaded itself): the frame is removed and the card says so.
//
// lovia.send(text) is accepted only when two independent checks agree that the user just clicked
// or pressed a key in the page:
//   1. in the frame, the bootstrap saw a trusted (isTrusted) pointer or key event in the last 5 s,
//      and each such event allows one send;
//   2. here, navigator.userActivation.isActive is true when the message arrives. A page cannot
//      fake this one: activation reaches this window only from a real input event in it or in one
//      of its frames.
// The first check is what stops a page from sending on load right after the user pressed Enter in
// the composer (the window then has activation, the frame does not); the second is the backstop
// the page's own code cannot touch.

import { registerRenderer } from "./charts.js";
import { t } from "./i18n.js";
import { currentTheme as pageTheme, onThemeChange } from "./theme.js";

const FRAME_URL = new URL("./pages-frame.html", import.meta.url).href;
const MIN_HEIGHT = 60;
const MAX_SHARE = 0.8; // of the viewport height
const THEME_VARS = {
  "--ink": ["--ink", "--text"],
  "--surface": ["--surface", "--panel"],
  "--border": ["--border", "--line"],
  "--accent": ["--accent"],
  "--muted": ["--muted"],
};
const FALLBACK = { light: { "--ink": "#1d1d1f", "--surface": "#ffffff", "--border": "#e3e3e0", "--accent": "#3a5bd9", "--muted": "#6b6b70" },
  dark: { "--ink": "#e6e6e3", "--surface": "#202226", "--border": "#33353b", "--accent": "#7d95ff", "--muted": "#9b9ca3" } };
const pages = new Set(); // mounted pages, re-run on a theme switch

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(label, testid, title) {
  const b = el("button", "page-tool", label);
  b.type = "button";
  b.dataset.testid = testid;
  if (title) b.title = title;
  return b;
}

function currentTheme(ctx) {
  if (ctx && (ctx.theme === "dark" || ctx.theme === "light")) return ctx.theme;
  return pageTheme();
}

// The chat's colours as a CSS declaration list for the page's :root. Values are the computed ones
// of this document, checked to be plain colour values before they cross into the page.
function themeVars(theme) {
  const style = getComputedStyle(document.documentElement);
  const read = (names) => names.map((n) => style.getPropertyValue(n).trim()).find(Boolean) || "";
  const safe = (v) => /^[#\w\s.,%()-]+$/.test(v);
  const out = [];
  for (const [name, sources] of Object.entries(THEME_VARS)) {
    const value = read(sources);
    out.push(`${name}:${safe(value) ? value : FALLBACK[theme][name]};`);
  }
  for (let i = 1; i <= 8; i += 1) {
    const value = read([`--chart-${i}`]);
    if (safe(value)) out.push(`--chart-${i}:${value};`);
  }
  return out.join("");
}

function fileName(title) {
  const base = String(title || "page").trim().toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  return `${(base || "page").slice(0, 60)}.html`;
}

function download(html, title) {
  const link = el("a");
  link.href = URL.createObjectURL(new Blob([html], { type: "text/html" }));
  link.download = fileName(title);
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

class Page {
  constructor(view, props, ctx) {
    this.view = view;
    this.html = props.html;
    this.title = typeof props.title === "string" ? props.title : "";
    this.ctx = ctx || {};
    this.frame = null;
    this.port = null;
    this.height = MIN_HEIGHT;
    this.onMessage = (event) => this.hello(event);
    this.onResize = () => this.fit();
    this.build();
  }

  build() {
    const head = el("div", "page-head");
    head.append(el("div", "view-title", this.title || t("pages.untitled")));
    const tools = el("div", "page-tools");
    const full = button("⤢", "page-fullscreen", t("pages.fullscreen"));
    const save = button("⤓", "page-download", t("pages.download"));
    full.onclick = () => this.fullscreen();
    save.onclick = () => download(this.html, this.title);
    tools.append(save, full);
    head.append(tools);
    this.body = el("div", "page-body");
    this.view.classList.add("page-view");
    this.view.append(head, this.body);
    this.view.dataset.rendered = "html";
  }

  // A live result runs at once; a replayed one (a reopened chat) waits for a click on Run.
  start(live) {
    if (live) this.run();
    else this.waitForRun();
  }

  waitForRun(note) {
    this.stop();
    const hold = el("div", "page-hold");
    hold.dataset.testid = "page-hold";
    if (note) hold.append(el("div", "view-note", note));
    const run = el("button", "primary", t("pages.run"));
    run.type = "button";
    run.dataset.testid = "page-run";
    run.onclick = () => this.run();
    hold.append(run, el("span", "page-hint", t("pages.hint")));
    this.body.replaceChildren(hold);
  }

  run() {
    this.stop();
    for (const page of [...pages]) if (!page.view.isConnected) page.stop(); // drawn again elsewhere
    const frame = el("iframe", "page-frame");
    frame.dataset.testid = "page-frame";
    frame.setAttribute("sandbox", "allow-scripts");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.title = this.title || t("pages.untitled");
    frame.style.height = `${MIN_HEIGHT}px`;
    frame.src = FRAME_URL;
    this.frame = frame;
    this.hellos = 0;
    window.addEventListener("message", this.onMessage);
    window.addEventListener("resize", this.onResize);
    pages.add(this);
    this.body.replaceChildren(frame);
  }

  stop() {
    window.removeEventListener("message", this.onMessage);
    window.removeEventListener("resize", this.onResize);
    pages.delete(this);
    if (this.port) this.port.close();
    this.port = null;
    this.frame = null;
  }

  hello(event) {
    if (!this.frame || event.source !== this.frame.contentWindow) return;
    const data = event.data;
    if (!data || data.lovia !== "page-frame") return;
    this.hellos += 1;
    const port = event.ports && event.ports[0];
    if (this.hellos > 1 || !port) {
      this.waitForRun(t("pages.navigated"));
      return;
    }
    this.port = port;
    port.onmessage = (e) => this.fromPage(e.data);
    const theme = currentTheme(this.ctx);
    port.postMessage({ type: "page", html: this.html, vars: themeVars(theme), scheme: theme });
  }

  fromPage(data) {
    if (!data || typeof data !== "object") return;
    if (data.type === "height" && Number.isFinite(data.height)) {
      this.height = Math.max(MIN_HEIGHT, Math.ceil(data.height));
      this.fit();
    } else if (data.type === "send" && typeof data.text === "string" && data.text.trim() && data.text.length <= 4000) {
      this.send(data.text);
    }
  }

  send(text) {
    const active = Boolean(navigator.userActivation && navigator.userActivation.isActive);
    const ok = active && typeof this.ctx.send === "function" && this.ctx.send(text) !== false;
    this.view.dataset.lastSend = ok ? "sent" : "refused";
  }

  fit() {
    if (!this.frame) return;
    if (document.fullscreenElement === this.view) {
      this.frame.style.height = "";
      return;
    }
    const cap = Math.max(MIN_HEIGHT, Math.floor(window.innerHeight * MAX_SHARE));
    this.frame.style.height = `${Math.min(this.height, cap)}px`;
  }

  fullscreen() {
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    else this.view.requestFullscreen?.().then(() => this.fit(), () => {});
  }
}

document.addEventListener("fullscreenchange", () => pages.forEach((p) => p.fit()));
onThemeChange(() => {
  for (const page of [...pages]) if (page.view.isConnected) page.run();
});

function renderPage(view, props, ctx) {
  if (!props || typeof props.html !== "string") throw new Error(t("pages.noHtml"));
  const page = new Page(view, props, ctx);
  page.start(Boolean(ctx && ctx.live));
  return () => page.stop();
}

// The export has no scripts: it shows the page's source.
function snapshotPage(props) {
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const title = props && typeof props.title === "string" && props.title ? `<p><b>${esc(props.title)}</b></p>` : "";
  return `${title}<pre><code>${esc(props && props.html ? props.html : "")}</code></pre>`;
}

registerRenderer("html", { render: renderPage, snapshot: snapshotPage });
