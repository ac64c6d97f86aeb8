"""The contract's sign-in cases (table 5.3), written once and run on every surface.

Each case takes a fresh stage and a surface and raises when the surface breaks the
contract (AssertionError with what was seen), or Skip when the case cannot run there.
Where a case names a browser detail that a device sign-in (RFC 8628) has no
counterpart for, the device surface checks the same promise in that grant's terms;
each such reading is said in the case's docstring.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..browser import location, query_of
from .stage import CALLBACK, PERSON, Skip, Stage
from .steps import (
    DEEP_LINK,
    DEVICE_GRANT,
    OFF_ORIGIN_TARGETS,
    SLUG_LOOKALIKES,
    approve_device,
    attacker_authorize_url,
    authorize_redirect,
    check_authorize_request,
    complete,
    deliver,
    expect,
    expect_handled_like_t3,
    logout_is_a_same_origin_post,
    said,
    sign_in,
    sign_in_starts,
    through_provider,
    url_path,
    wait_until_the_daemon_refuses,
    web_logout_ends_the_cookie,
)
from .surfaces import OUTCOME_SECONDS, Surface


def t1(stage: Stage, surface: Surface) -> None:
    """Begin sends the user to the provider with PKCE and state.

    Device reading: the daemon asks the provider's device authorization endpoint
    with its client id, and shows the provider's verification address and a code.
    """
    attempt = surface.begin(stage)
    if surface.device:
        requests = stage.provider.requests
        endpoint = url_path(stage.discovery["device_authorization_endpoint"])
        (asked,) = [r for r in requests if r.path == endpoint]
        expect(asked.params.get("client_id") == stage.client_id, "wrong client_id")
        expect("openid" in asked.params.get("scope", "").split(), "scope lacks openid")
        expect(attempt.user_code, "no user code to show")
        expect(
            attempt.verification_uri.startswith(stage.provider_origin() + "/"),
            "the verification address is not the provider's",
        )
        expect(attempt.interval >= 1, "no polling interval")
        expect(attempt.expires_at_unix > time.time(), "the sign-in expired at once")
        return
    check_authorize_request(stage, authorize_redirect(stage, attempt))
    if surface.name == "web":
        for path in SLUG_LOOKALIKES:
            answer = stage.browser.get(stage.web_url + path)
            expect(answer.status_code == 404, f"{path} answered {answer.status_code}, not 404")


def t2(stage: Stage, surface: Surface) -> None:
    """The code is redeemed with PKCE, the id_token checked with the provider's keys: a session."""
    stub = stage.provider
    verdict = complete(stage, surface, surface.begin(stage))
    if surface.device:
        polls = stub.token_requests(DEVICE_GRANT)
        expect(polls, "the daemon never polled the token endpoint")
        redeemed = polls[-1]
        expect(redeemed.params.get("client_id") == stage.client_id, "wrong client_id")
        expect(redeemed.params.get("device_code"), "no device_code")
    else:
        (redeemed,) = stub.token_requests("authorization_code")
        authorize = url_path(stage.discovery["authorization_endpoint"])
        (authorized,) = [r for r in stub.requests if r.path == authorize]
        params = redeemed.params
        expect(params.get("client_id") == stage.client_id, "wrong client_id")
        expect(params.get("code"), "no code")
        expect(params.get("redirect_uri") == stage.web_url + CALLBACK, "wrong redirect_uri")
        verifier = params.get("code_verifier", "")
        expect(
            create_s256_code_challenge(verifier) == authorized.params.get("code_challenge"),
            "the code_verifier does not match the challenge sent at authorize",
        )
    expect(redeemed.method == "POST", "the token request is not a POST")
    jwks = url_path(stage.discovery["jwks_uri"])
    expect(
        any(r.path == jwks for r in stub.requests if r.at >= redeemed.at),
        "the id_token was not checked against the provider's published keys",
    )
    expect(verdict.ok, f"the surface did not report a sign-in: {said(verdict)}")
    if verdict.response is not None:  # the web surface: the session cookie (docs/contract.md §5)
        (cookie,) = verdict.response.headers.get_list("set-cookie")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        expect(
            {"path=/", "secure", "httponly", "samesite=lax"} <= attributes,
            "the session cookie lacks Path=/, Secure, HttpOnly or SameSite=Lax",
        )
        expect(verdict.text == "/dashboard", "not sent to the authenticated home")
    later = surface.request(stage)
    expect(later is not None and PERSON.sub in later, "a later request has no user context")
    if surface.name == "web":
        shown = later or ""
        expect(PERSON.name in shown and PERSON.email in shown, "the dashboard lacks the user")


def t3(stage: Stage, surface: Surface) -> None:
    """A refused token exchange: a user-facing error, no session, the contract's log record."""
    stage.provider.fail_token_endpoint(status=400, error="invalid_grant")
    expect_handled_like_t3(stage, complete(stage, surface, surface.begin(stage)))
    expect(surface.request(stage) is None, "a session exists after a failed exchange")


def t4(stage: Stage, surface: Surface) -> None:
    """Once signed in, requests are served with the user's identity and no new sign-in."""
    sign_in(stage, surface)
    starts = sign_in_starts(stage)
    for _ in range(2):
        answer = surface.request(stage)
        expect(answer is not None and PERSON.sub in answer, "the request is not served as the user")
        if surface.name == "web":
            shown = answer or ""
            expect(f"Signed in as {PERSON.name}" in shown, "the page does not name the user")
    expect(sign_in_starts(stage) == starts, "the request started another sign-in")


def t5(stage: Stage, surface: Surface) -> None:
    """Logout ends the session here and at the provider; the next request needs a sign-in.

    Apps without a browser (cli, desktop, tv) have the tokens revoked at the provider;
    the browser is also sent to the provider's logout address.
    """
    sign_in(stage, surface)
    if surface.name == "web":
        logout_is_a_same_origin_post(stage)
    cookie = dict(stage.browser.cookies.get(urlsplit(stage.web_url).netloc, {}))
    verdict = surface.sign_out(stage)
    expect(verdict.ok, f"sign-out failed: {said(verdict)}")
    found = stage.discovery
    if verdict.response is not None:
        expect(
            verdict.text.startswith(str(found["end_session_endpoint"])),
            "the browser is not sent to the provider's logout",
        )
        web_logout_ends_the_cookie(stage, verdict.response, cookie)
    revocation = url_path(found["revocation_endpoint"])
    expect(
        any(r.path == revocation for r in stage.provider.requests),
        "the provider was not asked to revoke the tokens",
    )
    expect(surface.request(stage) is None, "still signed in after logout")


def t6(stage: Stage, surface: Surface) -> None:
    """Home is the landing (sign-in call) when anonymous and the dashboard when signed in."""
    signed_in, shown = surface.home(stage)
    expect(not signed_in, "home shows a signed-in view to an anonymous user")
    if surface.name == "web":
        expect('data-cta="sign-in"' in shown, "the landing has no sign-in call")
    for detail in (PERSON.name, PERSON.email, PERSON.preferred_username):
        expect(detail.lower() not in shown.lower(), "the anonymous view shows user data")
    sign_in(stage, surface)
    signed_in, shown = surface.home(stage)
    expect(signed_in, "home still shows the landing after sign-in")
    expect(PERSON.sub in shown, "the signed-in view does not show the user")
    if surface.name == "web":
        expect('data-cta="sign-in"' not in shown, "the dashboard shows the landing's call")


def t7(stage: Stage, surface: Surface) -> None:
    """State survives the round trip and the deep link the sign-in began at is where it ends.

    Device reading: the request's own state, the workspace asked for, survives the
    provider round trip, and the outcome reaches the sign-in that asked.
    """
    if surface.device:
        verdict = complete(stage, surface, surface.begin(stage, workspace_id="7"))
        expect(verdict.ok, f"the sign-in did not succeed: {said(verdict)}")
        account = stage.client.status().default_account
        expect(account == f"user:{PERSON.sub}:workspace:7", "the workspace did not survive")
        return
    attempt = surface.begin(stage, redirect_to=DEEP_LINK)
    if surface.name == "web":  # the protected page sends the browser to sign in, link kept
        first = stage.browser.get(attempt.url)
        expect(
            first.status_code == 302 and query_of(location(first)).get("redirect_to") == DEEP_LINK,
            "the deep link is not carried into the sign-in",
        )
    authorize = location(authorize_redirect(stage, attempt))
    callback = through_provider(stage, authorize)
    expect(
        query_of(callback).get("state") == query_of(authorize).get("state"),
        "the state changed on the way",
    )
    delivered, verdict = deliver(stage, surface, attempt, callback)
    expect(verdict.ok, f"the sign-in did not succeed: {said(verdict)}")
    expect(location(delivered) == DEEP_LINK, "the browser did not land on the deep link")


def t8(stage: Stage, surface: Surface) -> None:
    """A request at 50 s of a 60 s token: exactly one refresh, the new token kept, no re-auth."""
    stub = stage.provider
    stub.access_token_ttl = 60
    sign_in(stage, surface)
    issued = stub.token_requests()[-1]
    (before,) = stage.client.accounts()
    expect(before.access_token_expires_at_unix - issued.at <= 61, "the token is not the 60 s one")
    time.sleep(max(0.0, issued.at + 50 - time.time()))
    answer = surface.request(stage)  # the request at 50 s
    expect(answer is not None and PERSON.sub in answer, "the request at 50 s was not served")
    refreshes = stub.token_requests("refresh_token")
    expect(len(refreshes) == 1, f"{len(refreshes)} refresh requests, not exactly one")
    (after,) = stage.client.accounts()
    expect(
        after.access_token_expires_at_unix >= before.access_token_expires_at_unix + 30,
        "the new access token was not stored",
    )
    expect(sign_in_starts(stage) == 1, "the user was asked to sign in again")


# -- I1-I3 -----------------------------------------------------------------------------


def i1(stage: Stage, surface: Surface) -> None:
    """T1 and T2 end to end against the given provider."""
    attempt = surface.begin(stage)
    if surface.device:
        expect(attempt.verification_uri.startswith(stage.provider_origin()), "not the provider's")
        verdict = complete(stage, surface, attempt)
    else:
        answer = authorize_redirect(stage, attempt)
        check_authorize_request(stage, answer)
        callback = through_provider(stage, location(answer))
        verdict = deliver(stage, surface, attempt, callback)[1]
    expect(verdict.ok, f"the sign-in did not succeed: {said(verdict)}")
    expect(surface.request(stage) is not None, "a later request has no user context")


def i2(stage: Stage, surface: Surface) -> None:
    """After I1, an admin revoke at the provider is seen within 60 s.

    What is checked is the daemon: its answer to the surface's request (on tv, GetToken)
    must turn to "sign-in required", not merely the provider's answer to the old token.
    """
    target = stage.target
    if target.revoke is None and not target.admin_token:
        raise Skip(
            "no revoke command (--revoke-command) or admin token"
            " (SIGNIN_BROKER_CONFORMANCE_ADMIN_TOKEN) to revoke with"
        )
    sign_in(stage, surface)
    (account,) = stage.client.accounts()
    if target.revoke is not None:
        target.revoke.run(
            sub=account.platform_user_id, issuer=stage.issuer, client_id=stage.client_id
        )
    else:
        revoke_url = target.admin_revoke_url or stage.provider_origin() + "/admin/revoke"
        answer = httpx2.post(
            revoke_url,
            data={"sub": account.platform_user_id},
            headers={"Authorization": f"Bearer {target.admin_token}"},
            timeout=15,
        )
        expect(
            answer.status_code == 200,
            f"the provider's admin revoke answered {answer.status_code}",
        )
    wait_until_the_daemon_refuses(stage, surface)


def i3(stage: Stage, surface: Surface) -> None:
    """A second app on the device reuses the sign-in over the socket: no OAuth flow of its own."""
    sign_in(stage, surface)
    starts = sign_in_starts(stage)
    second = subprocess.run(  # noqa: S603 - our own module, no shell
        [
            sys.executable,
            "-m",
            "signin_broker_testing.conformance.second_app",
            str(stage.running.socket_path),
        ],
        capture_output=True,
        text=True,
        timeout=OUTCOME_SECONDS,
        check=False,
    )
    expect(second.returncode == 0, f"the second app failed: {second.stderr.strip()[-200:]}")
    expect(second.stdout.split() == [PERSON.sub], "the second app reached another user")
    expect(sign_in_starts(stage) == starts, "the second app went through its own sign-in")


# -- N1-N4 -----------------------------------------------------------------------------


def n1(stage: Stage, surface: Surface) -> None:
    """A callback with a valid code but another state is refused, and spoils nothing.

    Device reading: the daemon's callback stays open while a device sign-in waits; a
    code the attacker obtained with the component's registration is refused there.
    """
    attempt = surface.begin(stage)
    if surface.device:
        code = query_of(through_provider(stage, attacker_authorize_url(stage)))["code"]
        genuine = ""
    else:
        genuine = through_provider(stage, location(authorize_redirect(stage, attempt)))
        code = query_of(genuine)["code"]
    forged = stage.browser.get(
        f"{stage.web_url}{CALLBACK}?code={code}&state=forged-state-0123456789"
    )
    expect(
        forged.status_code == 200 and "Sign-in failed" in forged.text, "the forgery was not refused"
    )
    expect(not forged.headers.get_list("set-cookie"), "the forgery got a cookie")
    expect(not stage.provider.token_requests("authorization_code"), "the forged code was redeemed")
    records = stage.running.expect_log(flow="oauth", error_code="state_mismatch")
    expect(records[0].get("severity") == "warn", "the log record is not severity=warn")
    expect(surface.request(stage) is None, "the forgery signed someone in")
    if surface.device:
        approve_device(stage, attempt)
        verdict = surface.outcome(stage, attempt, None)
    else:
        verdict = deliver(stage, surface, attempt, genuine)[1]
    expect(verdict.ok, f"the genuine sign-in failed after the forgery: {said(verdict)}")


def n2(stage: Stage, surface: Surface) -> None:
    """An off-origin redirect_uri gets invalid_redirect_uri from the provider; no code anywhere."""
    if surface.device:
        surface.begin(stage)  # a device sign-in waits; the attacker tries the browser grant
        authorize = attacker_authorize_url(stage)
    else:
        authorize = location(authorize_redirect(stage, surface.begin(stage)))
    tampered = re.sub(
        r"redirect_uri=[^&]+", "redirect_uri=https%3A%2F%2Fevil.example%2Fcallback", authorize
    )
    answer = stage.browser.get(tampered)
    expect(answer.status_code == 400, f"the provider answered {answer.status_code}, not 400")
    expect(answer.json().get("error") == "invalid_redirect_uri", "not invalid_redirect_uri")
    expect("location" not in answer.headers, "the provider redirected with a code")
    expect(not stage.running.logs_with(step="callback"), "a callback reached the daemon")
    expect(surface.request(stage) is None, "somebody is signed in")


def n3(stage: Stage, surface: Surface) -> None:
    """A redeemed code posted again is invalid_grant, and the component handles it like T3.

    Device reading: a redeemed device code polled again is invalid_grant, and the
    session it gave stays as it was.
    """
    stub = stage.provider
    token_endpoint = str(stage.discovery["token_endpoint"])
    sign_in(stage, surface)
    grant = DEVICE_GRANT if surface.device else "authorization_code"
    redeemed = stub.token_requests(grant)[-1]
    again = httpx2.post(token_endpoint, data=redeemed.params, timeout=15)
    expect(again.status_code == 400, f"the provider answered {again.status_code} to a reused code")
    expect(again.json().get("error") == "invalid_grant", "the reused code is not invalid_grant")
    if surface.device:
        expect(surface.request(stage) is not None, "the session was lost")
        return
    attempt = surface.begin(stage)
    state = query_of(location(authorize_redirect(stage, attempt)))["state"]
    used = f"{stage.web_url}{CALLBACK}?code={redeemed.params['code']}&state={state}"
    expect_handled_like_t3(stage, deliver(stage, surface, attempt, used)[1])


def n4(stage: Stage, surface: Surface) -> None:
    """An off-origin redirect_to lands on the authenticated home, never off the origin."""
    if surface.device:
        raise Skip("a device sign-in never sends a browser back: no redirect_to to forge")
    for target in OFF_ORIGIN_TARGETS:
        attempt = surface.begin(stage, redirect_to=target)
        authorize = location(authorize_redirect(stage, attempt))
        delivered, verdict = deliver(stage, surface, attempt, through_provider(stage, authorize))
        expect(verdict.ok, f"the sign-in did not succeed: {said(verdict)}")
        expect(location(delivered) == "/dashboard", f"redirect_to {target} was followed")


@dataclass(frozen=True, slots=True)
class Case:
    """A case of table 5.3 and whether it runs against the given provider (I1, I2)."""

    id: str
    run: Callable[[Stage, Surface], None]
    given_provider: bool = False

    @property
    def title(self) -> str:
        """The first line of the case's docstring."""
        return (self.run.__doc__ or "").strip().splitlines()[0]


CASES: dict[str, Case] = {
    case.id: case
    for case in (
        Case("T1", t1),
        Case("T2", t2),
        Case("T3", t3),
        Case("T4", t4),
        Case("T5", t5),
        Case("T6", t6),
        Case("T7", t7),
        Case("T8", t8),
        Case("I1", i1, given_provider=True),
        Case("I2", i2, given_provider=True),
        Case("I3", i3),
        Case("N1", n1),
        Case("N2", n2),
        Case("N3", n3),
        Case("N4", n4),
    )
}
