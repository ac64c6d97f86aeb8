"""The session layer, built and started as one: what the gRPC API and the loopback pages use.

Three parts do the work, each with one concern, and callers use them directly: the
account registry (who is signed in, what callers may see, the encrypted records), the
token keeper (tokens on demand and ahead of time, renewal, re-validation, provider
health) and the session lifecycle (sign-ins, sign-out, removal). The manager builds
them together and starts them once, when the providers and the store are loaded:
`ready` is set then, and the API waits for it before any call (daemon.api.statuses.unary).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from .events import EventBus
from .lifecycle import SessionLifecycle
from .ports import AccountStore, AuditSink, NoAudit
from .providers import Providers
from .registry import AccountRegistry
from .renewal import TokenKeeper, keep


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
