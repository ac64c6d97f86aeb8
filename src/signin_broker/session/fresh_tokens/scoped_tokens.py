"""Down-scoped tokens: fewer scopes than the sign-in's, or one audience (RFC 8707).

Each is a refresh grant with `scope` or `resource`, made under the account's lock like
any other spend of its refresh token (refresh_grant.py; a service account's is a client
credentials grant with them), cached per account within
bounds while it serves, and counted against the asking app's budget of grants at the
provider (session.limits).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from ...oidc.errors import ProviderUnavailable
from ..accounts.records import Account
from ..accounts.registry import AccountRegistry
from ..errors import (
    ProviderUnreachable,
    SignInRequired,
    StorageWaits,
    TokenLifetimeTooShort,
    TokenTooShortLived,
    TooManyNewTokens,
)
from ..limits import GrantBudget, ScopedKey
from ..providers.revocation import revoke
from ..schedule import CALLER_WAIT_SECONDS, RENEWAL_RETRY_SECONDS
from ..tokens import TokenSet
from .provider_health import ProviderHealth
from .refresh_grant import RefreshGrant
from .service_accounts import ClientCredentialsGrant

RENEWAL_PENDING = "the provider has not answered a renewal yet"


class DownScopedTokens:
    """The accounts' down-scoped tokens: from the cache while they serve, else the provider."""

    def __init__(
        self,
        registry: AccountRegistry,
        grant_for: Callable[[Account], RefreshGrant | ClientCredentialsGrant],
        health: ProviderHealth,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._grant_for = grant_for  # the account's refresh token, or a service's credentials
        self._health = health
        self._clock = clock
        self._grants = GrantBudget(clock)

    async def token(
        self, account: Account, key: ScopedKey, min_ttl: int, app: str, refused: bool
    ) -> TokenSet:
        """The account's token of these scopes and audience, valid min_ttl seconds more."""
        cached = account.hold.scoped.get(key)
        now = self._clock()
        if cached is not None and cached.serves(now, min_ttl, refused):
            return cached  # no provider round trip while it is good
        if cached is not None and cached.renewal_would_hammer(now, min_ttl):
            raise TokenLifetimeTooShort(cached.lifetime, min_ttl)  # as for the main token
        if not account.renewable:
            raise TokenTooShortLived(0 if cached is None else max(0, int(cached.expires_at - now)))
        try:
            self._grants.take(app)  # before the lock: a refused flood does not queue there
        except TooManyNewTokens:
            if cached is not None and cached.lasts(now, min_ttl):
                return cached  # due for renewal, but still good enough for this caller
            raise
        try:
            async with self._refresh_turn(account):
                token = await self._fetch(account, key, min_ttl, refused)
        except (ProviderUnreachable, StorageWaits):
            if cached is not None and cached.lasts(self._clock(), min_ttl):
                return cached
            raise
        if token.lifetime < min_ttl:
            raise TokenLifetimeTooShort(token.lifetime, min_ttl)
        return token

    @contextlib.asynccontextmanager
    async def _refresh_turn(self, account: Account) -> AsyncIterator[None]:
        """The account's lock, waited for no longer than a caller waits for a renewal."""
        try:
            async with asyncio.timeout(CALLER_WAIT_SECONDS):
                await account.hold.lock.acquire()
        except TimeoutError:
            raise ProviderUnreachable(RENEWAL_PENDING, RENEWAL_RETRY_SECONDS) from None
        try:
            yield
        finally:
            account.hold.lock.release()

    async def _fetch(
        self, account: Account, key: ScopedKey, min_ttl: int, refused: bool
    ) -> TokenSet:
        """A new down-scoped token (the caller holds the account's lock)."""
        # As it stands now: the lock's last holder may have rotated its refresh token.
        account = self._registry.still_signed_in(account)
        cached = account.hold.scoped.get(key)
        if cached is not None and cached.serves(self._clock(), min_ttl, refused):
            return cached  # a caller ahead in the queue fetched it
        scopes, audience = key
        now = self._clock()  # the provider's token lives from about then, not its arrival
        try:
            response = await self._grant_for(account).spend(
                account, " ".join(sorted(scopes)) if scopes else None, audience or None
            )
        except ProviderUnavailable as error:  # a refusal is the grant's to say (ProviderRefused)
            raise self._health.unreachable(account, str(error)) from None
        requested = tuple(sorted(scopes)) if scopes else account.tokens.scopes
        token = replace(TokenSet.issued(response, now, requested), from_refresh=True)
        rotated = account.tokens.rotated(response)
        if self._registry.current(account) is None:  # signed out while the provider took its time
            client = account.client
            await revoke(
                client,
                replace(token, refresh_token=rotated.refresh_token),
                account.dpop_key,
            )
            raise SignInRequired
        await self._registry.replace_tokens(account, rotated)
        account.hold.scoped.put(key, token, now)
        return token
