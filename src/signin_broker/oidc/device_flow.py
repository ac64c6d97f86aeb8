"""The device authorization grant (RFC 8628) from its code to the signed-in identity.

The user enters the code on another device while the token endpoint is polled as
slowly as the provider asks: every `interval` seconds, 5 s more after each slow_down,
and twice as long after a network failure (RFC 8628 3.5). polled() yields how it
stands and, last, who signed in; it never calls back into its caller.

A provider that requires DPoP of this client refuses a poll without a proof (panva's
oidc-provider at once, before the person has approved, with a plain invalid_grant that
leaves the device code alone): the polls go on with a new key's proofs, so the person
who approved on the phone is never asked again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .answers import DeviceAuthorization, TokenResponse
from .dpop import DpopKey, is_bound, requirement_shown
from .errors import (
    DeviceGrantEnded,
    DpopWanted,
    IdTokenInvalid,
    NoDeviceGrant,
    OAuthError,
    ProviderUnavailable,
)
from .provider import Provider

DEVICE_CODE = "device code"  # the grant, as requirement_shown names it
SLOW_DOWN_SECONDS = 5
MAX_POLL_SECONDS = 60


@dataclass(frozen=True, slots=True)
class SlowerPolling:
    """The provider asked for slower polling (slow_down): every `interval` seconds now."""

    interval: int


@dataclass(frozen=True, slots=True)
class DeviceSignedIn:
    """The grant's tokens and who signed in (validated id_token claims, else userinfo's)."""

    tokens: TokenResponse
    claims: dict[str, Any] = field(repr=False)
    dpop_key: DpopKey | None = field(default=None, repr=False)  # the tokens' key; None: Bearer


async def authorization(
    provider: Provider, scopes: tuple[str, ...], extra: dict[str, str]
) -> DeviceAuthorization:
    """A device code and the code the user enters (NoDeviceGrant, DeviceGrantEnded)."""
    if not (await provider.metadata()).device_authorization_endpoint:
        raise NoDeviceGrant
    try:
        return await provider.device_authorization(" ".join(scopes), extra)
    except OAuthError as error:
        raise DeviceGrantEnded(error.error, "the provider refused a device sign-in") from None


async def polled(
    provider: Provider,
    grant: DeviceAuthorization,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    dpop: DpopKey | None = None,
) -> AsyncIterator[SlowerPolling | DeviceSignedIn]:
    """Poll until the user has signed in (the last item) or the grant ends (DeviceGrantEnded).

    A sign-in whose identity cannot be established raises IdTokenInvalid or
    ProviderUnavailable, as a browser sign-in's does. A poll without a proof that is
    refused as one wanting a proof may be (oidc.dpop.retry_key) is followed by polls
    with one; the provider has shown that it requires DPoP of this client when that
    refusal named DPoP, or when the same device code was then taken (or kept pending)
    with a proof.
    """
    interval = grant.interval
    refused: OAuthError | None = None  # the refusal without a proof the polls now answer
    while True:
        await asyncio.sleep(interval)
        if clock() >= deadline:
            raise DeviceGrantEnded("expired_token", "the code expired before it was used")
        try:
            tokens = await provider.poll_device(grant.device_code, dpop)
        except ProviderUnavailable:
            interval = min(interval * 2, MAX_POLL_SECONDS)  # RFC 8628 3.5: back off
            continue
        except OAuthError as error:
            if error.error in ("authorization_pending", "slow_down"):
                if refused is not None:  # kept pending now that it carries a proof
                    _shown(provider, refused, proven=True)
                if error.error == "slow_down":
                    interval += SLOW_DOWN_SECONDS
                    yield SlowerPolling(interval)
                continue
            if dpop is None and (dpop := await _key_after(provider, error)) is not None:
                refused = error
                _shown(provider, refused, proven=False)
                continue
            raise _ended(error, refused is not None and provider.dpop_required) from None
        if refused is not None and is_bound(tokens.token_type):
            _shown(provider, refused, proven=True)
        bound = dpop if dpop is not None and is_bound(tokens.token_type) else None
        yield DeviceSignedIn(tokens, await identity(provider, tokens, bound), bound)
        return


def _shown(provider: Provider, refusal: OAuthError, *, proven: bool) -> None:
    """Learn the requirement where the answers to this device code show it."""
    if said := requirement_shown(refusal, proven, DEVICE_CODE):
        provider.learned_dpop_required(said)


async def identity(
    provider: Provider, tokens: TokenResponse, dpop: DpopKey | None = None
) -> dict[str, Any]:
    """Who signed in: the validated id_token, else the provider's userinfo.

    `dpop`: the key the tokens are bound to (None: Bearer tokens).

    RFC 8628 is an OAuth grant, and some providers (django-oauth-toolkit) issue no
    id_token from it; then the userinfo endpoint, asked with the new access token
    over the provider's own TLS, names the user (OpenID Connect Core 5.3). There is
    no nonce in this grant.
    """
    if tokens.id_token is not None:
        return await provider.validate_id_token(tokens.id_token, None)
    try:
        claims = await provider.userinfo(tokens.access_token, dpop)
    except OAuthError as error:
        raise IdTokenInvalid(
            f"no id_token, and userinfo refused the new access token ({error.error})"
        ) from None
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise IdTokenInvalid("no id_token, and userinfo names no subject (sub)")
    return claims


async def _key_after(provider: Provider, refusal: OAuthError) -> DpopKey | None:
    """The key to poll with after a refusal without a proof (Provider.key_after_refusal)."""
    try:
        return await provider.key_after_refusal(refusal)
    except DpopWanted as wanted:
        raise DeviceGrantEnded("invalid_code", wanted.hint) from None


def _ended(error: OAuthError, learned: bool = False) -> DeviceGrantEnded:
    if error.error == "access_denied":
        return DeviceGrantEnded("access_denied", "the sign-in was denied")
    if error.error == "expired_token":
        return DeviceGrantEnded("expired_token", "the code expired before it was used")
    if learned:
        return DeviceGrantEnded(
            "invalid_code",
            "the identity provider refused the device code without a DPoP proof, then with"
            f" one ({error.error}): it requires DPoP of this client and may have spent the"
            " code; sign in again, and the new sign-in sends proofs from the start",
        )
    return DeviceGrantEnded(
        "invalid_code", f"the identity provider did not accept the device code ({error.error})"
    )
