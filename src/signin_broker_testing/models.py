"""What a test configures the stub provider with, and what it reads back from it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

WORKSPACE_ID = re.compile(r"[0-9]{1,18}")  # decimal, so it fits a signed 64-bit integer
# How a registered client authenticates (RFC 7591 token_endpoint_auth_method).
CLIENT_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post", "private_key_jwt")


@dataclass(frozen=True, slots=True)
class StubUser:
    """A person who can sign in; empty claims are left out of tokens and userinfo.

    `workspaces` are the ids of the workspaces the user is a member of, so a sign-in may
    name one of them (a tenant is a user plus an optional workspace).
    """

    sub: str
    name: str = ""
    email: str = ""
    preferred_username: str = ""
    email_verified: bool = True
    workspaces: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StubClient:
    """A registered client: public by default (no secret: it proves itself with PKCE).

    Loopback redirect URIs (http://127.0.0.1/... and http://[::1]/...) match the same
    URI on any port, as RFC 8252 section 7.3 asks; other URIs must match exactly.
    A confidential client must authenticate with its `token_endpoint_auth_method`
    alone, at the token, revocation and device authorization endpoints: with its
    `client_secret`, or with a JWT signed by a key of its `jwks` (public keys, RFC 7517).
    With `dpop_bound_access_tokens` (RFC 9449 10.2; the stub must offer DPoP) every
    token request without a DPoP proof is refused, harsher than panva's oidc-provider
    refuses it: the code is spent, and so is a device code already approved (a pending
    one is left, as oidc-provider leaves it). `dpop_refusal` is the refusal's error:
    invalid_dpop_proof, which names DPoP (RFC 9449 5), or a plain invalid_grant, as
    oidc-provider words it (a client could then not tell it from a bad code).
    """

    client_id: str
    redirect_uris: Sequence[str]
    post_logout_redirect_uris: Sequence[str] = ()
    token_endpoint_auth_method: str = "none"  # noqa: S105 - one of CLIENT_AUTH_METHODS
    client_secret: str = field(default="", repr=False)
    jwks: Mapping[str, Any] | None = None
    dpop_bound_access_tokens: bool = False
    dpop_refusal: str = "invalid_dpop_proof"  # or "invalid_grant"

    def accepts_redirect_uri(self, uri: str) -> bool:
        """Whether `uri` is one of the registered redirect URIs."""
        return any(_same_uri(registered, uri) for registered in self.redirect_uris)

    def accepts_post_logout_redirect_uri(self, uri: str) -> bool:
        """Whether `uri` is one of the registered post-logout redirect URIs."""
        return any(_same_uri(registered, uri) for registered in self.post_logout_redirect_uris)


@dataclass(frozen=True, slots=True)
class StubPaths:
    """Where each endpoint is served, relative to the base URL (not the issuer)."""

    authorize: str = "/oauth/v2/authorize"
    token: str = "/oauth/v2/token"  # noqa: S105 - a path, not a password
    userinfo: str = "/oauth/v2/userinfo"
    jwks: str = "/.well-known/jwks.json"
    logout: str = "/logout"
    revocation: str = "/oauth/v2/revoke"
    admin_revoke: str = "/admin/revoke"
    device_authorization: str = "/oauth/v2/device_authorization"  # RFC 8628 section 3.1
    device_verification: str = "/device"  # the page where a user enters a device's code


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the stub received it, before it was handled.

    `params` merges the query and a form body; `headers` has lower-case names.
    """

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    at: float


DEFAULT_USER = StubUser(
    sub="1001", name="Alice Example", email="alice@example.com", preferred_username="alice"
)
DEFAULT_CLIENT = StubClient(
    client_id="signin-broker",
    redirect_uris=["http://127.0.0.1/auth/oauth2/id-provider/callback"],
    post_logout_redirect_uris=["http://127.0.0.1/"],
)


def _same_uri(registered: str, requested: str) -> bool:
    if registered == requested:
        return True
    loopback = _loopback_parts(registered)
    return loopback is not None and loopback == _loopback_parts(requested)


def _loopback_parts(uri: str) -> tuple[str, str, str, str] | None:
    """What must match in a loopback http URI (all but the port); None for other URIs."""
    try:
        parts = urlsplit(uri)
        port_is_valid = parts.port is None or parts.port > 0
    except ValueError:
        return None
    if not port_is_valid or parts.scheme != "http" or "@" in parts.netloc or not parts.hostname:
        return None
    try:
        is_loopback = ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return None  # a name such as localhost may resolve anywhere (RFC 8252 section 8.3)
    if not is_loopback:
        return None
    return (parts.hostname, parts.path, parts.query, parts.fragment)


def check_client(client: StubClient, *, dpop_offered: bool = True) -> None:
    """A client has what its authentication method needs, and nothing it does not use."""
    if client.dpop_bound_access_tokens and not dpop_offered:
        raise ValueError(f"{client.client_id}: dpop_bound_access_tokens needs dpop=True")
    method = client.token_endpoint_auth_method
    if method not in CLIENT_AUTH_METHODS:
        raise ValueError(
            f"{client.client_id}: token_endpoint_auth_method must be one of {CLIENT_AUTH_METHODS}"
        )
    if bool(client.client_secret) != method.startswith("client_secret_"):
        raise ValueError(f"{client.client_id}: a client_secret goes with client_secret_* only")
    if (client.jwks is not None) != (method == "private_key_jwt"):
        raise ValueError(f"{client.client_id}: jwks go with private_key_jwt only")
