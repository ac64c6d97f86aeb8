"""How each provider is doing, as renewals, re-validations and sign-ins find it; set here only.

A failure backs the account off (schedule.retry_after_failure: exponential, with
jitter) and marks its provider degraded, once, with an event; the next answer clears
both, says the provider answers again, and moves the account's next re-validation on,
since a renewal vouches for the session as much as a userinfo call does. A refusal to
renew backs off the same way. Nothing else changes a provider's health
(ProviderLink's degraded_reason, last_contact and answer_seconds) or an account's
backoff (its runtime's failures, retry_at and refusal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ...states import EventKind
from ..accounts.events import EventBus, SessionEvent
from ..accounts.records import Account
from ..providers.links import ProviderLink
from ..schedule import RENEWAL_RETRY_SECONDS, next_revalidation, retry_after_failure

log = logging.getLogger(__name__)


class ProviderHealth:
    """Backs accounts off while their provider fails or refuses, and says when it answers again."""

    def __init__(
        self,
        events: EventBus,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._events = events
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock

    def failed(self, account: Account, reason: str) -> None:
        """The provider did not answer usefully: log why, and back the account off."""
        log.warning(
            "the identity provider is not answering",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": self._back_off(account, reason),
            },
        )

    def refused(self, account: Account, reason: str) -> None:
        """The provider refused to renew (not the end of the session): back off as from an outage.

        A provider's bare 400 is neither taken for the end of a session it still
        accepts, nor retried at once.
        """
        account.runtime.refusal = reason
        log.warning(
            "the provider refused a refresh",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": self._back_off(account, reason),
            },
        )

    def _back_off(self, account: Account, reason: str) -> float:
        """No refresh for a while (schedule.retry_after_failure), the provider marked degraded.

        The seconds until the next refresh.
        """
        runtime = account.runtime
        runtime.failures += 1
        runtime.retry_at = retry_after_failure(self._clock(), runtime.failures)
        link = self.link(account)
        if not link.degraded_reason:
            prefix = f"{link.alias}: " if link.alias else ""
            self._publish(EventKind.DEGRADED, f"degraded: {prefix}{reason}")
        link.degraded_reason = reason
        return round(runtime.retry_at - self._clock(), 1)

    def answered(self, account: Account, asked_at: float) -> None:
        """The provider vouched for the session as of asked_at: no re-validation till due."""
        runtime = account.runtime
        runtime.failures = 0
        runtime.retry_at = 0.0
        runtime.refusal = ""
        link = self.link(account)
        link.last_contact = self._clock()
        runtime.revalidate_at = next_revalidation(
            asked_at, self._revalidate_seconds, link.answer_seconds
        )
        self.confirmed(account, asked_at)
        if link.degraded_reason:
            link.degraded_reason = ""
            log.info(f"{link.name} answers again", extra={"provider": link.alias})
            self._publish(EventKind.RECOVERED, f"{link.name} answers again")

    def confirmed(self, account: Account, asked_at: float) -> None:
        """The provider took the session as of asked_at: no confirmation owed for an interval."""
        account.runtime.confirm_by = asked_at + self._revalidate_seconds

    def unconfirmed(self, account: Account) -> None:
        """No answer to a confirmation: the token serves until the next try, as in an outage."""
        account.runtime.confirm_by = account.runtime.retry_at

    def contacted(self, link: ProviderLink) -> None:
        """The provider answered (a sign-in's code, a refusal): status shows when it last did."""
        link.last_contact = self._clock()

    def revalidated(self, account: Account, asked_at: float, seconds: float) -> None:
        """Userinfo answered in `seconds`, whether it took the access token or not.

        A slowdown counts at once, a speed-up slowly. Answering is not renewing: a
        refused renewal's backoff goes on.
        """
        link = self.link(account)
        link.answer_seconds = max(seconds, 0.7 * link.answer_seconds + 0.3 * seconds)
        if account.runtime.refusal:
            self.contacted(link)
        else:
            self.answered(account, asked_at)

    def next_revalidation(self, account: Account) -> None:
        """Plan the account's next re-validation, as its provider's answer time allows."""
        account.runtime.revalidate_at = next_revalidation(
            self._clock(), self._revalidate_seconds, self.link(account).answer_seconds
        )

    def retry_in(self, account: Account) -> float:
        """When a caller refused for want of a renewal may ask again (seconds)."""
        if account.runtime.renewing:
            return RENEWAL_RETRY_SECONDS
        tokens = account.tokens
        due = tokens.refresh_due_at() if tokens.refresh_in_doubt else 0.0
        return max(account.runtime.retry_at, due) - self._clock()

    def reason(self, account: Account) -> str:
        """Why the account is backed off, for a caller its current token cannot serve."""
        link = account.runtime.link
        degraded = link.degraded_reason if link is not None else ""
        return account.runtime.refusal or degraded or "the last renewal failed"

    @staticmethod
    def link(account: Account) -> ProviderLink:
        """The account's provider (only accounts of configured providers are kept)."""
        link = account.runtime.link
        assert link is not None  # noqa: S101 - restore and sign-in keep no other
        return link

    def _publish(self, kind: EventKind, detail: str) -> None:
        self._events.publish(SessionEvent(kind, detail=detail))
