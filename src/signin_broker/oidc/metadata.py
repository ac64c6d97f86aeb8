"""What a provider says about itself: its discovery document, checked, and where to find it.

Endpoints come only from the issuer's discovery document (OpenID Connect Discovery
1.0), never from assumed paths, so any standards-following provider works from its
issuer URL alone; fields that document lacks come from its RFC 8414 metadata.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .errors import IdTokenInvalid, ProviderMisfit, ProviderUnavailable

DISCOVERY_PATH = "/.well-known/openid-configuration"  # OpenID Connect Discovery 4
OAUTH_METADATA_PATH = "/.well-known/oauth-authorization-server"  # RFC 8414 3
OAUTH_METADATA = "RFC 8414 metadata"  # what a metadata read is called in errors and logs
# Providers change endpoints and keys now and then: a long-running daemon reads the
# discovery document and the key set again daily, and soon after an endpoint answered
# 404 or a re-read failed (the last good one serves meanwhile).
METADATA_REFRESH_SECONDS = 24 * 3600.0
METADATA_RETRY_SECONDS = 60.0
# Entra ID's multi-tenant documents (.../common/v2.0) state the issuer as a template.
TENANT_PLACEHOLDER = "{tenantid}"
TENANT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")  # one path segment: a tenant's GUID or name
# Asymmetric algorithms only: "none" and shared-secret HS* can never sign an id_token here.
SIGNING_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "EdDSA",
    "Ed25519",  # RFC 9864's name for EdDSA with Ed25519
)


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """The parts of the discovery document the daemon uses."""

    issuer: str  # exactly as the provider states it; Entra ID's may hold {tenantid}
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str = ""
    end_session_endpoint: str = ""
    revocation_endpoint: str = ""
    device_authorization_endpoint: str = ""  # RFC 8628; "" when the provider has none
    signing_algorithms: tuple[str, ...] = ("RS256",)
    iss_parameter_supported: bool = False  # RFC 9207: every authorization response has `iss`
    # How clients may authenticate (client_auth.py); Discovery 3's default when unstated.
    token_endpoint_auth_methods: tuple[str, ...] = ("client_secret_basic",)
    token_endpoint_auth_signing_algorithms: tuple[str, ...] = ()  # () when unstated
    dpop_signing_algorithms: tuple[str, ...] = ()  # RFC 9449 5.1; () when it offers no DPoP
    # The acr values it supports (Discovery 3); None when its document lists none.
    acr_values_supported: tuple[str, ...] | None = None

    @classmethod
    def from_document(cls, document: object, configured_issuer: str) -> ProviderMetadata:
        """Check a discovery document (OpenID Connect Discovery 1.0, section 4.3).

        Its issuer must be the configured one exactly, a trailing slash included, or
        Entra ID's multi-tenant template that the configured issuer fills
        (https://login.microsoftonline.com/{tenantid}/v2.0 for .../organizations/v2.0).
        """
        if not isinstance(document, dict):
            raise ProviderUnavailable("the discovery document is not a JSON object")
        stated = document.get("issuer")
        if not isinstance(stated, str) or not _names_issuer(stated, configured_issuer):
            raise ProviderMisfit(_issuer_mismatch(stated, configured_issuer))
        endpoints = {}
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            endpoints[name] = _endpoint(document, name, required=True)
        for name in (
            "userinfo_endpoint",
            "end_session_endpoint",
            "revocation_endpoint",
            "device_authorization_endpoint",
        ):
            endpoints[name] = _endpoint(document, name, required=False)
        methods = document.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise ProviderMisfit("the provider does not support PKCE with S256")
        advertised = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = tuple(a for a in advertised if a in SIGNING_ALGORITHMS)
        if not algorithms:
            raise ProviderMisfit("the provider signs id_tokens with no supported algorithm")
        return cls(
            issuer=stated,
            signing_algorithms=algorithms,
            iss_parameter_supported=(
                document.get("authorization_response_iss_parameter_supported") is True
            ),
            token_endpoint_auth_methods=_names(
                document, "token_endpoint_auth_methods_supported", ("client_secret_basic",)
            ),
            token_endpoint_auth_signing_algorithms=_names(
                document, "token_endpoint_auth_signing_alg_values_supported", ()
            ),
            dpop_signing_algorithms=_names(document, "dpop_signing_alg_values_supported", ()),
            acr_values_supported=_listed(document, "acr_values_supported"),
            **endpoints,
        )

    def names_issuer(self, value: str) -> bool:
        """Whether `value` is this provider's issuer (its template filled with one tenant)."""
        return _names_issuer(self.issuer, value)

    def id_token_issuer(self, claims: dict[str, Any]) -> str:
        """The `iss` an id_token with these claims must carry, exactly.

        A templated issuer is filled with the token's own tenant, its `tid` claim, as
        Entra ID documents for applications that accept any organization's accounts.
        """
        if TENANT_PLACEHOLDER not in self.issuer:
            return self.issuer
        tenant = claims.get("tid")
        if not isinstance(tenant, str) or not TENANT_ID.fullmatch(tenant):
            raise IdTokenInvalid("the id_token has no tenant (tid) to check its issuer against")
        return self.issuer.replace(TENANT_PLACEHOLDER, tenant)


def _names_issuer(stated: str, value: str) -> bool:
    """Whether `value` is the issuer `stated`, or its one {tenantid} filled with a tenant."""
    if value == stated:
        return True
    if stated.count(TENANT_PLACEHOLDER) != 1:
        return False
    head, tail = stated.split(TENANT_PLACEHOLDER)
    if len(value) <= len(head) + len(tail) or not value.startswith(head):
        return False
    tenant = value[len(head) :]
    return tenant.endswith(tail) and bool(TENANT_ID.fullmatch(tenant[: len(tenant) - len(tail)]))


def _issuer_mismatch(stated: object, configured: str) -> str:
    message = f"the discovery document names issuer {stated!r}, not {configured!r}"
    if isinstance(stated, str) and stated.rstrip("/") == configured.rstrip("/"):
        message += f"; set issuer to exactly {stated!r}, as the provider states it"
    return message


def discovery_url(issuer: str) -> str:
    """Where an issuer's discovery document is: below it, without its trailing slash."""
    return issuer.rstrip("/") + DISCOVERY_PATH


def oauth_metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's RFC 8414 metadata may be, in the order to try.

    RFC 8414 (3.1) puts the well-known path between host and issuer path; providers
    mounted below a path (django-oauth-toolkit, Keycloak) also or only serve it after
    the issuer, as OpenID Connect does.
    """
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    inserted = origin + OAUTH_METADATA_PATH + path
    return [inserted, origin + path + OAUTH_METADATA_PATH] if path else [inserted]


def _names(document: dict[str, Any], name: str, unstated: tuple[str, ...]) -> tuple[str, ...]:
    """A metadata list of names; `unstated` when it is missing or not a list of strings."""
    value = document.get(name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return unstated
    return tuple(value)


def _listed(document: dict[str, Any], name: str) -> tuple[str, ...] | None:
    """A list of strings the document states; None when it states none (or no list)."""
    value = document.get(name)
    if not isinstance(value, list):
        return None
    return tuple(item for item in value if isinstance(item, str))


def _endpoint(document: dict[str, Any], name: str, *, required: bool) -> str:
    value = document.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not is_acceptable_url(value):
        raise ProviderMisfit(f"the discovery document has no usable {name}")
    return value


def is_acceptable_url(url: str) -> bool:
    """Whether a provider URL is safe: https, or plain http only to a loopback address."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False
