// Attachments (attach button, drag-and-drop, paste) and "Branch in new chat" on finished replies.
//
// Files go to POST /api/sessions/{id}/uploads as the raw request body; the ids of the finished
// uploads ride along with the next message as `attachments`. A refused upload shows the server's
// message and hint on its chip and is never sent.

import { apiError, authHeaders, url } from "./api.js";
import { t } from "./i18n.js";

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

async function errorText(response) {
  return (await apiError(response)).message;
}

// Raster images sent with a message show as thumbnails, drawn from the bytes the transcript
// already holds (no request). SVG and images by URL stay a named chip: nothing is fetched or run.
const THUMBNAIL_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

function thumbnail(part, label) {
  const img = document.createElement("img");
  img.className = "attachment sent image thumb";
  img.dataset.testid = "sent-attachment";
  img.dataset.kind = "thumbnail";
  img.alt = label;
  img.title = label;
  img.src = `data:${part.mime_type};base64,${part.data}`;
  img.tabIndex = 0;
  const toggle = () => img.classList.toggle("expanded"); // click or Enter: full width, and back
  img.onclick = toggle;
  img.onkeydown = (event) => {
    if (event.key === "Enter") toggle();
  };
  return img;
}

export function initUploads(transcript, page) {
  const box = document.getElementById("attachments");
  const form = document.getElementById("composer-form");
  const composer = document.getElementById("composer");
  const picker = el("input");
  picker.type = "file";
  picker.multiple = true;
  picker.hidden = true;
  picker.dataset.testid = "attach-input";
  form.append(picker);
  const chips = []; // { id, chip, ready }

  function removeChip(item) {
    chips.splice(chips.indexOf(item), 1);
    item.chip.remove();
  }

  async function upload(file) {
    const chip = el("span", "attachment uploading");
    chip.dataset.testid = "attachment";
    const label = el("span", "name", `${file.name} · ${sizeText(file.size)}`);
    const state = el("span", "state", t("upload.uploading"));
    const drop = el("button", "link", "✕");
    drop.type = "button";
    drop.setAttribute("aria-label", t("upload.remove", { name: file.name }));
    chip.append(label, state, drop);
    box.append(chip);
    const item = { id: null, chip, ready: false, sid: null };
    chips.push(item);
    drop.onclick = () => removeChip(item);
    try {
      const sid = await page.ensureSession();
      item.sid = sid;
      const response = await fetch(url(`/api/sessions/${encodeURIComponent(sid)}/uploads`), {
        method: "POST",
        headers: authHeaders({ "X-Filename": encodeURIComponent(file.name), "Content-Type": file.type || "application/octet-stream" }),
        body: file,
      });
      if (!response.ok) throw new Error(await errorText(response));
      item.id = (await response.json()).id;
      item.ready = true;
      chip.classList.replace("uploading", "ready");
      state.textContent = "";
    } catch (error) {
      chip.classList.replace("uploading", "failed");
      chip.dataset.testid = "attachment-error";
      state.textContent = String(error.message || error);
    }
  }

  function addFiles(files) {
    for (const file of files) upload(file).catch(page.fail);
  }

  document.getElementById("attach").onclick = () => picker.click();
  picker.onchange = () => {
    addFiles([...picker.files]);
    picker.value = "";
  };
  form.addEventListener("dragover", (event) => {
    if (!event.dataTransfer || ![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    form.classList.add("dropping");
  });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    form.classList.remove("dropping");
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    addFiles([...event.dataTransfer.files]);
  });
  composer.addEventListener("paste", (event) => {
    const files = event.clipboardData ? [...event.clipboardData.files] : [];
    if (!files.length) return;
    event.preventDefault();
    addFiles(files);
  });

  transcript.hooks.userContent = (msg, content) => {
    if (!Array.isArray(content)) return;
    const files = content.filter((p) => p && (p.type === "image" || p.type === "file"));
    if (!files.length) return;
    const row = el("div", "sent-attachments");
    for (const part of files) {
      const name = part.type === "image" ? part.mime_type || t("upload.picture") : part.filename || t("upload.unnamed");
      const kind = part.type === "image" ? t("upload.image") : t("upload.file");
      if (part.type === "image" && part.data && THUMBNAIL_TYPES.has(part.mime_type)) {
        row.append(thumbnail(part, t("upload.sent", { kind, name })));
        continue;
      }
      const chip = el("span", `attachment sent ${part.type}`, t("upload.sent", { kind, name }));
      chip.dataset.testid = "sent-attachment";
      row.append(chip);
    }
    msg.append(row);
  };

  transcript.hooks.controls = (root) => {
    for (const msg of root.querySelectorAll(".msg.assistant")) {
      const bar = msg.querySelector(".toolbar");
      if (!bar) continue; // no finished answer to branch from
      let next = msg.nextElementSibling;
      while (next && !next.matches(".msg.user")) next = next.nextElementSibling;
      const branch = el("button", "link", t("actions.branch"));
      branch.type = "button";
      branch.dataset.testid = "branch";
      branch.onclick = () => fork(next ? Number(next.dataset.userTurn) : null).catch(page.fail);
      bar.append(branch);
    }
  };

  async function fork(userTurn) {
    const sid = page.sessionId();
    if (!sid || page.busy()) return;
    const response = await fetch(url(`/api/sessions/${encodeURIComponent(sid)}/fork`), {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(userTurn === null ? {} : { user_turn: userTurn }),
    });
    if (!response.ok) throw new Error(await errorText(response));
    await page.openSession((await response.json()).session_id);
  }

  return {
    // The ids of the finished uploads, for the message being sent (their chips are cleared).
    take() {
      const ready = chips.filter((c) => c.ready && c.sid === page.sessionId());
      for (const item of ready) removeChip(item);
      // A refused file's chip explained the refusal; once a message goes out it has been read.
      for (const item of chips.filter((c) => c.chip.classList.contains("failed"))) removeChip(item);
      return ready.map((c) => c.id);
    },
    pending: () => chips.some((c) => !c.ready && !c.chip.classList.contains("failed")),
  };
}
