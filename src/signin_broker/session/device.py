"""A provider's device sign-in (RFC 8628): for a TV, a kiosk or an SSH session.

The user opens the provider's verification address on another device (or scans its
QR code) and enters the code shown here; the grant itself is
signin_broker.oidc.device_flow. This is one provider's half of it, and holds nothing:
what is pending, and for whom, is session.sign_ins's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..oidc import device_flow
from ..oidc.answers import DeviceAuthorization
from ..oidc.device_flow import SlowerPolling
from ..oidc.errors import DeviceGrantEnded
from ..oidc.id_tokens import check_workspace
from ..oidc.provider import Provider
from .dpop_requirements import DpopRequirements, bound_by
from .schedule import SIGN_IN_SECONDS
from .signin import SignedIn


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
    """Asks one provider for device codes and polls it until the person has signed in."""

    def __init__(
        self,
        provider: Provider,
        scopes: tuple[str, ...],
        alias: str = "",
        requirements: DpopRequirements | None = None,
    ) -> None:
        self.alias = alias  # of the provider (session.providers)
        self._provider = provider
        self._scopes = scopes
        self._requirements = requirements or DpopRequirements()

    async def begin(
        self, sign_in_id: str, owner: str, workspace_id: str = ""
    ) -> tuple[DeviceStart, DeviceAuthorization]:
        """A code for the person, and the grant to poll with (which holds the device code).

        NoDeviceGrant when the provider does not offer the grant at all; DeviceGrantEnded
        when it refuses this one.
        """
        extra = {"workspace_id": workspace_id} if workspace_id else {}
        grant = await device_flow.authorization(self._provider, self._scopes, extra)
        started = DeviceStart(
            sign_in_id=sign_in_id,
            user_code=grant.user_code,
            verification_uri=grant.verification_uri,
            verification_uri_complete=grant.verification_uri_complete,
            expires_at=time.time() + min(grant.expires_in, SIGN_IN_SECONDS),
            interval=grant.interval,
            owner=owner,
            workspace_id=workspace_id,
        )
        return started, grant

    async def outcome(
        self, started: DeviceStart, grant: DeviceAuthorization, progress: Callable[[str], None]
    ) -> SignedIn:
        """Poll until the person signs in; `progress` hears of slower polling on the way.

        DeviceGrantEnded (refused, expired), IdTokenInvalid or ProviderUnavailable else.
        What it learned of the provider requiring DPoP is kept, whatever the outcome.
        """
        deadline = time.monotonic() + max(0.0, started.expires_at - time.time())
        provider = self._provider
        try:
            key = await provider.new_dpop_key()
            async for step in device_flow.polled(provider, grant, deadline, dpop=key):
                if isinstance(step, SlowerPolling):
                    progress(f"the provider asked for slower polling: every {step.interval} s")
                    continue
                check_workspace(step.claims, started.workspace_id)
                if step.dpop_key is None:  # taken without a proof: DPoP is not required now
                    provider.dpop_required = False
                return SignedIn(
                    step.tokens,
                    step.claims,
                    started.sign_in_id,
                    started.workspace_id,
                    self.alias,
                    provider.client_id,
                    step.dpop_key,
                    bound_by(provider, step.dpop_key),
                )
        finally:
            await self._requirements.keep(provider)
        raise DeviceGrantEnded("expired_token", "the code expired before it was used")
