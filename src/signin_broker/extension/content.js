// The bridge between the page (page.js, in the page's own world) and the extension's
// background: it takes requests the page posts to itself, and posts the answers back
// to the page's origin only. A message from another window (a frame, an opener) or of
// another origin is ignored: the page vouches for nothing, the browser names its origin.
"use strict";

(() => {
  const api = globalThis.browser ?? globalThis.chrome;
  const REQUEST = "signin-broker:request";
  const ANSWER = "signin-broker:answer";
  const origin = window.location.origin;
  if (origin === "null") {
    return;
  }
  window.addEventListener("message", (event) => {
    if (event.source !== window || event.origin !== origin) {
      return;
    }
    const data = event.data;
    if (!data || data.type !== REQUEST || typeof data.id !== "string") {
      return;
    }
    const answer = (result) => window.postMessage({ type: ANSWER, id: data.id, answer: result }, origin);
    api.runtime.sendMessage({ kind: data.kind, request: data.request }).then(answer, (error) =>
      answer({ ok: false, code: "unavailable", error: `signin-broker: ${error.message || error}` })
    );
  });
})();
