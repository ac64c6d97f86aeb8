"""The loopback web surface: where a browser begins and completes a sign-in (RFC 8252).

Routes follow docs/contract.md §1: the begin endpoint and /user/login, the callback,
/logout, the anonymous landing at /, and the dashboard. Only the user who owns the
daemon is served: the Host header must name the loopback address (a DNS rebinding
guard), and on Linux the kernel must name that user as the owner of the browser's
socket when the connection is accepted, before a byte of it is read. The pages render
what the sessions decide: a sign-in is begun and completed by session.signing_in.sign_ins.
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
from typing import Any
from urllib.parse import quote, urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ...session.audit_entries import Actor
from ...session.errors import NotConfigured, ProviderDoesNotFit, ProviderUnreachable
from ...session.manager import SessionManager
from ...session.signing_in.sign_ins import MAX_PARAMETER_LENGTH, SignInEnd
from ...session.signing_out.logout_links import LINK_PATH as LOGOUT_LINK_PATH
from ...session.validation import check_workspace_id
from ..host.instance import loopback_base_url
from ..qr import qr_svg_markup
from . import BEGIN_PATH, pages
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

log = logging.getLogger(__name__)
SESSION_COOKIE = "signin_broker_session"
CALLBACK_PATH = BEGIN_PATH + "/callback"
HOME_PATH = "/dashboard"
BROWSER_SESSION_SECONDS = 12 * 3600
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

    docs/contract.md §4: a same-origin redirect_to survives the round trip;
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
        headers = security_headers([origin(link.issuer) for link in session.overview.providers])
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
        """Landing for strangers, the dashboard for the signed-in (docs/contract.md §1)."""
        if self._signed_in_account(request) is not None:
            return RedirectResponse(HOME_PATH, status_code=302)
        choices = [
            pages.ProviderChoice(link.alias, urlsplit(link.issuer).netloc)
            for link in self._session.overview.providers
        ]
        return HTMLResponse(pages.landing(self._waiting_devices(), choices))

    async def dashboard(self, request: Request) -> Response:
        """The authenticated home; anonymous visitors are sent to sign in and brought back."""
        account_id = self._signed_in_account(request)
        account = self._session.overview.account(account_id) if account_id else None
        if account is None:
            original = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(
                f"{BEGIN_PATH}?redirect_to={quote(original, safe='')}", status_code=302
            )
        others = [a for a in self._session.overview.accounts() if a.id != account.id]
        step_ups = self._session.step_ups.waiting()
        return HTMLResponse(pages.dashboard(account, others, self._waiting_devices(), step_ups))

    async def user_login(self, request: Request) -> Response:
        """The component convention: /user/login bounces to the begin endpoint."""
        query = request.url.query
        return RedirectResponse(BEGIN_PATH + (f"?{query}" if query else ""), status_code=302)

    async def begin(self, request: Request) -> Response:  # noqa: PLR0911 - one per outcome
        """Send the browser to the provider's authorize endpoint (docs/contract.md §2)."""
        if not self._session.overview.providers:
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
            url = await self._session.sign_ins.browser_url(
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
        except ProviderDoesNotFit as error:  # logged by the sign-ins: the page says it
            return page("The identity provider does not fit", str(error), status=502)
        except ProviderUnreachable:
            return page(
                "The identity provider cannot be reached",
                "Check your network connection and try again.",
                status=503,
            )
        return RedirectResponse(url, status_code=302)

    async def callback(self, request: Request) -> Response:
        """Finish a sign-in with the provider's answer (session.signing_in), and set the cookie."""
        if not self._session.overview.providers:
            return page("Sign-in is not set up", "No identity provider is configured.", status=503)
        answer = dict(request.query_params)
        return self._shown(await self._session.sign_ins.complete_browser(answer, BROWSER))

    def _shown(self, end: SignInEnd) -> Response:
        """How a sign-in ended, as the browser sees it: a page, the provider's, or home."""
        if end.failure is not None:  # 200 with a message, no cookie
            failure = end.failure
            return page("Sign-in failed", failure.message, status=200, hint=failure.error_code)
        if end.account is None:  # begun once more at the provider, with DPoP
            return RedirectResponse(end.again_at, status_code=302)
        response = RedirectResponse(end.redirect_to, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self._browsers.create(end.account.id),
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
            await self._session.endings.sign_out(account_id, actor=BROWSER)
            log.info("signed out from the browser", extra={"account": account_id})
        logout_url = await self._session.endings.provider_logout_url(
            self.base_url + "/", account_id=account_id or ""
        )
        response = RedirectResponse(logout_url or "/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def provider_logout(self, request: Request) -> Response:
        """A sign-out link from an app or the CLI: on to the provider's logout, with the hint.

        The id_token travels only in this redirect to the owner's browser
        (session.signing_out.logout_links).
        """
        target = self._session.endings.take_logout_link(request.query_params.get("end", ""))
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

    def _waiting_devices(self) -> list[pages.WaitingDevice]:
        """Device sign-ins waiting for the person at this desk (the page is theirs alone)."""
        return [
            pages.WaitingDevice(
                started.user_code,
                started.verification_uri,
                qr_svg_markup(started.verification_uri_complete or started.verification_uri),
            )
            for started in self._session.sign_ins.waiting_devices()
        ]

    def _signed_in_account(self, request: Request) -> str | None:
        account_id = self._browsers.account_of(request.cookies.get(SESSION_COOKIE))
        if account_id is not None and self._session.overview.account(account_id) is None:
            return None  # signed out meanwhile (by an app or the CLI)
        return account_id


def _same_origin_post(request: Request, base_url: str) -> bool:
    """A POST from our own page, as the browser reports it (Sec-Fetch-Site, else Origin)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or origin.lower() == base_url.lower()
