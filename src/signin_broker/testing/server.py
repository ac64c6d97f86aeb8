"""The authlib authorization server behind the stub provider, and its glue to Starlette.

It serves the code flow with PKCE, the device flow (RFC 8628), ID tokens, refresh
rotation (optionally narrowing the scope, RFC 6749 section 6, or naming a resource,
RFC 8707), revocation and sign-out. A sign-in may name a workspace of the user's
(`workspace_id`), which its tokens keep.
authlib has no Starlette integration, so this module is one: the web app reads each
request body first (authlib is synchronous), wraps it in an HttpExchange, and calls the
typed methods at the end of StubAuthorizationServer.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from authlib.common.urls import add_params_to_uri
from authlib.consts import default_json_headers
from authlib.oauth2.rfc6749 import (
    AccessDeniedError,
    AuthorizationServer,
    ClientMixin,
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    JsonPayload,
    JsonRequest,
    MissingAuthorizationError,
    OAuth2Error,
    OAuth2Payload,
    OAuth2Request,
    ResourceProtector,
    TokenMixin,
    UnsupportedTokenTypeError,
    grants,
    list_to_scope,
    scope_to_list,
)
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator, InvalidTokenError
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE,
    AuthorizationPendingError,
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    ExpiredTokenError,
    SlowDownError,
)
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from authlib.oidc.rpinitiated import EndSessionEndpoint
from joserfc.jwk import KeySet, RSAKey
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

from .models import CLIENT_AUTH_METHODS, WORKSPACE_ID, StubClient, StubUser
from .store import (
    AUTHORIZATION_CODE_SECONDS,
    AuthorizationCode,
    DeviceAuthorization,
    DevicePoll,
    IssuedToken,
    StubStore,
)

OFFLINE_ACCESS = "offline_access"
SUPPORTED_SCOPES = ["openid", "profile", "email", OFFLINE_ACCESS]
GRANT_TYPES = ["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE]
SIGNING_ALGORITHM = "RS256"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
OPAQUE_TOKEN_BYTES = 32
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# Every client may try each method; authlib then accepts only the one it registered.
ACCEPTED_AUTH_METHODS = list(CLIENT_AUTH_METHODS)
# The algorithms authlib verifies a client assertion with by default (joserfc's recommended).
ASSERTION_ALGORITHMS = ["RS256", "ES256"]
MAX_ASSERTION_SECONDS = 300  # a client assertion is for one request; a long-lived one is refused
ASSERTION_LEEWAY_SECONDS = 60
# RFC 3986 section 4.3: a scheme, then no fragment (RFC 8707 section 2 forbids one).
ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s#]+")

Grant = Any  # an authlib grant object; authlib has no type information
# How the token endpoint refuses a device code poll (RFC 8628 section 3.5).
POLL_REFUSALS: dict[DevicePoll, type[OAuth2Error]] = {
    "pending": AuthorizationPendingError,
    "slow_down": SlowDownError,
    "denied": AccessDeniedError,
    "expired": ExpiredTokenError,
    "redeemed": InvalidGrantError,  # a device code is redeemed once
}


def parse_form(headers: Headers, body: bytes) -> list[tuple[str, str]]:
    """The fields of a form body; nothing for any other content type."""
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != FORM_CONTENT_TYPE:
        return []
    return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)


def user_claims(user: StubUser, scope: str, workspace_id: str | None = None) -> dict[str, Any]:
    """The claims of `user` that `scope` grants, always with sub; empty ones left out.

    A sign-in into a workspace adds its id whatever the scope: it names the tenant.
    """
    claims = UserInfo(
        name=user.name,
        preferred_username=user.preferred_username,
        email=user.email,
        email_verified=user.email_verified if user.email else "",
    ).filter(scope)
    tenant = {} if workspace_id is None else {"workspace_id": workspace_id}
    return {
        "sub": user.sub,
        **{name: value for name, value in claims.items() if value != ""},
        **tenant,
    }


@dataclass(frozen=True, slots=True)
class HttpExchange:
    """A request whose body has been read, so authlib's synchronous code can use it."""

    method: str
    url: str  # built from the stub's own base URL, never from the Host header
    headers: Headers
    query: list[tuple[str, str]]
    body: bytes

    @property
    def form(self) -> list[tuple[str, str]]:
        """The fields of a form body."""
        return parse_form(self.headers, self.body)

    @property
    def parameters(self) -> list[tuple[str, str]]:
        """The OAuth parameters: a POST carries them in its form, anything else in its query."""
        return self.form if self.method == "POST" else self.query


@dataclass(frozen=True, slots=True)
class DeviceSettings:
    """How device codes are issued; the numbers are read at each issue."""

    verification_uri: str
    interval: Callable[[], int]  # seconds
    lifetime: Callable[[], int]  # seconds


class InvalidRedirectUriError(OAuth2Error):  # type: ignore[misc]
    """The redirect URI is not registered: the error goes to the browser, never to the URI."""

    error = "invalid_redirect_uri"
    description = "The redirect_uri is not registered for this client."


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707: the requested resource is not one the stub can issue a token for."""

    error = "invalid_target"


class _Parameters(OAuth2Payload):  # type: ignore[misc]
    """Request parameters, keeping repeats so authlib can refuse them."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._first: dict[str, str] = {}
        self._all: defaultdict[str, list[str]] = defaultdict(list)
        for name, value in pairs:
            self._first.setdefault(name, value)
            self._all[name].append(value)

    @property
    def data(self) -> dict[str, str]:
        return self._first

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._all


class _Request(OAuth2Request):  # type: ignore[misc]
    """authlib's request, made from an exchange whose body is already read."""

    def __init__(self, exchange: HttpExchange) -> None:
        super().__init__(exchange.method, exchange.url, headers=exchange.headers)
        self.payload = _Parameters(exchange.parameters)
        self.resource: str | None = None  # RFC 8707, once a refresh grant has checked it
        self.workspace_id: str | None = None  # once an authorization request has checked it
        self._exchange = exchange

    @property
    def args(self) -> dict[str, str]:
        return dict(self._exchange.query)

    @property
    def form(self) -> dict[str, str]:
        return dict(self._exchange.form)


class _JsonBody(JsonPayload):  # type: ignore[misc]
    """A JSON body, for authlib's endpoints that take one (none is registered today)."""

    def __init__(self, body: bytes) -> None:
        self._data = json.loads(body) if body else {}

    @property
    def data(self) -> Any:
        return self._data


class _Client(ClientMixin):  # type: ignore[misc]
    """authlib's view of a StubClient: public, code flow only, registered URIs only."""

    def __init__(self, registration: StubClient) -> None:
        self.registration = registration
        self.client_id = registration.client_id

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None  # OpenID Connect makes redirect_uri a required parameter

    def get_allowed_scope(self, scope: str | None) -> str:
        requested = scope_to_list(scope) or ["openid"]
        return str(list_to_scope([name for name in requested if name in SUPPORTED_SCOPES]))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return self.registration.accepts_redirect_uri(redirect_uri)

    def check_client_secret(self, client_secret: str) -> bool:
        secret = self.registration.client_secret
        return bool(secret) and hmac.compare_digest(client_secret.encode(), secret.encode())

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.registration.token_endpoint_auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in GRANT_TYPES


class _CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    """The code flow for public clients; codes are single-use and bound to their request."""

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    @staticmethod
    def validate_authorization_redirect_uri(request: _Request, client: _Client) -> str:
        """Refuse a missing or unregistered redirect URI without redirecting to it."""
        redirect_uri = request.payload.redirect_uri
        if not redirect_uri:
            raise InvalidRequestError("Missing 'redirect_uri' in request.")
        if not client.check_redirect_uri(redirect_uri):
            raise InvalidRedirectUriError()
        return str(redirect_uri)

    def validate_authorization_request(self) -> str:
        """Check the request as authlib does, then its workspace_id, if any."""
        redirect_uri = str(super().validate_authorization_request())
        try:
            self.request.workspace_id = _requested_workspace(self.request.payload)
        except OAuth2Error as error:
            error.redirect_uri = redirect_uri  # the client is known, so it hears of it
            raise
        return redirect_uri

    def create_authorization_response(
        self, redirect_uri: str, grant_user: StubUser | None
    ) -> tuple[int, str, list[tuple[str, str]]]:
        """Issue a code, unless the user is not a member of the requested workspace."""
        workspace_id = self.request.workspace_id
        if (
            grant_user is not None
            and workspace_id is not None
            and workspace_id not in grant_user.workspaces
        ):
            raise AccessDeniedError(
                f"The user is not a member of workspace {workspace_id}.",
                redirect_uri=redirect_uri,
            )
        response: tuple[int, str, list[tuple[str, str]]] = super().create_authorization_response(
            redirect_uri, grant_user
        )
        return response

    def save_authorization_code(self, code: str, request: _Request) -> None:
        parameters = request.payload.data
        now = time.time()
        scope = request.scope
        prompts = parameters.get("prompt", "").split()
        if self.server.offline_access_needs_consent and "consent" not in prompts:
            scope = list_to_scope([s for s in scope_to_list(scope) if s != OFFLINE_ACCESS])
        self.server.store.save_code(
            AuthorizationCode(
                code=code,
                client_id=request.client.get_client_id(),
                redirect_uri=request.payload.redirect_uri,
                scope=scope,
                sub=request.user.sub,
                code_challenge=parameters["code_challenge"],
                code_challenge_method=parameters["code_challenge_method"],
                nonce=parameters.get("nonce"),
                auth_time=int(now),
                expires_at=now + AUTHORIZATION_CODE_SECONDS,
                workspace_id=request.workspace_id,
            )
        )

    def generate_token(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """A refresh token only with offline_access, if the server insists on that."""
        scope = self.request.authorization_code.get_scope()
        if self.server.offline_access_needs_consent and OFFLINE_ACCESS not in scope.split():
            kwargs["include_refresh_token"] = False
        token: dict[str, Any] = super().generate_token(*args, **kwargs)
        return token

    def save_token(self, token: dict[str, Any]) -> None:
        """Keep the new pair, in the code's workspace."""
        code: AuthorizationCode = self.request.authorization_code
        self.server.save_token(token, self.request, workspace_id=code.workspace_id)

    def query_authorization_code(self, code: str, client: _Client) -> AuthorizationCode | None:
        store: StubStore = self.server.store
        return store.redeem_code(code, client.get_client_id())

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        """Nothing left to do: redeeming the code already used it up."""

    def authenticate_user(self, authorization_code: AuthorizationCode) -> StubUser | None:
        store: StubStore = self.server.store
        return store.users.get(authorization_code.sub)


@dataclass(frozen=True, slots=True)
class _RefreshCredential(TokenMixin):  # type: ignore[misc]
    """authlib's view of a refresh token: its scope is the whole grant's.

    authlib checks a requested `scope` against get_scope() and issues get_scope() when
    none is requested; the record's own scope is its access token's, maybe narrowed.
    """

    record: IssuedToken

    def check_client(self, client: ClientMixin) -> bool:
        return self.record.check_client(client)

    def get_scope(self) -> str:
        return self.record.refresh_scope


class _RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    """Refresh with rotation: a new refresh token each time, the old one ends.

    A `scope` narrows only the new access token: the new refresh token keeps the old
    one's scope (RFC 6749 section 6), which authlib alone would narrow too.
    """

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: each refresh token works once

    def validate_token_request(self) -> None:
        """Check client, token and scope as authlib does, then the RFC 8707 resource."""
        super().validate_token_request()
        self.request.resource = _requested_resource(self.request.payload)

    def authenticate_refresh_token(self, refresh_token: str) -> _RefreshCredential | None:
        store: StubStore = self.server.store
        token = store.by_refresh_token(refresh_token)
        if token is not None and not token.refresh_is_usable():
            store.refresh_reused(token)
        return _RefreshCredential(token) if token and token.refresh_is_usable() else None

    def authenticate_user(self, refresh_token: _RefreshCredential) -> StubUser | None:
        store: StubStore = self.server.store
        return store.users.get(refresh_token.record.sub)

    def save_token(self, token: dict[str, Any]) -> None:
        """Keep the new pair: its refresh token has the old one's scope, whatever was asked.

        It stays in the old one's workspace: a refresh cannot change the tenant.
        """
        credential: _RefreshCredential = self.request.refresh_token
        self.server.save_token(
            token,
            self.request,
            refresh_scope=credential.record.refresh_scope,
            audience=self.request.resource,
            workspace_id=credential.record.workspace_id,
        )

    def revoke_old_credential(self, refresh_token: _RefreshCredential) -> None:
        store: StubStore = self.server.store
        store.revoke_refresh_token(refresh_token.record)


class _DeviceAuthorizationEndpoint(DeviceAuthorizationEndpoint):  # type: ignore[misc]
    """RFC 8628 device authorization for public clients, which may name a workspace_id.

    authlib's response, but with the stub's current lifetime and interval, the scope as
    the client may have it, and the request's workspace kept for the sign-in.
    """

    CLIENT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def create_endpoint_response(
        self, request: _Request
    ) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        client = self.authenticate_client(request)
        self.server.validate_requested_scope(request.payload.scope)
        workspace_id = _requested_workspace(request.payload)
        settings: DeviceSettings = self.server.device
        lifetime, interval = settings.lifetime(), settings.interval()
        device = DeviceAuthorization(
            device_code=self.generate_device_code(),
            user_code=self.generate_user_code(),
            client_id=client.get_client_id(),
            scope=client.get_allowed_scope(request.payload.scope),
            expires_at=time.time() + lifetime,
            interval=interval,
            workspace_id=workspace_id,
        )
        self.server.store.save_device(device)
        body = {
            "device_code": device.device_code,
            "user_code": device.user_code,
            "verification_uri": settings.verification_uri,
            "verification_uri_complete": add_params_to_uri(
                settings.verification_uri, [("user_code", device.user_code)]
            ),
            "expires_in": lifetime,
            "interval": interval,
        }
        return 200, body, default_json_headers


class _DeviceCodeGrant(DeviceCodeGrant):  # type: ignore[misc]
    """RFC 8628 polling for public clients: each poll is noted, and an approval redeemed once."""

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def query_device_credential(self, device_code: str) -> DeviceAuthorization:
        """The device code's record; invalid_grant for an unknown one or another client's."""
        store: StubStore = self.server.store
        device = store.device_by_code(device_code)
        if device is None or device.client_id != self.request.client.get_client_id():
            raise InvalidGrantError("The device_code is unknown, or was issued to another client.")
        return device

    def validate_device_credential(self, credential: DeviceAuthorization) -> StubUser:
        """Note the poll and return who approved, or refuse it per RFC 8628 section 3.5.

        One store call instead of authlib's several checks, so that two racing polls
        cannot both redeem an approval.
        """
        store: StubStore = self.server.store
        outcome = store.poll_device(credential, time.monotonic())
        if outcome == "approved":
            return store.users[credential.sub]
        raise POLL_REFUSALS[outcome]()

    def save_token(self, token: dict[str, Any]) -> None:
        """Keep the new pair, in the workspace the device asked for."""
        device: DeviceAuthorization = self.request.credential
        self.server.save_token(token, self.request, workspace_id=device.workspace_id)


def _requested_workspace(payload: _Parameters) -> str | None:
    """The authorization request's workspace_id: at most one, of 1-18 decimal digits."""
    workspaces = payload.datalist.get("workspace_id", [])
    if not workspaces:
        return None
    if len(workspaces) > 1:
        raise InvalidRequestError("Multiple 'workspace_id' in request.")
    if not WORKSPACE_ID.fullmatch(workspaces[0]):
        raise InvalidRequestError("'workspace_id' must be 1 to 18 decimal digits.")
    return workspaces[0]


def _requested_resource(payload: _Parameters) -> str | None:
    """The token request's RFC 8707 resource: at most one absolute URI."""
    resources = payload.datalist.get("resource", [])
    if not resources:
        return None
    if len(resources) > 1:
        raise InvalidTargetError("The stub binds an access token to one 'resource' at most.")
    if not ABSOLUTE_URI.fullmatch(resources[0]):
        raise InvalidTargetError("'resource' must be an absolute URI without a fragment.")
    return resources[0]


class _PrivateKeyJwt(JWTBearerClientAssertion):  # type: ignore[misc]
    """private_key_jwt (OpenID Connect Core 9, RFC 7523): a JWT signed by a registered key.

    authlib checks the signature, that iss and sub are the client, aud, exp and the jti
    (here: never seen before); the stub also refuses an assertion that lives long.
    """

    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, store: StubStore, audiences: Sequence[str]) -> None:
        super().__init__(validate_jti=True, leeway=ASSERTION_LEEWAY_SECONDS)
        self._store = store
        self._audiences = list(audiences)  # the token endpoint URL and the issuer

    def get_audiences(self) -> list[str]:
        return self._audiences

    def resolve_client_public_key(self, client: _Client) -> KeySet:
        return KeySet.import_key_set(
            {"keys": list((client.registration.jwks or {}).get("keys", []))}
        )

    def validate_jti(self, claims: dict[str, Any], jti: object) -> bool:
        return self._store.first_use_of_assertion(str(claims["sub"]), str(jti), claims["exp"])

    def verify_claims(self, claims: dict[str, Any]) -> None:
        super().verify_claims(claims)
        if float(claims["exp"]) - time.time() > MAX_ASSERTION_SECONDS:
            raise InvalidClientError(
                description=f"A client assertion may live {MAX_ASSERTION_SECONDS} s at most."
            )


class _S256Only(CodeChallenge):  # type: ignore[misc]
    """PKCE is mandatory, and only with S256 (a plain challenge protects nothing)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]  # noqa: RUF012 - authlib's class setting

    def validate_code_challenge(self, grant: Grant, redirect_uri: str | None) -> None:
        parameters = grant.request.payload.data
        if not parameters.get("code_challenge"):
            raise InvalidRequestError(
                "PKCE is required: send 'code_challenge' with 'code_challenge_method=S256'."
            )
        if parameters.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Only the S256 'code_challenge_method' is supported.")
        super().validate_code_challenge(grant, redirect_uri)


class _IdTokens(OpenIDCode):  # type: ignore[misc]
    """Signs ID tokens with the current key and this stub's issuer."""

    def __init__(self, store: StubStore, issuer: str) -> None:
        super().__init__(require_nonce=False)
        self._store = store
        self._issuer = issuer

    def resolve_client_private_key(self, client: _Client) -> RSAKey:
        return self._store.keys.current

    def get_client_claims(self, client: _Client) -> dict[str, str]:
        return {"iss": self._issuer, "aud": client.get_client_id()}

    def get_encode_header(self, client: _Client) -> dict[str, str]:
        return {"alg": SIGNING_ALGORITHM, "kid": str(self._store.keys.current.kid)}

    def get_authorization_code_claims(
        self, authorization_code: AuthorizationCode
    ) -> dict[str, Any]:
        """The claims the code carries (nonce, auth_time), plus its workspace_id."""
        claims: dict[str, Any] = super().get_authorization_code_claims(authorization_code)
        if authorization_code.workspace_id is not None:
            claims["workspace_id"] = authorization_code.workspace_id
        return claims

    def generate_user_info(self, user: StubUser, scope: str) -> dict[str, Any]:
        return user_claims(user, scope)

    def exists_nonce(self, nonce: str, request: _Request) -> bool:
        """Never: like common providers, the stub leaves nonce replay checks to the client.

        Refusing a nonce that a pending code carries would fail a client that is restarted
        with the same seeded secrets, which real providers do not do.
        """
        return False


class _DeviceIdTokens(_IdTokens):
    """ID tokens for the device flow: no nonce, and auth_time and workspace_id from the approval."""

    def get_compatible_claims(self, request: _Request) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_compatible_claims(request)
        device: DeviceAuthorization = request.credential
        claims["auth_time"] = device.approved_at
        if device.workspace_id is not None:
            claims["workspace_id"] = device.workspace_id
        return claims


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    """RFC 7009 revocation for public clients."""

    CLIENT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        store: StubStore = self.server.store
        return store.by_access_token(token_string) or store.by_refresh_token(token_string)

    def revoke_token(self, token: IssuedToken, request: _Request) -> None:
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
        self, request: _Request, post_logout_redirect_uri: str, client: _Client, hint: str | None
    ) -> bool:
        return True  # being registered is proof enough for a test provider

    def _is_valid_post_logout_redirect_uri(self, client: _Client, uri: str) -> bool:
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
        offline_access_needs_consent: bool = False,
        client_assertion_audiences: Sequence[str] = (),
    ) -> None:
        super().__init__(scopes_supported=SUPPORTED_SCOPES)
        self.store = store
        self.device = device
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
        self.register_grant(_CodeGrant, [_S256Only(required=True), _IdTokens(store, issuer)])
        self.register_grant(_RefreshGrant)
        self.register_grant(_DeviceCodeGrant, [_DeviceIdTokens(store, issuer)])
        self.register_endpoint(_DeviceAuthorizationEndpoint)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_EndSession)
        self.register_client_auth_method(
            "private_key_jwt", _PrivateKeyJwt(store, client_assertion_audiences)
        )
        self._access_tokens = ResourceProtector()
        self._access_tokens.register_token_validator(_AccessTokens(store))

    # What authlib asks of a framework integration.

    def query_client(self, client_id: str) -> _Client | None:
        registration = self.store.clients.get(client_id)
        return None if registration is None else _Client(registration)

    def authenticate_client(
        self, request: _Request, methods: list[str], endpoint: str = "token"
    ) -> _Client:
        """The client as authlib checks it, kept on the request for the grant.

        A refusal is 401 only for a client that tried HTTP authentication (RFC 6749 5.2).
        """
        try:
            client: _Client = super().authenticate_client(request, methods, endpoint)
        except InvalidClientError as error:
            if "authorization" not in request.headers:
                error.status_code = 400
            raise
        request.client = client
        return client

    def save_token(
        self,
        token: dict[str, Any],
        request: _Request,
        *,
        refresh_scope: str | None = None,
        audience: str | None = None,
        workspace_id: str | None = None,
    ) -> None:
        """Keep a new token (pair); the refresh token's scope is the access token's unless given."""
        now = time.time()
        scope = token.get("scope", "")
        refresh_seconds = self._refresh_token_seconds()
        self.store.save_token(
            IssuedToken(
                access_token=token["access_token"],
                refresh_token=token.get("refresh_token", ""),
                client_id=request.client.get_client_id(),
                sub=request.user.sub,
                scope=scope,
                refresh_scope=scope if refresh_scope is None else refresh_scope,
                expires_at=now + token.get("expires_in", 0),
                audience=audience,
                refresh_expires_at=None if refresh_seconds is None else now + refresh_seconds,
                workspace_id=workspace_id,
            )
        )

    def create_oauth2_request(self, request: HttpExchange) -> _Request:
        return _Request(request)

    def create_json_request(self, request: HttpExchange) -> JsonRequest:
        json_request = JsonRequest(request.method, request.url, request.headers)
        json_request.payload = _JsonBody(request.body)
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
        """Answer a token request (authorization_code, refresh_token or device_code)."""
        response: Response = self.create_token_response(exchange)
        return response

    def device_authorization_response(self, exchange: HttpExchange) -> Response:
        """Answer an RFC 8628 device authorization request."""
        response: Response = self.create_endpoint_response("device_authorization", exchange)
        return response

    def revocation_response(self, exchange: HttpExchange) -> Response:
        """Answer an RFC 7009 revocation request."""
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
        """The claims the access token's scope grants, or 401 invalid_token."""
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
