"""How each provider is doing, as renewals and re-validations find it: answering, or backed off.

A failure backs the account off (schedule.retry_after_failure: exponential, with
jitter) and marks its provider degraded, once, with an event; the next answer clears
both, says the provider answers again, and moves the account's next re-validation on,
since a renewal vouches for the session as much as a userinfo call does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .accounts import Account
from .events import EventKind, SessionEvent
from .registry import AccountRegistry
from .schedule import next_revalidation, retry_after_failure

if TYPE_CHECKING:
    from .providers import ProviderLink

log = logging.getLogger(__name__)

# A caller refused while a renewal is under way is told to ask again this much later.
RENEWAL_RETRY_SECONDS = 5.0


class ProviderHealth:
    """Backs accounts off while their provider fails, and says when it answers again."""

    def __init__(
        self,
        registry: AccountRegistry,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock

    def failed(self, account: Account, reason: str) -> None:
        """The provider did not answer usefully: log why, and back the account off."""
        log.warning(
            "the identity provider is not answering",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": self.back_off(account, reason),
            },
        )

    def back_off(self, account: Account, reason: str) -> float:
        """No refresh for a while (schedule.retry_after_failure); seconds until the next."""
        account.failures += 1
        account.retry_at = retry_after_failure(self._clock(), account.failures)
        link = self.link(account)
        if not link.degraded_reason:
            prefix = f"{link.alias}: " if link.alias else ""
            self._publish(EventKind.DEGRADED, f"degraded: {prefix}{reason}")
        link.degraded_reason = reason
        return round(account.retry_at - self._clock(), 1)

    def answered(self, account: Account, asked_at: float) -> None:
        """The provider vouched for the session as of asked_at: no re-validation till due."""
        account.failures = 0
        account.retry_at = 0.0
        account.refusal = ""
        link = self.link(account)
        link.last_contact = self._clock()
        account.revalidate_at = next_revalidation(
            asked_at, self._revalidate_seconds, link.answer_seconds
        )
        if link.degraded_reason:
            link.degraded_reason = ""
            log.info(f"{link.name} answers again", extra={"provider": link.alias})
            self._publish(EventKind.RECOVERED, f"{link.name} answers again")

    def retry_in(self, account: Account) -> float:
        """When a caller refused for want of a renewal may ask again (seconds)."""
        if refreshing(account):
            return RENEWAL_RETRY_SECONDS
        tokens = account.tokens
        due = tokens.refresh_due_at() if tokens.refresh_in_doubt else 0.0
        return max(account.retry_at, due) - self._clock()

    def reason(self, account: Account) -> str:
        """Why the account is backed off, for a caller its current token cannot serve."""
        link = account.link
        degraded = link.degraded_reason if link is not None else ""
        return account.refusal or degraded or "the last renewal failed"

    def link(self, account: Account) -> ProviderLink:
        """The account's provider (only accounts of configured providers are kept)."""
        link = account.link
        assert link is not None  # noqa: S101 - restore and sign-in keep no other
        return link

    def _publish(self, kind: EventKind, detail: str) -> None:
        self._registry.events.publish(SessionEvent(kind, detail=detail))


def refreshing(account: Account) -> bool:
    """Whether a renewal of the account is under way."""
    return account.refresh_task is not None and not account.refresh_task.done()
