"""The stub's grants on authlib: its clients, code flow, refresh, device and client credentials.

The code flow takes PKCE S256 only; refresh rotates, may narrow the scope or name an
RFC 8707 resource; clients may prove themselves with signed assertions. A confidential
client may have a token of its own (RFC 6749 4.4), whose sub is its client id.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from authlib.common.urls import add_params_to_uri
from authlib.consts import default_json_headers
from authlib.oauth2.rfc6749 import (
    AccessDeniedError,
    ClientMixin,
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    OAuth2Error,
    TokenMixin,
    grants,
    list_to_scope,
    scope_to_list,
)
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import (
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
)
from joserfc.jwk import KeySet

from .dpop import INVALID_PROOF
from .exchanges import AuthlibRequest, Parameters
from .models import WORKSPACE_ID, StubClient, StubUser
from .records import AuthorizationCode, DeviceAuthorization, IssuedToken
from .rules import (
    ABSOLUTE_URI,
    ACCEPTED_AUTH_METHODS,
    ASSERTION_LEEWAY_SECONDS,
    CLIENT_CREDENTIALS,
    GRANT_TYPES,
    MAX_ASSERTION_SECONDS,
    OFFLINE_ACCESS,
    POLL_REFUSALS,
    SUPPORTED_SCOPES,
    AuthenticationSettings,
    DeviceSettings,
    Grant,
    InvalidRedirectUriError,
    InvalidTargetError,
)
from .store import AUTHORIZATION_CODE_SECONDS, StubStore


class Client(ClientMixin):  # type: ignore[misc]
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
        if grant_type == CLIENT_CREDENTIALS:  # RFC 6749 4.4: confidential clients only
            return self.registration.token_endpoint_auth_method != "none"  # noqa: S105
        return grant_type in GRANT_TYPES


class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    """The code flow for public clients; codes are single-use and bound to their request."""

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    @staticmethod
    def validate_authorization_redirect_uri(request: AuthlibRequest, client: Client) -> str:
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
            self.request.workspace_id = requested_workspace(self.request.payload)
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

    def save_authorization_code(self, code: str, request: AuthlibRequest) -> None:
        parameters = request.payload.data
        now = time.time()
        scope = request.scope
        prompts = parameters.get("prompt", "").split()
        authentication: AuthenticationSettings = self.server.authentication
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
                auth_time=int(now) - authentication.auth_age(),
                expires_at=now + AUTHORIZATION_CODE_SECONDS,
                workspace_id=request.workspace_id,
                dpop_jkt=parameters.get("dpop_jkt") or None,
                acr=authentication.acr(parameters.get("acr_values", "")),
            )
        )

    def validate_token_request(self) -> None:
        """Check the request as authlib does; a code bound to a DPoP key needs its proof.

        A client that must use DPoP gets invalid_grant without one, its code spent.
        """
        super().validate_token_request()
        refuse_without_a_proof(self.request)
        bound = self.request.authorization_code.dpop_jkt
        if bound is not None and bound != self.request.dpop_jkt:
            raise InvalidGrantError("The code is bound to another DPoP key (dpop_jkt).")

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
        self.server.save_token(token, self.request, workspace_id=code.workspace_id, acr=code.acr)

    def query_authorization_code(self, code: str, client: Client) -> AuthorizationCode | None:
        store: StubStore = self.server.store
        return store.redeem_code(code, client.get_client_id())

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        """Nothing left to do: redeeming the code already used it up."""

    def authenticate_user(self, authorization_code: AuthorizationCode) -> StubUser | None:
        store: StubStore = self.server.store
        return store.users.get(authorization_code.sub)


@dataclass(frozen=True, slots=True)
class RefreshCredential(TokenMixin):  # type: ignore[misc]
    """authlib's view of a refresh token: its scope is the whole grant's.

    authlib checks a requested `scope` against get_scope() and issues get_scope() when
    none is requested; the record's own scope is its access token's, maybe narrowed.
    """

    record: IssuedToken

    def check_client(self, client: ClientMixin) -> bool:
        return self.record.check_client(client)

    def get_scope(self) -> str:
        return self.record.refresh_scope


class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    """Refresh with rotation: a new refresh token each time, the old one ends.

    A `scope` narrows only the new access token: the new refresh token keeps the old
    one's scope (RFC 6749 section 6), which authlib alone would narrow too.
    """

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: each refresh token works once

    def validate_token_request(self) -> None:
        """Check client, token and scope as authlib does, then the RFC 8707 resource."""
        super().validate_token_request()
        refuse_without_a_proof(self.request)
        self.request.resource = requested_resource(self.request.payload)

    def authenticate_refresh_token(self, refresh_token: str) -> RefreshCredential | None:
        store: StubStore = self.server.store
        token = store.by_refresh_token(refresh_token)
        if token is not None and token.jkt is not None and token.jkt != self.request.dpop_jkt:
            return None  # bound to a key (RFC 9449 5): worthless without its proof
        if token is not None and not token.refresh_is_usable():
            store.refresh_reused(token)
        return RefreshCredential(token) if token and token.refresh_is_usable() else None

    def authenticate_user(self, refresh_token: RefreshCredential) -> StubUser | None:
        store: StubStore = self.server.store
        return store.users.get(refresh_token.record.sub)

    def save_token(self, token: dict[str, Any]) -> None:
        """Keep the new pair: its refresh token has the old one's scope, whatever was asked.

        It stays in the old one's workspace: a refresh cannot change the tenant.
        """
        credential: RefreshCredential = self.request.refresh_token
        self.server.save_token(
            token,
            self.request,
            refresh_scope=credential.record.refresh_scope,
            audience=self.request.resource,
            workspace_id=credential.record.workspace_id,
            acr=credential.record.acr,
        )

    def revoke_old_credential(self, refresh_token: RefreshCredential) -> None:
        store: StubStore = self.server.store
        store.revoke_refresh_token(refresh_token.record)


class StubClientCredentialsGrant(grants.ClientCredentialsGrant):  # type: ignore[misc]
    """RFC 6749 4.4: a confidential client's own token, no refresh token; its sub is the client.

    It may name one RFC 8707 resource, as a refresh may.
    """

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def validate_token_request(self) -> None:
        """Check the client, its grant and scope as authlib does, then the resource."""
        super().validate_token_request()
        self.request.resource = requested_resource(self.request.payload)

    def save_token(self, token: dict[str, Any]) -> None:
        client_id = self.request.client.get_client_id()
        self.server.save_token(token, self.request, audience=self.request.resource, sub=client_id)


class StubDeviceAuthorizationEndpoint(DeviceAuthorizationEndpoint):  # type: ignore[misc]
    """RFC 8628 device authorization for public clients, which may name a workspace_id.

    authlib's response, but with the stub's current lifetime and interval, the scope as
    the client may have it, and the request's workspace kept for the sign-in.
    """

    CLIENT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def create_endpoint_response(
        self, request: AuthlibRequest
    ) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        client = self.authenticate_client(request)
        self.server.validate_requested_scope(request.payload.scope)
        workspace_id = requested_workspace(request.payload)
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
        self.server.store.devices.save(device)
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


class StubDeviceCodeGrant(DeviceCodeGrant):  # type: ignore[misc]
    """RFC 8628 polling for public clients: each poll is noted, and an approval redeemed once."""

    TOKEN_ENDPOINT_AUTH_METHODS = ACCEPTED_AUTH_METHODS

    def query_device_credential(self, device_code: str) -> DeviceAuthorization:
        """The device code's record; invalid_grant for an unknown one or another client's."""
        store: StubStore = self.server.store
        device = store.devices.by_code(device_code)
        if device is None or device.client_id != self.request.client.get_client_id():
            raise InvalidGrantError("The device_code is unknown, or was issued to another client.")
        return device

    def validate_device_credential(self, credential: DeviceAuthorization) -> StubUser:
        """Note the poll and return who approved, or refuse it per RFC 8628 section 3.5.

        One store call instead of authlib's several checks, so that two racing polls
        cannot both redeem an approval.
        """
        store: StubStore = self.server.store
        if self.request.client.registration.dpop_bound_access_tokens and not self.request.dpop_jkt:
            store.devices.spend_approved(credential)
            refuse_without_a_proof(self.request)
        outcome = store.devices.poll(credential, time.monotonic())
        if outcome == "approved":
            return store.users[credential.sub]
        raise POLL_REFUSALS[outcome]()

    def save_token(self, token: dict[str, Any]) -> None:
        """Keep the new pair, in the workspace the device asked for."""
        device: DeviceAuthorization = self.request.credential
        self.server.save_token(token, self.request, workspace_id=device.workspace_id)


class DpopProofMissing(OAuth2Error):  # type: ignore[misc]
    """RFC 9449's invalid_dpop_proof, for a request without a proof from a client that must."""

    error = INVALID_PROOF


def refuse_without_a_proof(request: AuthlibRequest) -> None:
    """The client's refusal (StubClient.dpop_refusal) when it must prove and did not."""
    registration = request.client.registration
    if registration.dpop_bound_access_tokens and request.dpop_jkt is None:
        if registration.dpop_refusal == INVALID_PROOF:
            raise DpopProofMissing("a DPoP proof is required of this client")
        raise InvalidGrantError("grant request is invalid")  # as oidc-provider words it


def requested_workspace(payload: Parameters) -> str | None:
    """The authorization request's workspace_id: at most one, of 1-18 decimal digits."""
    workspaces = payload.datalist.get("workspace_id", [])
    if not workspaces:
        return None
    if len(workspaces) > 1:
        raise InvalidRequestError("Multiple 'workspace_id' in request.")
    if not WORKSPACE_ID.fullmatch(workspaces[0]):
        raise InvalidRequestError("'workspace_id' must be 1 to 18 decimal digits.")
    return workspaces[0]


def requested_resource(payload: Parameters) -> str | None:
    """The token request's RFC 8707 resource: at most one absolute URI."""
    resources = payload.datalist.get("resource", [])
    if not resources:
        return None
    if len(resources) > 1:
        raise InvalidTargetError("The stub binds an access token to one 'resource' at most.")
    if not ABSOLUTE_URI.fullmatch(resources[0]):
        raise InvalidTargetError("'resource' must be an absolute URI without a fragment.")
    return resources[0]


class PrivateKeyJwt(JWTBearerClientAssertion):  # type: ignore[misc]
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

    def resolve_client_public_key(self, client: Client) -> KeySet:
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


class S256Only(CodeChallenge):  # type: ignore[misc]
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
