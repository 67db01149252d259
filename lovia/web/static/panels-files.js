// The Files panel: the agent's workspace folder beside the chat (GET /api/workspace/*), a
// highlighted preview of a text file or a picture, and uploads into its uploads/ folder.
//
// Names and contents from the workspace are always set as text: a file called `<img onerror=...>`
// is shown as those characters. Pictures are fetched with the page's token and shown as data:
// URLs (the page's CSP allows no other image source), so /raw needs no token in its URL.

import { api, apiError, authHeaders, check, url } from "./api.js";
import { CONFIG } from "./i18n.js";
import { enhance, renderMarkdown } from "./markdown.js";
import hljs from "./vendor/highlight.min.js";
import { servedPart } from "./parts.js";
import { button, el, t } from "./panels-strings.js";

const MARKDOWN_EXT = new Set(["md", "markdown"]);
// The server sends its preview table (lovia.web.media.PREVIEW_IMAGE_EXT); the fallback is the same list.
const IMAGE_EXT = new Set(CONFIG.previewImageExt || ["png", "jpg", "jpeg", "gif", "webp", "avif", "bmp", "svg"]);
const HIGHLIGHT_MAX = 200_000; // bigger previews are shown plain: highlighting them would stall the page
const PAGE = 200;

function ext(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

function sizeText(bytes) {
  if (bytes === null || bytes === undefined) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) q.set(k, String(v));
  return q.toString();
}

async function fetchRaw(path, sessionId, download) {
  const response = await fetch(url(`/api/workspace/raw?${query({ path, session_id: sessionId, download: download || null })}`), {
    headers: authHeaders(),
  });
  if (!response.ok) throw await apiError(response);
  return response.blob();
}

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** Build the panel (hidden) next to the chat; `page.sessionId()` scopes requests to the chat's agent. */
export function createFilesPanel(page) {
  const panel = servedPart("files-panel") || el("aside", "files-panel"); // the served page has it (empty)
  panel.replaceChildren();
  panel.id = "files-panel";
  panel.dataset.testid = "files-panel";
  panel.dataset.part = "files-panel";
  panel.setAttribute("aria-label", t("files.title"));
  panel.hidden = true;

  const head = el("header", "files-head");
  const title = el("h2", "files-title", t("files.title"));
  const where = el("span", "files-root");
  where.dataset.testid = "files-root";
  const close = button("icon", "✕", "files-close");
  close.setAttribute("aria-label", t("files.close"));
  head.append(title, where, close);

  const actions = el("div", "files-actions");
  const upload = button("", t("files.upload"), "files-upload");
  const refresh = button("", t("files.refresh"), "files-refresh");
  const picker = el("input");
  picker.type = "file";
  picker.hidden = true;
  picker.dataset.testid = "files-upload-input";
  actions.append(upload, refresh, picker);

  const status = el("p", "files-status");
  status.dataset.testid = "files-status";
  status.setAttribute("role", "status");
  status.hidden = true;

  const browse = el("div", "files-browse");
  const crumbs = el("nav", "files-crumbs");
  crumbs.dataset.testid = "files-crumbs";
  const list = el("ul", "files-list");
  list.dataset.testid = "files-list";
  const more = button("link files-more", "", "files-more");
  more.hidden = true;
  const recentTitle = el("h3", "files-subtitle", t("files.recent"));
  const recent = el("ul", "files-list recent");
  recent.dataset.testid = "files-recent";
  browse.append(crumbs, list, more, recentTitle, recent);

  const preview = el("section", "files-preview");
  preview.dataset.testid = "file-preview";
  preview.hidden = true;
  const previewHead = el("div", "files-preview-head");
  const back = button("link", t("files.back"), "file-preview-back");
  const previewName = el("span", "files-preview-name");
  previewName.dataset.testid = "file-preview-name";
  const asSource = button("link", t("files.source"), "file-preview-source");
  asSource.hidden = true;
  const download = button("link", t("files.download"), "file-download");
  previewHead.append(back, previewName, asSource, download);
  const previewBody = el("div", "files-preview-body");
  preview.append(previewHead, previewBody);

  panel.append(head, actions, status, browse, preview);

  let info = null; // GET /api/workspace
  let dir = ".";
  let shownCount = 0;
  let opened = null; // the previewed path
  let generation = 0; // a newer listing or preview wins over an older one still loading

  const sid = () => page.sessionId() || null;

  function say(text, kind) {
    status.textContent = text || "";
    status.dataset.kind = kind || "";
    status.hidden = !text;
  }

  function entryItem(entry, full = false) {
    const li = el("li", `file-entry ${entry.kind}`);
    li.dataset.testid = "file-entry";
    li.dataset.path = entry.path;
    li.dataset.kind = entry.kind;
    const open = button("link file-open", "");
    open.append(el("span", "file-icon", entry.kind === "dir" ? "📁" : "📄"), el("span", "file-name", full ? entry.path : entry.name));
    open.title = entry.path;
    li.append(open);
    if (entry.kind === "file") li.append(el("span", "file-size", sizeText(entry.size)));
    open.onclick = () => (entry.kind === "dir" ? list_(entry.path) : openFile(entry.path)).catch(fail);
    return li;
  }

  function fail(error) {
    say(String(error.message || error), "error");
  }

  function drawCrumbs() {
    crumbs.replaceChildren();
    const rootLink = button("link crumb", info ? info.root : ".", "files-crumb");
    rootLink.onclick = () => list_(".").catch(fail);
    crumbs.append(rootLink);
    if (dir === ".") return;
    let sofar = "";
    for (const part of dir.split("/")) {
      sofar = sofar ? `${sofar}/${part}` : part;
      const target = sofar;
      crumbs.append(el("span", "crumb-sep", "/"));
      const link = button("link crumb", part, "files-crumb");
      link.onclick = () => list_(target).catch(fail);
      crumbs.append(link);
    }
  }

  async function list_(path, offset = 0) {
    const mine = ++generation;
    // The body is an array of entries; X-Total-Count says how many the folder shows in all.
    const response = await check(
      await fetch(url(`/api/workspace/files?${query({ path, session_id: sid(), offset, limit: PAGE })}`), { headers: authHeaders() }),
    );
    const entries = await response.json();
    const total = Number(response.headers.get("X-Total-Count") ?? offset + entries.length);
    if (mine !== generation) return;
    dir = path.replace(/^\.\/+/, "").replace(/\/+$/, "") || ".";
    showBrowse();
    drawCrumbs();
    if (offset === 0) {
      list.replaceChildren();
      shownCount = 0;
      if (dir !== ".") {
        const up = button("link file-open", "..", "files-up");
        up.title = t("files.up");
        const li = el("li", "file-entry dir up");
        li.append(up);
        up.onclick = () => list_(dir.includes("/") ? dir.slice(0, dir.lastIndexOf("/")) : ".").catch(fail);
        list.append(li);
      }
    }
    list.append(...entries.map(entryItem));
    shownCount += entries.length;
    if (!shownCount && offset === 0) list.append(el("li", "files-empty", t("files.emptyDir")));
    more.hidden = shownCount >= total;
    more.textContent = t("files.more", { shown: shownCount, total });
    more.onclick = () => list_(dir, shownCount).catch(fail);
  }

  async function loadRecent() {
    const files = await api("GET", `/api/workspace/recent?${query({ session_id: sid(), limit: 10 })}`);
    recent.replaceChildren(...files.map((f) => entryItem(f, true)));
    if (!files.length) recent.append(el("li", "files-empty", t("files.noRecent")));
  }

  function showBrowse() {
    opened = null;
    preview.hidden = true;
    browse.hidden = false;
  }

  async function openFile(path) {
    const mine = ++generation;
    opened = path;
    say("");
    const name = path.split("/").pop();
    previewName.textContent = path;
    asSource.hidden = true;
    previewBody.replaceChildren(el("p", "files-loading", t("files.loading")));
    browse.hidden = true;
    preview.hidden = false;
    try {
      if (IMAGE_EXT.has(ext(name))) {
        // The server shows only raster images inline; an SVG comes as a download, drawn here as a picture.
        const src = await dataUrl(await fetchRaw(path, sid(), ext(name) === "svg"));
        if (mine !== generation) return;
        const img = el("img", "files-image");
        img.alt = name;
        img.dataset.testid = "file-preview-image";
        img.src = src;
        previewBody.replaceChildren(img);
        return;
      }
      const data = await api("GET", `/api/workspace/file?${query({ path, session_id: sid() })}`);
      if (mine !== generation) return;
      if (data.binary) {
        const p = el("p", "files-preview-error", t("files.binary", { name }));
        p.dataset.testid = "file-preview-error";
        previewBody.replaceChildren(p);
        return;
      }
      if (MARKDOWN_EXT.has(ext(name))) showMarkdown(data.content, name, true);
      else previewBody.replaceChildren(sourceView(data.content, ext(name)));
      if (data.truncated) {
        const note = el("p", "files-truncated", t("files.truncated", { shown: data.end, total: data.total_lines }));
        note.dataset.testid = "file-preview-truncated";
        previewBody.append(note);
      }
    } catch (error) {
      if (mine !== generation) return;
      const p = el("p", "files-preview-error", String(error.message || error));
      p.dataset.testid = "file-preview-error";
      previewBody.replaceChildren(p);
    }
  }

  // A Markdown file shows rendered (sanitized like a reply: no raw HTML, no scripts), with a
  // button to flip to its highlighted source and back.
  function showMarkdown(content, name, rendered) {
    asSource.hidden = false;
    asSource.textContent = t(rendered ? "files.source" : "files.rendered");
    asSource.onclick = () => showMarkdown(content, name, !rendered);
    if (!rendered) return previewBody.replaceChildren(sourceView(content, ext(name)));
    const doc = el("div", "files-markdown md");
    doc.dataset.testid = "file-preview-markdown";
    doc.innerHTML = renderMarkdown(content);
    enhance(doc);
    previewBody.replaceChildren(doc);
    return undefined;
  }

  function sourceView(content, lang) {
    const pre = el("pre", "files-code");
    const code = el("code", "", content);
    code.dataset.testid = "file-preview-text";
    if (lang && hljs.getLanguage(lang) && content.length <= HIGHLIGHT_MAX) {
      code.className = `language-${lang}`;
      hljs.highlightElement(code);
    } else code.classList.add("hljs");
    pre.append(code);
    return pre;
  }

  async function saveAs(path) {
    const blob = await fetchRaw(path, sid(), true);
    const href = URL.createObjectURL(blob);
    const a = el("a");
    a.href = href;
    a.download = path.split("/").pop();
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 10_000);
  }

  async function send(file) {
    say(t("files.uploading", { name: file.name }), "busy");
    const response = await fetch(url(`/api/workspace/upload?${query({ session_id: sid() })}`), {
      method: "POST",
      headers: authHeaders({ "X-Filename": encodeURIComponent(file.name), "Content-Type": file.type || "application/octet-stream" }),
      body: file,
    });
    if (!response.ok) throw await apiError(response);
    const stored = await response.json();
    say(t(stored.renamed ? "files.uploadedRenamed" : "files.uploaded", { path: stored.path }), "ok");
    await Promise.all([list_(dir), loadRecent()]);
  }

  upload.onclick = () => picker.click();
  picker.onchange = () => {
    const files = [...picker.files];
    picker.value = "";
    (async () => {
      for (const file of files) await send(file);
    })().catch(fail);
  };
  refresh.onclick = () => reload().catch(fail);
  back.onclick = () => {
    generation += 1;
    showBrowse();
  };
  download.onclick = () => {
    if (opened) saveAs(opened).catch(fail);
  };

  async function reload() {
    info = await api("GET", `/api/workspace?${query({ session_id: sid() })}`);
    const mode = t(`files.mode.${info.mode}`);
    where.textContent = `${info.root} · ${mode}`;
    upload.title = t("files.uploadTitle", { dir: info.uploads_dir });
    const reopen = opened;
    await Promise.all([reopen ? Promise.resolve() : list_(dir).catch(() => list_(".")), loadRecent()]);
    if (reopen) await openFile(reopen);
  }

  return {
    element: panel,
    isOpen: () => !panel.hidden,
    async open() {
      panel.hidden = false;
      say("");
      await reload().catch(fail);
    },
    close() {
      panel.hidden = true;
    },
    // After a run: the agent may have written files.
    refresh() {
      if (!panel.hidden) reload().catch(fail);
    },
    onClose(handler) {
      close.onclick = handler;
    },
  };
}
