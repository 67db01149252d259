// HTTP + SSE client for the lovia web API (bearer token kept in localStorage).

// The app's own base URL. This module is served at <base>/static/api.js, so behind a reverse
// proxy's path prefix (or mounted inside another app) every request stays under that prefix.
export const BASE = new URL("../", import.meta.url);

// Two apps under one host (different prefixes) keep separate tokens.
const TOKEN_KEY = BASE.pathname === "/" ? "lovia_token" : `lovia_token:${BASE.pathname}`;

// The URL of an app path: url("/api/info") is <base>/api/info.
export function url(path) {
  return new URL(String(path).replace(/^\/+/, ""), BASE).href;
}

import { CONFIG } from "./i18n.js";

// A 401. `code` is the body's code: "server_token" for the app's own token check, else the
// code of the app's auth dependency (the user is signed out).
export class AuthError extends Error {
  constructor(message, code = null) {
    super(message);
    this.code = code;
  }
}

let redirecting = false;

// With ChatUI(login_url=...), a signed-out 401 (not the token check's) sends the browser to the
// sign-in page once, `{next}` replaced by the current page's path, query and fragment.
function signInRedirect(code) {
  if (code === "server_token" || !CONFIG.loginUrl || redirecting) return;
  redirecting = true;
  const next = encodeURIComponent(window.location.pathname + window.location.search + window.location.hash);
  window.location.assign(CONFIG.loginUrl.replaceAll("{next}", next));
}

// An Error for a failed response, carrying status, code and hint. The body is the API's
// {detail: {code, message, hint}}, or a validation error's {detail: [{loc, msg, type}]}.
export async function apiError(response) {
  let message = `${response.status} ${response.statusText}`.trim();
  let code = null;
  let hint = null;
  try {
    const detail = (await response.json()).detail;
    if (Array.isArray(detail)) {
      code = "invalid_request";
      message = detail.map((e) => `${(e.loc || []).slice(1).join(".") || "request"}: ${e.msg}`).join("; ");
    } else if (detail && typeof detail === "object") {
      code = detail.code || null;
      message = detail.message || message;
      hint = detail.hint || null;
    } else if (typeof detail === "string") {
      message = detail;
    }
  } catch (_e) { /* not JSON */ }
  const error = new Error(hint ? `${message} (${hint})` : message);
  error.status = response.status;
  error.code = code;
  error.hint = hint;
  return error;
}

export function captureToken() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token) {
    localStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
}

export function setToken(token) {
  localStorage.setItem(TOKEN_KEY, token);
}

export function authHeaders(extra = {}) {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

export async function check(response) {
  if (response.status === 401) {
    const error = await apiError(response);
    signInRedirect(error.code);
    throw new AuthError(error.message, error.code);
  }
  if (!response.ok) throw await apiError(response);
  return response;
}

export async function api(method, path, body) {
  const init = { method, headers: authHeaders(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const response = await check(await fetch(url(path), init));
  return response.status === 204 ? null : response.json();
}

// POST (or GET) and read the SSE reply; onFrame(event, data) per frame. Resolves when the stream ends.
export async function streamFrames(path, body, onFrame, signal, method = "POST") {
  const init = { method, headers: authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }), signal };
  if (body) init.body = JSON.stringify(body);
  const response = await check(await fetch(url(path), init));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onFrame(event, JSON.parse(data.join("\n")));
    }
  }
}
