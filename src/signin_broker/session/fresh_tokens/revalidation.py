"""Re-validation: asking the provider whether a session still stands (docs/contract.md §8).

The keeper asks about once a minute (schedule.revalidation_period), and a caller waits
for the answer when a confirmation is owed (records.Standing.confirm_by: the first
request after a start above all), once however many wait. What the answer says of the
provider and of the account's standing is provider_health.py's to decide. A rejected
access token is a renewal's to judge when the session can be renewed (the refresh
decides); one that cannot be renewed ends with it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ...oidc.errors import OAuthError, ProviderUnavailable
from ..accounts.records import Account
from ..accounts.registry import AccountRegistry
from .provider_health import Answer, ProviderHealth
from .refresh_grant import RefreshGrant


class Revalidation:
    """Asks the provider whether sessions stand, with their access tokens' userinfo calls."""

    def __init__(
        self,
        registry: AccountRegistry,
        health: ProviderHealth,
        grant: RefreshGrant,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._health = health
        self._grant = grant  # ends a session the provider ended
        self._clock = clock

    async def confirm(self, account: Account) -> bool:
        """Re-validate the session, once however many wait: True when its token is rejected.

        Then a renewal decides whether the session stands (its refresh token refused:
        it does not); a session that cannot be renewed has ended here.
        """
        task = account.hold.confirmation(
            lambda: asyncio.get_running_loop().create_task(self._check(account))
        )
        return await asyncio.shield(task)

    async def _check(self, account: Account) -> bool:
        account = self._registry.current(account) or account  # its access token as it is now
        client, asked_at = account.client, self._clock()
        answer, why, started = Answer.NOTHING_LEARNED, "", time.perf_counter()
        try:
            if client is not None and not account.info.service:  # else: no session there
                await client.userinfo(account.tokens.access_token, account.dpop_for(account.tokens))
                answer = Answer.TAKEN
        except ProviderUnavailable as error:
            answer, why = Answer.NO_ANSWER, str(error)
        except OAuthError:
            answer = Answer.REJECTED
        finally:  # planned however it went, so that none is asked again at once
            seconds = time.perf_counter() - started
            self._health.checked(account, asked_at, answer, seconds=seconds, why=why)
        if answer is not Answer.REJECTED or not account.tokens.is_valid(self._clock()):
            return False  # it expired on the way: its expiry ends the session, no revocation
        if not account.renewable:
            await self._grant.provider_ended(account, "it rejects the access token")
        return True
