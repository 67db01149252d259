// Every string the Files panel, the Memory dialog and the follow-up chips show, in one place so
// that a locale can replace them: assign to STRINGS (or override keys) before the page starts.

export const STRINGS = {
  "files.toggle": "Files",
  "files.toggleTitle": "Show the agent's workspace files",
  "files.title": "Files",
  "files.close": "Close the file panel",
  "files.upload": "Upload",
  "files.uploadTitle": "Upload a file into the workspace's {dir}/ folder",
  "files.refresh": "Refresh",
  "files.recent": "Recently changed",
  "files.noRecent": "No files yet.",
  "files.emptyDir": "This folder is empty.",
  "files.more": "Show more ({shown} of {total})",
  "files.up": "Parent folder",
  "files.back": "← Files",
  "files.download": "Download",
  "files.source": "Source",
  "files.rendered": "Rendered",
  "files.loading": "Loading…",
  "files.uploading": "Uploading {name}…",
  "files.uploaded": "Uploaded {path}",
  "files.uploadedRenamed": "Uploaded as {path} (a file with that name already existed)",
  "files.mode.readonly": "read-only",
  "files.mode.coding": "coding",
  "files.mode.trusted": "trusted",
  "memory.open": "Memory",
  "memory.openTitle": "Show and edit the agent's memory notes",
  "memory.title": "Memory notes",
  "memory.help": "One note per line starting with \"- \". Other lines are dropped; undated notes get this month's [YYYY-MM] stamp.",
  "memory.meter": "{used} / {budget} characters",
  "memory.dreamedAt": "Last dreamed {when}",
  "memory.neverDreamed": "Never dreamed",
  "memory.save": "Save",
  "memory.saved": "Saved.",
  "memory.dream": "Dream now",
  "memory.dreamTitle": "Let the model merge and tidy the notes now",
  "memory.dreamDirty": "Save or undo your edits first",
  "memory.dreaming": "Dreaming…",
  "memory.dreamed": "Dreamed: {before} → {after} notes, {usedBefore} → {usedAfter} characters.",
  "memory.close": "Close",
  "memory.loading": "Loading…",
  "followups.label": "Suggested follow-ups",
};

/** The string for `key` with `{name}` placeholders filled from `vars` (the key itself if unknown). */
export function t(key, vars = {}) {
  const template = STRINGS[key] ?? key;
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

/** An element with a class and text (text is always set as text, never parsed as HTML). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A `type="button"` button with its test id. */
export function button(cls, text, testid) {
  const b = el("button", cls, text);
  b.type = "button";
  if (testid) b.dataset.testid = testid;
  return b;
}
