"""The front door to the sessions: their rooms, one per use case, built together and started once.

What the gRPC API, the loopback pages and the daemon's start and stop use, each a room
of its own: the tokens handed out (TokenKeeper: renewed, re-validated, down-scoped,
DPoP-proven), step-up sign-ins (StepUpSignIns), every sign-in under way and how it
ends (SignIns), sessions ended and the default chosen (SessionLifecycle), accounts by
name and their aliases (Naming), and what each caller may see of it all
(SessionOverview). Behind them, and no caller's business: the account registry, the
saved state, the providers' health and the event bus. The manager builds the rooms and
starts them once, when the providers and the store are loaded: `ready` is set then,
and the API waits for it before any call (daemon/api/dispatch.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..locations import STEP_UP_TIMEOUT_SECONDS
from .accounts.events import EventBus, Subscription
from .accounts.names import AccountNames, Naming
from .accounts.overview import SessionOverview
from .accounts.registry import AccountRegistry
from .fresh_tokens.keeper import TokenKeeper, keep
from .fresh_tokens.provider_health import ProviderHealth
from .ports import AccountStore, AliasStore, AuditSink, NoAudit
from .providers.links import Providers
from .schedule import REFRESH_ANSWER_SECONDS
from .signing_in.sign_ins import SignIns
from .signing_in.step_up_sign_ins import StepUpSignIns
from .signing_out.lifecycle import SessionLifecycle


class SessionManager:
    """The sessions' rooms, and their start, background upkeep and stop."""

    def __init__(
        self,
        *,
        revalidate_seconds: int = 30,
        step_up_seconds: float = STEP_UP_TIMEOUT_SECONDS,
        audit: AuditSink | None = None,
        events: EventBus | None = None,
        clock: Callable[[], float] = time.time,
        answer_idle: float = REFRESH_ANSWER_SECONDS,
    ) -> None:
        audit = audit if audit is not None else NoAudit()
        self._events = events if events is not None else EventBus()
        self._aliases = AccountNames()
        self._registry = AccountRegistry(
            self._events, audit, revalidate_seconds=revalidate_seconds, clock=clock
        )
        health = ProviderHealth(
            self._registry, self._events, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self.tokens = TokenKeeper(
            self._registry, health, audit, self._events, clock=clock, answer_idle=answer_idle
        )
        self.overview = SessionOverview(self._registry, self._aliases, self.tokens.uses, clock)
        self.names = Naming(self._aliases, self._registry, audit)
        self.sign_ins = SignIns(
            self._registry, self.overview, health, audit, self._events, clock=clock
        )
        self.step_ups = StepUpSignIns(
            self._registry,
            self.sign_ins,
            self.tokens.get_token,
            self._events,
            timeout=step_up_seconds,
            clock=clock,
        )
        self.endings = SessionLifecycle(
            self._registry, self.overview, self.sign_ins, self._aliases, audit, clock=clock
        )
        self.ready = asyncio.Event()  # set by start(): the stored accounts are back

    async def start(
        self,
        providers: Providers,
        store: AccountStore | None,
        storage: str,
        aliases: AliasStore | None = None,
    ) -> None:
        """Take the providers and the stores, bring the stored accounts back, and be ready."""
        try:
            await self._aliases.restore(aliases)
            await self._registry.restore(providers, store, storage)
        finally:
            self.ready.set()
            self._registry.changed.set()

    def subscribe(self, own: bool = False) -> AbstractContextManager[Subscription]:
        """Hear every event of the sessions from now on, while the context lasts.

        `own`: the daemon's own subscription (its notices), which is no app's watch.
        """
        return self._events.subscribe(own)

    def work_counters(self) -> dict[str, Callable[[], int]]:
        """What counts the sessions' work that keeps the daemon running (daemon/idle_exit.py).

        Sign-ins and step-ups a person is completing, renewals, grants and confirmations
        at the provider (never cut by an exit), apps watching the events.
        """
        return {
            "sign-ins": self.sign_ins.pending,
            "step-ups": lambda: len(self.step_ups.waiting()),
            "renewals": self.tokens.under_way,
            "watchers": lambda: self._events.watchers,
        }

    async def keep(self) -> None:
        """Renew and re-validate in the background until cancelled (after start)."""
        await keep(self.tokens, self._registry.changed)

    async def tend(self) -> float:
        """One round of renewal and re-validation (what keep() repeats); when the next is due."""
        return await self.tokens.tend()

    async def wind_down(self, grace: float, reason: str) -> None:
        """At the daemon's stop: renewals under way finish, device sign-ins end, watches end.

        Nothing of a device sign-in is stored: its owner is told instead.
        """
        await self.tokens.finish_renewals(grace)  # else a rotated refresh token is lost
        await self.sign_ins.cancel_devices(None, reason)
        self._events.close(reason)

    async def close(self) -> None:
        """Close the providers' HTTP clients (after wind_down)."""
        for link in self._registry.providers:
            await link.client.close()
            if link.device_client is not link.client:
                await link.device_client.close()
