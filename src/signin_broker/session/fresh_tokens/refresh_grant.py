"""Spending a refresh token, once, and what each answer to it means for the session.

A refresh token is spent only once its successor can be stored: the store must first
take a record that it is being sent (a write-ahead), or it is not sent at all while
the state cannot be written. Once sent, a refresh is awaited as long as its answer
keeps coming (minutes of silence, a generous bound in all), since a provider that
stalls may still complete it and rotate the refresh token. One whose answer never
came (lost) leaves its refresh token in doubt: it is sent once more, to learn whether
the provider had it, only when the access token is about to expire, so that a request
the provider never saw costs nothing, and one it completed (whose new tokens were
lost anyway) ends the session no sooner than it had to. One the provider answered, but
unusably, was spent there if the provider rotates refresh tokens (`may_rotate`: seen
at an earlier renewal, or not yet known either way for a public client): it is never
sent again, and the session ends when its access token does.
The provider ends a session by refusing the refresh token (`invalid_grant`), or by
refusing a refresh and the access token (userinfo) both. Each answer is classified
here once: a refusal ends the session (SignInRequired) or is refused
(ProviderRefused, which the main token's renewal backs off from); no answer is
ProviderUnavailable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import NoReturn

from ...oidc.answers import TokenResponse
from ...oidc.errors import AnswerLost, AnswerUnusable, OAuthError, ProviderUnavailable
from ...states import EventKind
from ..accounts.records import Account
from ..accounts.registry import AccountRegistry
from ..audit_entries import daemon_actor
from ..clock import to_wall
from ..errors import ProviderRefused
from ..schedule import REFRESH_ANSWER_SECONDS
from ..tokens import TokenSet
from .provider_health import ProviderHealth

log = logging.getLogger(__name__)


class RefreshGrant:
    """Sends an account's refresh token (the caller holds its lock) and acts on the answer."""

    def __init__(
        self,
        registry: AccountRegistry,
        health: ProviderHealth,
        clock: Callable[[], float] = time.time,
        *,
        answer_idle: float = REFRESH_ANSWER_SECONDS,
    ) -> None:
        self._registry = registry
        self._health = health
        self._clock = clock
        self._answer_idle = answer_idle  # a test may shorten it (daemon.app)

    async def spend(
        self, account: Account, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """One refresh_token grant (caller holds the account's lock); tracks provider health.

        Once sent, its answer is awaited however slow the provider is, while it keeps
        coming (REFRESH_ANSWER_SECONDS of silence, the client's generous bound in all):
        a rotating provider that stalls, then completes the refresh, would otherwise
        leave the daemon holding a spent refresh token. A token whose answer never came
        is in doubt (TokenSet.unanswered), and sent again only when the access token is
        about to expire. That includes a daemon stopped while it waited: the store
        counts the send before it is made (a write-ahead), and nothing is sent when it
        cannot (StorageWaits): the successor could not be stored either.
        """
        account = self._registry.still_signed_in(account)  # unless signed out while this waited
        tokens, client = account.tokens, account.client
        sent_at = self._clock()
        assert client is not None and tokens.refresh_token is not None  # noqa: S101 - checked by callers
        if tokens.refresh_in_doubt and sent_at < tokens.refresh_due_at():
            raise ProviderUnavailable(self.resend_reason(tokens))  # not at once, whoever asks
        if not tokens.refresh_kept:  # a rotating provider spends it: count the send first
            await self._registry.write_ahead(account, tokens.sent())
        try:
            response = await client.refresh(
                tokens.refresh_token,
                scope=scope,
                resource=resource,
                answer_within=self._answer_idle,
                dpop=account.dpop_key,
            )
        except AnswerUnusable as error:
            if error.refresh_token is not None:
                await self._rotated_only(account, error.refresh_token, str(error))
                raise ProviderUnavailable(str(error)) from None
            if may_rotate(account):  # spent there, for all the daemon knows: never sent again
                await self._spent(account, str(error))
            else:
                await self._answer_lost(account, f"a renewal's answer was unusable ({error})")
            raise
        except (TimeoutError, AnswerLost) as error:
            reason = str(error) or "no whole answer in time"
            await self._answer_lost(account, f"a renewal got no answer ({reason})")
            raise AnswerLost(reason) from None
        except ProviderUnavailable as error:
            await self._not_spent(account, tokens)  # not sent, or a server error: unspent
            self._health.failed(account, str(error))
            raise
        except OAuthError as error:
            self._health.contacted(self._health.link(account))
            await self._refused(account, tokens, error)
        self._health.answered(account, sent_at)  # a renewal re-validates too
        return response

    async def _refused(self, account: Account, tokens: TokenSet, error: OAuthError) -> NoReturn:
        """What a refusal of the refresh token means: the session's end, or ProviderRefused."""
        if error.error != "invalid_grant":
            await self._not_spent(account, tokens)
            raise ProviderRefused(error.error, error.status) from None
        if self._registry.current(account) is not None:
            reason = "it refused the refresh token (invalid_grant)"
            if tokens.refresh_in_doubt:
                reason += ", having completed the renewal whose answer was lost"
            await self.provider_ended(account, reason)
        raise self._registry.sign_in_required(account.info.id) from None

    async def _spent(self, account: Account, reason: str) -> None:
        """The provider answered a refresh unusably, having rotated its refresh token.

        The old one is never sent again (a second use reads as theft there, and ends
        the grant with its access tokens): the session is served on its access token and
        ends when that expires (Renewals.expire), saying why.
        """
        if self._registry.current(account) is None:
            return
        lost = (
            f"the provider answered its last renewal unusably ({reason}) after rotating the"
            " refresh token, which is never sent twice"
        )
        spent = replace(account.tokens, refresh_token=None, unanswered=0, refresh_lost=lost)
        await self._registry.replace_tokens(account, spent)
        log.warning(
            "the refresh token was spent by an answer that cannot be used: the session ends"
            " when its access token expires",
            extra={
                "account": account.info.id,
                "reason": reason,
                "expires_in_s": round(spent.expires_at - self._clock()),
            },
        )
        self._health.failed(account, f"a renewal's answer was unusable ({reason})")

    async def _not_spent(self, account: Account, tokens: TokenSet) -> None:
        """Take back the write-ahead of a refresh the provider refused or never received."""
        if not tokens.refresh_kept:
            await self._registry.write_back(account)

    async def _answer_lost(self, account: Account, reason: str) -> None:
        """A renewal whose answer never came: its refresh token may be spent (unless kept)."""
        if not account.tokens.refresh_kept and self._registry.current(account) is not None:
            doubtful = account.tokens.sent()
            await self._registry.replace_tokens(account, doubtful)
            after = self.resend_reason(doubtful)
            log.warning(
                "the provider may have spent the refresh token: " + after,
                extra={
                    "account": account.info.id,
                    "reason": reason,
                    "expires_in_s": round(doubtful.expires_at - self._clock()),
                },
            )
            reason = f"{reason}; {after}"
        self._health.failed(account, reason)

    async def _rotated_only(self, account: Account, refresh_token: str, reason: str) -> None:
        """An unusable answer that still names the new refresh token: keep that, not in doubt.

        The access token it brought is not used; the renewal is tried again after the
        backoff, with the new refresh token, like one that failed.
        """
        if self._registry.current(account) is not None:
            kept = replace(
                account.tokens,
                refresh_token=refresh_token,
                refresh_kept=False,
                refresh_rotates=True,
                unanswered=0,
            )
            await self._registry.replace_tokens(account, kept)
        self._health.failed(account, f"a renewal's answer was unusable ({reason})")

    async def refused(self, account: Account, refusal: ProviderRefused) -> None:
        """A refused renewal of the main token: the session has ended if userinfo rejects it too.

        Else the account backs off (ProviderHealth.refused).
        """
        if self._registry.current(account) is None:
            return
        reason = f"the provider refused to renew the token ({refusal.error}, HTTP {refusal.status})"
        if await self._token_rejected(account):
            await self.provider_ended(account, f"{reason} and rejects the access token")
            return
        self._health.refused(account, reason)

    async def _token_rejected(self, account: Account) -> bool:
        """Whether the provider's userinfo rejects the access token (no answer: no)."""
        client = account.client
        assert client is not None  # noqa: S101 - it answered a refresh
        try:
            await client.userinfo(account.tokens.access_token, account.dpop_for(account.tokens))
        except OAuthError:
            return True
        except ProviderUnavailable:
            pass  # no evidence either way
        return False

    async def provider_ended(self, account: Account, reason: str) -> None:
        """The provider ended the session: say why in the log, and end it here (REVOKED)."""
        log.warning(
            "the provider ended the session", extra={"account": account.info.id, "reason": reason}
        )
        await self._registry.end(
            account,
            EventKind.REVOKED,
            f"the provider ended the session: {reason}",
            daemon_actor(),
            by_itself=True,
        )

    def resend_reason(self, tokens: TokenSet) -> str:
        """Why a refresh token in doubt is not sent now, and when it will be."""
        due = to_wall(self._clock, tokens.refresh_due_at())
        return (
            "the provider never answered the last renewal; its refresh token is sent once"
            f" more at {time.strftime('%H:%M:%S', time.localtime(due))}, shortly before the"
            " access token expires"
        )


def may_rotate(account: Account) -> bool:
    """Whether the provider may have spent a refresh token it answered, however unusably.

    It does if it was seen to rotate; it does not if it was seen to keep the token. Not
    seen either way (the session's first refresh), it may: RFC 9700 4.14.2 has a
    provider rotate a public client's refresh tokens unless they are sender-constrained,
    and a provider may rotate those too. Only a confidential client's token, which the
    provider can tie to the client's credentials, is sent again to learn whether it was.
    """
    tokens, client = account.tokens, account.client
    if tokens.refresh_rotates or tokens.refresh_kept:
        return tokens.refresh_rotates
    return client is None or not client.confidential
