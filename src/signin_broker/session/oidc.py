"""The OpenID provider as the daemon sees it: discovery, token endpoint, id_token checks, userinfo.

Endpoints come only from the issuer's discovery document, never from assumed
paths, so any standards-following provider works from its issuer URL alone. Fields
that document lacks are taken from the provider's RFC 8414 metadata, if it has any;
both, and the published keys, are read again once a day, the discovery document when
an endpoint has gone (404) and the keys when an id_token names an unknown kid. Two
kinds of failure are kept apart because the daemon treats them differently: the
provider *answering no* (OAuthError, e.g. invalid_grant) and the provider *not
answering properly* (ProviderUnavailable: network, timeout, 5xx, garbage).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hmac
import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2
import jwt
from authlib.oauth2.rfc6749.parameters import prepare_token_request

from .._version import __version__
from .client_auth import ClientAuth
from .errors import (
    AnswerLost,
    AnswerUnusable,
    ClockSkewed,
    IdTokenInvalid,
    OAuthError,
    ProviderUnavailable,
)

log = logging.getLogger(__name__)

HTTP_TIMEOUT_SECONDS = 10.0
# How far this device's clock may be from the provider's when an id_token's iat and exp
# are checked. Devices boot with clocks minutes off; the nonce, not the time, binds an
# id_token to its sign-in, so a wide allowance costs little. Beyond it the sign-in fails
# naming the clock.
CLOCK_SKEW_SECONDS = 15 * 60
CLOCK_NOTICED_SECONDS = 60  # status says the clock is off from this much on
SET_THE_CLOCK = "set the clock right (on Linux: timedatectl set-ntp true)"
DISCOVERY_PATH = "/.well-known/openid-configuration"  # OpenID Connect Discovery 4
OAUTH_METADATA_PATH = "/.well-known/oauth-authorization-server"  # RFC 8414 3
# Providers change endpoints and keys now and then; a long-running daemon notices.
METADATA_REFRESH_SECONDS = 24 * 3600.0
# A provider rotating keys is normal; id_tokens that keep naming unknown kids are not:
# they make the key set be read again at most this often.
UNKNOWN_KID_RETRY_SECONDS = 60.0
# How soon the discovery document is read again after an endpoint answered 404, or
# after a re-read failed (the last good document is used meanwhile).
METADATA_RETRY_SECONDS = 60.0
# Entra ID's multi-tenant documents (.../common/v2.0) state the issuer as a template.
TENANT_PLACEHOLDER = "{tenantid}"
TENANT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")  # one path segment: a tenant's GUID or name
DEFAULT_EXPIRES_IN_SECONDS = 3600
# Bounds on what a provider's answer may hold: a token of at most 32 KiB (it must fit an
# HTTP header and the 1 MiB state file with room to spare), an answer of at most 1 MiB
# (read whole, so the refresh token beside an oversized access token is still kept), a
# stated lifetime of at most a day (longer is taken as a day).
MAX_TOKEN_CHARS = 32 * 1024
MAX_ANSWER_BYTES = 1024 * 1024
MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600
OAUTH_METADATA = "RFC 8414 metadata"  # what a metadata read is called in errors and logs
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
            raise ProviderUnavailable(_issuer_mismatch(stated, configured_issuer))
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
            raise ProviderUnavailable("the provider does not support PKCE with S256")
        advertised = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = tuple(a for a in advertised if a in SIGNING_ALGORITHMS)
        if not algorithms:
            raise ProviderUnavailable("the provider signs id_tokens with no supported algorithm")
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


def _clock_skewed(
    id_token: str, key: jwt.PyJWK, algorithm: str, audience: str, offset: float | None
) -> IdTokenInvalid:
    """Why an id_token is not yet or no longer valid: this device's clock, if it is off.

    How far off is measured from the provider's Date header (`offset`), else from the
    token's iat (it was issued moments ago).
    """
    try:
        claims = jwt.decode(
            id_token,
            key=key,
            algorithms=[algorithm],
            audience=audience,
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
        )
    except jwt.PyJWTError as error:
        return IdTokenInvalid(f"the id_token failed validation: {error}")
    issued = claims.get("iat")
    if not isinstance(issued, int | float):
        return IdTokenInvalid("the id_token is not valid at this time")
    off = issued - time.time() if offset is None else offset
    if abs(off) <= CLOCK_SKEW_SECONDS:  # the clock is fine: the token is just stale
        return IdTokenInvalid("the id_token has expired")
    return ClockSkewed(
        f"{_clock_off(off)} (it issued the sign-in at"
        f" {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(issued))}); {SET_THE_CLOCK}"
        " and sign in again"
    )


def _clock_off(off: float) -> str:
    """How this device's clock stands to the provider's, `off` seconds (provider less device)."""
    seconds = abs(off)
    amount = f"{seconds / 3600:.1f} hours" if seconds >= 5400 else f"{round(seconds / 60)} minutes"
    side = "behind" if off > 0 else "ahead of"
    return f"this device's clock is {amount} {side} the identity provider's"


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


def _endpoint(document: dict[str, Any], name: str, *, required: bool) -> str:
    value = document.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not is_acceptable_url(value):
        raise ProviderUnavailable(f"the discovery document has no usable {name}")
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


DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@dataclass(frozen=True, slots=True)
class DeviceAuthorization:
    """The provider's answer to a device authorization request (RFC 8628 3.2)."""

    device_code: str = field(repr=False)
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int

    @classmethod
    def from_json(cls, body: object) -> DeviceAuthorization:
        """Check the answer; ProviderUnavailable when it is not a usable one."""
        if not isinstance(body, dict):
            raise ProviderUnavailable("the device authorization answer is not a JSON object")
        texts = {}
        for name in ("device_code", "user_code", "verification_uri"):
            value = body.get(name)
            if not isinstance(value, str) or not value or len(value) > 2048:
                raise ProviderUnavailable(f"the device authorization answer has no usable {name}")
            texts[name] = value
        if not is_acceptable_url(texts["verification_uri"]):
            raise ProviderUnavailable("the device verification address is not https")
        complete = body.get("verification_uri_complete")
        if not isinstance(complete, str) or not is_acceptable_url(complete):
            complete = ""
        expires_in, interval = body.get("expires_in"), body.get("interval", 5)
        if not isinstance(expires_in, int) or not isinstance(interval, int) or expires_in <= 0:
            raise ProviderUnavailable("the device authorization answer has no usable expires_in")
        return cls(
            verification_uri_complete=complete,
            expires_in=expires_in,
            interval=max(interval, 1),
            **texts,
        )


@dataclass(frozen=True, slots=True)
class TokenResponse:
    """A successful token endpoint answer (RFC 6749 section 5.1)."""

    access_token: str = field(repr=False)
    token_type: str
    expires_in: int
    refresh_token: str | None = field(repr=False)
    id_token: str | None = field(repr=False)
    scope: tuple[str, ...] | None  # None when the provider did not say
    # It stated a lifetime above a day, taken as a day: a renewal assumes the lifetime
    # its tokens had before (TokenSet.renewed) rather than believe it.
    lifetime_unsure: bool = False

    @classmethod
    def from_json(cls, body: object) -> TokenResponse:
        """Check a token response; AnswerUnusable (with any usable refresh token) if it is not.

        Every token must be printable ASCII of at most MAX_TOKEN_CHARS (so whatever is
        accepted can be stored and handed to apps as a header), and expires_in a
        positive number; a lifetime above MAX_TOKEN_LIFETIME_SECONDS is taken as that,
        or as the lifetime tokens had before (`lifetime_unsure`), and re-validation
        finds out sooner if the token dies sooner.
        """
        if not isinstance(body, dict):
            raise AnswerUnusable("the token response is not a JSON object")
        refresh_token = _token(body, "refresh_token")  # unusable: nothing can be kept
        try:
            access_token, stated, id_token = _usable_access(body)
        except AnswerUnusable as error:  # the refresh token it rotated to is kept
            raise AnswerUnusable(str(error), refresh_token) from None
        scope = body.get("scope")
        if stated > MAX_TOKEN_LIFETIME_SECONDS:
            log.warning(
                "the provider states a token lifetime above a day; it is not believed",
                extra={"expires_in": stated},
            )
        return cls(
            access_token=access_token,
            token_type="Bearer",  # noqa: S106 - a token type, not a password
            expires_in=min(stated, MAX_TOKEN_LIFETIME_SECONDS),
            lifetime_unsure=stated > MAX_TOKEN_LIFETIME_SECONDS,
            refresh_token=refresh_token,
            id_token=id_token,
            scope=tuple(scope.split()) if isinstance(scope, str) else None,
        )


def _usable_access(body: dict[str, Any]) -> tuple[str, int, str | None]:
    """The access token, its lifetime and the id_token of a token response, if usable."""
    access_token = _token(body, "access_token")
    if access_token is None:
        raise AnswerUnusable("the token response has no access_token")
    token_type = body.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise AnswerUnusable(f"the token response has token_type {token_type!r:.40}")
    expires_in = _lifetime(body.get("expires_in", DEFAULT_EXPIRES_IN_SECONDS))
    return access_token, expires_in, _token(body, "id_token")


def _token(body: dict[str, Any], name: str) -> str | None:
    """A token of the answer; None when absent; AnswerUnusable when not usable as one."""
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not (value.isascii() and value.isprintable()):
        raise AnswerUnusable(f"the token response's {name} is not printable text")
    if len(value) > MAX_TOKEN_CHARS:
        raise AnswerUnusable(f"the token response's {name} is over {MAX_TOKEN_CHARS} characters")
    return value


def _lifetime(expires_in: object) -> int:
    """expires_in as seconds (a string of digits is accepted)."""
    if isinstance(expires_in, str) and expires_in.isdigit() and len(expires_in) < 20:
        expires_in = int(expires_in)
    if not isinstance(expires_in, int) or isinstance(expires_in, bool) or expires_in <= 0:
        raise AnswerUnusable(f"the token response has an unusable expires_in ({expires_in!r:.40})")
    return expires_in


class Provider:
    """One OpenID provider, reached over HTTPS (or loopback HTTP) from its issuer URL."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        http: httpx2.AsyncClient | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        client_auth: ClientAuth | None = None,
    ) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self._client_auth = client_auth or ClientAuth(client_id)  # a public client by default
        self._http = http or httpx2.AsyncClient(
            timeout=HTTP_TIMEOUT_SECONDS,
            follow_redirects=False,
            headers={"User-Agent": f"signin-broker/{__version__}"},
        )
        self._clock = clock
        self._metadata: ProviderMetadata | None = None
        self._metadata_read_at = 0.0
        self._metadata_due = 0.0  # when the discovery document is read again
        self._metadata_lock = asyncio.Lock()
        self._keys: dict[str, jwt.PyJWK] = {}
        self._keys_uri = ""  # where the keys were read: discovery may move them
        self._keys_due = 0.0
        self._unknown_kid_read_at: float | None = None
        self._keys_lock = asyncio.Lock()
        # The provider's clock less this device's, from the Date header of its last answer
        # (to a second or so); None until an answer had one.
        self.clock_offset: float | None = None

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def metadata(self) -> ProviderMetadata:
        """The discovery document, read again when due (daily, or soon after a 404).

        A failed re-read keeps the last good document and is tried again a minute
        later, so a provider that is briefly down or misconfigured stops nothing.
        """
        async with self._metadata_lock:
            now = self._clock()
            if self._metadata is None or now >= self._metadata_due:
                try:
                    self._metadata = await self._discover()
                except ProviderUnavailable as error:
                    if self._metadata is None:
                        raise
                    log.warning(
                        "could not read the discovery document again; using the last one",
                        extra={"reason": str(error)},
                    )
                    self._metadata_due = now + METADATA_RETRY_SECONDS
                else:
                    self._metadata_read_at = now
                    self._metadata_due = now + METADATA_REFRESH_SECONDS
            return self._metadata

    async def _discover(self) -> ProviderMetadata:
        """The discovery document, with the fields it lacks taken from RFC 8414 metadata.

        django-oauth-toolkit, for one, lists its revocation endpoint only there.
        """
        extra = asyncio.ensure_future(self._oauth_metadata())  # meanwhile: no extra round trip
        try:
            document = await self._get_json(discovery_url(self.issuer), "discovery")
        except BaseException:
            extra.cancel()  # never left running on its own
            raise
        merged = await extra
        if isinstance(document, dict) and document.get("issuer") == self.issuer:
            document = {**merged, **document}
        return ProviderMetadata.from_document(document, self.issuer)

    async def _oauth_metadata(self) -> dict[str, Any]:
        """The provider's RFC 8414 metadata naming this issuer; {} when it has none."""
        for url in oauth_metadata_urls(self.issuer):
            try:
                document = await self._get_json(url, OAUTH_METADATA)
            except ProviderUnavailable as error:
                log.debug("no RFC 8414 metadata here", extra={"url": url, "reason": str(error)})
                continue
            if isinstance(document, dict) and document.get("issuer") == self.issuer:
                return document
            log.info("RFC 8414 metadata for another issuer is ignored", extra={"url": url})
        return {}

    def _endpoint_gone(self) -> None:
        """An endpoint answered 404: read the discovery document again, within a minute."""
        self._metadata_due = min(
            self._metadata_due, self._metadata_read_at + METADATA_RETRY_SECONDS
        )

    async def exchange_code(
        self, code: str, redirect_uri: str, code_verifier: str
    ) -> TokenResponse:
        """Redeem an authorization code (RFC 6749 4.1.3 with RFC 7636's code_verifier)."""
        body = prepare_token_request(
            "authorization_code",
            code=code,
            redirect_uri=redirect_uri,
            client_id=self.client_id,
            code_verifier=code_verifier,
        )
        return await self._token_request(body)

    async def refresh(
        self,
        refresh_token: str,
        scope: str | None = None,
        resource: str | None = None,
        *,
        answer_within: float | None = None,
    ) -> TokenResponse:
        """Trade a refresh token for a new access token (RFC 6749 section 6).

        A narrower `scope` and a `resource` (RFC 8707) ask for a down-scoped token.
        `answer_within`: seconds its answer is awaited once sent (the manager's choice).
        """
        body = prepare_token_request(
            "refresh_token",
            refresh_token=refresh_token,
            client_id=self.client_id,
            scope=scope,
            resource=resource,
        )
        return await self._token_request(body, answer_within)

    async def device_authorization(
        self, scope: str, extra: dict[str, str] | None = None
    ) -> DeviceAuthorization:
        """Ask for a device code and the code the user enters elsewhere (RFC 8628 3.1-3.2)."""
        url = (await self.metadata()).device_authorization_endpoint
        if not url:
            raise ProviderUnavailable("the provider offers no device sign-in (RFC 8628)")
        body = urlencode({"scope": scope, **(extra or {})})
        return DeviceAuthorization.from_json(
            await self._post_form(url, "device authorization", body)
        )

    async def poll_device(self, device_code: str) -> TokenResponse:
        """One poll of the token endpoint for a device code (RFC 8628 3.4).

        OAuthError carries authorization_pending, slow_down, access_denied or expired_token.
        """
        body = urlencode(
            {
                "grant_type": DEVICE_CODE_GRANT,
                "device_code": device_code,
                "client_id": self.client_id,
            }
        )
        return await self._token_request(body)

    async def userinfo(self, access_token: str) -> dict[str, Any]:
        """The user's claims; OAuthError("invalid_token") when the provider rejects the token."""
        url = (await self.metadata()).userinfo_endpoint
        if not url:
            raise ProviderUnavailable("the provider has no userinfo endpoint")
        response = await self._send("GET", url, "userinfo", bearer=access_token)
        if response.status_code in (401, 403):
            raise OAuthError("invalid_token", "the provider rejected the access token", 401)
        claims = _json_of(response, "userinfo")
        if not isinstance(claims, dict):
            raise ProviderUnavailable("the userinfo response is not a JSON object")
        return claims

    async def revoke(self, token: str, hint: str) -> bool:
        """Revoke a token (RFC 7009) if the provider offers it; False when it does not."""
        url = (await self.metadata()).revocation_endpoint
        if not url:
            return False
        body = urlencode({"token": token, "token_type_hint": hint})
        response = await self._send_form(url, "revocation", body)
        if response.status_code >= 400:
            raise ProviderUnavailable(f"revocation answered HTTP {response.status_code}")
        return True

    async def validate_id_token(self, id_token: str, nonce: str | None) -> dict[str, Any]:
        """Check signature, iss, aud, exp, iat and nonce; return the claims.

        `iss` must be the issuer the provider states exactly (Core 3.1.3.7), with a
        templated one filled with the token's tenant (see ProviderMetadata.id_token_issuer).
        """
        metadata = await self.metadata()
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError as error:
            raise IdTokenInvalid(f"the id_token is not a JWT: {error}") from None
        algorithm = header.get("alg")
        if algorithm not in metadata.signing_algorithms:
            raise IdTokenInvalid(f"the id_token is signed with {algorithm!r}, which is not allowed")
        key = await self._signing_key(header.get("kid"), metadata.jwks_uri)
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key=key,
                algorithms=[algorithm],
                audience=self.client_id,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["iss", "aud", "sub", "exp", "iat"]},
            )
        except (jwt.ImmatureSignatureError, jwt.ExpiredSignatureError):
            raise _clock_skewed(
                id_token, key, algorithm, self.client_id, self.clock_offset
            ) from None
        except jwt.PyJWTError as error:
            raise IdTokenInvalid(f"the id_token failed validation: {error}") from None
        expected_issuer = metadata.id_token_issuer(claims)
        if claims["iss"] != expected_issuer:
            raise IdTokenInvalid(
                f"the id_token's issuer is {claims['iss']!r}, not {expected_issuer!r}"
            )
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise IdTokenInvalid("the id_token has several audiences and azp is not this client")
        if nonce is not None and not hmac.compare_digest(
            str(claims.get("nonce", "")).encode("utf-8", "surrogatepass"),
            nonce.encode("utf-8", "surrogatepass"),
        ):
            raise IdTokenInvalid("the id_token's nonce does not match the sign-in's")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise IdTokenInvalid("the id_token has no subject")
        return claims

    async def _signing_key(self, kid: object, jwks_uri: str) -> jwt.PyJWK:
        """The published key with this kid.

        The key set is read when none is known, daily, and when discovery moved it. A
        kid it lacks (the provider rotated its keys) has it read again, at most once a
        minute however many unknown kids arrive.
        """
        async with self._keys_lock:
            now = self._clock()
            fresh = False
            if not self._keys or jwks_uri != self._keys_uri or now >= self._keys_due:
                fresh = await self._read_keys(jwks_uri, now)
            key = self._find_key(kid)
            if key is None and not fresh and self._may_read_for_unknown_kid(now):
                await self._fetch_keys(jwks_uri, now)
                key = self._find_key(kid)
        if key is None:
            raise IdTokenInvalid(f"the provider publishes no key with kid {kid!r}")
        return key

    def _may_read_for_unknown_kid(self, now: float) -> bool:
        last = self._unknown_kid_read_at
        if last is not None and now - last < UNKNOWN_KID_RETRY_SECONDS:
            return False
        self._unknown_kid_read_at = now
        return True

    async def _read_keys(self, jwks_uri: str, now: float) -> bool:
        """Read the key set; False when a scheduled re-read failed and the known keys stay."""
        try:
            await self._fetch_keys(jwks_uri, now)
        except ProviderUnavailable as error:
            if not self._keys or jwks_uri != self._keys_uri:
                raise
            log.warning(
                "could not read the provider's keys again; using the last ones",
                extra={"reason": str(error)},
            )
            self._keys_due = now + METADATA_RETRY_SECONDS
            return False
        return True

    def _find_key(self, kid: object) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if isinstance(kid, str) else None

    async def _fetch_keys(self, jwks_uri: str, now: float) -> None:
        document = await self._get_json(jwks_uri, "jwks")
        try:
            key_set = jwt.PyJWKSet.from_dict(document)
        except (jwt.PyJWKSetError, jwt.PyJWKError, TypeError, KeyError) as error:
            raise ProviderUnavailable(f"the provider's key set is unusable: {error}") from None
        self._keys = {key.key_id or "": key for key in key_set.keys}
        self._keys_uri = jwks_uri
        self._keys_due = now + METADATA_REFRESH_SECONDS

    async def _token_request(self, body: str, answer_within: float | None = None) -> TokenResponse:
        url = (await self.metadata()).token_endpoint
        return TokenResponse.from_json(await self._post_form(url, "token", body, answer_within))

    async def _post_form(
        self, url: str, what: str, body: str, answer_within: float | None = None
    ) -> Any:
        """POST a form as this client; the JSON answer, or OAuthError, or ProviderUnavailable."""
        response = await self._send_form(url, what, body, answer_within)
        if 400 <= response.status_code < 500:
            raise _oauth_error(response)
        return _json_of(response, what)

    async def _send_form(
        self, url: str, what: str, body: str, answer_within: float | None = None
    ) -> httpx2.Response:
        """POST a form authenticated as this client (see client_auth.py).

        A refusal of the client's credentials is logged with what may help to fix it:
        the caller sees only invalid_client.
        """
        metadata = await self.metadata()
        content, headers, method = self._client_auth.sign(body, metadata)
        response = await self._send(
            "POST",
            url,
            what,
            content=content,
            headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
            answer_within=answer_within,
        )
        if 400 <= response.status_code < 500 and _oauth_error(response).error == "invalid_client":
            self._client_auth.refused(method, what, metadata)
        return response

    @property
    def clock_problem(self) -> str:
        """How far this device's clock is off the provider's, if over a minute; else ""."""
        off = self.clock_offset
        if off is None or abs(off) < CLOCK_NOTICED_SECONDS:
            return ""
        return f"{_clock_off(off)} (by its Date header); {SET_THE_CLOCK}"

    def _note_clock(self, date: str | None) -> None:
        """Measure the provider's clock against this device's from an answer's Date header."""
        if date:
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                self.clock_offset = (
                    email.utils.parsedate_to_datetime(date).timestamp() - time.time()
                )

    async def _get_json(self, url: str, what: str) -> Any:
        return _json_of(await self._send("GET", url, what), what)

    async def _send(
        self,
        method: str,
        url: str,
        what: str,
        *,
        bearer: str | None = None,
        content: str | None = None,
        headers: dict[str, str] | None = None,
        answer_within: float | None = None,
    ) -> httpx2.Response:
        """One request and its whole answer; AnswerLost if it may have arrived but no answer did.

        The exchange as a whole is bounded in time, `answer_within` seconds (else
        HTTP_TIMEOUT_SECONDS): a body still trickling in is read while that lasts, and
        only then given up. An answer over MAX_ANSWER_BYTES is not read further.
        """
        headers = {"Accept": "application/json", **(headers or {})}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        total = HTTP_TIMEOUT_SECONDS if answer_within is None else answer_within
        request = self._http.build_request(
            method,
            url,
            content=content,
            headers=headers,
            timeout=httpx2.Timeout(total, connect=min(total, HTTP_TIMEOUT_SECONDS)),
        )
        try:
            async with asyncio.timeout(total):
                streamed = await self._http.send(request, stream=True)
                try:
                    body = await _read_bounded(streamed, what)
                finally:
                    await streamed.aclose()
        except TimeoutError:
            raise AnswerLost(f"the {what} request got no whole answer within {total:g} s") from None
        except httpx2.HTTPError as error:
            unsent = isinstance(
                error, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
            )
            raise (ProviderUnavailable if unsent else AnswerLost)(
                f"the {what} request failed: {type(error).__name__}"
            ) from None
        response = httpx2.Response(
            streamed.status_code, headers=streamed.headers, content=body, request=request
        )
        self._note_clock(response.headers.get("date"))
        if response.status_code == 504:  # a gateway gave up waiting: the provider may act on it
            raise AnswerLost(f"the {what} endpoint answered HTTP 504")
        if response.status_code >= 500:
            raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
        if response.status_code == 404 and what not in ("discovery", OAUTH_METADATA):
            self._endpoint_gone()
        return response


async def _read_bounded(response: httpx2.Response, what: str) -> bytes:
    """The answer's body (decoded), refused once it is over MAX_ANSWER_BYTES.

    Refused as unusable when the provider answered (see _from_the_provider), else as
    not answering usefully.
    """
    refusal = AnswerUnusable if _from_the_provider(response) else ProviderUnavailable
    too_large = f"the {what} endpoint's answer is over {MAX_ANSWER_BYTES // 1024} KiB"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise refusal(too_large)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise refusal(too_large)
    return bytes(body)


def _json_of(response: httpx2.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise (AnswerUnusable if _from_the_provider(response) else ProviderUnavailable)(
            f"the {what} endpoint answered something that is not JSON"
            f" ({response.headers.get('content-type', 'no content type')!r:.60})"
        ) from None


def _from_the_provider(response: httpx2.Response) -> bool:
    """Whether a success answer comes from the provider, which then acted on the request.

    OAuth endpoints answer JSON (RFC 6749 5.1); a success of another type (an HTML
    page from a captive portal or a proxy) is taken as never having reached it, so a
    hotel's login page cannot put a refresh token in doubt.
    """
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return response.is_success and (
        media_type == "application/json" or media_type.endswith("+json")
    )


def _oauth_error(response: httpx2.Response) -> OAuthError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error = body.get("error")
    description = body.get("error_description")
    unnamed = "invalid_client" if response.status_code == 401 else "invalid_request"  # RFC 6749 5.2
    return OAuthError(
        error if isinstance(error, str) else unnamed,
        description if isinstance(description, str) else "",
        response.status_code,
    )
