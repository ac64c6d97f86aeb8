"""Checking an id_token (OpenID Connect Core 3.1.3.7) against the keys its provider publishes.

The keys (the JWKS) are read when none is known, daily, when discovery moves them,
and when an id_token names a kid they lack (the provider rotated its keys), at most
once a minute however many unknown kids arrive. A JWK need not state its `alg`: the
id_token's header names it, and it must be one the provider lists and this key's
kind can verify. Devices boot with clocks minutes off, so the times allow
CLOCK_SKEW_SECONDS; beyond that the refusal names this device's clock.

joserfc (with cryptography's x509 and key modules, about 2.5 MB) loads at the first
check, a sign-in's: a daemon that restored its sessions never needs it.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from ..json_depth import within_depth
from .errors import ClockSkewed, IdTokenInvalid, ProviderUnavailable
from .jose import eddsa_by_its_old_name
from .metadata import METADATA_REFRESH_SECONDS, METADATA_RETRY_SECONDS, ProviderMetadata

if TYPE_CHECKING:  # loaded at the first check (a sign-in's)
    from joserfc.jwk import Key

log = logging.getLogger(__name__)

# How far this device's clock may be from the provider's when an id_token's iat and exp
# are checked. The nonce, not the time, binds an id_token to its sign-in, so a wide
# allowance costs little.
CLOCK_SKEW_SECONDS = 15 * 60
SET_THE_CLOCK = "set the clock right (on Linux: timedatectl set-ntp true)"
# A provider rotating keys is normal; id_tokens that keep naming unknown kids are not.
UNKNOWN_KID_RETRY_SECONDS = 60.0

ReadJson = Callable[[str, str], Awaitable[Any]]  # (url, what) -> the JSON answer


class IdTokenChecker:
    """Validates one client's id_tokens with a provider's published keys."""

    def __init__(self, client_id: str, read_json: ReadJson, clock: Callable[[], float]) -> None:
        self._client_id = client_id
        self._read_json = read_json
        self._clock = clock
        self._keys: dict[str, Key] = {}
        self._keys_uri = ""  # where the keys were read: discovery may move them
        self._keys_due = 0.0
        self._unknown_kid_read_at: float | None = None
        self._lock = asyncio.Lock()

    async def validate(
        self,
        id_token: str,
        nonce: str | None,
        metadata: ProviderMetadata,
        clock_offset: float | None,
    ) -> dict[str, Any]:
        """Check signature, iss, aud, exp, iat and nonce; return the claims.

        `iss` must be the issuer the provider states exactly, with a templated one filled
        with the token's tenant (ProviderMetadata.id_token_issuer). `clock_offset`: the
        provider's clock less this device's, if known, to say how far off a clock is.
        """
        from joserfc import jwt
        from joserfc.errors import ClaimError, ExpiredTokenError, JoseError

        header = _header(id_token)
        algorithm = header.get("alg")
        if algorithm not in metadata.signing_algorithms:
            raise IdTokenInvalid(f"the id_token is signed with {algorithm!r}, which is not allowed")
        key = await self._signing_key(header.get("kid"), metadata.jwks_uri)
        try:
            with eddsa_by_its_old_name():
                claims: dict[str, Any] = jwt.decode(id_token, key, algorithms=[algorithm]).claims
        except (JoseError, ValueError) as error:
            raise IdTokenInvalid(f"the id_token failed validation: {error}") from None
        try:
            jwt.JWTClaimsRegistry(
                leeway=CLOCK_SKEW_SECONDS,
                iss={"essential": True},
                aud={"essential": True, "value": self._client_id},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
            ).validate(claims)
        except ExpiredTokenError:
            raise _clock_skewed(claims, clock_offset) from None
        except ClaimError as error:
            if error.claim in ("iat", "nbf") and _is_time(claims[error.claim]):  # in the future
                raise _clock_skewed(claims, clock_offset) from None
            raise IdTokenInvalid(f"the id_token failed validation: {error}") from None
        expected_issuer = metadata.id_token_issuer(claims)
        if claims["iss"] != expected_issuer:
            raise IdTokenInvalid(
                f"the id_token's issuer is {claims['iss']!r}, not {expected_issuer!r}"
            )
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self._client_id:
            raise IdTokenInvalid("the id_token has several audiences and azp is not this client")
        if nonce is not None and not hmac.compare_digest(
            str(claims.get("nonce", "")).encode("utf-8", "surrogatepass"),
            nonce.encode("utf-8", "surrogatepass"),
        ):
            raise IdTokenInvalid("the id_token's nonce does not match the sign-in's")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise IdTokenInvalid("the id_token has no subject")
        return claims

    async def _signing_key(self, kid: object, jwks_uri: str) -> Key:
        """The published key with this kid, the key set read again as the module says."""
        async with self._lock:
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

    def _find_key(self, kid: object) -> Key | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if isinstance(kid, str) else None

    async def _fetch_keys(self, jwks_uri: str, now: float) -> None:
        self._keys = published_keys(await self._read_json(jwks_uri, "jwks"))
        self._keys_uri = jwks_uri
        self._keys_due = now + METADATA_REFRESH_SECONDS


def published_keys(document: object) -> dict[str, Key]:
    """The verifying keys of a JWK set by kid ("" for none); keys of other kinds are skipped.

    ProviderUnavailable when the set is malformed or holds no key that can verify.
    """
    from joserfc.errors import JoseError
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    # The kinds of key that can verify an id_token (never a shared secret).
    verifying: dict[str, type[RSAKey | ECKey | OKPKey]] = {
        "RSA": RSAKey,
        "EC": ECKey,
        "OKP": OKPKey,
    }
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ProviderUnavailable("the provider's key set is unusable: it has no keys list")
    keys: dict[str, Key] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        kind = verifying.get(str(entry.get("kty")))
        if kind is None:
            continue
        try:
            key = kind.import_key(entry)
        except (JoseError, ValueError, TypeError, KeyError) as error:
            log.info("a published key is skipped", extra={"reason": str(error)})
            continue
        if not key.is_private:
            keys[str(entry.get("kid") or "")] = key
    if not keys:
        raise ProviderUnavailable("the provider's key set is unusable: no key can verify")
    return keys


def check_workspace(claims: dict[str, Any], workspace_id: str) -> None:
    """IdTokenInvalid unless the provider confirmed the workspace asked for (same claim)."""
    if workspace_id and claims.get("workspace_id") != workspace_id:
        raise IdTokenInvalid(f"the identity provider did not confirm workspace {workspace_id}")


def clock_off(off: float) -> str:
    """How this device's clock stands to the provider's, `off` seconds (provider less device)."""
    seconds = abs(off)
    amount = f"{seconds / 3600:.1f} hours" if seconds >= 5400 else f"{round(seconds / 60)} minutes"
    side = "behind" if off > 0 else "ahead of"
    return f"this device's clock is {amount} {side} the identity provider's"


def _is_time(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _header(id_token: str) -> dict[str, Any]:
    """The id_token's protected header, unverified (it names the key and algorithm).

    The header and the claims are refused first if they nest too deep: joserfc reads
    both with json (json_depth).
    """
    from joserfc import jws
    from joserfc.errors import JoseError

    try:
        for segment in id_token.split(".")[:2]:
            within_depth(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
        return dict(jws.extract_compact(id_token.encode()).protected)
    except (JoseError, ValueError) as error:
        raise IdTokenInvalid(f"the id_token is not a JWT: {error}") from None


def _clock_skewed(claims: dict[str, Any], offset: float | None) -> IdTokenInvalid:
    """Why a correctly signed id_token is not yet or no longer valid: this device's clock, if off.

    How far off is measured from the provider's Date header (`offset`), else from the
    token's iat (it was issued moments ago).
    """
    issued = claims.get("iat")
    if not _is_time(issued):
        return IdTokenInvalid("the id_token is not valid at this time")
    off = issued - time.time() if offset is None else offset
    if abs(off) <= CLOCK_SKEW_SECONDS:  # the clock is fine: the token is just stale
        return IdTokenInvalid("the id_token has expired")
    return ClockSkewed(
        f"{clock_off(off)} (it issued the sign-in at"
        f" {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(issued))}); {SET_THE_CLOCK}"
        " and sign in again"
    )
