"""Device sign-in (RFC 8628): for a TV, a kiosk or an SSH session, with no browser at hand.

The user opens the provider's verification address on another device (or scans its
QR code) and enters the code shown here; meanwhile the daemon polls the token
endpoint, as slowly as the provider asks: every `interval` seconds, 5 s more after
each slow_down, and twice as long after a network failure (RFC 8628 section 3.5).
The id_token is validated as in the browser flow (there is no nonce in this grant).
A pending device sign-in is a tenant-owned record (contract 5.4 T11): it belongs to
the account it signs in again or, for a new account, to the app that began it, and
it is kept and looked up under that owner's key. One is pending per owner; a new
one, or a sign-out, cancels it. For anyone but its owner it does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ..oidc.answers import DeviceAuthorization, TokenResponse
from ..oidc.errors import IdTokenInvalid, OAuthError, ProviderUnavailable
from ..oidc.provider import Provider
from .accounts import SIGN_IN_SECONDS
from .signin import SignedIn

log = logging.getLogger(__name__)

SLOW_DOWN_SECONDS = 5
MAX_POLL_SECONDS = 60


class DeviceSignInFailed(Exception):
    """The device sign-in ended without a session; error_code is RFC 8628's (or ours)."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.reason = message


class NoDeviceSignIn(Exception):
    """The provider offers no device sign-in: its discovery has no device_authorization_endpoint."""

    def __init__(self) -> None:
        super().__init__(
            "the identity provider offers no device sign-in (its discovery document has no"
            " device_authorization_endpoint); sign in with a browser instead"
        )


class SignInReports(Protocol):
    """Where a device sign-in reports how it stands and how it ended (the sign-in owner)."""

    def sign_in_progress(self, sign_in_id: str, detail: str) -> None: ...

    def sign_in_failed(self, sign_in_id: str, detail: str) -> None: ...

    async def complete_sign_in(self, signed_in: SignedIn) -> object: ...


@dataclass(frozen=True, slots=True)
class DeviceStart:
    """What the user needs to complete a device sign-in; nothing secret (no device code)."""

    sign_in_id: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_at: float
    interval: int
    owner: str  # the account it signs in again, or "app:<app id>" for a new account
    workspace_id: str = ""


class DeviceFlow:
    """Begins device sign-ins and polls for their outcome, one per owner at a time."""

    def __init__(
        self,
        provider: Provider,
        scopes: tuple[str, ...],
        reports: SignInReports,
        alias: str = "",
    ) -> None:
        self.alias = alias  # of the provider (session.providers)
        self._provider = provider
        self._scopes = scopes
        self._reports = reports
        self._pending: dict[str, tuple[DeviceStart, asyncio.Task[None]]] = {}

    def pending(self) -> list[DeviceStart]:
        """The device sign-ins waiting for the user (for the loopback dashboard)."""
        return [started for started, _ in self._pending.values()]

    def find(self, sign_in_id: str, owners: frozenset[str] | None) -> DeviceStart | None:
        """The pending sign-in with this id if one of `owners` owns it (None: any owner).

        The lookup goes by owner: another owner's sign-in is as absent as an unknown one.
        """
        keys = self._pending if owners is None else owners
        for owner in keys:
            pending = self._pending.get(owner)
            if pending is not None and pending[0].sign_in_id == sign_in_id:
                return pending[0]
        return None

    async def begin(self, sign_in_id: str, owner: str, workspace_id: str = "") -> DeviceStart:
        """Ask the provider for a code, cancel the owner's earlier one, and start polling.

        NoDeviceSignIn when the provider does not offer the grant at all.
        """
        if not (await self._provider.metadata()).device_authorization_endpoint:
            raise NoDeviceSignIn
        extra = {"workspace_id": workspace_id} if workspace_id else {}
        try:
            grant = await self._provider.device_authorization(" ".join(self._scopes), extra)
        except OAuthError as error:
            raise DeviceSignInFailed(error.error, "the provider refused a device sign-in") from None
        expires_in = min(grant.expires_in, SIGN_IN_SECONDS)
        started = DeviceStart(
            sign_in_id=sign_in_id,
            user_code=grant.user_code,
            verification_uri=grant.verification_uri,
            verification_uri_complete=grant.verification_uri_complete,
            expires_at=time.time() + expires_in,
            interval=grant.interval,
            owner=owner,
            workspace_id=workspace_id,
        )
        await self.cancel(owner, "a new device sign-in replaced this one")
        task = asyncio.get_running_loop().create_task(self._run(started, grant, expires_in))
        self._pending[owner] = (started, task)
        self._reports.sign_in_progress(
            sign_in_id, f"enter code {grant.user_code} at {grant.verification_uri}"
        )
        return started

    async def cancel(self, owner: str | None, reason: str) -> None:
        """End the owner's pending device sign-in (None: every one), telling watchers why."""
        for key in [owner] if owner is not None else list(self._pending):
            pending = self._pending.pop(key, None)
            if pending is None:
                continue
            started, task = pending
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._reports.sign_in_failed(started.sign_in_id, f"cancelled: {reason}")

    async def _run(self, started: DeviceStart, grant: DeviceAuthorization, expires_in: int) -> None:
        try:
            signed_in = await self._outcome(started, grant, time.monotonic() + expires_in)
        except DeviceSignInFailed as failure:
            # The contract's record of a failed sign-in (section 6): each poll is a
            # token exchange, and a refusal other than RFC 8628's own is invalid_code.
            log.warning(
                "device sign-in failed",
                extra={
                    "flow": "oauth",
                    "step": "token_exchange",
                    "error_code": failure.error_code,
                    "reason": failure.reason,
                },
            )
            self._pending.pop(started.owner, None)
            self._reports.sign_in_failed(started.sign_in_id, str(failure))
            return
        self._pending.pop(started.owner, None)
        await self._reports.complete_sign_in(signed_in)

    async def _outcome(
        self, started: DeviceStart, grant: DeviceAuthorization, deadline: float
    ) -> SignedIn:
        interval = grant.interval
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() >= deadline:
                raise DeviceSignInFailed("expired_token", "the code expired before it was used")
            try:
                tokens = await self._provider.poll_device(grant.device_code)
            except ProviderUnavailable:
                interval = min(interval * 2, MAX_POLL_SECONDS)  # RFC 8628 3.5: back off
                continue
            except OAuthError as error:
                interval = self._after_refusal(error, interval, started)
                continue
            return await self._validated(tokens, started)

    def _after_refusal(self, error: OAuthError, interval: int, started: DeviceStart) -> int:
        """The interval to go on polling with, or DeviceSignInFailed when it is over."""
        if error.error == "authorization_pending":
            return interval
        if error.error == "slow_down":
            interval += SLOW_DOWN_SECONDS
            self._reports.sign_in_progress(
                started.sign_in_id, f"the provider asked for slower polling: every {interval} s"
            )
            return interval
        if error.error == "access_denied":
            raise DeviceSignInFailed("access_denied", "the sign-in was denied")
        if error.error == "expired_token":
            raise DeviceSignInFailed("expired_token", "the code expired before it was used")
        raise DeviceSignInFailed(
            "invalid_code", f"the identity provider did not accept the device code ({error.error})"
        )

    async def _validated(self, tokens: TokenResponse, started: DeviceStart) -> SignedIn:
        try:
            claims = await self._identity(tokens)
        except (IdTokenInvalid, ProviderUnavailable) as error:
            raise DeviceSignInFailed("invalid_id_token", str(error)) from None
        if started.workspace_id and claims.get("workspace_id") != started.workspace_id:
            raise DeviceSignInFailed(
                "invalid_id_token",
                f"the identity provider did not confirm workspace {started.workspace_id}",
            )
        return SignedIn(
            tokens,
            claims,
            started.sign_in_id,
            started.workspace_id,
            self.alias,
            self._provider.client_id,
        )

    async def _identity(self, tokens: TokenResponse) -> dict[str, Any]:
        """Who signed in: the validated id_token, else the provider's userinfo.

        RFC 8628 is an OAuth grant, and some providers (django-oauth-toolkit) issue no
        id_token from it; then the userinfo endpoint, asked with the new access token
        over the provider's own TLS, names the user (OpenID Connect Core 5.3).
        """
        if tokens.id_token is not None:
            return await self._provider.validate_id_token(tokens.id_token, None)
        try:
            claims = await self._provider.userinfo(tokens.access_token)
        except OAuthError as error:
            raise IdTokenInvalid(
                f"no id_token, and userinfo refused the new access token ({error.error})"
            ) from None
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise IdTokenInvalid("no id_token, and userinfo names no subject (sub)")
        return claims
