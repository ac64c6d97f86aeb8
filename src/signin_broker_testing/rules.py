"""What the stub provider offers and allows: scopes, grants, algorithms, bounds, settings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from authlib.oauth2.rfc6749 import (
    AccessDeniedError,
    InvalidGrantError,
    OAuth2Error,
)
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE,
    AuthorizationPendingError,
    ExpiredTokenError,
    SlowDownError,
)

from .models import CLIENT_AUTH_METHODS
from .records import DevicePoll

OFFLINE_ACCESS = "offline_access"
API_SCOPE = "read"  # an API's scope beside OpenID's, as real providers have (down-scoping)
SUPPORTED_SCOPES = ["openid", "profile", "email", OFFLINE_ACCESS, API_SCOPE]
CLIENT_CREDENTIALS = "client_credentials"  # RFC 6749 4.4: a confidential client's own token
GRANT_TYPES = ["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE, CLIENT_CREDENTIALS]
SIGNING_ALGORITHM = "RS256"
CLAIMS_SUPPORTED = [
    *("sub", "iss", "aud", "exp", "iat", "auth_time", "acr", "nonce", "at_hash", "name"),
    *("preferred_username", "email", "email_verified", "workspace_id"),
]
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


# The authentication context classes the stub offers by default (OpenID Connect acr).
DEFAULT_ACR_VALUES = ("urn:stub:acr:pwd", "urn:stub:acr:mfa")


@dataclass(frozen=True, slots=True)
class AuthenticationSettings:
    """How the stub says a person authenticated (the ID token's acr and auth_time).

    The callables are read at each sign-in, so a test can change them while it serves.
    """

    acr_values_supported: tuple[str, ...]
    acr_override: Callable[[], str | None]  # the acr of every sign-in, whatever was asked
    auth_age: Callable[[], int]  # seconds the authentication lies before the sign-in

    def acr(self, acr_values: str) -> str | None:
        """The acr of a sign-in that asked for `acr_values`: the first offered, else the default."""
        override = self.acr_override()
        if override is not None:
            return override or None
        offered = self.acr_values_supported
        asked = [value for value in acr_values.split() if value in offered]
        return asked[0] if asked else (offered[0] if offered else None)


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
