"""The steps the cases are made of: signing in on a surface, through the provider, checks.

Each step drives the stage (provider, daemon, browser, app) or checks what it did;
`expect` raises AssertionError with what was seen.
"""

from __future__ import annotations

import re
import secrets
import time
from urllib.parse import urlencode, urlsplit

import httpx2
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..browser import location, query_of
from .stage import BEGIN, CALLBACK, Stage
from .surfaces import Attempt, Surface, Verdict

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
OFF_ORIGIN = "https://evil.example/steal"
# Where a sign-in must never send the browser (N4): other origins, and what a browser
# reads as one ("//", "/\\"), a script, and a path that is not absolute.
OFF_ORIGIN_TARGETS = (
    OFF_ORIGIN,
    "//evil.example/steal",
    "/\\evil.example",
    "http://127.0.0.1:1/elsewhere",
    "javascript:alert(1)",
    "dashboard",
)
# Rule 2: the sign-in path's slug is exactly id-provider; these are not it.
SLUG_LOOKALIKES = (
    "/auth/oauth2/ID-Provider",
    "/auth/oauth2/idprovider",
    "/auth/oauth2/id_provider",
)
DEEP_LINK = "/dashboard?tab=apps&q=a%20b"
REVOCATION_LIMIT_SECONDS = 60  # contract I2


def expect(condition: object, failure: str) -> None:
    """The check of a case: AssertionError with what was wrong (never a token)."""
    if not condition:
        raise AssertionError(failure)


def url_path(url: object) -> str:
    return urlsplit(str(url)).path


# -- the person's part: the browser or the verification page ---------------------------


def authorize_redirect(stage: Stage, attempt: Attempt) -> httpx2.Response:
    """Open the sign-in address; the answer that sends the browser to the provider."""
    browser = stage.browser
    return browser.follow(browser.get(attempt.url), until=stage.provider_origin())


def through_provider(stage: Stage, authorize: str) -> str:
    """Visit the authorize URL (the provider approves); the callback URL it sends back to.

    With a browser login command (hooks.py) the command signs the test user in and
    prints the address the provider sent the browser to.
    """
    redirect_uri = stage.web_url + CALLBACK
    login = stage.target.browser_login
    if login is not None:
        said = login.run(
            url=authorize,
            redirect_uri=redirect_uri,
            issuer=stage.issuer,
            client_id=stage.client_id,
        )
        lines = [line.strip() for line in said.splitlines()]
        target = next((line for line in lines if line.startswith(redirect_uri)), "")
        expect(target, f"{login.option} printed no address starting with the redirect URI")
        return target
    browser = stage.browser
    answer = browser.follow(browser.get(authorize), until=redirect_uri)
    target = location(answer) if answer.is_redirect else ""
    expect(target.startswith(redirect_uri), "the provider did not send a code back")
    return target


def deliver(
    stage: Stage, surface: Surface, attempt: Attempt, callback: str
) -> tuple[httpx2.Response, Verdict]:
    """The browser brings the provider's answer to the daemon; what the surface then says."""
    delivered = stage.browser.get(callback)
    return delivered, surface.outcome(stage, attempt, delivered)


def approve_device(stage: Stage, attempt: Attempt) -> None:
    """The person opens the verification address (with the code in it) and approves.

    With a device approval command (hooks.py) the command approves the code instead.
    """
    approve = stage.target.approve_device
    if approve is not None:
        approve.run(
            user_code=attempt.user_code,
            verification_uri=attempt.verification_uri,
            verification_uri_complete=attempt.url,
            issuer=stage.issuer,
            client_id=stage.client_id,
        )
        return
    page = stage.browser.get(attempt.url)
    expect(page.status_code == 200, f"the verification page answered {page.status_code}")


def complete(stage: Stage, surface: Surface, attempt: Attempt) -> Verdict:
    """Finish a begun sign-in as the person would; the surface's verdict."""
    if surface.device:
        approve_device(stage, attempt)
        return surface.outcome(stage, attempt, None)
    authorize = location(authorize_redirect(stage, attempt))
    return deliver(stage, surface, attempt, through_provider(stage, authorize))[1]


def sign_in(stage: Stage, surface: Surface, **begin: str) -> Verdict:
    """A whole successful sign-in through the surface."""
    verdict = complete(stage, surface, surface.begin(stage, **begin))
    expect(verdict.ok, f"the sign-in did not succeed: {said(verdict)}")
    return verdict


def sign_in_starts(stage: Stage) -> int:
    """Requests that start a sign-in at the provider (authorize or device authorization)."""
    found = stage.discovery
    paths = {
        url_path(found["authorization_endpoint"]),
        url_path(found["device_authorization_endpoint"]),
    }
    return len([r for r in stage.provider.requests if r.path in paths])


def attacker_authorize_url(stage: Stage) -> str:
    """An authorize URL an attacker builds with the component's registration."""
    verifier = secrets.token_urlsafe(48)
    query = {
        "client_id": stage.client_id,
        "redirect_uri": stage.web_url + CALLBACK,
        "response_type": "code",
        "scope": "openid",
        "state": "attacker-state-" + secrets.token_urlsafe(12),
        "code_challenge": create_s256_code_challenge(verifier),
        "code_challenge_method": "S256",
    }
    return f"{stage.discovery['authorization_endpoint']}?{urlencode(query)}"


def check_authorize_request(stage: Stage, answer: httpx2.Response) -> dict[str, str]:
    """docs/contract.md §2: the browser goes to the provider's authorize endpoint with PKCE."""
    expect(answer.status_code in (302, 303, 307), f"begin answered {answer.status_code}")
    target = location(answer)
    expected = str(stage.discovery["authorization_endpoint"])
    expect(target.split("?")[0] == expected, "the browser is not sent to the authorize endpoint")
    query = query_of(target)
    expect(query.get("client_id") == stage.client_id, "wrong or missing client_id")
    expect(query.get("redirect_uri") == stage.web_url + CALLBACK, "wrong redirect_uri")
    expect(query.get("response_type") == "code", "response_type is not code")
    scopes = set(query.get("scope", "").split())
    expect({"openid", "profile", "email"} <= scopes, "scope lacks openid profile email")
    expect(len(query.get("state", "")) >= 16, "state is missing or shorter than 16 characters")
    expect(query.get("nonce"), "no nonce")
    expect(query.get("code_challenge_method") == "S256", "PKCE method is not S256")
    challenge = query.get("code_challenge", "")
    expect(re.fullmatch(r"[A-Za-z0-9_-]{43}", challenge), "no S256 code_challenge")
    return query


def said(verdict: Verdict) -> str:
    """A verdict's text, short and without markup, for a failure's reason."""
    return re.sub(r"<[^>]*>|\s+", " ", verdict.text).strip()[:200]


# -- T1-T8 -----------------------------------------------------------------------------


def expect_handled_like_t3(stage: Stage, verdict: Verdict) -> None:
    """A refused code: the user is told (200 page with no cookie, or the reason), and logged."""
    expect(not verdict.ok, "the surface reported a sign-in although the exchange failed")
    if verdict.response is not None:
        expect(verdict.response.status_code == 200, "the error is not a user-facing page")
        expect("Sign-in failed" in verdict.text, "the page does not say the sign-in failed")
        expect("did not accept the sign-in code" in verdict.text, "the page does not say why")
        expect(not verdict.response.headers.get_list("set-cookie"), "a cookie was set")
    else:
        expect("invalid_code" in verdict.text, f"the user is not told why: {said(verdict)}")
    stage.running.expect_log(flow="oauth", step="token_exchange", error_code="invalid_code")
    expect(stage.running.alive, "the daemon stopped")


def logout_is_a_same_origin_post(stage: Stage) -> None:
    """GET /logout only asks to confirm; a POST from another site is refused."""
    page = stage.browser.get(stage.web_url + "/logout")
    expect(page.status_code == 200 and 'method="post"' in page.text, "GET /logout is no form")
    for forged in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        answer = stage.browser.post(stage.web_url + "/logout", headers=forged)
        expect(answer.status_code == 403, f"a cross-site logout answered {answer.status_code}")
    expect(stage.browser.get(stage.web_url + "/dashboard").status_code == 200, "signed out")


def web_logout_ends_the_cookie(
    stage: Stage, answer: httpx2.Response, cookie: dict[str, str]
) -> None:
    """The cookie is cleared, the provider sends the browser home, and the old one is dead."""
    cleared = answer.headers.get_list("set-cookie")
    expect(len(cleared) == 1 and "max-age=0" in cleared[0].lower(), "the cookie is not cleared")
    target = location(answer)
    expect(
        query_of(target).get("post_logout_redirect_uri") == stage.web_url + "/",
        "the provider is not asked to send the browser back home",
    )
    back = stage.browser.follow(stage.browser.get(target))
    expect('data-cta="sign-in"' in back.text, "the browser does not land on the landing")
    replay = httpx2.get(
        stage.web_url + "/dashboard",
        headers={"Cookie": "; ".join(f"{k}={v}" for k, v in cookie.items())},
    )
    expect(
        replay.status_code == 302 and location(replay).startswith(BEGIN + "?redirect_to="),
        "the old session cookie still works after logout",
    )


def wait_until_the_daemon_refuses(
    stage: Stage,
    surface: Surface,
    limit_seconds: float = REVOCATION_LIMIT_SECONDS,
    poll_seconds: float = 1.0,
) -> None:
    """Ask the daemon through the surface until it says sign-in required; fail after the limit."""
    revoked_at = time.monotonic()
    while surface.daemon_serves(stage):
        if time.monotonic() - revoked_at > limit_seconds:
            raise AssertionError(
                f"the daemon still hands out the session {limit_seconds:g} s"
                " after the provider revoked it"
            )
        time.sleep(poll_seconds)
