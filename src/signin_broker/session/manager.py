"""The front door to the sessions: what the gRPC API, the loopback pages and the daemon use.

Each use case is one method here; the servicer and the pages translate requests and
answers, never reaching the parts behind it. Four parts do the work, each with one
concern: the account registry (who is signed in, what callers may see, the encrypted
records), the token keeper (tokens on demand and ahead of time, renewal,
re-validation, provider health), the sign-ins under way (session.sign_ins) and the
session lifecycle (sign-out, removal, the default). The manager builds them together
and starts them once, when the providers and the store are loaded: `ready` is set
then, and the API waits for it before any call (daemon.api.statuses.unary).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..locations import STEP_UP_TIMEOUT_SECONDS
from ..oidc.dpop import htu, is_bound
from ..store.audit import Actor
from . import audit_rows
from .accounts import EVERYTHING, AccountInfo, AppUse, Entitlement, IssuedToken, SignInState
from .errors import AliasHidesLogin
from .events import EndedSession, EventBus
from .lifecycle import SessionLifecycle
from .names import AccountNames
from .ports import AccountStore, AliasStore, AuditSink, NoAudit
from .providers import Providers
from .refresh_grant import REFRESH_ANSWER_SECONDS
from .registry import AccountRegistry
from .renewal import TokenKeeper, keep
from .sign_ins import SignIns
from .step_up import StepUp
from .step_ups import StepUps


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """The sign-in state as one caller may know it (GetStatus, the TUI, `status`)."""

    state: SignInState
    default: AccountInfo | None
    account_count: int
    storage_problem: str  # why sessions may not survive a restart; "" when they will
    ended: list[EndedSession]  # sessions that ended by themselves, until signed in again


class SessionManager:
    """The accounts, their tokens and sessions, and the events about them."""

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
        self._audit = audit
        self._events = events if events is not None else EventBus()
        self._names = AccountNames()
        self._registry = AccountRegistry(
            self._events, audit, self._names, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self._keeper = TokenKeeper(
            self._registry,
            audit,
            revalidate_seconds=revalidate_seconds,
            clock=clock,
            answer_idle=answer_idle,
        )
        self._sign_ins = SignIns(
            self._registry, audit, revalidate_seconds=revalidate_seconds, clock=clock
        )
        self._step_ups = StepUps(
            self._registry, self._sign_ins, timeout=step_up_seconds, clock=clock
        )
        self._lifecycle = SessionLifecycle(
            self._registry, self._sign_ins, self._names, audit, clock=clock
        )
        self.ready = asyncio.Event()  # set by start(): the stored accounts are back
        # The hot path (GetToken) calls the keeper with no frame in between.
        self.get_token = self._keeper.get_token
        self.begin_sign_in = self._sign_ins.begin
        self.continued_step_up = self._step_ups.continued
        self.waiting_step_ups = self._step_ups.waiting
        self.browser_sign_in_url = self._sign_ins.browser_url
        self.take_browser_sign_in = self._sign_ins.take_browser
        self.complete_sign_in = self._sign_ins.complete
        self.sign_in_failed = self._sign_ins.failed
        self.device_sign_in = self._sign_ins.device
        self.waiting_devices = self._sign_ins.waiting_devices
        self.sign_out = self._lifecycle.sign_out
        self.remove_account = self._lifecycle.remove_account
        self.set_default = self._lifecycle.set_default
        self.provider_logout_url = self._lifecycle.provider_logout_url
        self.take_logout_link = self._lifecycle.logout_links.take
        self.accounts = self._registry.accounts
        self.sign_in_state = self._registry.state
        self.account = self._registry.account
        self.subscribe = self._events.subscribe

    async def start(
        self,
        providers: Providers,
        store: AccountStore | None,
        storage: str,
        aliases: AliasStore | None = None,
    ) -> None:
        """Take the providers and the stores, bring the stored accounts back, and be ready."""
        try:
            await self._names.restore(aliases)
            await self._registry.restore(providers, store, storage)
        finally:
            self.ready.set()
            self._registry.changed.set()

    async def keep(self) -> None:
        """Renew and re-validate in the background until cancelled (after start)."""
        await keep(self._keeper, self._registry.changed)

    async def tend(self) -> float:
        """One round of renewal and re-validation (what keep() repeats); when the next is due."""
        return await self._keeper.tend()

    async def wind_down(self, grace: float, reason: str) -> None:
        """At the daemon's stop: renewals under way finish, device sign-ins end, watches end.

        Nothing of a device sign-in is stored: its owner is told instead.
        """
        await self._keeper.finish_renewals(grace)  # else a rotated refresh token is lost
        await self._sign_ins.cancel_devices(None, reason)
        self._events.close(reason)

    async def close(self) -> None:
        """Close the providers' HTTP clients (after wind_down)."""
        for link in self.providers:
            await link.client.close()
            if link.device_client is not link.client:
                await link.device_client.close()

    async def dpop_proof(
        self,
        account_id: str,
        scopes: list[str],
        min_ttl: int,
        *,
        method: str,
        url: str,
        nonce: str = "",
        audience: str = "",
        actor: Actor,
        entitlement: Entitlement = EVERYTHING,
        refused: bool = False,
    ) -> tuple[IssuedToken, str]:
        """A token as get_token gives it, and a DPoP proof for one request with it.

        The proof ("" for a token that is not DPoP-bound) names the method, the URL,
        the token's hash and the server's nonce; the account's key never leaves here.
        """
        token = await self.get_token(
            account_id,
            scopes,
            min_ttl,
            audience=audience,
            actor=actor,
            entitlement=entitlement,
            refused=refused,
        )
        account = self._registry.resolve(token.account, entitlement)
        key, client = account.dpop_key, account.client
        if key is None or not is_bound(token.token_type):
            return token, ""
        now = client.provider_time() if client is not None else None  # the device's may be off
        proof = key.proof(
            method, url, access_token=token.access_token, nonce=nonce or None, now=now
        )
        parts = urlsplit(htu(url))  # no user:password@ in the audit
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        self._audit.record(
            audit_rows.dpop_proof_signed(actor, token.account, origin, token.expires_at)
        )
        return token, proof

    async def stepped_up_token(
        self,
        step_up: StepUp,
        begin_url: str,
        account_id: str,
        *,
        actor: Actor,
        entitlement: Entitlement,
        may_begin: bool = True,
        **asked: object,
    ) -> IssuedToken:
        """get_token() for a request with a step-up: after a sign-in that meets it, if need be.

        With may_begin False (a forward's caller), only a sign-in that meets it already.
        """
        return await self._step_ups.token(
            self.get_token,
            step_up,
            account_id,
            app=actor.app,
            entitlement=entitlement,
            begin_url=begin_url,
            may_begin=may_begin,
            actor=actor,
            **asked,
        )

    # -- accounts by name ----------------------------------------------------------------

    def account_named(self, name: str, entitlement: Entitlement = EVERYTHING) -> str:
        """The id of the account a request names: its id, alias, e-mail or login (session.names).

        Every request that names an account asks here, as the caller it comes from:
        AccountNotFound when nothing it may see fits, AmbiguousAccount when several do.
        """
        if not name or name in self._registry.ids:  # an id, signed in: the common case
            return name
        return self._names.resolve(name, self._registry.all(), entitlement)

    async def set_alias(
        self, alias: str, account: str, *, actor: Actor, force: bool = False
    ) -> str:
        """Let `alias` name a signed-in account (named in any way); the account's id.

        AliasHidesLogin when it is another account's login, unless forced.
        """
        chosen = self._registry.resolve(self.account_named(account), EVERYTHING)
        hidden = self._names.hidden_by(alias, chosen.info.id, self._registry.all())
        if hidden and not force:
            raise AliasHidesLogin(alias, chosen.info.id, hidden)
        await self._names.set(alias, chosen.info.id)
        self._audit.record(audit_rows.alias_set(actor, chosen.info.id, alias))
        return chosen.info.id

    async def remove_alias(self, alias: str, *, actor: Actor) -> str:
        """Remove an alias; the id of the account it named."""
        named = await self._names.remove(alias)
        self._audit.record(audit_rows.alias_removed(actor, named, alias))
        return named

    # -- what callers may know -----------------------------------------------------------

    def status(self, entitlement: Entitlement = EVERYTHING) -> SessionStatus:
        """The sign-in state, the default account and the sessions that ended, as seen."""
        default_id = self._registry.default_for(entitlement)
        return SessionStatus(
            state=self._registry.state(entitlement),
            default=self._registry.account(default_id, entitlement),
            account_count=len(self._registry.accounts(entitlement)),
            storage_problem=self._registry.storage_problem(entitlement),
            ended=self._registry.ended(entitlement),
        )

    def app_use(self) -> Mapping[str, AppUse]:
        """Each app's use of the accounts, by app id (for the app listing)."""
        return self._keeper.uses.app_use

    @property
    def providers(self) -> Providers:
        """The configured providers (none before start)."""
        return self._registry.providers

    @property
    def storage(self) -> str:
        """Where sessions are kept across restarts, for status."""
        return self._registry.storage

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
