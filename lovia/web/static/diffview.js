// What the workspace's edit_file and write_file calls changed, drawn inside their tool card as a
// unified diff computed here from the call's arguments. Every line is set as text, never markup.

import { t } from "./i18n.js";

const CONTEXT = 3; // unchanged lines kept around each change; longer unchanged runs are folded
const MAX_CELLS = 400_000; // beyond this the line match is skipped: all old lines out, all new in

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function lines(text) {
  if (typeof text !== "string" || text === "") return [];
  const out = text.split("\n");
  if (out[out.length - 1] === "") out.pop(); // a final newline ends the last line, it adds none
  return out;
}

/** The line operations turning `a` into `b`: `[{kind: "ctx" | "del" | "add", text}]`. */
export function lineDiff(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA -= 1;
    endB -= 1;
  }
  const head = a.slice(0, start).map((text) => ({ kind: "ctx", text }));
  const tail = a.slice(endA).map((text) => ({ kind: "ctx", text }));
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  const middle = [];
  if (x.length * y.length > MAX_CELLS) {
    middle.push(...x.map((text) => ({ kind: "del", text })), ...y.map((text) => ({ kind: "add", text })));
  } else {
    // Longest common subsequence, then walk it: removed lines before added ones in each change.
    const w = y.length + 1;
    const lcs = new Uint32Array((x.length + 1) * w);
    for (let i = x.length - 1; i >= 0; i -= 1) {
      for (let j = y.length - 1; j >= 0; j -= 1) {
        lcs[i * w + j] = x[i] === y[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        middle.push({ kind: "ctx", text: x[i] });
        i += 1;
        j += 1;
      } else if (i < x.length && (j >= y.length || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
        middle.push({ kind: "del", text: x[i] });
        i += 1;
      } else {
        middle.push({ kind: "add", text: y[j] });
        j += 1;
      }
    }
  }
  return [...head, ...middle, ...tail];
}

// Fold unchanged runs longer than twice the context into one "⋯ n unchanged lines" row.
function fold(ops) {
  const out = [];
  let i = 0;
  while (i < ops.length) {
    if (ops[i].kind !== "ctx") {
      out.push(ops[i]);
      i += 1;
      continue;
    }
    let end = i;
    while (end < ops.length && ops[end].kind === "ctx") end += 1;
    const keepHead = i === 0 ? 0 : CONTEXT;
    const keepTail = end === ops.length ? 0 : CONTEXT;
    if (end - i > keepHead + keepTail + 1) {
      out.push(...ops.slice(i, i + keepHead), { kind: "fold", text: t("diff.unchanged", { n: end - i - keepHead - keepTail }) });
      out.push(...ops.slice(end - keepTail, end));
    } else out.push(...ops.slice(i, end));
    i = end;
  }
  return out;
}

const SIGN = { ctx: " ", del: "-", add: "+", fold: "" };

function diffBox(path, note, ops) {
  const box = node("div", "diff-view");
  box.dataset.testid = "diff-view";
  const head = node("div", "diff-head");
  head.append(node("span", "diff-path", path || "?"));
  if (note) head.append(node("span", "diff-note", note));
  const pre = node("pre", "diff-lines");
  for (const op of fold(ops)) {
    const line = node("div", `diff-line ${op.kind}`, op.kind === "fold" ? op.text : `${SIGN[op.kind]}${op.text}`);
    line.dataset.testid = "diff-line";
    line.dataset.kind = op.kind;
    pre.append(line);
  }
  if (!ops.length) pre.append(node("div", "diff-line fold", t("diff.empty")));
  box.append(head, pre);
  return box;
}

function parse(args) {
  try {
    const value = JSON.parse(args || "{}");
    return value && typeof value === "object" ? value : null;
  } catch (_e) {
    return null; // still streaming, or not JSON: no view
  }
}

/** Put the diff of an edit_file / write_file call (`name`, JSON `args`) into its card `details`. */
export function renderCallView(details, name, args) {
  if (name !== "edit_file" && name !== "write_file") return;
  const a = parse(args);
  if (!a || typeof a.path !== "string") return;
  let box;
  if (name === "edit_file") {
    if (typeof a.old !== "string" || typeof a.new !== "string") return;
    box = diffBox(a.path, a.replace_all ? t("diff.everyOccurrence") : "", lineDiff(lines(a.old), lines(a.new)));
  } else {
    if (typeof a.content !== "string") return;
    const note = a.create_only ? t("diff.createOnly") : t("diff.wholeFile");
    box = diffBox(a.path, note, lines(a.content).map((text) => ({ kind: "add", text })));
  }
  details.querySelector(".diff-view")?.remove();
  details.querySelector("summary").after(box);
  const raw = details.querySelector(".tool-input");
  if (raw) raw.hidden = true; // the diff shows every argument; the raw JSON would repeat it
  details.open = true;
}
