"""Tokens on demand and ahead of time: renewal, re-validation, expiry, and DPoP proofs for apps.

An account's tokens are renewed when session.schedule says, once however many callers
ask at the same moment: one renewal task per account is shared by all of them, and
every call that spends a refresh token runs under the account's lock, because a
rotated refresh token may be spent only once (refresh_grant.py). A rotated refresh
token is written to the encrypted store before the new access token is handed out
(registry.AccountRegistry.replace_tokens). While the provider cannot be reached a
still-valid token is served and renewal backs off (provider_health.py). Down-scoped
tokens (fewer scopes, or an audience) come from scoped_tokens.py; every token handed
out is counted and audited (use_ledger.py). A service account's tokens are renewed the
same way, by the client credentials grant instead of a refresh token
(service_accounts.py), and never re-validated: it has no session at the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ...oidc.answers import id_token_expiry
from ...oidc.dpop import htu, is_bound
from ...oidc.errors import OAuthError, ProviderUnavailable
from ...states import EventKind
from .. import audit_entries, schedule
from ..accounts.events import EventBus, SessionEvent
from ..accounts.records import EVERYTHING, Account, Entitlement, IssuedToken
from ..accounts.registry import AccountRegistry
from ..accounts.use_ledger import UseLedger
from ..audit_entries import Actor, daemon_actor
from ..clock import to_wall
from ..errors import (
    AudienceNotAllowed,
    IdTokenNotAllowed,
    IdTokenUnavailable,
    NoPerson,
    ProviderRefused,
    ProviderUnreachable,
    ScopeNotGranted,
    ScopesNotAllowed,
    StorageWaits,
    TokenLifetimeTooShort,
    TokenTooShortLived,
)
from ..ports import AuditSink
from ..providers.revocation import revoke
from ..tokens import TokenSet
from .provider_health import ProviderHealth
from .refresh_grant import RefreshGrant
from .scoped_tokens import RENEWAL_PENDING, DownScopedTokens
from .service_accounts import ClientCredentialsGrant

log = logging.getLogger(__name__)

ARRIVED_DEAD = "the provider's answer took longer to arrive than its token lives; renewing again"


def _not_granted(missing: list[str], account: Account) -> ScopeNotGranted:
    """The refusal of scopes the account lacks, with what the sign-in asked for and got."""
    link = account.link
    asked = link.sign_in.scopes if link is not None else ()
    return ScopeNotGranted(missing, account.info.id, account.tokens.scopes, asked)


class TokenKeeper:
    """Hands out the accounts' tokens, renewing and re-validating them at the provider."""

    def __init__(
        self,
        registry: AccountRegistry,
        health: ProviderHealth,
        audit: AuditSink,
        events: EventBus,
        *,
        clock: Callable[[], float] = time.time,
        answer_idle: float = schedule.REFRESH_ANSWER_SECONDS,
    ) -> None:
        self._registry = registry
        self._health = health
        self._audit = audit
        self._events = events
        self._clock = clock
        self._grant = RefreshGrant(registry, health, clock, answer_idle=answer_idle)
        self._client_grant = ClientCredentialsGrant(health, clock)
        self._scoped = DownScopedTokens(registry, self._grant_for, health, clock)
        self.uses = UseLedger(audit, registry, clock)

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
        now, unless it was renewed for a refusal too recently for that
        (schedule.refused_renewal_allowed: a server that refuses every token must not
        make the daemon hammer).

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
        app = actor.app if actor is not None else ""
        account, wanted, audience = self._asked(
            account_id, (scopes, audience, id_token), entitlement, app
        )
        if self._clock() >= account.standing.confirm_by:  # owed before a token is served
            refused = await self._confirm(account) or refused  # rejected: its renewal decides
            account = self._registry.signed_in(account)  # unless the confirmation ended it
        if audience or (wanted and wanted != frozenset(account.tokens.scopes)):
            tokens = await self._scoped.token(account, (wanted, audience), min_ttl, app, refused)
        else:
            tokens = await self._main_token(account, min_ttl, refused=refused)
        account = self._registry.current(account) or account  # as it stands, after a renewal
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
            renew_at=int(to_wall(self._clock, tokens.refresh_due_at())),
        )

    def _grant_for(self, account: Account) -> RefreshGrant | ClientCredentialsGrant:
        """How the account's tokens are renewed: its refresh token, or the client's credentials."""
        return self._client_grant if account.info.service else self._grant

    def _asked(
        self,
        account_id: str,
        asked: tuple[Sequence[str], str, bool],
        entitlement: Entitlement,
        app: str,
    ) -> tuple[Account, frozenset[str], str]:
        """The account, scopes and audience a request means, within what the caller may get.

        `asked`: the scopes, the audience, and whether the ID token too.
        """
        scopes, audience, id_token = asked
        if entitlement.scopes is not None and not entitlement.scopes.issuperset(scopes):
            raise ScopesNotAllowed(entitlement.scopes)
        if id_token and not entitlement.id_token:
            raise IdTokenNotAllowed(app or "APP")
        if entitlement.audience:
            if audience not in ("", entitlement.audience):
                raise AudienceNotAllowed(entitlement.audience)
            audience = entitlement.audience
        account = self._registry.resolve(account_id, entitlement)
        granted = account.tokens.scopes
        if entitlement.scopes is not None and not scopes:
            scopes = sorted(entitlement.scopes & frozenset(granted))
            if not scopes:  # never the whole sign-in's token for want of a common scope
                raise _not_granted(sorted(entitlement.scopes), account)
        missing = [scope for scope in scopes if scope not in granted]
        if missing:
            raise _not_granted(missing, account)
        return account, frozenset(scopes), audience

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
            audit_entries.dpop_proof_signed(actor, token.account, origin, token.expires_at)
        )
        return token, proof

    def _id_token(self, account: Account, min_ttl: int) -> tuple[str, int]:
        """The session's ID token and its expiry, if it lasts min_ttl seconds more."""
        if account.info.service:
            raise NoPerson(account.info.id, "it has no ID token, only access tokens")
        token = account.tokens.id_token
        if not token:
            raise IdTokenUnavailable("the provider issued no ID token for this session")
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
        if tokens.renewal_would_hammer(now, min_ttl):
            raise TokenLifetimeTooShort(tokens.lifetime, min_ttl)
        if not account.renewable:
            return await self._unrenewable(account, min_ttl)
        if now < account.standing.retry_at and not account.hold.renewing:
            # Backing off: do not hammer a failing (or refusing) provider.
            return self._without_renewal(account, min_ttl, self._health.reason(account))
        task = self._start_renewal(account)
        lasts = tokens.lasts(now, min_ttl)
        wait = schedule.RENEWAL_WAIT_SECONDS if lasts else schedule.CALLER_WAIT_SECONDS
        try:
            renewed = await asyncio.wait_for(asyncio.shield(task), wait)
        except TimeoutError:
            return self._without_renewal(account, min_ttl, RENEWAL_PENDING)  # it carries on
        except StorageWaits:
            if tokens.lasts(self._clock(), min_ttl):
                return tokens
            raise
        except ProviderUnavailable as error:
            return self._without_renewal(account, min_ttl, str(error))
        except ProviderRefused:
            account = self._registry.signed_in(account)
            return self._without_renewal(account, min_ttl, self._health.reason(account))
        return self._renewed_for(account, renewed, min_ttl)

    def _renewed_for(self, account: Account, renewed: TokenSet, min_ttl: int) -> TokenSet:
        """A renewal's token, for a caller asking min_ttl, if the account is still signed in."""
        self._registry.signed_in(account)  # not ended meanwhile
        if renewed.lifetime < min_ttl:
            raise TokenLifetimeTooShort(renewed.lifetime, min_ttl)
        if not renewed.is_valid(self._clock()):  # the keeper renews it at once
            return self._without_renewal(account, min_ttl, ARRIVED_DEAD)
        return renewed

    def _start_renewal(self, account: Account) -> asyncio.Task[TokenSet]:
        """The account's renewal under way, or a new one: one at a time, whoever asks."""

        def start() -> asyncio.Task[TokenSet]:
            task = asyncio.get_running_loop().create_task(self._renew(account))
            task.add_done_callback(self._renewal_ended)
            return task

        return account.hold.renewal(start)

    def _renewal_ended(self, task: asyncio.Task[TokenSet]) -> None:
        """Wake the keeper; the task dealt with its outcome, awaited by a caller or not."""
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it as lost
        self._registry.changed.set()

    async def _renew(self, account: Account) -> TokenSet:
        """Renew the main token; shared by every caller waiting at that moment."""
        async with account.hold.lock:
            # As it stands now: the lock's last holder may have rotated its refresh token.
            account = self._registry.signed_in(account)
            asked_at = self._clock()  # the provider's tokens live from about then, not arrival
            grant = self._grant_for(account)
            try:
                response = await grant.spend(account)
            except ProviderRefused as refusal:
                await grant.refused(account, refusal)
                raise
            renewed = account.tokens.renewed(response, asked_at)
            if self._registry.current(account) is None:  # signed out while the provider took long
                await revoke(account.client, renewed, account.dpop_key)
                return renewed
            await self._registry.replace_tokens(account, renewed)
        self._publish(EventKind.REFRESHED, account.info.id, "the access token was renewed")
        return renewed

    def under_way(self) -> int:
        """How many accounts have a renewal, a grant or a confirmation under way now.

        A refresh token is spent under the account's lock (refresh_grant.py), down-scoped
        grants too: a lock held is a grant in flight.
        """
        return sum(account.hold.busy for account in self._registry.all())

    async def finish_renewals(self, grace: float) -> None:
        """Give the renewals under way up to grace seconds to be answered and stored (a stop)."""
        running = [
            task for account in self._registry.all() if (task := account.hold.renewing) is not None
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
        tokens = (self._registry.current(account) or account).tokens
        if tokens.lasts(self._clock(), min_ttl):
            return tokens
        raise ProviderUnreachable(reason, self._health.retry_in(account))

    async def tend(self) -> float:
        """Renew, re-validate and expire what is due; return the seconds until something is.

        A renewal runs on in its own task (it may wait minutes for the provider); when
        it ends, it wakes the keeper (`changed`).
        """
        now = self._clock()
        await self._registry.write_again()
        for listed in self._registry.all():
            account = self._registry.current(listed)  # as it stands, after what was awaited
            if account is None:
                continue
            renewable = account.renewable
            if not renewable and not account.tokens.is_valid(now):
                await self._expire(account)
            elif now < account.standing.retry_at:
                continue
            elif renewable and now >= self._renewal_at(account) and not account.hold.renewing:
                self._start_renewal(account)
            elif now >= account.standing.revalidate_at:
                await self._confirm(account)
        return self._next_due() - self._clock()

    def _renewal_at(self, account: Account) -> float:
        """When the keeper renews the account: when due, and its state can be written.

        A renewal whose new refresh token cannot be stored would leave the old, spent
        one on disk for the next start to send; so it waits, however long, until the
        state is saved again (the keeper tries every few seconds), then renews at once.
        """
        if self._registry.saved.unsaved(account) and not account.tokens.refresh_kept:
            return math.inf
        return account.refresh_at

    async def _confirm(self, account: Account) -> bool:
        """Re-validate the session, once however many wait (the keeper, callers); True: rejected.

        A caller waits for it when a confirmation is owed (AccountRuntime.confirm_by): a
        running daemon's keeper confirms ahead of that, so a caller waits only after a
        gap, the first request after a start (an idle exit, a restart) above all.
        """
        task = account.hold.confirmation(
            lambda: asyncio.get_running_loop().create_task(self._revalidate(account))
        )
        return await asyncio.shield(task)

    async def _revalidate(self, account: Account) -> bool:
        """Ask the provider whether the session still stands (within 60 s: docs/contract.md §8).

        True when the provider rejects the access token (a renewal then decides).
        """
        account = self._registry.current(account) or account  # its access token as it is now
        client, asked_at = account.client, self._clock()
        self._health.next_revalidation(account)
        if client is None or account.info.service:
            return False  # a provider no longer configured (not restored); no session to check
        started = time.perf_counter()
        try:
            await client.userinfo(account.tokens.access_token, account.dpop_for(account.tokens))
            rejected = False
        except ProviderUnavailable as error:
            self._health.failed(account, str(error))
            self._health.unconfirmed(account)
            return False
        except OAuthError:
            rejected = True
        self._health.revalidated(account, asked_at, time.perf_counter() - started)
        if rejected and not account.tokens.is_valid(self._clock()):
            return False  # it expired on the way: its expiry ends the session, no revocation
        if not rejected:
            self._health.confirmed(account, asked_at)
        elif account.renewable:
            self._start_renewal(account)  # the refresh decides
        else:
            await self._grant.provider_ended(account, "it rejects the access token")
        return rejected

    def _next_due(self) -> float:
        now = self._clock()
        moments = [schedule.KEEPER_LONGEST_SLEEP_SECONDS + now]
        for account in self._registry.all():
            standing = account.standing
            if standing.retry_at > now:
                moments.append(standing.retry_at)
                continue
            moments.append(standing.revalidate_at)
            if not account.renewable:
                moments.append(account.tokens.expires_at)
            elif not account.hold.renewing:
                moments.append(self._renewal_at(account))
        saved = self._registry.saved
        if saved.behind:
            moments.append(saved.retry_at)
        return min(moments)

    def _publish(self, kind: EventKind, account: str, detail: str) -> None:
        self._events.publish(SessionEvent(kind, account=account, detail=detail))


async def keep(keeper: TokenKeeper, changed: asyncio.Event) -> None:
    """The background keeper: renew ahead of time and re-validate, until cancelled."""
    while True:
        changed.clear()  # before tend(): what changes meanwhile wakes the next wait
        try:
            due_in = await keeper.tend()
        except Exception:
            log.exception("the session keeper failed; trying again shortly")
            due_in = schedule.BACKOFF_FIRST_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), schedule.keeper_sleep(due_in))
