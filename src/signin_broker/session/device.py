"""Device sign-ins (RFC 8628) in progress: for a TV, a kiosk or an SSH session.

The user opens the provider's verification address on another device (or scans its
QR code) and enters the code shown here; the grant itself is
signin_broker.oidc.device_flow. A pending device sign-in is a tenant-owned record
(contract 5.4 T11): it belongs to the account it signs in again or, for a new
account, to the app that began it, and it is kept and looked up under that owner's
key. One is pending per owner; a new one, or a sign-out, cancels it. For anyone but
its owner it does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from ..oidc import device_flow
from ..oidc.answers import DeviceAuthorization
from ..oidc.device_flow import DeviceGrantEnded, DeviceSignedIn, SlowerPolling
from ..oidc.errors import IdTokenInvalid, ProviderUnavailable
from ..oidc.failures import failure_of
from ..oidc.id_tokens import check_workspace
from ..oidc.provider import Provider
from .accounts import SIGN_IN_SECONDS
from .signin import SignedIn

log = logging.getLogger(__name__)


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
    """Begins device sign-ins and follows them to their outcome, one per owner at a time."""

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

        NoDeviceGrant when the provider does not offer the grant at all; DeviceGrantEnded
        when it refuses this one.
        """
        extra = {"workspace_id": workspace_id} if workspace_id else {}
        grant = await device_flow.authorization(self._provider, self._scopes, extra)
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
        except (DeviceGrantEnded, IdTokenInvalid, ProviderUnavailable) as error:
            # The contract's record of a failed sign-in (section 6): each poll is a
            # token exchange.
            failure = failure_of(error)
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
        async for step in device_flow.polled(self._provider, grant, deadline):
            if isinstance(step, SlowerPolling):
                self._reports.sign_in_progress(
                    started.sign_in_id,
                    f"the provider asked for slower polling: every {step.interval} s",
                )
            else:
                return self._signed_in(step, started)
        raise DeviceGrantEnded("expired_token", "the code expired before it was used")

    def _signed_in(self, done: DeviceSignedIn, started: DeviceStart) -> SignedIn:
        check_workspace(done.claims, started.workspace_id)
        return SignedIn(
            done.tokens,
            done.claims,
            started.sign_in_id,
            started.workspace_id,
            self.alias,
            self._provider.client_id,
        )
