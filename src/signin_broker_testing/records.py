"""What the stub keeps of each grant, as authlib reads it: codes, device codes, tokens."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin
from authlib.oauth2.rfc8628 import DeviceCredentialMixin
from authlib.oidc.core import AuthorizationCodeMixin

DeviceState = Literal["pending", "approved", "denied", "redeemed"]
# The answer to one poll: "approved" hands the tokens out, the rest are refusals.
DevicePoll = Literal["pending", "slow_down", "approved", "denied", "expired", "redeemed"]


@dataclass(slots=True)
class AuthorizationCode(AuthorizationCodeMixin):  # type: ignore[misc]
    """A code and everything it is bound to: client, redirect URI, PKCE, nonce, user.

    It also keeps the workspace the sign-in named, if any, for every token issued from it.
    """

    code: str
    client_id: str
    redirect_uri: str
    scope: str
    sub: str
    code_challenge: str
    code_challenge_method: str
    nonce: str | None
    auth_time: int
    expires_at: float
    workspace_id: str | None = None
    dpop_jkt: str | None = None  # RFC 9449 10: only a proof by this key redeems it
    acr: str | None = None  # how the person authenticated, echoed in the ID token

    def get_redirect_uri(self) -> str:
        """The redirect URI the code was delivered to; the token request must repeat it."""
        return self.redirect_uri

    def get_scope(self) -> str:
        """The scope granted at the authorization endpoint."""
        return self.scope

    def get_nonce(self) -> str | None:
        """The nonce of the authorization request, echoed in the ID token."""
        return self.nonce

    def get_auth_time(self) -> int:
        """When the user approved, echoed in the ID token."""
        return self.auth_time

    def get_acr(self) -> str | None:
        """The authentication context class of the sign-in, echoed in the ID token."""
        return self.acr


@dataclass(slots=True)
class DeviceAuthorization(DeviceCredentialMixin):  # type: ignore[misc]
    """A device code, the user code shown with it, and what became of it (RFC 8628).

    It keeps the workspace the request named, if any, as a code does. `interval` grows by
    SLOW_DOWN_SECONDS with each slow_down; `polls` are the monotonic times of the token
    requests for it, and `too_fast` counts those sooner than the interval then in force.
    """

    device_code: str
    user_code: str  # as shown: XXXX-XXXX
    client_id: str
    scope: str
    expires_at: float  # epoch seconds
    interval: int  # seconds
    workspace_id: str | None = None
    state: DeviceState = "pending"
    sub: str = ""  # who approved it, once someone has
    approved_at: int = 0  # when, in epoch seconds: the ID token's auth_time
    slow_down_next: bool = False
    polls: list[float] = field(default_factory=list)
    too_fast: int = 0

    def get_client_id(self) -> str:
        """The client the device code was issued to."""
        return self.client_id

    def get_scope(self) -> str:
        """The scope asked for, which the tokens get."""
        return self.scope

    def get_user_code(self) -> str:
        """The code the user enters on the verification page."""
        return self.user_code

    def is_expired(self) -> bool:
        """Whether the device code has outlived its expires_in."""
        return time.time() >= self.expires_at


@dataclass(slots=True)
class IssuedToken(TokenMixin):  # type: ignore[misc]
    """An access token and the refresh token issued with it; both opaque and stored.

    The access token may carry less scope than the refresh token (a narrowed refresh),
    so each has its own; authlib sees this record as the access token.
    """

    access_token: str
    refresh_token: str  # "" when none was issued
    client_id: str
    sub: str
    scope: str  # the access token's
    refresh_scope: str  # the whole grant's, which every rotated refresh token keeps
    expires_at: float
    audience: str | None = None  # the RFC 8707 resource the access token is for
    refresh_expires_at: float | None = None  # None: the refresh token never expires
    workspace_id: str | None = None  # the sign-in's workspace, kept through every rotation
    jkt: str | None = None  # the DPoP key both tokens are bound to (RFC 9449); None: Bearer
    acr: str | None = None  # how the person authenticated at the sign-in, kept likewise
    access_revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client: ClientMixin) -> bool:
        """Whether the token was issued to `client`."""
        return bool(client.get_client_id() == self.client_id)

    def get_scope(self) -> str:
        """The granted scope."""
        return self.scope

    def is_expired(self) -> bool:
        """Whether the access token has outlived its expires_in."""
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        """Whether the access token was revoked."""
        return self.access_revoked

    def refresh_is_usable(self) -> bool:
        """Whether the refresh token is neither revoked nor expired."""
        expired = self.refresh_expires_at is not None and time.time() >= self.refresh_expires_at
        return not (self.refresh_revoked or expired)
