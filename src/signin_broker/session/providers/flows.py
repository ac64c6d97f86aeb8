"""One provider's half of each sign-in, holding nothing: in the browser (PKCE), by device code.

The browser's: the authorization request and its URL, then the code redeemed and the
id_token validated against the request's nonce (the protocol itself is
signin_broker.oidc.code_flow). The device's: a code for the person to enter on another
device (or its QR code), then the token endpoint polled until they have (the grant is
signin_broker.oidc.device_flow). Which sign-ins are pending, and for whom, is
session.signing_in.sign_ins'. Whether the tokens are DPoP-bound, and what a sign-in learned of
the provider requiring it, is session.providers.dpop_requirements'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...oidc import device_flow
from ...oidc.answers import DeviceAuthorization, TokenResponse
from ...oidc.code_flow import AuthorizationRequest, SignInSecrets
from ...oidc.device_flow import SlowerPolling
from ...oidc.dpop import AUTO, DpopKey, key_for
from ...oidc.errors import DeviceGrantEnded
from ...oidc.id_tokens import check_workspace
from ...oidc.provider import Provider
from ..schedule import SIGN_IN_SECONDS
from .dpop_requirements import DpopRequirements, Requirement, bound_by

# -- in the browser -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    """What the callback needs to finish a sign-in; kept in the daemon, never sent out."""

    request: AuthorizationRequest
    redirect_to: str  # where the browser goes afterwards (a same-origin path)
    sign_in_id: str  # correlates the outcome with a BeginSignIn; "" when begun in the browser
    created_at: float
    dpop_again: bool = False  # begun again with DPoP after the code was refused without it
    provider: str = ""  # the alias of the provider it went to ("" the main one)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A completed sign-in (browser or device): the tokens and the validated id_token claims."""

    tokens: TokenResponse
    claims: dict[str, Any] = field(repr=False)
    sign_in_id: str  # the BeginSignIn it completes; "" when begun in the browser
    workspace_id: str = ""
    provider: str = ""  # the alias of the provider it signed in at ("" the main one)
    client_id: str = ""  # the client the tokens were issued to
    dpop_key: DpopKey | None = field(default=None, repr=False)  # the key they are bound to
    dpop_bound_by: str = ""  # why they are bound (oidc.dpop.BY_SETTING, BY_PROVIDER); "" if not


class SignInFlow:
    """Begins one provider's sign-ins (the authorize URL) and completes them (the code)."""

    def __init__(
        self,
        provider: Provider,
        scopes: tuple[str, ...],
        source: SignInSecrets,
        authorize_params: Mapping[str, str] | None = None,
        alias: str = "",
        *,
        requirements: DpopRequirements | None = None,
    ) -> None:
        self.alias = alias  # of the provider (session.providers.links)
        self._provider = provider
        self.scopes = scopes  # what it asks for: the provider's `scopes` setting
        self._source = source
        self._authorize_params = dict(authorize_params or {})  # the daemon's setting
        self._requirements = requirements or DpopRequirements()

    def dpop_requirement(self) -> Requirement | None:
        """What is known of the provider requiring DPoP of this client; None: nothing."""
        return self._requirements.of(self._provider)

    async def begin(
        self,
        redirect_uri: str,
        redirect_to: str,
        sign_in_id: str,
        *,
        created_at: float,
        workspace_id: str = "",
        authorize_params: Mapping[str, str] | None = None,
        dpop_again: bool = False,
    ) -> tuple[PendingSignIn, str]:
        """A new sign-in to remember under its state, and the provider's authorize URL for it.

        A workspace is asked for with the `workspace_id` authorization parameter; the
        provider must confirm the membership with the same claim in the id_token.
        authorize_params (login_hint, prompt, ...; checked by the caller) are added,
        over the daemon's own setting. `dpop_again`: a sign-in begun again because the
        provider refused its code without a DPoP proof and with one (DpopSignInAgain):
        this one is bound with DPoP from the start.
        """
        await self._requirements.refresh(self._provider)  # forgotten since? expired?
        metadata = await self._provider.metadata()
        key = (
            key_for(AUTO, metadata.dpop_signing_algorithms, self._provider.issuer)
            if dpop_again
            else await self._provider.new_dpop_key()
        )
        request = AuthorizationRequest.new(self._source, redirect_uri, metadata, workspace_id, key)
        url = request.url(
            self._provider.client_id,
            self.scopes,
            {**self._authorize_params, **(authorize_params or {})},
        )
        pending = PendingSignIn(
            request, redirect_to, sign_in_id, created_at, dpop_again, self.alias
        )
        return pending, url

    async def complete(self, pending: PendingSignIn, code: str) -> SignedIn:
        """Redeem the code and validate the id_token against this sign-in's nonce.

        What it learned of the provider requiring DPoP is kept, whatever the outcome.
        """
        provider = self._provider
        try:
            tokens, claims, key = await pending.request.redeem(provider, code)
            if key is None:  # taken without a proof: whatever it required before, not now
                provider.dpop_required = False
        finally:
            await self._requirements.keep(provider)
        return SignedIn(
            tokens,
            claims,
            pending.sign_in_id,
            pending.request.workspace_id,
            self.alias,
            provider.client_id,
            key,
            bound_by(provider, key),
        )


# -- on another device ------------------------------------------------------------------


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
        self.alias = alias  # of the provider (session.providers.links)
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
        await self._requirements.refresh(provider)
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
