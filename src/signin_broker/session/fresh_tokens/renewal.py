"""The main token: handed out while it serves, else renewed, once whoever asks, or refused.

An account's token is renewed when session.schedule says, once however many callers
ask at the same moment: one renewal task per account is shared by all of them, and
every call that spends a refresh token runs under the account's lock, because a
rotated refresh token may be spent only once (refresh_grant.py). A rotated refresh
token is written to the encrypted store before the new access token is handed out
(registry.AccountRegistry.replace_tokens). While the provider cannot be reached a
still-valid token is served and renewal backs off (provider_health.py). A service
account's token is renewed the same way, by the client credentials grant instead of a
refresh token (service_accounts.py). A session that cannot be renewed is served until
its token expires, and ends then.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

from ...oidc.errors import ProviderUnavailable
from ...states import EventKind
from .. import schedule
from ..accounts.events import EventBus, SessionEvent
from ..accounts.records import Account
from ..accounts.registry import AccountRegistry
from ..audit_entries import daemon_actor
from ..errors import ProviderRefused, StorageWaits, TokenLifetimeTooShort, TokenTooShortLived
from ..providers.revocation import revoke
from ..tokens import TokenSet
from .provider_health import ProviderHealth
from .refresh_grant import RefreshGrant
from .scoped_tokens import RENEWAL_PENDING
from .service_accounts import ClientCredentialsGrant

log = logging.getLogger(__name__)

ARRIVED_DEAD = "the provider's answer took longer to arrive than its token lives; renewing again"


class Renewals:
    """Renews the accounts' main tokens, for callers now and for the keeper ahead of time."""

    def __init__(
        self,
        registry: AccountRegistry,
        health: ProviderHealth,
        events: EventBus,
        grants: tuple[RefreshGrant, ClientCredentialsGrant],
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._health = health
        self._events = events
        self._grant, self._client_grant = grants
        self._clock = clock

    def grant_for(self, account: Account) -> RefreshGrant | ClientCredentialsGrant:
        """How the account's tokens are renewed: its refresh token, or the client's credentials."""
        return self._client_grant if account.info.service else self._grant

    async def main_token(
        self, account: Account, min_ttl: int, *, refused: bool = False
    ) -> TokenSet:
        """The account's main token, valid min_ttl seconds more: as it is, renewed, or none.

        A caller whose token still lasts waits briefly for a renewal, one whose token
        does not waits longer (schedule.RENEWAL_WAIT_SECONDS, CALLER_WAIT_SECONDS);
        then it gets the token it has while that lasts, or ProviderUnreachable saying
        why and when to ask again.
        """
        tokens, now = account.tokens, self._clock()
        if tokens.serves(now, min_ttl, refused):
            return tokens  # the common case: no lock, no await
        if tokens.renewal_would_hammer(now, min_ttl):
            raise TokenLifetimeTooShort(tokens.lifetime, min_ttl)
        if not account.renewable:
            return await self._unrenewable(account, min_ttl)
        try:
            renewed = await self._renewal(account, tokens.lasts(now, min_ttl))
        except StorageWaits:  # nothing was sent: the token the caller has, while it lasts
            if tokens.lasts(self._clock(), min_ttl):
                return tokens
            raise
        return self._served(account, renewed, min_ttl)

    async def _renewal(self, account: Account, lasts: bool) -> TokenSet | str:
        """The renewal's tokens, or why none came in time ("": the account's backoff says).

        A caller whose token lasts waits less: it is served that token meanwhile.
        """
        if self._clock() < account.standing.retry_at and not account.hold.renewing:
            return ""  # backing off: do not hammer a failing (or refusing) provider
        wait = schedule.RENEWAL_WAIT_SECONDS if lasts else schedule.CALLER_WAIT_SECONDS
        try:
            return await asyncio.wait_for(asyncio.shield(self.start(account)), wait)
        except TimeoutError:
            return RENEWAL_PENDING  # it carries on
        except ProviderUnavailable as error:
            return str(error)
        except ProviderRefused:
            return ""

    def _served(self, account: Account, renewed: TokenSet | str, min_ttl: int) -> TokenSet:
        """A renewal's token if it serves, else the one the session has while that lasts.

        `renewed`: else why no renewal came. SignInRequired once the session ended
        meanwhile (a refusal may end it); ProviderUnreachable when no token lasts.
        """
        account = self._registry.still_signed_in(account)
        now = self._clock()
        if isinstance(renewed, TokenSet):
            if renewed.lifetime < min_ttl:
                raise TokenLifetimeTooShort(renewed.lifetime, min_ttl)
            if renewed.is_valid(now):
                return renewed
            renewed = ARRIVED_DEAD  # the keeper renews it at once
        if account.tokens.lasts(now, min_ttl):
            return account.tokens
        raise self._health.unreachable(account, renewed)

    def start(self, account: Account) -> asyncio.Task[TokenSet]:
        """The account's renewal under way, or a new one: one at a time, whoever asks."""

        def begin() -> asyncio.Task[TokenSet]:
            task = asyncio.get_running_loop().create_task(self._renew(account))
            task.add_done_callback(self._ended)
            return task

        return account.hold.renewal(begin)

    def _ended(self, task: asyncio.Task[TokenSet]) -> None:
        """Wake the keeper; the task dealt with its outcome, awaited by a caller or not."""
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it as lost
        self._registry.changed.set()

    async def _renew(self, account: Account) -> TokenSet:
        """Renew the main token; shared by every caller waiting at that moment."""
        async with account.hold.lock:
            # As it stands now: the lock's last holder may have rotated its refresh token.
            account = self._registry.still_signed_in(account)
            asked_at = self._clock()  # the provider's tokens live from about then, not arrival
            grant = self.grant_for(account)
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
        renewal = SessionEvent(
            EventKind.REFRESHED, account=account.info.id, detail="the access token was renewed"
        )
        self._events.publish(renewal)
        return renewed

    def due_at(self, account: Account) -> float:
        """When the keeper renews the account: when due, and its state can be written.

        A renewal whose new refresh token cannot be stored would leave the old, spent
        one on disk for the next start to send; so it waits, however long, until the
        state is saved again (the keeper tries every few seconds), then renews at once.
        """
        if self._registry.saved.unsaved(account) and not account.tokens.refresh_kept:
            return math.inf
        return account.refresh_at

    async def _unrenewable(self, account: Account, min_ttl: int) -> TokenSet:
        """The token of a session that cannot be renewed, while it serves; none after expiry."""
        tokens, now = account.tokens, self._clock()
        if tokens.lasts(now, min_ttl):
            return tokens
        if tokens.is_valid(now):
            raise TokenTooShortLived(int(tokens.expires_at - now))
        await self.expire(account)
        raise self._registry.sign_in_required(account.info.id)

    async def expire(self, account: Account) -> None:
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
