// The sidebar's agent switcher (data-part="agent-switcher"). It exists only while the server
// serves two or more agents; with one, the element is removed. app.js owns what a pick means
// (a new chat with that agent); this module draws the menu and keeps the user's last pick in
// localStorage, one entry per app base path.

import { BASE } from "./api.js";

const KEY = BASE.pathname === "/" ? "lovia_agent" : `lovia_agent:${BASE.pathname}`;

function remembered() {
  try {
    return localStorage.getItem(KEY);
  } catch (_e) {
    return null; // storage blocked: no memory of the pick
  }
}

/**
 * `onPick(name)` runs when the user picks an agent in the menu.
 * Returns `{ setInfo(info) -> initial agent name, show(name), remember(name), enabled }`.
 */
export function initAgentSwitcher(onPick) {
  const box = document.querySelector('[data-part="agent-switcher"]');
  const select = box ? box.querySelector("select") : null;
  const api = {
    enabled: false,

    // Fill the menu from the merged /api/info + /api/agents payload. The first agent shown is
    // the remembered pick when that agent is still served, else the server's default.
    setInfo(info) {
      const names = (info.agents || []).map((a) => a.name);
      if (!box || !select || names.length < 2) {
        box?.remove();
        api.enabled = false;
        return info.default_agent;
      }
      api.enabled = true;
      select.replaceChildren(...names.map((name) => new Option(name, name)));
      box.hidden = false;
      const kept = remembered();
      const first = kept && names.includes(kept) ? kept : info.default_agent;
      select.value = first;
      return first;
    },

    // Show `name` as the current agent (an unknown name, e.g. an agent no longer served, leaves
    // the menu as it is).
    show(name) {
      if (!api.enabled || !name) return;
      if ([...select.options].some((o) => o.value === name)) select.value = name;
    },

    remember(name) {
      try {
        localStorage.setItem(KEY, name);
      } catch (_e) { /* storage blocked */ }
    },
  };
  if (select) select.addEventListener("change", () => onPick(select.value));
  return api;
}
