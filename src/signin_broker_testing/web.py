"""The stub provider's HTTP side: a Starlette app that records, reads, then hands to authlib.

In front of every endpoint it plays any outage a test started; the token endpoint also
plays injected failures and delays.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import OAuth2Error
from authlib.oauth2.rfc6749.util import extract_basic_authorization
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import pages
from .broken_answers import before_processing, broken
from .exchanges import HttpExchange, parse_form
from .ledger import SecretLedger
from .models import RecordedRequest, StubPaths, StubUser
from .pauses import Pauses
from .rules import (
    ASSERTION_ALGORITHMS,
    CLAIMS_SUPPORTED,
    GRANT_TYPES,
    NO_STORE,
    SIGNING_ALGORITHM,
    SUPPORTED_SCOPES,
)
from .server import StubAuthorizationServer
from .store import Outage, StubStore

log = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"  # below the issuer (Discovery 1.0 sec. 4)
OAUTH_METADATA_PATH = "/.well-known/oauth-authorization-server"  # RFC 8414 section 3
# Where the RFC 8414 document may be served: where RFC 8414 3.1 puts it (between host
# and issuer path), or after the issuer as django-oauth-toolkit mounted below a path does.
OAUTH_METADATA_PLACES = ("inserted", "appended")
MAX_BODY_BYTES = 1 << 20
CONSENT_FIELDS = ("sub", "deny")  # what the consent page's buttons add to the request
GARBAGE_BODY = "<html>upstream error</html>"  # what a broken proxy in front might answer
CLIENT_LEFT = 499  # logged for a request dropped because its client went away meanwhile


@dataclass(frozen=True, slots=True)
class Site:
    """Where the stub is served and how it behaves."""

    base_url: str
    issuer_path: str
    paths: StubPaths
    auto_approve: Callable[[], StubUser | None]  # asked at each request, so a test can switch
    admin_token: str
    oauth_metadata: str | None = None  # one of OAUTH_METADATA_PLACES, or None: not served
    oauth_metadata_only: tuple[str, ...] = ()  # fields left out of the OpenID document
    iss_parameter: bool = False  # RFC 9207: advertised, and `iss` in authorization responses
    auth_methods: tuple[str, ...] = ("none",)  # the client authentication methods advertised
    dpop_algorithms: tuple[str, ...] = ()  # RFC 9449's dpop_signing_alg_values_supported
    acr_values: tuple[str, ...] = ()  # the authentication context classes offered

    @property
    def issuer(self) -> str:
        """The issuer identifier: the base URL plus the issuer path (maybe ending in /)."""
        return self.base_url + self.issuer_path

    @property
    def discovery_path(self) -> str:
        """Below the issuer, without its trailing slash (Discovery 1.0 section 4)."""
        return self.issuer_path.rstrip("/") + DISCOVERY_PATH

    @property
    def oauth_metadata_path(self) -> str | None:
        """Where the RFC 8414 document is served, if it is."""
        if self.oauth_metadata is None:
            return None
        path = self.issuer_path.rstrip("/")
        if self.oauth_metadata == "inserted":
            return OAUTH_METADATA_PATH + path
        return path + OAUTH_METADATA_PATH


def discovery_document(site: Site) -> dict[str, object]:
    """The OpenID Provider metadata, less the fields the site serves only in RFC 8414's."""
    document = oauth_metadata_document(site)
    return {name: value for name, value in document.items() if name not in site.oauth_metadata_only}


def oauth_metadata_document(site: Site) -> dict[str, object]:
    """All the stub's metadata: absolute URLs of every endpoint, and what it supports."""
    paths, base = site.paths, site.base_url
    iss_parameter = {"authorization_response_iss_parameter_supported": True}
    assertion_algorithms = {
        "token_endpoint_auth_signing_alg_values_supported": ASSERTION_ALGORITHMS
    }
    return {
        "issuer": site.issuer,
        "authorization_endpoint": base + paths.authorize,
        "token_endpoint": base + paths.token,
        "userinfo_endpoint": base + paths.userinfo,
        "jwks_uri": base + paths.jwks,
        "end_session_endpoint": base + paths.logout,
        "revocation_endpoint": base + paths.revocation,
        "device_authorization_endpoint": base + paths.device_authorization,
        "scopes_supported": SUPPORTED_SCOPES,
        "response_types_supported": ["code"],
        "grant_types_supported": GRANT_TYPES,
        "code_challenge_methods_supported": ["S256"],
        "id_token_signing_alg_values_supported": [SIGNING_ALGORITHM],
        "token_endpoint_auth_methods_supported": list(site.auth_methods),
        "revocation_endpoint_auth_methods_supported": list(site.auth_methods),
        **(assertion_algorithms if "private_key_jwt" in site.auth_methods else {}),
        "subject_types_supported": ["public"],
        "claims_supported": CLAIMS_SUPPORTED,
        **({"acr_values_supported": list(site.acr_values)} if site.acr_values else {}),
        **(iss_parameter if site.iss_parameter else {}),
        **(
            {"dpop_signing_alg_values_supported": list(dpop)}
            if (dpop := site.dpop_algorithms)
            else {}
        ),
    }


def build_app(
    server: StubAuthorizationServer, store: StubStore, site: Site, pauses: Pauses
) -> Starlette:
    """The Starlette app serving every endpoint at the site's paths."""
    endpoints = _Endpoints(server, store, site, pauses)
    paths = site.paths
    routes = [
        Route(site.discovery_path, endpoints.discovery, methods=["GET"]),
        Route(paths.authorize, endpoints.authorize, methods=["GET", "POST"]),
        Route(paths.token, endpoints.token, methods=["POST"]),
        Route(paths.userinfo, endpoints.userinfo, methods=["GET", "POST"]),
        Route(paths.jwks, endpoints.jwks, methods=["GET"]),
        Route(paths.logout, endpoints.logout, methods=["GET", "POST"]),
        Route(paths.revocation, endpoints.revocation, methods=["POST"]),
        Route(paths.admin_revoke, endpoints.admin_revoke, methods=["POST"]),
        Route(paths.device_authorization, endpoints.device_authorization, methods=["POST"]),
        Route(paths.device_verification, endpoints.device_verification, methods=["GET", "POST"]),
    ]
    if site.oauth_metadata_path is not None:
        routes.append(Route(site.oauth_metadata_path, endpoints.oauth_metadata, methods=["GET"]))
    return Starlette(
        routes=routes, middleware=[Middleware(_RecordEveryRequest, store=store, pauses=pauses)]
    )


class _Endpoints:
    def __init__(
        self, server: StubAuthorizationServer, store: StubStore, site: Site, pauses: Pauses
    ) -> None:
        self._server = server
        self._store = store
        self._site = site
        self._pauses = pauses
        self._discovery = discovery_document(site)
        self._oauth_metadata = oauth_metadata_document(site)

    async def _read(self, request: Request) -> HttpExchange:
        url = self._site.base_url + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        exchange = HttpExchange(
            method=request.method,
            url=url,
            headers=request.headers,
            query=request.query_params.multi_items(),
            body=await request.body(),
        )
        form = dict(exchange.form)  # client credentials, right or wrong, are secrets too
        _, basic_secret = extract_basic_authorization(exchange.headers)
        SecretLedger.note(form.get("client_secret"), form.get("client_assertion"), basic_secret)
        return exchange

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(self._discovery)

    async def oauth_metadata(self, request: Request) -> Response:
        return JSONResponse(self._oauth_metadata)

    async def jwks(self, request: Request) -> Response:
        return JSONResponse(self._store.keys.jwks())

    async def authorize(self, request: Request) -> Response:
        exchange = await self._read(request)
        client_id = dict(exchange.parameters).get("client_id", "")
        if client_id not in self._store.clients:  # so no redirect URI can be trusted
            return _page(400, "Unknown client", "This sign-in request names no known client.")
        choice = dict(exchange.form) if exchange.method == "POST" else {}
        chosen_sub = choice.get("sub")
        end_user = self._site.auto_approve()
        if chosen_sub is not None:
            end_user = self._store.users.get(chosen_sub)
            if end_user is None:
                return _page(400, "Unknown user", "Nobody with that sub can sign in here.")
        try:
            grant = self._server.check_authorization(exchange, end_user)
        except OAuth2Error as error:
            return self._with_issuer(self._server.error_response(error))
        if "deny" in choice or self._store.faults.take_denial():
            return self._with_issuer(self._server.authorization_response(grant, None))
        if end_user is None:
            return HTMLResponse(
                pages.consent(
                    client_id,
                    self._store.users.values(),
                    self._site.paths.authorize,
                    [pair for pair in exchange.parameters if pair[0] not in CONSENT_FIELDS],
                ),
                headers=NO_STORE,
            )
        return self._with_issuer(self._server.authorization_response(grant, end_user))

    def _with_issuer(self, response: Response) -> Response:
        """An authorization response redirect, with `iss` when the site sends it (RFC 9207 2)."""
        location = response.headers.get("location")
        if self._site.iss_parameter and location:
            response.headers["location"] = add_params_to_uri(location, [("iss", self._site.issuer)])
        return response

    async def token(self, request: Request) -> Response:
        exchange = await self._read(request)
        SecretLedger.note(dict(exchange.form).get("code_verifier"))
        delay = self._store.faults.next_token_delay()
        if (
            delay is not None
            and not delay.after_processing
            and not await self._pauses.pause(delay.seconds, request.receive)
        ):
            return Response(status_code=CLIENT_LEFT)  # dropped, so nothing is used up
        breaking = self._store.faults.next_broken_answer()
        if breaking is not None and (portal := before_processing(breaking.how)) is not None:
            return portal
        failure = self._store.faults.next_token_failure()
        if failure is not None:
            response: Response = (
                JSONResponse({"error": failure.error}, failure.status, headers=NO_STORE)
                if failure.error
                else Response(status_code=failure.status, headers=NO_STORE)  # a bare refusal
            )
        else:
            response = self._server.token_response(exchange)
            if response.status_code == 200:  # the ID token exists only in this answer
                answer = json.loads(bytes(response.body))
                SecretLedger.note(answer.get("id_token"))
                if breaking is not None:
                    response = broken(answer, breaking, self._store.alias_access_token)
        if delay is not None and delay.after_processing:
            await self._pauses.pause(delay.seconds, request.receive)
        return response

    async def device_authorization(self, request: Request) -> Response:
        return self._server.device_authorization_response(await self._read(request))

    async def device_verification(self, request: Request) -> Response:
        """The form for a device's code; a GET with the code approves as the auto-approve user."""
        exchange = await self._read(request)
        fields = dict(exchange.parameters)
        user_code = fields.get("user_code", "")
        approver: StubUser | None
        if exchange.method == "GET":
            approver = self._site.auto_approve()
            if approver is None or not user_code:
                return HTMLResponse(
                    pages.device_verification(
                        user_code, self._store.users.values(), self._site.paths.device_verification
                    ),
                    headers=NO_STORE,
                )
        elif "deny" in fields:
            approver = None
        else:
            approver = self._store.users.get(fields.get("sub", ""))
            if approver is None:
                return _page(400, "Unknown user", "Nobody with that sub can sign in here.")
        return self._settle_device(user_code, approver)

    def _settle_device(self, user_code: str, approver: StubUser | None) -> Response:
        """Approve the device code as `approver`, or deny it if None, and say what happened."""
        try:
            approved = self._store.devices.settle(user_code, approver)
        except KeyError:
            return _page(400, "Unknown code", "No device sign-in has that code.")
        except ValueError:
            return _page(
                400, "Code already used", "That code was approved or denied already, or expired."
            )
        if approver is None:
            return _page(200, "Device sign-in denied", "The device is told access_denied.")
        name = pages.display_name(approver)
        if approved:
            return _page(200, "Device signed in", f"Signed in as {name}: go back to your device.")
        return _page(
            200,
            "Device sign-in denied",
            f"{name} is not a member of the workspace the device asked for.",
        )

    async def userinfo(self, request: Request) -> Response:
        return self._server.userinfo_response(await self._read(request))

    async def logout(self, request: Request) -> Response:
        exchange = await self._read(request)
        try:
            redirect = self._server.end_session_response(exchange)
        except OAuth2Error as error:
            return _page(400, "Sign-out refused", str(error.description))
        return redirect or _page(200, "You are signed out", "You can close this window.")

    async def revocation(self, request: Request) -> Response:
        return self._server.revocation_response(await self._read(request))

    async def admin_revoke(self, request: Request) -> Response:
        exchange = await self._read(request)
        scheme, _, presented = exchange.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(
            presented.strip().encode(), self._site.admin_token.encode()
        ):
            return JSONResponse(
                {"error": "invalid_token"},
                401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        sub = dict(exchange.form).get("sub")
        if not sub:
            return JSONResponse(
                {"error": "invalid_request", "error_description": "Missing 'sub'."}, 400
            )
        return JSONResponse({"revoked": self._store.revoke_user(sub)})


def _page(status: int, title: str, text: str) -> Response:
    return HTMLResponse(pages.message(title, text), status, headers=NO_STORE)


class _RecordEveryRequest:
    """Records each request (query and form merged), plays any outage, then logs it.

    A stalled request whose client goes away is dropped unhandled, as if it never came,
    so it cannot use up a code or refresh token long after the test moved on.
    """

    def __init__(self, app: ASGIApp, store: StubStore, pauses: Pauses) -> None:
        self._app = app
        self._store = store
        self._pauses = pauses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        body, complete = await _read_body(receive)
        headers = Headers(scope=scope)
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        method, path = scope["method"], scope["path"]
        self._store.record(
            RecordedRequest(
                method=method,
                path=path,
                params=dict(query + parse_form(headers, body)),
                headers=_flat(headers),
                at=time.time(),
            )
        )
        status = 500  # until the app starts a response

        async def send_and_note_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        outage = self._store.faults.outage()
        if not complete:
            await PlainTextResponse("request body too large", 413)(
                scope, receive, send_and_note_status
            )
        elif (failing := _outage_response(outage)) is not None:
            await failing(scope, receive, send_and_note_status)
        elif (
            outage is not None
            and outage.mode == "stall"
            and not await self._pauses.pause(outage.stall_seconds, receive)
        ):
            status = CLIENT_LEFT
        else:
            await self._app(scope, _replay(body, receive), send_and_note_status)
        log.info("%s %s %d", method, path, status)


def _outage_response(outage: Outage | None) -> Response | None:
    """What every request gets during an outage that answers at once; None otherwise."""
    if outage is None:
        return None
    if outage.mode == "http_500":
        return JSONResponse({"error": "server_error"}, 500, headers=NO_STORE)
    if outage.mode == "garbage":
        return HTMLResponse(GARBAGE_BODY, 200, headers=NO_STORE)
    return None  # "stall" waits, then answers normally; "stopped" has no server to ask


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body, and False when it was cut off at MAX_BODY_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BODY_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), size <= MAX_BODY_BYTES
    return b"".join(chunks), False


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replaying_receive() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replaying_receive


def _flat(headers: Headers) -> dict[str, str]:
    flat: dict[str, str] = {}
    for name, value in headers.items():
        flat[name] = f"{flat[name]}, {value}" if name in flat else value
    return flat
