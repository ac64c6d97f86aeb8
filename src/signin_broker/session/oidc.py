"""The OpenID provider as the daemon sees it: discovery, token endpoint, id_token checks, userinfo.

Endpoints come only from the issuer's discovery document, never from assumed
paths, so any standards-following provider works from its issuer URL alone. Two
kinds of failure are kept apart because the daemon treats them differently: the
provider *answering no* (OAuthError, e.g. invalid_grant) and the provider *not
answering properly* (ProviderUnavailable: network, timeout, 5xx, garbage).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2
import jwt
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7009.parameters import prepare_revoke_token_request

from .._version import __version__
from .errors import IdTokenInvalid, OAuthError, ProviderUnavailable

HTTP_TIMEOUT_SECONDS = 10.0
CLOCK_SKEW_SECONDS = 60
# A provider rotating keys is normal; one that keeps presenting an unknown kid is not.
UNKNOWN_KID_RETRY_SECONDS = 60.0
DEFAULT_EXPIRES_IN_SECONDS = 3600
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

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str = ""
    end_session_endpoint: str = ""
    revocation_endpoint: str = ""
    device_authorization_endpoint: str = ""  # RFC 8628; "" when the provider has none
    signing_algorithms: tuple[str, ...] = ("RS256",)

    @classmethod
    def from_document(cls, document: object, expected_issuer: str) -> ProviderMetadata:
        """Check a discovery document (OpenID Connect Discovery 1.0, section 4.3)."""
        if not isinstance(document, dict):
            raise ProviderUnavailable("the discovery document is not a JSON object")
        if document.get("issuer") != expected_issuer:
            raise ProviderUnavailable(
                f"the discovery document names issuer {document.get('issuer')!r},"
                f" not {expected_issuer!r}"
            )
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
        return cls(issuer=expected_issuer, signing_algorithms=algorithms, **endpoints)


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

    @classmethod
    def from_json(cls, body: object) -> TokenResponse:
        """Check the fields a token response must have."""
        if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            raise ProviderUnavailable("the token response has no access_token")
        token_type = body.get("token_type")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise ProviderUnavailable(f"the token response has token_type {token_type!r}")
        expires_in = body.get("expires_in", DEFAULT_EXPIRES_IN_SECONDS)
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        if not isinstance(expires_in, int) or isinstance(expires_in, bool) or expires_in <= 0:
            raise ProviderUnavailable("the token response has an unusable expires_in")
        scope = body.get("scope")
        return cls(
            access_token=body["access_token"],
            token_type="Bearer",  # noqa: S106 - a token type, not a password
            expires_in=expires_in,
            refresh_token=_optional_text(body, "refresh_token"),
            id_token=_optional_text(body, "id_token"),
            scope=tuple(scope.split()) if isinstance(scope, str) else None,
        )


def _optional_text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    return value if isinstance(value, str) and value else None


class Provider:
    """One OpenID provider, reached over HTTPS (or loopback HTTP) from its issuer URL."""

    def __init__(self, issuer: str, client_id: str, http: httpx2.AsyncClient | None = None) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self._http = http or httpx2.AsyncClient(
            timeout=HTTP_TIMEOUT_SECONDS,
            follow_redirects=False,
            headers={"User-Agent": f"signin-broker/{__version__}"},
        )
        self._metadata: ProviderMetadata | None = None
        self._metadata_lock = asyncio.Lock()
        self._keys: dict[str, jwt.PyJWK] = {}
        self._unknown_kids: dict[str, float] = {}
        self._keys_lock = asyncio.Lock()

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def metadata(self) -> ProviderMetadata:
        """The discovery document, fetched once and kept."""
        async with self._metadata_lock:
            if self._metadata is None:
                url = self.issuer + "/.well-known/openid-configuration"
                document = await self._get_json(url, "discovery")
                self._metadata = ProviderMetadata.from_document(document, self.issuer)
            return self._metadata

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
        self, refresh_token: str, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """Trade a refresh token for a new access token (RFC 6749 section 6).

        A narrower `scope` and a `resource` (RFC 8707) ask for a down-scoped token.
        """
        body = prepare_token_request(
            "refresh_token",
            refresh_token=refresh_token,
            client_id=self.client_id,
            scope=scope,
            resource=resource,
        )
        return await self._token_request(body)

    async def device_authorization(
        self, scope: str, extra: dict[str, str] | None = None
    ) -> DeviceAuthorization:
        """Ask for a device code and the code the user enters elsewhere (RFC 8628 3.1-3.2)."""
        url = (await self.metadata()).device_authorization_endpoint
        if not url:
            raise ProviderUnavailable("the provider offers no device sign-in (RFC 8628)")
        body = urlencode({"client_id": self.client_id, "scope": scope, **(extra or {})})
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
        body, headers = prepare_revoke_token_request(
            token, hint, body=urlencode({"client_id": self.client_id})
        )
        response = await self._send("POST", url, "revocation", content=body, headers=headers)
        if response.status_code >= 400:
            raise ProviderUnavailable(f"revocation answered HTTP {response.status_code}")
        return True

    async def validate_id_token(self, id_token: str, nonce: str | None) -> dict[str, Any]:
        """Check signature, iss, aud, exp, iat and nonce; return the claims."""
        metadata = await self.metadata()
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError as error:
            raise IdTokenInvalid(f"the id_token is not a JWT: {error}") from None
        algorithm = header.get("alg")
        if algorithm not in metadata.signing_algorithms:
            raise IdTokenInvalid(f"the id_token is signed with {algorithm!r}, which is not allowed")
        key = await self._signing_key(header.get("kid"))
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key=key,
                algorithms=[algorithm],
                audience=self.client_id,
                issuer=self.issuer,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["iss", "aud", "sub", "exp", "iat"]},
            )
        except jwt.PyJWTError as error:
            raise IdTokenInvalid(f"the id_token failed validation: {error}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise IdTokenInvalid("the id_token has several audiences and azp is not this client")
        if nonce is not None and not hmac.compare_digest(str(claims.get("nonce", "")), nonce):
            raise IdTokenInvalid("the id_token's nonce does not match the sign-in's")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise IdTokenInvalid("the id_token has no subject")
        return claims

    async def _signing_key(self, kid: object) -> jwt.PyJWK:
        """The published key with this kid, fetching the key set again for a new kid.

        A provider that rotates keys presents a kid we have not seen: fetch once. A kid
        still unknown after that is not asked about again for a while.
        """
        async with self._keys_lock:
            key = self._find_key(kid)
            tried = self._unknown_kids.get(str(kid), 0.0)
            if key is None and time.monotonic() - tried > UNKNOWN_KID_RETRY_SECONDS:
                await self._fetch_keys()
                key = self._find_key(kid)
                if key is None:
                    self._unknown_kids[str(kid)] = time.monotonic()
        if key is None:
            raise IdTokenInvalid(f"the provider publishes no key with kid {kid!r}")
        return key

    def _find_key(self, kid: object) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if isinstance(kid, str) else None

    async def _fetch_keys(self) -> None:
        document = await self._get_json((await self.metadata()).jwks_uri, "jwks")
        try:
            key_set = jwt.PyJWKSet.from_dict(document)
        except (jwt.PyJWKSetError, jwt.PyJWKError, TypeError, KeyError) as error:
            raise ProviderUnavailable(f"the provider's key set is unusable: {error}") from None
        self._keys = {key.key_id or "": key for key in key_set.keys}

    async def _token_request(self, body: str) -> TokenResponse:
        url = (await self.metadata()).token_endpoint
        return TokenResponse.from_json(await self._post_form(url, "token", body))

    async def _post_form(self, url: str, what: str, body: str) -> Any:
        """POST a form; the JSON answer, OAuthError for a 4xx, ProviderUnavailable else."""
        response = await self._send(
            "POST",
            url,
            what,
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if 400 <= response.status_code < 500:
            raise _oauth_error(response)
        return _json_of(response, what)

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
    ) -> httpx2.Response:
        headers = {"Accept": "application/json", **(headers or {})}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        try:
            response = await self._http.request(method, url, content=content, headers=headers)
        except httpx2.HTTPError as error:
            raise ProviderUnavailable(
                f"the {what} request failed: {type(error).__name__}"
            ) from None
        if response.status_code >= 500:
            raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
        return response


def _json_of(response: httpx2.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise ProviderUnavailable(
            f"the {what} endpoint answered something that is not JSON"
        ) from None


def _oauth_error(response: httpx2.Response) -> OAuthError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error = body.get("error")
    description = body.get("error_description")
    return OAuthError(
        error if isinstance(error, str) else "invalid_request",
        description if isinstance(description, str) else "",
        response.status_code,
    )
