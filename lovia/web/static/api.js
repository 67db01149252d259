// HTTP + SSE client for the lovia web API (bearer token kept in localStorage).

const TOKEN_KEY = "lovia_token";

export class AuthError extends Error {}

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

function headers(extra = {}) {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function check(response) {
  if (response.status === 401) throw new AuthError("unauthorized");
  if (!response.ok) {
    let detail = response.statusText;
    try {
      detail = (await response.json()).detail || detail;
    } catch (_e) { /* not JSON */ }
    throw new Error(`${response.status}: ${detail}`);
  }
  return response;
}

export async function api(method, path, body) {
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const response = await check(await fetch(path, init));
  return response.status === 204 ? null : response.json();
}

// POST (or GET) and read the SSE reply; onFrame(event, data) per frame. Resolves when the stream ends.
export async function streamFrames(path, body, onFrame, signal, method = "POST") {
  const init = { method, headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }), signal };
  if (body) init.body = JSON.stringify(body);
  const response = await check(await fetch(path, init));
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
