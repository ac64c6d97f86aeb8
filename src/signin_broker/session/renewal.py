"""Tokens on demand and ahead of time: renewal, re-validation, and expiry.

An account's tokens are renewed at 75 % of their lifetime, once however many callers
ask at the same moment: one refresh task per account is shared by all of them, and
every call that spends a refresh token runs under the account's lock, because a
rotated refresh token may be spent only once (refresh_grant.py). A rotated refresh
token is written to the encrypted store before the new access token is handed out.
While the provider cannot be reached a still-valid token is served and renewal backs
off (provider_health.py). Down-scoped tokens (fewer scopes, or an audience) come from
scoped_tokens.py; every token handed out is counted and audited (use_ledger.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..oidc.errors import OAuthError, ProviderUnavailable
from ..store.audit import Actor
from .accounts import EVERYTHING, Account, Entitlement, IssuedToken
from .clock import to_wall
from .errors import (
    AudienceNotAllowed,
    IdTokenNotAllowed,
    IdTokenUnavailable,
    ProviderUnreachable,
    ScopeNotGranted,
    ScopesNotAllowed,
    StorageWaits,
    TokenLifetimeTooShort,
    TokenTooShortLived,
)
from .events import EventKind, SessionEvent
from .ports import AuditSink, daemon_actor
from .provider_health import ProviderHealth, refreshing
from .refresh_grant import REFRESH_ANSWER_SECONDS, RefreshGrant
from .registry import AccountRegistry
from .revocation import revoke
from .schedule import (
    BACKOFF_FIRST_SECONDS,
    BACKOFF_MAX_SECONDS,
    next_revalidation,
)
from .scoped_tokens import CALLER_WAIT_SECONDS, RENEWAL_PENDING, DownScopedTokens
from .tokens import TokenSet
from .use_ledger import UseLedger

if TYPE_CHECKING:  # the OAuth stack loads after start-up (see daemon.app)
    pass

log = logging.getLogger(__name__)

# A caller whose token is still good waits this long for a renewal, then gets the
# current token while the renewal goes on: an outage never stalls the apps.
RENEWAL_WAIT_SECONDS = 2.0
ARRIVED_DEAD = "the provider's answer took longer to arrive than its token lives; renewing again"


class TokenKeeper:
    """Hands out the accounts' tokens, renewing and re-validating them at the provider."""

    def __init__(
        self,
        registry: AccountRegistry,
        audit: AuditSink,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
        answer_idle: float = REFRESH_ANSWER_SECONDS,
    ) -> None:
        self._registry = registry
        self._audit = audit
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock
        self._health = ProviderHealth(registry, revalidate_seconds=revalidate_seconds, clock=clock)
        self._grant = RefreshGrant(registry, self._health, clock, answer_idle=answer_idle)
        self._scoped = DownScopedTokens(registry, self._grant, self._health, clock)
        self.uses = UseLedger(audit, clock)

    async def get_token(
        self,
        account_id: str,
        scopes: Sequence[str],
        min_ttl: int,
        *,
        audience: str = "",
        actor: Actor | None = None,
        entitlement: Entitlement = EVERYTHING,
        id_token: bool = False,
        refused: bool = False,
    ) -> IssuedToken:
        """A token of the account (default when empty) valid for min_ttl seconds more.

        `refused`: a server refused the token handed out last (HTTP 401); it is renewed
        now, unless renewing for a refusal already happened within a quarter of its
        lifetime (a server that refuses every token must not make the daemon hammer).

        With id_token, the account's ID token too, valid as long (IdTokenNotAllowed
        unless the caller's rule allows it; IdTokenUnavailable when the provider did
        not renew it with the access token).

        TokenLifetimeTooShort when the provider's tokens never last that long: after at
        most one renewal, so such a caller costs the provider nothing more.

        With scopes narrower than the sign-in's, or an audience, the token is a
        down-scoped one, kept until it wants renewing like any other; each one the
        provider is asked for counts against the app's budget (TooManyNewTokens). A
        caller limited to some scopes gets a token of those scopes when it names none.
        """
        if entitlement.scopes is not None and not entitlement.scopes.issuperset(scopes):
            raise ScopesNotAllowed(entitlement.scopes)
        if id_token and not entitlement.id_token:
            raise IdTokenNotAllowed(actor.app if actor is not None else "APP")
        if entitlement.audience:
            if audience not in ("", entitlement.audience):
                raise AudienceNotAllowed(entitlement.audience)
            audience = entitlement.audience
        account = self._registry.resolve(account_id, entitlement)
        if entitlement.scopes is not None and not scopes:
            scopes = sorted(entitlement.scopes & frozenset(account.tokens.scopes))
            if not scopes:  # never the whole sign-in's token for want of a common scope
                raise ScopeNotGranted(sorted(entitlement.scopes), account.info.id)
        missing = [scope for scope in scopes if scope not in account.tokens.scopes]
        if missing:
            raise ScopeNotGranted(missing, account.info.id)
        wanted = frozenset(scopes)
        if audience or (wanted and wanted != frozenset(account.tokens.scopes)):
            app = actor.app if actor is not None else ""
            tokens = await self._scoped.token(account, (wanted, audience), min_ttl, app, refused)
        else:
            tokens = await self._main_token(account, min_ttl, refused=refused)
        identity = self._id_token(account, min_ttl) if id_token else ("", 0)
        if actor is not None:
            self.uses.note(account, actor, tokens, audience, id_token)
        return IssuedToken(
            access_token=tokens.access_token,
            token_type=tokens.token_type,
            expires_at=int(to_wall(self._clock, tokens.expires_at)),
            scopes=tokens.scopes,
            account=account.info.id,
            id_token=identity[0],
            id_token_expires_at=identity[1],
            acr=account.info.acr,
            auth_time=account.info.auth_time,
            dpop_bound_by=account.info.dpop_bound_by if account.dpop_for(tokens) else "",
        )

    def _id_token(self, account: Account, min_ttl: int) -> tuple[str, int]:
        """The session's ID token and its expiry, if it lasts min_ttl seconds more."""
        token = account.tokens.id_token
        if not token:
            raise IdTokenUnavailable("the provider issued no ID token for this session")
        from ..oidc.id_tokens import id_token_expiry  # loaded by the time there are tokens

        expires_at = id_token_expiry(token)  # the provider's time: the wall clock's
        if expires_at < to_wall(self._clock, self._clock()) + min_ttl:
            raise IdTokenUnavailable(
                "the session's ID token has expired and the provider did not renew it with"
                " the access token; sign in again (`signin-broker login`)"
            )
        return token, expires_at

    async def _main_token(  # noqa: PLR0911 - each return is a different situation
        self, account: Account, min_ttl: int, *, refused: bool = False
    ) -> TokenSet:
        tokens = account.tokens
        now = self._clock()
        if tokens.serves(now, min_ttl, refused):
            return tokens  # the common case: no lock, no await
        if tokens.renewal_would_hammer(now, min_ttl):  # issue 14, finding 5
            raise TokenLifetimeTooShort(tokens.lifetime, min_ttl)
        if not self._registry.renewable(account):
            return await self._unrenewable(account, min_ttl)
        if now < account.retry_at and not refreshing(account):
            # Backing off: do not hammer a failing (or refusing) provider.
            return self._without_renewal(account, min_ttl, self._health.reason(account))
        task = self._start_refresh(account)
        wait = RENEWAL_WAIT_SECONDS if tokens.lasts(now, min_ttl) else CALLER_WAIT_SECONDS
        try:
            renewed = await asyncio.wait_for(asyncio.shield(task), wait)
        except TimeoutError:
            return self._without_renewal(account, min_ttl, RENEWAL_PENDING)  # it carries on
        except StorageWaits:
            if account.tokens.lasts(self._clock(), min_ttl):
                return account.tokens
            raise
        except ProviderUnavailable as error:
            return self._without_renewal(account, min_ttl, str(error))
        except OAuthError:
            if not self._registry.is_current(account):
                raise self._registry.sign_in_required(account.info.id) from None
            return self._without_renewal(account, min_ttl, self._health.reason(account))
        return self._renewed_for(account, renewed, min_ttl)

    def _renewed_for(self, account: Account, renewed: TokenSet, min_ttl: int) -> TokenSet:
        """A renewal's token, for a caller asking min_ttl, if the account is still signed in."""
        if not self._registry.is_current(account):
            raise self._registry.sign_in_required(account.info.id)  # ended meanwhile
        if renewed.lifetime < min_ttl:
            raise TokenLifetimeTooShort(renewed.lifetime, min_ttl)
        if not renewed.is_valid(self._clock()):  # the keeper renews it at once
            return self._without_renewal(account, min_ttl, ARRIVED_DEAD)
        return renewed

    def _start_refresh(self, account: Account) -> asyncio.Task[TokenSet]:
        """The account's renewal under way, or a new one: one at a time, whoever asks."""
        task = account.refresh_task
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._refresh_main(account))
            task.add_done_callback(self._refresh_ended)
            account.refresh_task = task
        return task

    def _refresh_ended(self, task: asyncio.Task[TokenSet]) -> None:
        """Wake the keeper; the task dealt with its outcome, awaited by a caller or not."""
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it as lost
        self._registry.changed.set()

    async def _refresh_main(self, account: Account) -> TokenSet:
        """Renew the main token; shared by every caller waiting at that moment."""
        async with account.refresh_lock:
            asked_at = self._clock()  # the provider's tokens live from about then, not arrival
            try:
                response = await self._grant.spend(account)
            except OAuthError as error:
                await self._grant.refused(account, error)
                raise
            renewed = account.tokens.renewed(response, asked_at)
            if not self._registry.is_current(
                account
            ):  # signed out while the provider took its time
                await revoke(account.client, renewed, account.dpop_key)
                return renewed
            await self._registry.persist(account, renewed)
            account.tokens = renewed
        self._publish(EventKind.REFRESHED, account.info.id, "the access token was renewed")
        return renewed

    async def finish_renewals(self, grace: float) -> None:
        """Give the renewals under way up to grace seconds to be answered and stored (a stop)."""
        running = [
            account.refresh_task
            for account in self._registry.all()
            if account.refresh_task is not None and not account.refresh_task.done()
        ]
        if running:
            await asyncio.wait(running, timeout=grace)

    async def _unrenewable(self, account: Account, min_ttl: int) -> TokenSet:
        """The token of a session that cannot be renewed, while it serves; none after expiry."""
        tokens, now = account.tokens, self._clock()
        if tokens.lasts(now, min_ttl):
            return tokens
        if tokens.is_valid(now):
            raise TokenTooShortLived(int(tokens.expires_at - now))
        await self._expire(account)
        raise self._registry.sign_in_required(account.info.id)

    async def _expire(self, account: Account) -> None:
        """End a session whose token expired and cannot be renewed: status agrees with GetToken."""
        if account.client is None:
            reason = "its identity provider is no longer configured"
        else:
            reason = account.tokens.refresh_lost or "the provider issued no refresh token"
        log.warning(
            "the session ended: its access token expired and cannot be renewed",
            extra={"account": account.info.id, "reason": reason},
        )
        detail = f"the access token expired and cannot be renewed ({reason}); sign in again"
        await self._registry.end(
            account, EventKind.SIGNED_OUT, detail, daemon_actor(), by_itself=True
        )

    def _without_renewal(self, account: Account, min_ttl: int, reason: str) -> TokenSet:
        """The current token while a renewal is pending or failed, if it serves the caller."""
        if account.tokens.lasts(self._clock(), min_ttl):
            return account.tokens
        raise ProviderUnreachable(reason, self._health.retry_in(account))

    async def tend(self) -> float:
        """Renew, re-validate and expire what is due; return the seconds until something is.

        A renewal runs on in its own task (it may wait minutes for the provider); when
        it ends, it wakes the keeper (`changed`).
        """
        now = self._clock()
        if self._registry.saving_fails and now >= self._registry.save_retry_at:
            await self._registry.save_unsaved()
        for account in self._registry.all():
            renewable = self._registry.renewable(account)
            if not renewable and not account.tokens.is_valid(now):
                await self._expire(account)
            elif now < account.retry_at:
                continue
            elif renewable and now >= self._renewal_at(account) and not refreshing(account):
                self._start_refresh(account)
            elif now >= account.revalidate_at:
                await self._revalidate(account)
        return self._next_due() - self._clock()

    def _renewal_at(self, account: Account) -> float:
        """When the keeper renews the account: when due, and its state can be written.

        A renewal whose new refresh token cannot be stored would leave the old, spent
        one on disk for the next start to send; so it waits, however long, until the
        state is saved again (the keeper tries every few seconds), then renews at once.
        """
        if self._registry.is_unsaved(account) and not account.tokens.refresh_kept:
            return math.inf
        return account.refresh_at

    async def _revalidate(self, account: Account) -> None:
        """Ask the provider whether the session still stands (contract I2, within 60 s)."""
        client = account.client
        link, asked_at = self._health.link(account), self._clock()
        account.revalidate_at = next_revalidation(
            asked_at, self._revalidate_seconds, link.answer_seconds
        )
        if client is None:
            return  # a provider no longer configured: its accounts are not restored
        started = time.perf_counter()
        try:
            await client.userinfo(account.tokens.access_token, account.dpop_for(account.tokens))
            rejected = False
        except ProviderUnavailable as error:
            self._health.failed(account, str(error))
            return
        except OAuthError:
            rejected = True
        link.timed(time.perf_counter() - started)
        if account.refusal:  # answering is not renewing: the refusal's backoff goes on
            link.last_contact = self._clock()
        else:
            self._health.answered(account, asked_at)
        if rejected and self._registry.renewable(account):
            self._start_refresh(account)  # the refresh decides
        elif rejected:
            await self._grant.provider_ended(account, "it rejects the access token")

    def _next_due(self) -> float:
        now = self._clock()
        moments = [BACKOFF_MAX_SECONDS + now]
        for account in self._registry.all():
            if account.retry_at > now:
                moments.append(account.retry_at)
                continue
            moments.append(account.revalidate_at)
            if not self._registry.renewable(account):
                moments.append(account.tokens.expires_at)
            elif not refreshing(account):
                moments.append(self._renewal_at(account))
        if self._registry.saving_fails:
            moments.append(self._registry.save_retry_at)
        return min(moments)

    def _publish(self, kind: EventKind, account: str, detail: str) -> None:
        self._registry.events.publish(SessionEvent(kind, account=account, detail=detail))


async def keep(keeper: TokenKeeper, changed: asyncio.Event) -> None:
    """The background keeper: renew ahead of time and re-validate, until cancelled."""
    while True:
        changed.clear()  # before tend(): what changes meanwhile wakes the next wait
        try:
            delay = await keeper.tend()
        except Exception:
            log.exception("the session keeper failed; trying again shortly")
            delay = BACKOFF_FIRST_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), max(0.05, min(delay, BACKOFF_MAX_SECONDS)))
