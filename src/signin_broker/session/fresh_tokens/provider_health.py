"""How each provider is doing, as renewals, re-validations and sign-ins find it; decided here only.

A failure backs the account off (schedule.retry_after_failure: exponential, with
jitter) and marks its provider degraded, once, with an event; the next answer clears
both, says the provider answers again, and moves the account's next re-validation on,
since a renewal vouches for the session as much as a userinfo call does. A refusal to
renew backs off the same way. Nothing else decides a provider's health (ProviderLink's
degraded_reason, last_contact and answer_seconds) or an account's standing with it
(records.Standing: its backoff, and when it is re-validated and must be confirmed),
which the registry keeps with the account's record.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from ...states import EventKind
from ..accounts.events import EventBus, SessionEvent
from ..accounts.records import Account, Standing
from ..accounts.registry import AccountRegistry
from ..errors import ProviderUnreachable
from ..providers.links import ProviderLink
from ..schedule import RENEWAL_RETRY_SECONDS, next_revalidation, retry_after_failure

log = logging.getLogger(__name__)


class Answer(enum.Enum):
    """What a re-validation's userinfo call said of the access token."""

    TAKEN = enum.auto()
    REJECTED = enum.auto()
    NO_ANSWER = enum.auto()  # none that could be used: the provider is failing
    NOTHING_LEARNED = enum.auto()  # not asked (no session there), or cut short here


class ProviderHealth:
    """Backs accounts off while their provider fails or refuses, and says when it answers again."""

    def __init__(
        self,
        registry: AccountRegistry,
        events: EventBus,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._events = events
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock

    def failed(self, account: Account, reason: str, *, checked_at: float | None = None) -> None:
        """The provider did not answer usefully: log why, and back the account off.

        `checked_at`: it was a re-validation asked then; the token serves until the next
        try, as in an outage, and the next check is planned from then.
        """
        self._back_off(
            "the identity provider is not answering", account, reason, checked_at=checked_at
        )

    def refused(self, account: Account, reason: str) -> None:
        """The provider refused to renew (not the end of the session): back off as from an outage.

        A provider's bare 400 is neither taken for the end of a session it still
        accepts, nor retried at once.
        """
        self._back_off("the provider refused a refresh", account, reason, refusal=reason)

    def _back_off(
        self,
        warning: str,
        account: Account,
        reason: str,
        *,
        refusal: str | None = None,
        checked_at: float | None = None,
    ) -> None:
        """No refresh for a while (schedule.retry_after_failure), the provider marked degraded.

        `warning` is logged with the reason and the seconds until the next refresh.
        """
        now, link = self._clock(), self.link(account)

        def backed_off(standing: Standing) -> Standing:
            failures = standing.failures + 1
            standing = replace(
                standing,
                failures=failures,
                retry_at=retry_after_failure(now, failures),
                refusal=standing.refusal if refusal is None else refusal,
            )
            if checked_at is None:
                return standing
            planned = self._planned(checked_at, link)
            return replace(standing, revalidate_at=planned, confirm_by=standing.retry_at)

        standing = self._registry.stand(account, backed_off)
        if not link.degraded_reason:
            prefix = f"{link.alias}: " if link.alias else ""
            self._publish(EventKind.DEGRADED, f"degraded: {prefix}{reason}")
        link.degraded_reason = reason
        retry_in = round(standing.retry_at - now, 1)
        log.warning(warning, extra={"flow": "oauth", "reason": reason, "retry_in_s": retry_in})

    def answered(self, account: Account, asked_at: float) -> None:
        """The provider vouched for the session as of asked_at: no re-validation till due."""
        link = self.link(account)
        link.last_contact = self._clock()
        answered = Standing(
            revalidate_at=self._planned(asked_at, link),
            confirm_by=asked_at + self._revalidate_seconds,
        )
        self._registry.stand(account, lambda _: answered)
        if link.degraded_reason:
            link.degraded_reason = ""
            log.info(f"{link.name} answers again", extra={"provider": link.alias})
            self._publish(EventKind.RECOVERED, f"{link.name} answers again")

    def contacted(self, link: ProviderLink) -> None:
        """The provider answered (a sign-in's code, a refusal): status shows when it last did."""
        link.last_contact = self._clock()

    def next_revalidation_at(self, link: ProviderLink) -> float:
        """When an account of the provider is next re-validated, as its answer time allows."""
        return self._planned(self._clock(), link)

    def checked(
        self,
        account: Account,
        asked_at: float,
        answer: Answer,
        *,
        seconds: float = 0.0,
        why: str = "",
    ) -> None:
        """What a re-validation asked at asked_at found: when the next is due, and if one is owed.

        Planned whatever happened, a check not made or cut short too, so that none is
        asked again at once. No answer (`why`) backs the account off (failed). An
        answer, the access token taken or not, times the provider (`seconds`: a slowdown
        counts at once, a speed-up slowly) and vouches for it as a renewal does
        (answered), unless a refused renewal's backoff is on: answering is not
        renewing. A taken token confirms the session for an interval.
        """
        link = self.link(account)
        if answer is Answer.NO_ANSWER:
            self.failed(account, why, checked_at=asked_at)
            return
        if answer is not Answer.NOTHING_LEARNED:
            link.answer_seconds = max(seconds, 0.7 * link.answer_seconds + 0.3 * seconds)
            if not self._now(account).standing.refusal:
                self.answered(account, asked_at)
                return
            self.contacted(link)
        planned = self._planned(asked_at, link)
        taken = answer is Answer.TAKEN
        confirmed = asked_at + self._revalidate_seconds

        def change(standing: Standing) -> Standing:
            confirm_by = confirmed if taken else standing.confirm_by
            return replace(standing, revalidate_at=planned, confirm_by=confirm_by)

        self._registry.stand(account, change)

    def _planned(self, asked_at: float, link: ProviderLink) -> float:
        """The re-validation after one asked at asked_at, as the provider's answer time allows."""
        return next_revalidation(asked_at, self._revalidate_seconds, link.answer_seconds)

    def retry_in(self, account: Account) -> float:
        """When a caller refused for want of a renewal may ask again (seconds)."""
        now = self._now(account)
        if now.hold.renewing:
            return RENEWAL_RETRY_SECONDS
        tokens = now.tokens
        due = tokens.refresh_due_at() if tokens.refresh_in_doubt else 0.0
        return max(now.standing.retry_at, due) - self._clock()

    def unreachable(self, account: Account, why: str = "") -> ProviderUnreachable:
        """The refusal of a caller no token serves now: why ("": the backoff), when to ask again."""
        why, retry_in = why or self.reason(account), self.retry_in(account)
        return ProviderUnreachable(why, retry_in)

    def reason(self, account: Account) -> str:
        """Why the account is backed off, for a caller its current token cannot serve."""
        link = account.link
        degraded = link.degraded_reason if link is not None else ""
        return self._now(account).standing.refusal or degraded or "the last renewal failed"

    @staticmethod
    def link(account: Account) -> ProviderLink:
        """The account's provider (only accounts of configured providers are kept)."""
        link = account.link
        assert link is not None  # noqa: S101 - restore and sign-in keep no other
        return link

    def _now(self, account: Account) -> Account:
        """The account's record as it stands now (the one given, once its session ended)."""
        return self._registry.current(account) or account

    def _publish(self, kind: EventKind, detail: str) -> None:
        self._events.publish(SessionEvent(kind, detail=detail))
