// What a web page sees: window.signinBroker.getToken({scopes, audience, account, ...})
// and .signDpopProof({method, url, nonce, ...}), each a promise of the broker's answer
// for this page's origin. Runs in the page's world; talks to content.js by postMessage.
"use strict";

(() => {
  const REQUEST = "signin-broker:request";
  const ANSWER = "signin-broker:answer";
  const origin = window.location.origin;
  if (origin === "null" || window.signinBroker) {
    return;
  }
  const waiting = new Map();
  let counter = 0;

  class SigninBrokerError extends Error {
    constructor(code, message) {
      super(message);
      this.name = "SigninBrokerError";
      this.code = code; // the daemon's status: permission_denied, unauthenticated, ...
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window || event.origin !== origin) {
      return;
    }
    const data = event.data;
    if (!data || data.type !== ANSWER || !waiting.has(data.id)) {
      return;
    }
    const { resolve, reject } = waiting.get(data.id);
    waiting.delete(data.id);
    const answer = data.answer || {};
    if (answer.ok) {
      resolve(answer.token);
    } else {
      reject(new SigninBrokerError(answer.code || "unknown", answer.error || "refused"));
    }
  });

  function ask(kind, request) {
    const id = `${Date.now()}-${++counter}-${Math.random().toString(36).slice(2)}`;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      window.postMessage({ type: REQUEST, id, kind, request: request ?? {} }, origin);
    });
  }

  const broker = Object.freeze({
    // {scopes: [...], audience: "https://api...", account: "", minTtlSeconds: 0,
    //  acrValues: "urn:...", maxAgeSeconds: 300, idToken: false}
    getToken: (request) => ask("getToken", request),
    // {method: "GET", url: "https://api.../x", nonce: "", scopes, audience, account}
    signDpopProof: (request) => ask("signDpopProof", request),
    SigninBrokerError,
  });
  Object.defineProperty(window, "signinBroker", { value: broker, enumerable: true });
  window.dispatchEvent(new Event("signin-broker-ready"));
})();
