"""StubProvider: a real OpenID Connect provider on loopback, served from a background thread.

It has the knobs a test turns: choose who signs in, approve, deny, expire or slow down a
device sign-in, revoke a user, rotate keys, fail or delay the token endpoint, expire
refresh tokens, take the whole provider down, and look tokens and device polls up.
Constructor options make it behave like particular real providers: an issuer ending
in "/", RFC 8414 metadata, RFC 9207's iss, refresh tokens only with offline consent.
"""

from __future__ import annotations

import math
import secrets
import socket
import threading
from collections.abc import Sequence
from dataclasses import fields, replace
from types import TracebackType
from typing import Self

from .broken_answers import BROKEN_ANSWERS
from .device_knobs import DeviceSignIns
from .dpop import ALGORITHMS as DPOP_ALGORITHMS
from .dpop import StubDpop
from .loopback import Address, Serving, Tls, halt, listen, loopback_host, serve
from .models import (
    CLIENT_AUTH_METHODS,
    DEFAULT_CLIENT,
    DEFAULT_USER,
    WORKSPACE_ID,
    RecordedRequest,
    StubClient,
    StubPaths,
    StubUser,
    check_client,
)
from .pauses import Pauses
from .rules import DEFAULT_ACR_VALUES, AuthenticationSettings, DeviceSettings
from .server import StubAuthorizationServer
from .store import OUTAGE_MODES, BrokenAnswer, Outage, StubStore, TokenDelay, TokenFailure
from .web import OAUTH_METADATA_PLACES, Site, build_app, discovery_document


class StubProvider(DeviceSignIns):
    """A stub OpenID Connect provider for tests and demos.

    Public clients by default, confidential ones as registered (a client secret, or
    private_key_jwt), authorization code flow with mandatory PKCE (S256), the device
    flow (RFC 8628), RS256 ID tokens, rotating refresh tokens, opaque access tokens that
    can really be revoked.
    Start it with `start()` or a `with` block; it serves on loopback only. Every method
    may be called from any thread while it serves.
    """

    def __init__(
        self,
        users: Sequence[StubUser] | None = None,
        clients: Sequence[StubClient] | None = None,
        *,
        access_token_ttl: int = 3600,
        refresh_token_ttl: int | None = None,
        paths: StubPaths | None = None,
        issuer_path: str = "",
        auto_approve: str | None = "1001",
        device_interval: int = 5,
        device_code_ttl: int = 600,
        oauth_metadata: str | None = None,
        oauth_metadata_only: Sequence[str] = (),
        iss_parameter: bool = False,
        offline_access_needs_consent: bool = False,
        token_endpoint_auth_methods: Sequence[str] | None = None,
        refresh_reuse_ends_grant: bool = False,
        dpop: bool = False,
        dpop_nonce: bool = False,
        acr_values_supported: Sequence[str] = DEFAULT_ACR_VALUES,
        tls: Tls | None = None,
    ) -> None:
        self.users = tuple(users) if users is not None else (DEFAULT_USER,)
        self.clients = tuple(clients) if clients is not None else (DEFAULT_CLIENT,)
        # What discovery advertises (read at start); by default the methods clients use.
        self.token_endpoint_auth_methods = _advertised(token_endpoint_auth_methods, self.clients)
        self.access_token_ttl = access_token_ttl  # seconds, read at each issue
        self.refresh_token_ttl = refresh_token_ttl  # seconds or None (never), read at each issue
        self.paths = paths or StubPaths()
        self.issuer_path = issuer_path
        self.auto_approve = auto_approve  # a sub, or None (consent page); read at each request
        self.device_interval = device_interval  # seconds between device polls, read at each issue
        self.device_code_ttl = device_code_ttl  # seconds, read at each issue
        # Like real providers (read at start): an RFC 8414 document ("inserted" where RFC
        # 8414 puts it, "appended" after the issuer as django-oauth-toolkit does) holding
        # the fields the OpenID document leaves out; RFC 9207's iss parameter; and a
        # refresh token only for offline_access asked for with prompt=consent, as a
        # default panva oidc-provider does (it drops offline_access otherwise).
        self.oauth_metadata = oauth_metadata
        self.oauth_metadata_only = tuple(oauth_metadata_only)
        self.iss_parameter = iss_parameter
        self.offline_access_needs_consent = offline_access_needs_consent
        self.admin_token = secrets.token_urlsafe(32)
        self._offer(dpop, dpop_nonce, acr_values_supported)
        self.tls = tls  # serve https with this certificate (read at start)
        _check_settings(self)
        # RFC 9700 4.14.2, as panva's oidc-provider does: a spent refresh token sent again
        # ends its whole grant (`reuses` lists each such end).
        self._store = StubStore(self.users, self.clients, reuse_ends_grant=refresh_reuse_ends_grant)
        self._lock = threading.RLock()  # one start, stop or outage at a time
        self._address: Address | None = None
        self._serving: Serving | None = None  # None while stopped, or in a "stopped" outage

    def _offer(self, dpop: bool, dpop_nonce: bool, acr_values: Sequence[str]) -> None:
        """DPoP and authentication context classes, as __init__ was given them."""
        # RFC 9449 (read at start): DPoP offered, a proof's token bound to its key; and a
        # nonce demanded in every proof (read at each request; dpop_state.new_nonce()).
        self.dpop = dpop
        self.dpop_nonce = dpop_nonce
        self.dpop_state = StubDpop(lambda: self.dpop_nonce)
        # OpenID Connect acr (RFC 9470 step-up): a sign-in gets the first of its acr_values
        # the stub offers (advertised in discovery, read at start), else the first offered;
        # `acr_override` (None: off; "" for none) plays a provider that answers another;
        # `auth_age` one that answers from an older browser session, ignoring max_age.
        self.acr_values_supported = tuple(acr_values)
        self.acr_override: str | None = None  # read at each sign-in
        self.auth_age = 0  # seconds, read at each sign-in

    def start(self, host: str = "127.0.0.1", port: int = 0) -> Self:
        """Serve on host:port (port 0 picks a free one) from a background thread."""
        with self._lock:
            if self._address is not None:
                raise RuntimeError("the stub provider is already running")
            bind_host = loopback_host(host)
            listening = listen(bind_host, port)
            bound_port = listening.getsockname()[1]
            url_host = f"[{bind_host}]" if ":" in bind_host else bind_host
            base_url = f"{'https' if self.tls else 'http'}://{url_host}:{bound_port}"
            address = Address(bind_host, bound_port, base_url, base_url + self.issuer_path)
            self._serving = self._serve(listening, address)
            self._address = address
        return self

    def stop(self) -> None:
        """Stop serving (idempotent); the state survives for a later `start()`.

        A "stopped" outage ends with it (the next start serves); other outages go on.
        """
        with self._lock:
            serving, self._serving, self._address = self._serving, None, None
            outage = self._store.faults.outage()
            if outage is not None and outage.mode == "stopped":
                self._store.faults.set_outage(None)
            if serving is not None:
                halt(serving)

    def outage(self, mode: str | None, *, stall_seconds: float = 12.0) -> None:
        """Make every endpoint fail in `mode` until `outage(None)`.

        "stopped": the listening socket closes, so connections are refused; `outage(None)`
        (or another mode) serves again on the same host and port. "http_500": every
        request gets 500 {"error": "server_error"}. "stall": every request waits
        `stall_seconds` (less if the stub stops), then is handled normally; one whose
        client leaves meanwhile is dropped unhandled. "garbage": every request gets 200
        with an HTML body. Users, codes, tokens, keys and recorded requests are kept, and
        requests that arrive are recorded as usual.
        """
        if mode is not None and mode not in OUTAGE_MODES:
            raise ValueError(f"unknown outage mode {mode!r}; use one of {OUTAGE_MODES} or None")
        if not (math.isfinite(stall_seconds) and stall_seconds >= 0):
            raise ValueError("stall_seconds must be a finite number, at least 0")
        outage = None if mode is None else Outage(mode, stall_seconds)
        with self._lock:
            if mode == "stopped":
                self._running()
                self._store.faults.set_outage(outage)
                serving, self._serving = self._serving, None
                if serving is not None:
                    halt(serving)
                return
            address = self._address
            if address is None or self._serving is not None:
                self._store.faults.set_outage(outage)
                return
            # Back from "stopped": the same port again (SO_REUSEADDR), so the issuer holds.
            stopped = self._store.faults.outage()
            listening = listen(address.host, address.port)
            self._store.faults.set_outage(outage)  # before serving, so no request misses it
            try:
                self._serving = self._serve(listening, address)
            except BaseException:
                self._store.faults.set_outage(stopped)
                raise

    def delay_token_response(
        self, seconds: float, *, after_processing: bool, times: int = 1
    ) -> None:
        """Make the next `times` token requests wait `seconds` (less if the stub stops).

        Before processing, nothing is used up yet: a request whose client leaves during
        the wait is dropped unhandled. After processing, codes and refresh tokens are used
        up and the new tokens stored; only the response waits, and is lost with its client.
        """
        if not (math.isfinite(seconds) and seconds >= 0) or times < 1:
            raise ValueError("seconds must be a finite number, at least 0, and times at least 1")
        self._store.faults.delay_token_requests(TokenDelay(seconds, after_processing), times)

    def break_token_answers(self, how: str, *, seconds: float = 5.0, times: int = 1) -> None:
        """Answer the next `times` token requests broken in the way `how` names.

        See testing.broken_answers.BROKEN_ANSWERS: the request is acted on first (a
        refresh token rotates), except for "html", which never reaches the stub.
        """
        if how not in BROKEN_ANSWERS or times < 1:
            raise ValueError(f"unknown broken answer {how!r}; use one of {BROKEN_ANSWERS}")
        self._store.faults.break_token_answers(BrokenAnswer(how, seconds), times)

    @property
    def reuses(self) -> list[str]:
        """The subs whose grants ended because a rotated refresh token was sent again."""
        return list(self._store.reuses)

    def access_token_info(self, token: str) -> dict[str, object] | None:
        """What the stub knows about an access token; None if it never issued it.

        {"sub", "scope", "audience" (the RFC 8707 resource, or None), "expires_at"
        (epoch seconds), "acr" (of the sign-in, or None), "active" (neither expired nor
        revoked)}.
        """
        return self._store.access_token_info(token)

    def __enter__(self) -> Self:
        if self._address is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """http://HOST:PORT, where the endpoint paths are rooted."""
        return self._running().base_url

    @property
    def issuer(self) -> str:
        """The issuer: the base URL plus issuer_path; discovery is below it."""
        return self._running().issuer

    @property
    def discovery_url(self) -> str:
        """The OpenID Provider Configuration document's URL."""
        return self.base_url + self._site(self._running()).discovery_path

    @property
    def signing_kid(self) -> str:
        """The kid of the key that signs new ID tokens."""
        return str(self._store.keys.current.kid)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, oldest first (a copy)."""
        return self._store.recorded()

    def token_requests(self, grant_type: str | None = None) -> list[RecordedRequest]:
        """The requests to the token endpoint, of one grant type if given."""
        return [
            request
            for request in self._store.recorded()
            if request.path == self.paths.token
            and request.method == "POST"
            and (grant_type is None or request.params.get("grant_type") == grant_type)
        ]

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        self._store.clear_requests()

    def revoke_user(self, sub: str) -> int:
        """End every access token, refresh token and pending code of a user.

        It also denies a device code the user approved that nobody has redeemed yet.
        Returns how many grants (access and refresh token pairs) were still alive.
        """
        return self._store.revoke_user(sub)

    def rotate_keys(self, keep_previous: bool = True) -> str:
        """Sign with a new key from now on; returns its kid.

        The old key stays in the JWKS only if keep_previous, so ID tokens it signed
        stop validating otherwise.
        """
        return self._store.keys.rotate(keep_previous)

    def fail_token_endpoint(
        self, status: int = 400, error: str | None = None, times: int = 1
    ) -> None:
        """Make the next `times` token requests fail with `status` and {"error": error}.

        The error defaults to invalid_grant, or server_error for a status of 500 and up;
        "" sends the status alone, with an empty body, as some providers refuse.
        """
        if not 400 <= status <= 599 or times < 1:
            raise ValueError("status must be 400-599 and times at least 1")
        if error is None:
            error = "server_error" if status >= 500 else "invalid_grant"
        self._store.faults.fail_token_requests(TokenFailure(status, error), times)

    def approve_as(self, sub: str | None) -> None:
        """Make later authorizations sign `sub` in at once, or show the consent page if None.

        It takes effect on the next authorization request and lasts through stop() and
        start(), so a test can switch users without restarting the stub.
        """
        if sub is not None and sub not in self._store.users:
            raise ValueError(
                f"approve_as({sub!r}) names none of the users {list(self._store.users)}; "
                "pass one of their subs, or None for a sign-in page"
            )
        self.auto_approve = sub

    def deny_next_authorization(self) -> None:
        """Make the next authorization request redirect back with error=access_denied."""
        self._store.faults.deny_next_authorization()

    def _auto_approved_user(self) -> StubUser | None:
        """Who an authorization request signs in without asking, read afresh each time."""
        sub = self.auto_approve
        return None if sub is None else self._store.users.get(sub)

    def _running(self) -> Address:
        address = self._address
        if address is None:
            raise RuntimeError("the stub provider is not running; call start() first")
        return address

    def _serve(self, listening: socket.socket, address: Address) -> Serving:
        """Serve the store on an already listening socket; closes it if that fails."""
        try:
            site = self._site(address)
            authorization = StubAuthorizationServer(
                self._store,
                site.issuer,
                lambda: self.access_token_ttl,
                lambda: self.refresh_token_ttl,
                DeviceSettings(
                    address.base_url + self.paths.device_verification,
                    lambda: self.device_interval,
                    lambda: self.device_code_ttl,
                ),
                authentication=AuthenticationSettings(
                    self.acr_values_supported, lambda: self.acr_override, lambda: self.auth_age
                ),
                offline_access_needs_consent=self.offline_access_needs_consent,
                client_assertion_audiences=(address.base_url + self.paths.token, site.issuer),
                dpop=self.dpop_state if self.dpop else None,
            )
            pauses = Pauses()
            app = build_app(authorization, self._store, site, pauses)
        except BaseException:
            listening.close()
            raise
        return serve(app, listening, f"stub-provider {address.base_url}", pauses, self.tls)

    def _site(self, address: Address) -> Site:
        return Site(
            address.base_url,
            self.issuer_path,
            self.paths,
            self._auto_approved_user,
            self.admin_token,
            self.oauth_metadata,
            self.oauth_metadata_only,
            self.iss_parameter,
            auth_methods=self.token_endpoint_auth_methods,
            dpop_algorithms=tuple(DPOP_ALGORITHMS) if self.dpop else (),
            acr_values=self.acr_values_supported,
        )


def _check_settings(stub: StubProvider) -> None:
    subs = [user.sub for user in stub.users]
    client_ids = [client.client_id for client in stub.clients]
    paths = [getattr(stub.paths, field.name) for field in fields(stub.paths)]
    paths += _metadata_paths(stub)
    if not subs or len(set(subs)) != len(subs):
        raise ValueError("users must be at least one, each with its own sub")
    if not client_ids or len(set(client_ids)) != len(client_ids):
        raise ValueError("clients must be at least one, each with its own client_id")
    for client in stub.clients:
        check_client(client, dpop_offered=stub.dpop)
    if not set(stub.token_endpoint_auth_methods) <= set(CLIENT_AUTH_METHODS):
        raise ValueError(f"token_endpoint_auth_methods are among {CLIENT_AUTH_METHODS} only")
    if stub.auto_approve is not None and stub.auto_approve not in subs:
        raise ValueError(
            f"auto_approve={stub.auto_approve!r} names none of the users {subs}; "
            "pass one of their subs, or None for a sign-in page"
        )
    bad_workspaces = [
        workspace
        for user in stub.users
        for workspace in user.workspaces
        if not WORKSPACE_ID.fullmatch(workspace)
    ]
    if bad_workspaces:
        raise ValueError(f"workspace ids must be 1 to 18 decimal digits, not {bad_workspaces}")
    if stub.issuer_path and not (stub.issuer_path.startswith("/") and "//" not in stub.issuer_path):
        raise ValueError("issuer_path must be empty or start with '/' (and may end with one)")
    if any(not path.startswith("/") or "{" in path for path in paths):
        raise ValueError("every path must start with '/' (and hold no '{')")
    if len(set(paths)) != len(paths):
        raise ValueError("every endpoint needs a path of its own")
    if stub.access_token_ttl < 1:
        raise ValueError("access_token_ttl must be at least one second")
    if stub.refresh_token_ttl is not None and stub.refresh_token_ttl < 1:
        raise ValueError("refresh_token_ttl must be None (never) or at least one second")
    if stub.device_interval < 0 or stub.device_code_ttl < 1:
        raise ValueError("device_interval must be at least 0, and device_code_ttl at least 1")


def _metadata_paths(stub: StubProvider) -> list[str]:
    """Where the metadata documents are served, once the settings that shape them are checked."""
    site = stub._site(Address("127.0.0.1", 0, "http://127.0.0.1", ""))
    if stub.oauth_metadata is None:
        if stub.oauth_metadata_only:
            raise ValueError("oauth_metadata_only needs an RFC 8414 document: set oauth_metadata")
        return [site.discovery_path]
    if stub.oauth_metadata not in OAUTH_METADATA_PLACES:
        raise ValueError(f"oauth_metadata must be None or one of {OAUTH_METADATA_PLACES}")
    movable = set(discovery_document(replace(site, oauth_metadata_only=()))) - {"issuer"}
    if not movable.issuperset(stub.oauth_metadata_only):
        raise ValueError(f"oauth_metadata_only names fields of {sorted(movable)} only")
    return [site.discovery_path, str(site.oauth_metadata_path)]


def _advertised(methods: Sequence[str] | None, clients: Sequence[StubClient]) -> tuple[str, ...]:
    """The client authentication methods discovery names: these, else those the clients use."""
    if methods is not None:
        return tuple(methods)
    return tuple(
        method
        for method in CLIENT_AUTH_METHODS
        if any(client.token_endpoint_auth_method == method for client in clients)
    )
