"""What the stub says about its users: the claims a scope grants, and the ID tokens it signs."""

from __future__ import annotations

from typing import Any

from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import RSAKey

from .exchanges import AuthlibRequest
from .grants import Client
from .models import StubUser
from .records import AuthorizationCode, DeviceAuthorization
from .rules import SIGNING_ALGORITHM
from .store import StubStore


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


class IdTokens(OpenIDCode):  # type: ignore[misc]
    """Signs ID tokens with the current key and this stub's issuer."""

    def __init__(self, store: StubStore, issuer: str) -> None:
        super().__init__(require_nonce=False)
        self._store = store
        self._issuer = issuer

    def resolve_client_private_key(self, client: Client) -> RSAKey:
        return self._store.keys.current

    def get_client_claims(self, client: Client) -> dict[str, str]:
        return {"iss": self._issuer, "aud": client.get_client_id()}

    def get_encode_header(self, client: Client) -> dict[str, str]:
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

    def exists_nonce(self, nonce: str, request: AuthlibRequest) -> bool:
        """Never: like common providers, the stub leaves nonce replay checks to the client.

        Refusing a nonce that a pending code carries would fail a client that is restarted
        with the same seeded secrets, which real providers do not do.
        """
        return False


class DeviceIdTokens(IdTokens):
    """ID tokens for the device flow: no nonce, and auth_time and workspace_id from the approval."""

    def get_compatible_claims(self, request: AuthlibRequest) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_compatible_claims(request)
        device: DeviceAuthorization = request.credential
        claims["auth_time"] = device.approved_at
        if device.workspace_id is not None:
            claims["workspace_id"] = device.workspace_id
        return claims
