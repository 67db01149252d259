// The composer's context ring: how full the open chat's context window is, from its latest run's
// prompt size (the input tokens of the run's last model call when the server reports it, else the
// run's input tokens, cached ones included) over the agent's context window (/api/agents).
// Hidden for a new chat, and when the window or the usage is not known.

import { LANG, t } from "./i18n.js";

const NS = "http://www.w3.org/2000/svg";
const RADIUS = 9;
const CIRCUMFERENCE = 2 * Math.PI * RADIUS;
const WARN = 0.8;
const DANGER = 0.95;

function circle(cls) {
  const node = document.createElementNS(NS, "circle");
  node.setAttribute("class", cls);
  node.setAttribute("cx", "12");
  node.setAttribute("cy", "12");
  node.setAttribute("r", String(RADIUS));
  node.setAttribute("fill", "none");
  node.setAttribute("stroke-width", "3");
  return node;
}

/** The prompt size a run's usage tells, or null. */
export function promptTokens(usage) {
  if (!usage || typeof usage !== "object") return null;
  const last = usage.last_input_tokens;
  if (Number.isFinite(last) && last > 0) return last;
  const input = usage.input_tokens;
  return Number.isFinite(input) && input > 0 ? input : null;
}

export function initRing(root, { agents, defaultAgent }) {
  if (!root) return { show() {}, hide() {} };
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  const fill = circle("ring-fill");
  fill.setAttribute("stroke-linecap", "round");
  fill.setAttribute("stroke-dasharray", String(CIRCUMFERENCE));
  svg.append(circle("ring-track"), fill);
  root.replaceChildren(svg);
  root.setAttribute("role", "img");
  root.hidden = true;

  const windowOf = (name) => {
    const list = agents() || [];
    const agent = list.find((a) => a.name === name) || list.find((a) => a.name === defaultAgent());
    const size = agent ? agent.context_window : null;
    return Number.isFinite(size) && size > 0 ? size : null;
  };

  const hide = () => {
    root.hidden = true;
    delete root.dataset.percent;
    delete root.dataset.level;
  };

  // `detail`: a chat's GET /api/sessions/{id} body (its runs and their usage), or null.
  const show = (detail) => {
    const runs = detail && Array.isArray(detail.runs) ? detail.runs : [];
    const last = [...runs].reverse().find((r) => promptTokens(r.usage) !== null);
    const size = last ? windowOf(detail.agent) : null;
    if (!last || !size) return hide();
    const used = promptTokens(last.usage);
    const share = used / size;
    const percent = Math.round(share * 100);
    const fmt = new Intl.NumberFormat(LANG);
    const vars = { used: fmt.format(used), window: fmt.format(size), percent };
    fill.setAttribute("stroke-dashoffset", String(CIRCUMFERENCE * (1 - Math.min(1, share))));
    root.title = t("composer.context", vars);
    root.setAttribute("aria-label", t("composer.contextLabel", vars));
    root.dataset.percent = String(percent);
    root.dataset.level = share > DANGER ? "danger" : share > WARN ? "warn" : "ok";
    root.hidden = false;
    return undefined;
  };

  return { show, hide };
}
