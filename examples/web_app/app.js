// The whole of a web app's part: ask the extension for a token for this page's origin,
// then send it to the API. The page never sees a refresh token or an ID token.
"use strict";

const tokenStatus = document.getElementById("token-status");
const apiResult = document.getElementById("api-result");

async function callTheApi() {
  if (!window.signinBroker) {
    tokenStatus.textContent = "the signin-broker extension is not installed";
    tokenStatus.dataset.state = "missing";
    return;
  }
  let token;
  try {
    token = await window.signinBroker.getToken({ scopes: ["openid", "profile"] });
  } catch (error) {
    tokenStatus.textContent = `refused (${error.code}): ${error.message}`;
    tokenStatus.dataset.state = "refused";
    tokenStatus.dataset.code = error.code;
    return;
  }
  tokenStatus.textContent = `a ${token.tokenType} token of ${token.account}, valid until ${new Date(token.expiresAt * 1000).toLocaleTimeString()}`;
  tokenStatus.dataset.state = "ok";
  const answer = await fetch("/api/me", { headers: { Authorization: `Bearer ${token.accessToken}` } });
  const body = await answer.json();
  apiResult.textContent = answer.ok ? `the API says hello to ${body.name}` : `the API refused: ${answer.status}`;
  apiResult.dataset.state = answer.ok ? "ok" : "refused";
  apiResult.dataset.sub = body.sub || "";
}

document.getElementById("go").addEventListener("click", callTheApi);
if (new URLSearchParams(window.location.search).has("now")) {
  callTheApi();
}
