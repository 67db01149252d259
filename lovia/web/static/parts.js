// The regions the served page (templates/index.html) carries, found by their data-part. A script
// fills the served element instead of making a second one; on a page of your own
// (ChatUI(assets=...)) that leaves a region out, the script makes it as before.

/** The served element of region `part`, or null when the page has none. */
export function servedPart(part) {
  return document.querySelector(`[data-part="${part}"]`);
}
