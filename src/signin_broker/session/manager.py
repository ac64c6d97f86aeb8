"""The session layer's front door: what the gRPC API and the loopback pages talk to.

Three parts do the work, each with one concern: the account registry (who is signed
in, what callers may see, the encrypted records), the token keeper (tokens on demand
and ahead of time, renewal, re-validation, provider health) and the session
lifecycle (sign-ins, sign-out, removal). The manager builds them together and starts
them once, when the providers and the store are loaded: `ready` is set then, and the
API waits for it before any call (daemon.api.servicer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..store.audit import Actor
from .accounts import (
    EVERYTHING,
    AccountInfo,
    Entitlement,
    IssuedToken,
    SignInStart,
    SignInState,
    SignOutResult,
)
from .events import EventBus
from .lifecycle import BegunSignIn, SessionLifecycle
from .ports import AccountStore, AuditSink, NoAudit
from .providers import Providers
from .registry import AccountRegistry
from .renewal import TokenKeeper, keep

if TYPE_CHECKING:
    from .device import DeviceStart
    from .signin import SignedIn
    from .signout import LogoutLinks


class SessionManager:
    """The accounts, their tokens and sessions, and the events about them."""

    def __init__(
        self,
        *,
        revalidate_seconds: int = 30,
        audit: AuditSink | None = None,
        events: EventBus | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        audit = audit if audit is not None else NoAudit()
        self.events = events if events is not None else EventBus()
        self.registry = AccountRegistry(
            self.events, audit, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self.keeper = TokenKeeper(
            self.registry, audit, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self.lifecycle = SessionLifecycle(
            self.registry, audit, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self.ready = asyncio.Event()  # set by start(): the stored accounts are back

    async def start(self, providers: Providers, store: AccountStore | None, storage: str) -> None:
        """Take the providers and the store, bring the stored accounts back, and be ready."""
        self.registry.providers = providers
        self.registry.store = store
        self.registry.storage = storage
        try:
            await self.registry.restore()
        finally:
            self.ready.set()
            self.registry.changed.set()

    async def keep(self) -> None:
        """Renew and re-validate in the background until cancelled (after start)."""
        await keep(self.keeper, self.registry.changed)

    # -- what callers may know -----------------------------------------------------------

    @property
    def providers(self) -> Providers:
        """The configured providers (none before start)."""
        return self.registry.providers

    @property
    def storage(self) -> str:
        """Where sessions are kept across restarts, for status."""
        return self.registry.storage

    @property
    def issuer(self) -> str:
        """The default provider's issuer ("" when none is configured)."""
        default = self.providers.default
        return default.issuer if default is not None else ""

    @property
    def degraded_reason(self) -> str:
        """Why providers are considered unreachable ("" when they answer)."""
        return self.providers.degraded_reason

    @property
    def last_provider_contact(self) -> float:
        """When a provider last answered (0 when none has yet)."""
        return self.providers.last_contact

    def state(self, entitlement: Entitlement = EVERYTHING) -> SignInState:
        """See AccountRegistry.state."""
        return self.registry.state(entitlement)

    def accounts(self, entitlement: Entitlement = EVERYTHING) -> list[AccountInfo]:
        """See AccountRegistry.accounts."""
        return self.registry.accounts(entitlement)

    def account(self, account_id: str, entitlement: Entitlement = EVERYTHING) -> AccountInfo | None:
        """See AccountRegistry.account."""
        return self.registry.account(account_id, entitlement)

    @property
    def default_account(self) -> str:
        """See AccountRegistry.default_account."""
        return self.registry.default_account

    def default_for(self, entitlement: Entitlement) -> str:
        """See AccountRegistry.default_for."""
        return self.registry.default_for(entitlement)

    # -- tokens ------------------------------------------------------------------------

    async def get_token(
        self,
        account_id: str,
        scopes: Sequence[str],
        min_ttl: int,
        *,
        audience: str = "",
        actor: Actor | None = None,
        entitlement: Entitlement = EVERYTHING,
    ) -> IssuedToken:
        """See TokenKeeper.get_token."""
        return await self.keeper.get_token(
            account_id, scopes, min_ttl, audience=audience, actor=actor, entitlement=entitlement
        )

    async def tend(self) -> float:
        """See TokenKeeper.tend."""
        return await self.keeper.tend()

    async def finish_renewals(self, grace: float) -> None:
        """See TokenKeeper.finish_renewals."""
        await self.keeper.finish_renewals(grace)

    # -- sessions ------------------------------------------------------------------------

    @property
    def logout_links(self) -> LogoutLinks:
        """The one-time sign-out links the loopback page redeems."""
        return self.lifecycle.logout_links

    async def begin_sign_in(
        self,
        *,
        account: str,
        app: str,
        device: bool | None,
        workspace_id: str = "",
        authorize_params: Mapping[str, str] | None = None,
        redirect_to: str = "",
        provider: str = "",
        begin_url: str,
    ) -> BegunSignIn:
        """See SessionLifecycle.begin_sign_in."""
        return await self.lifecycle.begin_sign_in(
            account=account,
            app=app,
            device=device,
            workspace_id=workspace_id,
            authorize_params=authorize_params,
            redirect_to=redirect_to,
            provider=provider,
            begin_url=begin_url,
        )

    def device_sign_in(self, sign_in_id: str, owners: frozenset[str]) -> DeviceStart | None:
        """See SessionLifecycle.device_sign_in."""
        return self.lifecycle.device_sign_in(sign_in_id, owners)

    def sign_in_started(self, sign_in_id: str) -> SignInStart | None:
        """See SessionLifecycle.sign_in_started."""
        return self.lifecycle.sign_in_started(sign_in_id)

    async def complete_sign_in(
        self, signed_in: SignedIn, actor: Actor | None = None
    ) -> AccountInfo:
        """See SessionLifecycle.complete_sign_in."""
        return await self.lifecycle.complete_sign_in(signed_in, actor)

    def sign_in_failed(self, sign_in_id: str, detail: str) -> None:
        """See SessionLifecycle.sign_in_failed."""
        self.lifecycle.sign_in_failed(sign_in_id, detail)

    def sign_in_progress(self, sign_in_id: str, detail: str) -> None:
        """See SessionLifecycle.sign_in_progress."""
        self.lifecycle.sign_in_progress(sign_in_id, detail)

    async def sign_out(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor | None = None,
        entitlement: Entitlement = EVERYTHING,
    ) -> SignOutResult:
        """See SessionLifecycle.sign_out."""
        return await self.lifecycle.sign_out(
            account_id, page_url, actor=actor, entitlement=entitlement
        )

    async def remove_account(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor,
        entitlement: Entitlement = EVERYTHING,
    ) -> str:
        """See SessionLifecycle.remove_account."""
        return await self.lifecycle.remove_account(
            account_id, page_url, actor=actor, entitlement=entitlement
        )

    async def set_default(
        self, account_id: str, *, actor: Actor, entitlement: Entitlement = EVERYTHING
    ) -> AccountInfo:
        """See SessionLifecycle.set_default."""
        return await self.lifecycle.set_default(account_id, actor=actor, entitlement=entitlement)

    async def provider_logout_url(
        self,
        post_logout_redirect_uri: str = "",
        id_token_hint: str | None = None,
        account_id: str = "",
    ) -> str:
        """See SessionLifecycle.provider_logout_url."""
        return await self.lifecycle.provider_logout_url(
            post_logout_redirect_uri, id_token_hint, account_id
        )
