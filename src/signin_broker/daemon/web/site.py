"""The loopback web surface: where a browser begins and completes a sign-in (RFC 8252).

Routes follow the contract's section 4.1: the begin endpoint and /user/login, the
callback, /logout, the anonymous landing at /, and the dashboard. Only the user who
owns the daemon is served: the Host header must name the loopback address (a DNS
rebinding guard), and on Linux the kernel must name that user as the owner of the
browser's socket when the connection is accepted, before a byte of it is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ...identities import name_of
from ...oidc.errors import (
    DpopSignInAgain,
    IdTokenInvalid,
    OAuthError,
    ProviderMisfit,
    ProviderUnavailable,
)
from ...oidc.failures import failure_of
from ...session.errors import NotConfigured, StepUpRefused
from ...session.manager import SessionManager
from ...session.signout import LINK_PATH as LOGOUT_LINK_PATH
from ...session.validation import check_workspace_id
from ...store.audit import Actor
from ..host.instance import loopback_base_url
from ..qr import qr_svg_markup
from . import pages
from .serving import (
    CONCURRENT_CONNECTIONS,
    Admission,
    EmbeddedServer,
    LoopbackGuard,
    origin,
    page,
    page_protocol,
    security_headers,
)

if TYPE_CHECKING:
    from ...session.signin import PendingSignIn

log = logging.getLogger(__name__)
SESSION_COOKIE = "signin_broker_session"
BEGIN_PATH = pages.BEGIN_PATH
CALLBACK_PATH = BEGIN_PATH + "/callback"
HOME_PATH = "/dashboard"
BROWSER_SESSION_SECONDS = 12 * 3600
MAX_PARAMETER_LENGTH = 4096
STOP_GRACE_SECONDS = 2  # how long open requests may finish when the daemon stops
SIGN_IN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The actor of sign-ins and sign-outs done on the page (Admission proves the uid).
BROWSER = Actor(app="browser (loopback sign-in page)", uid=os.geteuid())


class BrowserSessions:
    """Which browser (by cookie) signed in as which account; in memory only."""

    def __init__(self) -> None:
        self._by_cookie: dict[str, tuple[str, float]] = {}

    def create(self, account_id: str) -> str:
        """A new cookie value for a browser that just signed in."""
        now = time.time()
        self._by_cookie = {k: v for k, v in self._by_cookie.items() if v[1] > now}
        cookie = secrets.token_urlsafe(32)
        self._by_cookie[cookie] = (account_id, now + BROWSER_SESSION_SECONDS)
        return cookie

    def account_of(self, cookie: str | None) -> str | None:
        """The account a cookie belongs to, while it is valid."""
        entry = self._by_cookie.get(cookie or "")
        if entry is None or entry[1] <= time.time():
            return None
        return entry[0]

    def end(self, cookie: str | None) -> None:
        """Forget a cookie (logout)."""
        self._by_cookie.pop(cookie or "", None)


def same_origin_target(value: str, base_url: str) -> str:
    """Where to send the browser after sign-in: the requested place if it is ours, else home.

    Contract 4.1 rules 6 and 7: a same-origin redirect_to survives the round trip;
    anything else (another origin, a scheme-relative `//host`, backslash tricks,
    control characters) falls back to the authenticated home.
    """
    if not value or len(value) > MAX_PARAMETER_LENGTH or not value.isprintable():
        return HOME_PATH
    parts = urlsplit(value)
    foreign = f"{parts.scheme}://{parts.netloc}".lower() != base_url.lower()
    if (parts.scheme or parts.netloc) and foreign:
        return HOME_PATH
    path = parts.path
    if not path.startswith("/") or path.startswith("//") or "\\" in value:
        return HOME_PATH
    if path.startswith(BEGIN_PATH) or path == "/logout":
        return HOME_PATH
    return path + (f"?{parts.query}" if parts.query else "")


class SignInSite:
    """The Starlette app and the uvicorn server that serves it on the daemon's loop."""

    def __init__(
        self,
        sock: socket.socket,
        session: SessionManager,
        own_uid: int,
    ) -> None:
        self.base_url = loopback_base_url(sock)
        authority = self.base_url.removeprefix("http://")
        self.redirect_uri = self.base_url + CALLBACK_PATH
        self._sock = sock
        self._session = session
        self._browsers = BrowserSessions()
        app = Starlette(
            routes=[
                Route("/", self.home),
                Route(HOME_PATH, self.dashboard),
                Route(BEGIN_PATH, self.begin),
                Route("/user/login", self.user_login),
                Route(CALLBACK_PATH, self.callback),
                Route("/logout", self.logout, methods=["GET", "POST"]),
                Route(LOGOUT_LINK_PATH, self.provider_logout),
            ],
        )
        headers = security_headers([origin(link.issuer) for link in session.providers])
        admission = Admission(own_uid, headers)
        guarded = LoopbackGuard(app, authority, admission, headers)
        config = uvicorn.Config(
            guarded,
            http=page_protocol(admission),
            lifespan="off",
            ws="none",  # no WebSocket routes: wsproto (0.5 MB) stays unloaded, upgrades refused
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,
            timeout_keep_alive=5,
            # uvicorn waits for open connections without end unless told: a stuck
            # browser connection must not keep the daemon from stopping.
            timeout_graceful_shutdown=STOP_GRACE_SECONDS,
            limit_concurrency=CONCURRENT_CONNECTIONS,
            h11_max_incomplete_event_size=16 * 1024,
        )
        self._server = EmbeddedServer(config)
        self._task: Any = None

    async def start(self) -> None:
        """Serve on the daemon's loop."""
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[self._sock])
        )
        for _ in range(200):  # bounded: uvicorn's start-up takes a few milliseconds
            if self._server.started or self._task.done():
                break
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # raise what stopped it

    async def stop(self) -> None:
        """Finish open requests briefly, then close."""
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        self._sock.close()

    # -- routes ------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        """Landing for strangers, the dashboard for the signed-in (contract T6)."""
        if self._signed_in_account(request) is not None:
            return RedirectResponse(HOME_PATH, status_code=302)
        choices = [
            pages.ProviderChoice(link.alias, urlsplit(link.issuer).netloc)
            for link in self._session.providers
        ]
        return HTMLResponse(pages.landing(self._waiting_devices(), choices))

    async def dashboard(self, request: Request) -> Response:
        """The authenticated home; anonymous visitors are sent to sign in and brought back."""
        account_id = self._signed_in_account(request)
        account = self._session.account(account_id) if account_id else None
        if account is None:
            original = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(
                f"{BEGIN_PATH}?redirect_to={quote(original, safe='')}", status_code=302
            )
        others = [a for a in self._session.accounts() if a.id != account.id]
        step_ups = self._session.waiting_step_ups()
        return HTMLResponse(pages.dashboard(account, others, self._waiting_devices(), step_ups))

    async def user_login(self, request: Request) -> Response:
        """The component convention: /user/login bounces to the begin endpoint."""
        query = request.url.query
        return RedirectResponse(BEGIN_PATH + (f"?{query}" if query else ""), status_code=302)

    async def begin(self, request: Request) -> Response:  # noqa: PLR0911 - one per outcome
        """Send the browser to the provider's authorize endpoint (contract 4.1 rule 4)."""
        if not self._session.providers:
            return page(
                "Sign-in is not set up",
                "No identity provider is configured. Set issuer (--issuer,"
                " SIGNIN_BROKER_ISSUER or issuer in config.toml) and restart the daemon.",
                status=503,
            )
        redirect_to = same_origin_target(request.query_params.get("redirect_to", ""), self.base_url)
        sign_in_id = request.query_params.get("sign_in", "")
        if not SIGN_IN_ID.fullmatch(sign_in_id):
            sign_in_id = ""
        try:
            workspace_id = check_workspace_id(request.query_params.get("workspace_id", ""))
        except ValueError as error:
            return page("Not a workspace", str(error), status=400)
        try:
            url = await self._session.browser_sign_in_url(
                self.redirect_uri,
                redirect_to,
                sign_in_id,
                workspace_id,
                provider=request.query_params.get("provider", ""),
            )
        except ValueError as error:
            return page("Not a provider", str(error), status=400)
        except NotConfigured as error:
            return page("No such identity provider", str(error), status=404)
        except ProviderUnavailable as error:
            failure = failure_of(error)
            _oauth_log(logging.ERROR, "authorize", failure.error_code, failure.reason)
            if isinstance(error, ProviderMisfit):  # a setting to mend: the reason the CLI gets
                return page("The identity provider does not fit", failure.message, status=502)
            return page(
                "The identity provider cannot be reached",
                "Check your network connection and try again.",
                status=503,
            )
        return RedirectResponse(url, status_code=302)

    async def callback(self, request: Request) -> Response:  # noqa: PLR0911 - one per outcome
        """Finish a sign-in: check state, redeem the code, validate the id_token, set the cookie."""
        if not self._session.providers:
            return page("Sign-in is not set up", "No identity provider is configured.", status=503)
        params = request.query_params
        if any(len(v) > MAX_PARAMETER_LENGTH for v in params.values()) or len(params) > 16:
            _oauth_log(logging.WARNING, "callback", "invalid_request", "oversized parameters")
            return self._failed("", "invalid_request", "The sign-in response was malformed.")
        state = params.get("state", "")
        taken = self._session.take_browser_sign_in(state) if state else None
        if taken is None:
            _oauth_log(logging.WARNING, "callback", "state_mismatch", "unknown or reused state")
            return self._failed(
                "",
                "state_mismatch",
                "This sign-in response does not belong to a sign-in started here,"
                " or it was used already.",
            )
        flow, pending = taken
        if problem := pending.request.issuer_problem(params.get("iss")):
            _oauth_log(logging.WARNING, "callback", "iss_mismatch", problem)
            return self._failed(
                pending.sign_in_id,
                "iss_mismatch",
                "This sign-in response does not come from the identity provider it was sent to.",
            )
        if "error" in params:
            error = params["error"] if re.fullmatch(r"[a-z_]{1,64}", params["error"]) else "invalid"
            _oauth_log(logging.WARNING, "authorize", error, "the provider returned an error")
            message = (
                "The sign-in was declined."
                if error == "access_denied"
                else f"The identity provider refused the sign-in ({error})."
            )
            if said := _error_description(params.get("error_description", "")):
                message = f"{message[:-1]}: {said}."
            return self._failed(pending.sign_in_id, error, message)
        code = params.get("code", "")
        if not code:
            _oauth_log(logging.WARNING, "callback", "invalid_request", "no code")
            return self._failed(pending.sign_in_id, "invalid_request", "The response had no code.")
        try:
            signed_in = await flow.complete(pending, code)
        except DpopSignInAgain as again:
            return await self._again_with_dpop(flow.alias, pending, again)
        except (OAuthError, IdTokenInvalid, ProviderUnavailable) as error:
            failure = failure_of(error)
            step = "id_token" if isinstance(error, IdTokenInvalid) else "token_exchange"
            level = logging.WARNING if failure.error_code == "invalid_code" else logging.ERROR
            _oauth_log(level, step, failure.error_code, failure.reason)
            return self._failed(pending.sign_in_id, failure.error_code, failure.message)
        try:
            account = await self._session.complete_sign_in(signed_in, BROWSER)
        except StepUpRefused as refused:  # another user, or short of the step-up asked for
            _oauth_log(logging.WARNING, "callback", "step_up_refused", str(refused))
            return self._failed(pending.sign_in_id, "step_up_refused", f"{refused}.")
        log.info("signed in", extra={"flow": "oauth", "step": "callback", "account": account.id})
        response = RedirectResponse(pending.redirect_to, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self._browsers.create(account.id),
            max_age=BROWSER_SESSION_SECONDS,
            path="/",
            secure=True,
            httponly=True,
            samesite="lax",
        )
        return response

    async def logout(self, request: Request) -> Response:
        """POST ends the session (here and at the provider); GET only asks to confirm."""
        if request.method == "GET":
            if self._signed_in_account(request) is None:
                return RedirectResponse("/", status_code=302)
            return HTMLResponse(pages.logout_confirmation())
        if not _same_origin_post(request, self.base_url):
            return page("Not signed out", "That request did not come from this page.", status=403)
        cookie = request.cookies.get(SESSION_COOKIE)
        account_id = self._signed_in_account(request)
        self._browsers.end(cookie)
        if account_id is not None:
            await self._session.sign_out(account_id, actor=BROWSER)
            log.info("signed out from the browser", extra={"account": account_id})
        logout_url = await self._session.provider_logout_url(
            self.base_url + "/", account_id=account_id or ""
        )
        response = RedirectResponse(logout_url or "/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def provider_logout(self, request: Request) -> Response:
        """A sign-out link from an app or the CLI: on to the provider's logout, with the hint.

        The id_token travels only in this redirect to the owner's browser (session.signout).
        """
        target = self._session.take_logout_link(request.query_params.get("end", ""))
        if target is None:
            return page(
                "This sign-out link is used up",
                "It was used already or is more than a few minutes old. You are signed out"
                " on this computer; sign out at the identity provider's site if you need to.",
                status=410,
            )
        log.info("sent the browser to the provider's logout")
        return RedirectResponse(target, status_code=303)

    # -- helpers ---------------------------------------------------------------------------

    async def _again_with_dpop(
        self, alias: str, pending: PendingSignIn, again: DpopSignInAgain
    ) -> Response:
        """Begin the sign-in once more, bound with DPoP from the start, and send the browser.

        The provider refused the code without a DPoP proof and with one: it may require
        DPoP of this client and have spent the code. A sign-in begun again so is never
        begun again a second time (SignInFlow.begin).
        """
        _oauth_log(logging.WARNING, "token_exchange", "dpop_required", str(again))
        try:
            url = await self._session.browser_sign_in_url(
                self.redirect_uri,
                pending.redirect_to,
                pending.sign_in_id,
                pending.request.workspace_id,
                provider=name_of(alias),
                dpop_again=True,
            )
        except (ProviderUnavailable, NotConfigured) as error:
            message = (
                f"The identity provider refused the sign-in code ({again}), and a new"
                f" sign-in could not begin: {error}."
            )
            return self._failed(pending.sign_in_id, "invalid_code", message)
        return RedirectResponse(url, status_code=302)

    def _waiting_devices(self) -> list[pages.WaitingDevice]:
        """Device sign-ins waiting for the person at this desk (the page is theirs alone)."""
        return [
            pages.WaitingDevice(
                started.user_code,
                started.verification_uri,
                qr_svg_markup(started.verification_uri_complete or started.verification_uri),
            )
            for started in self._session.waiting_devices()
        ]

    def _signed_in_account(self, request: Request) -> str | None:
        account_id = self._browsers.account_of(request.cookies.get(SESSION_COOKIE))
        if account_id is not None and self._session.account(account_id) is None:
            return None  # signed out meanwhile (by an app or the CLI)
        return account_id

    def _failed(self, sign_in_id: str, error_code: str, message: str) -> Response:
        """The user-facing error of a failed callback: 200 with a message, no cookie."""
        self._session.sign_in_failed(sign_in_id, f"{error_code}: {message}")
        return page("Sign-in failed", message, status=200, hint=error_code)


def _error_description(text: str) -> str:
    """The provider's own words, in RFC 6749 4.1.2.1's printable ASCII only, shortened."""
    kept = "".join(c for c in text if " " <= c <= "~" and c not in '"\\').strip()
    return kept[:200].rstrip(".")


def _oauth_log(level: int, step: str, error_code: str, reason: str) -> None:
    """The contract's structured record (section 6); reason never holds a code or token."""
    log.log(
        level,
        "sign-in failed",
        extra={"flow": "oauth", "step": step, "error_code": error_code, "reason": reason},
    )


def _same_origin_post(request: Request, base_url: str) -> bool:
    """A POST from our own page, as the browser reports it (Sec-Fetch-Site, else Origin)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or origin.lower() == base_url.lower()
