// The extension's one privileged part: it takes a page's request from the content
// script, names the page's origin as the browser reports it (never as the page says),
// and forwards it to the broker's native host. The host and the daemon decide; this
// only relays, and hands back the fields a page may have.
"use strict";

const HOST = "org.signin_broker.native_host";
const api = globalThis.browser ?? globalThis.chrome;
const KINDS = new Set(["getToken", "signDpopProof"]);
const MAX_WAITING = 32; // requests waiting for the host at once; more are refused

let port = null;
let nextId = 1;
const waiting = new Map(); // request id -> its sendResponse

function hostPort() {
  if (port !== null) {
    return port;
  }
  const opened = api.runtime.connectNative(HOST);
  opened.onMessage.addListener((answer) => {
    const respond = waiting.get(answer && answer.id);
    if (respond !== undefined) {
      waiting.delete(answer.id);
      respond(answer.ok ? { ok: true, token: answer.token } : failure(answer.code, answer.error));
    }
  });
  opened.onDisconnect.addListener((gone) => {
    // Chromium says why in runtime.lastError, Firefox in the port's error.
    const reason =
      (api.runtime.lastError && api.runtime.lastError.message) ||
      (gone && gone.error && gone.error.message) ||
      "the signin-broker native host stopped";
    if (port === opened) {
      port = null;
    }
    for (const respond of waiting.values()) {
      respond(failure("unavailable", `signin-broker cannot be reached: ${reason}`));
    }
    waiting.clear();
  });
  port = opened;
  return port;
}

function failure(code, error) {
  return { ok: false, code: String(code || "unknown"), error: String(error || "refused") };
}

function originOf(sender) {
  // The browser's own record of the frame, not anything the page said of itself.
  if (typeof sender.origin === "string" && sender.origin !== "null") {
    return sender.origin;
  }
  try {
    const origin = new URL(sender.url).origin;
    return origin === "null" ? null : origin;
  } catch {
    return null;
  }
}

api.runtime.onMessage.addListener((message, sender, sendResponse) => {
  if (sender.id !== api.runtime.id || !sender.tab || sender.frameId !== 0) {
    return false; // only this extension's content script, in a tab's top frame
  }
  const origin = originOf(sender);
  if (origin === null || !message || !KINDS.has(message.kind)) {
    sendResponse(failure("invalid_argument", "not a request signin-broker knows"));
    return false;
  }
  if (waiting.size >= MAX_WAITING) {
    sendResponse(failure("resource_exhausted", "too many requests wait for signin-broker"));
    return false;
  }
  const id = nextId++;
  waiting.set(id, sendResponse);
  try {
    hostPort().postMessage({ id, kind: message.kind, origin, request: message.request ?? {} });
  } catch (error) {
    waiting.delete(id);
    sendResponse(failure("unavailable", `signin-broker cannot be reached: ${error.message}`));
    return false;
  }
  return true; // the answer comes later
});
