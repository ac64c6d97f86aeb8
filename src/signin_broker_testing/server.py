"""The authlib authorization server behind the stub provider, and its glue to Starlette.

It serves the code flow with PKCE, the device flow (RFC 8628), ID tokens, refresh
rotation (optionally narrowing the scope, RFC 6749 section 6, or naming a resource,
RFC 8707), revocation and sign-out. A sign-in may name a workspace of the user's
(`workspace_id`), which its tokens keep.
authlib has no Starlette integration, so this module is one: the web app reads each
request body first (authlib is synchronous), wraps it in an HttpExchange
(exchanges.py), and calls the typed methods at the end of StubAuthorizationServer.
Its grants are grants.py, its ID tokens and claims claims.py, its limits rules.py.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    InvalidClientError,
    JsonRequest,
    MissingAuthorizationError,
    OAuth2Error,
    ResourceProtector,
    UnsupportedTokenTypeError,
)
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator, InvalidTokenError
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oidc.rpinitiated import EndSessionEndpoint
from joserfc.jwk import KeySet
from starlette.responses import JSONResponse, Response

from .claims import DeviceIdTokens, IdTokens, user_claims
from .dpop import INVALID_PROOF, TOKEN_TYPE, DpopRefusal, StubDpop
from .exchanges import AuthlibRequest, HttpExchange, JsonBody
from .grants import (
    Client,
    CodeGrant,
    PrivateKeyJwt,
    RefreshGrant,
    S256Only,
    StubClientCredentialsGrant,
    StubDeviceAuthorizationEndpoint,
    StubDeviceCodeGrant,
)
from .models import StubUser
from .records import IssuedToken
from .rules import (
    ACCEPTED_AUTH_METHODS,
    NO_STORE,
    OPAQUE_TOKEN_BYTES,
    SIGNING_ALGORITHM,
    SUPPORTED_SCOPES,
    AuthenticationSettings,
    DeviceSettings,
    Grant,
)
from .store import StubStore


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    """RFC 7009 revocation for public clients."""

    CLIENT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        store: StubStore = self.server.store
        return store.by_access_token(token_string) or store.by_refresh_token(token_string)

    def revoke_token(self, token: IssuedToken, request: AuthlibRequest) -> None:
        """An access token ends alone; a refresh token ends with its access token (RFC 7009)."""
        store: StubStore = self.server.store
        if request.form["token"] == token.access_token:
            store.revoke_access_token(token)
        else:
            store.revoke_grant(token)


class _EndSession(EndSessionEndpoint):  # type: ignore[misc]
    """RP-initiated logout: checks id_token_hint against the JWKS, redirects if registered."""

    def get_server_jwks(self) -> KeySet:
        store: StubStore = self.server.store
        return store.keys.public_key_set()

    def get_algorithms(self) -> list[str]:
        return [SIGNING_ALGORITHM]

    def end_session(self, end_session_request: Any) -> None:
        """Nothing to end: the stub keeps no browser session (each sign-in starts afresh)."""

    def is_post_logout_redirect_uri_legitimate(
        self,
        request: AuthlibRequest,
        post_logout_redirect_uri: str,
        client: Client,
        hint: str | None,
    ) -> bool:
        return True  # being registered is proof enough for a test provider

    def _is_valid_post_logout_redirect_uri(self, client: Client, uri: str) -> bool:
        # authlib 1.9 matches exactly; loopback URIs must match on any port (RFC 8252)
        return client.registration.accepts_post_logout_redirect_uri(uri)


class _AccessTokens(BearerTokenValidator):  # type: ignore[misc]
    """Looks bearer tokens up in the store; authlib checks expiry and revocation."""

    def __init__(self, store: StubStore) -> None:
        super().__init__()
        self._store = store

    def authenticate_token(self, token_string: str) -> IssuedToken | None:
        return self._store.by_access_token(token_string)


def _opaque_token(**_: Any) -> str:
    return secrets.token_urlsafe(OPAQUE_TOKEN_BYTES)


class StubAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """authlib's AuthorizationServer wired to the stub's store and Starlette responses."""

    def __init__(
        self,
        store: StubStore,
        issuer: str,
        access_token_seconds: Callable[[], int],
        refresh_token_seconds: Callable[[], int | None],
        device: DeviceSettings,
        *,
        authentication: AuthenticationSettings,
        offline_access_needs_consent: bool = False,
        client_assertion_audiences: Sequence[str] = (),
        dpop: StubDpop | None = None,
    ) -> None:
        super().__init__(scopes_supported=SUPPORTED_SCOPES)
        self.store = store
        self.dpop = dpop  # None: DPoP not offered, a DPoP header ignored
        self.device = device
        self.authentication = authentication  # acr and auth_time of each sign-in
        # As a default panva oidc-provider: offline_access is dropped from a sign-in
        # without prompt=consent, and a refresh token is issued only with offline_access.
        self.offline_access_needs_consent = offline_access_needs_consent
        self._refresh_token_seconds = refresh_token_seconds  # read at each issue
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                _opaque_token,
                _opaque_token,
                lambda client, grant_type: access_token_seconds(),  # read at each issue
            ),
        )
        self.register_grant(CodeGrant, [S256Only(required=True), IdTokens(store, issuer)])
        self.register_grant(RefreshGrant)
        self.register_grant(StubDeviceCodeGrant, [DeviceIdTokens(store, issuer)])
        self.register_grant(StubClientCredentialsGrant)
        self.register_endpoint(StubDeviceAuthorizationEndpoint)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_EndSession)
        self.register_client_auth_method(
            "private_key_jwt", PrivateKeyJwt(store, client_assertion_audiences)
        )
        self._access_tokens = ResourceProtector()
        self._access_tokens.register_token_validator(_AccessTokens(store))

    # What authlib asks of a framework integration.

    def query_client(self, client_id: str) -> Client | None:
        registration = self.store.clients.get(client_id)
        return None if registration is None else Client(registration)

    def authenticate_client(
        self, request: AuthlibRequest, methods: list[str], endpoint: str = "token"
    ) -> Client:
        """The client as authlib checks it, kept on the request for the grant.

        A refusal is 401 only for a client that tried HTTP authentication (RFC 6749 5.2).
        """
        try:
            client: Client = super().authenticate_client(request, methods, endpoint)
        except InvalidClientError as error:
            if "authorization" not in request.headers:
                error.status_code = 400
            raise
        request.client = client
        return client

    def save_token(
        self,
        token: dict[str, Any],
        request: AuthlibRequest,
        *,
        refresh_scope: str | None = None,
        audience: str | None = None,
        workspace_id: str | None = None,
        acr: str | None = None,
        sub: str | None = None,
    ) -> None:
        """Keep a new token (pair); the refresh token's scope is the access token's unless given.

        `sub`: whose it is when no person signed in (a client's own token); else the user's.
        """
        now = time.time()
        scope = token.get("scope", "")
        refresh_seconds = self._refresh_token_seconds()
        if request.dpop_jkt is not None:
            token["token_type"] = TOKEN_TYPE  # the answer's, as the same dict
        self.store.save_token(
            IssuedToken(
                access_token=token["access_token"],
                refresh_token=token.get("refresh_token", ""),
                client_id=request.client.get_client_id(),
                sub=sub if sub is not None else request.user.sub,
                scope=scope,
                refresh_scope=scope if refresh_scope is None else refresh_scope,
                expires_at=now + token.get("expires_in", 0),
                audience=audience,
                refresh_expires_at=None if refresh_seconds is None else now + refresh_seconds,
                workspace_id=workspace_id,
                jkt=request.dpop_jkt,
                acr=acr,
            )
        )

    def create_oauth2_request(self, request: HttpExchange) -> AuthlibRequest:
        return AuthlibRequest(request)

    def create_json_request(self, request: HttpExchange) -> JsonRequest:
        json_request = JsonRequest(request.method, request.url, request.headers)
        json_request.payload = JsonBody(request.body)
        return json_request

    def handle_response(
        self, status: int, body: dict[str, Any] | str, headers: list[tuple[str, str]]
    ) -> Response:
        content = json.dumps(body) if isinstance(body, dict) else body
        return Response(content, status_code=status, headers=dict(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Nobody listens to authlib's signals here."""

    # What the web app asks of it.

    def check_authorization(self, exchange: HttpExchange, end_user: StubUser | None) -> Grant:
        """Validate an authorization request; raises OAuth2Error when it is refused."""
        return self.get_consent_grant(exchange, end_user)

    def authorization_response(self, grant: Grant, user: StubUser | None) -> Response:
        """Redirect back with a code for `user`, or with access_denied when None."""
        response: Response = self.create_authorization_response(
            grant.request, grant_user=user, grant=grant
        )
        return response

    def error_response(self, error: OAuth2Error) -> Response:
        """The standard response to an OAuth error: a redirect or a JSON body."""
        response: Response = self.handle_error_response(None, error)
        return response

    def token_response(self, exchange: HttpExchange) -> Response:
        """Answer a token request (authorization_code, refresh_token or device_code).

        With DPoP offered, a request with a proof gets tokens bound to its key.
        """
        try:
            exchange = self._with_dpop(exchange)
        except DpopRefusal as refusal:
            assert self.dpop is not None  # noqa: S101 - only it refuses
            return self.dpop.token_refusal(refusal)
        response: Response = self.create_token_response(exchange)
        return response

    def _with_dpop(self, exchange: HttpExchange) -> HttpExchange:
        """The exchange with the key of its DPoP proof, checked; as it was without one."""
        proof = exchange.headers.get("dpop")
        if self.dpop is None or proof is None:
            return exchange
        jkt = self.dpop.check(proof, exchange.method, exchange.url)
        return replace(exchange, dpop_jkt=jkt)

    def device_authorization_response(self, exchange: HttpExchange) -> Response:
        """Answer an RFC 8628 device authorization request."""
        response: Response = self.create_endpoint_response("device_authorization", exchange)
        return response

    def revocation_response(self, exchange: HttpExchange) -> Response:
        """Answer an RFC 7009 revocation request (a DPoP proof sent with it must be valid)."""
        try:
            exchange = self._with_dpop(exchange)
        except DpopRefusal as refusal:
            assert self.dpop is not None  # noqa: S101 - only it refuses
            return self.dpop.token_refusal(refusal)
        response: Response = self.create_endpoint_response("revocation", exchange)
        return response

    def end_session_response(self, exchange: HttpExchange) -> Response | None:
        """Redirect to a registered post-logout URI, or None to show a page.

        Raises OAuth2Error when the request is invalid (say, a forged id_token_hint).
        """
        validated = self.validate_endpoint_request("end_session", exchange)
        response: Response | None = self.create_endpoint_response("end_session", validated)
        return response

    def userinfo_response(self, exchange: HttpExchange) -> Response:
        """The claims the access token's scope grants, or 401 invalid_token.

        A DPoP-bound token is accepted only as DPoP, with a proof by its key (RFC 9449 7).
        """
        scheme, _, credential = exchange.headers.get("authorization", "").partition(" ")
        bound = self.store.by_access_token(credential.strip())
        if self.dpop is not None and (scheme.lower() == "dpop" or (bound and bound.jkt)):
            return self._dpop_userinfo(exchange, scheme, credential.strip(), bound)
        try:
            try:
                token: IssuedToken = self._access_tokens.validate_request(
                    ["openid"], self.create_oauth2_request(exchange)
                )
            except (MissingAuthorizationError, UnsupportedTokenTypeError) as missing:
                raise InvalidTokenError() from missing
        except OAuth2Error as error:
            return self.error_response(error)
        user = self.store.users[token.sub]
        return JSONResponse(user_claims(user, token.scope, token.workspace_id), headers=NO_STORE)

    def _dpop_userinfo(
        self, exchange: HttpExchange, scheme: str, credential: str, token: IssuedToken | None
    ) -> Response:
        """Userinfo for a token sent as DPoP, or for a bound one sent otherwise (refused)."""
        assert self.dpop is not None  # noqa: S101 - checked by the caller
        if token is None or token.is_expired() or token.is_revoked():
            return self.dpop.resource_refusal("invalid_token", "the access token is not valid")
        if scheme.lower() != "dpop" or token.jkt is None:
            return self.dpop.resource_refusal(
                "invalid_token", "a DPoP-bound token must be sent as DPoP, with a proof"
            )
        try:
            jkt = self.dpop.check(
                exchange.headers.get("dpop"), exchange.method, exchange.url, credential
            )
        except DpopRefusal as refusal:
            return self.dpop.resource_refusal(refusal.error, refusal.description)
        if jkt != token.jkt:
            return self.dpop.resource_refusal(INVALID_PROOF, "the proof's key is not the token's")
        user = self.store.users[token.sub]
        return JSONResponse(user_claims(user, token.scope, token.workspace_id), headers=NO_STORE)
