"""What a caller is handed: the account's token, down-scoped, its ID token, a DPoP proof.

And the keeper, which renews, re-validates and expires ahead of time what is due. A
token comes from renewal.py (the main one) or scoped_tokens.py (fewer scopes, or an
audience), after a re-validation when one is owed (revalidation.py); every token handed
out is counted and audited (use_ledger.py). A service account's session is never
re-validated: it has none at the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ...oidc.answers import id_token_expiry
from ...oidc.dpop import htu, is_bound
from .. import audit_entries, schedule
from ..accounts.events import EventBus
from ..accounts.records import EVERYTHING, Account, Entitlement, IssuedToken
from ..accounts.registry import AccountRegistry
from ..accounts.use_ledger import UseLedger
from ..audit_entries import Actor
from ..clock import to_wall
from ..errors import (
    AudienceNotAllowed,
    IdTokenNotAllowed,
    IdTokenUnavailable,
    NoPerson,
    ScopeNotGranted,
    ScopesNotAllowed,
)
from ..ports import AuditSink
from .provider_health import ProviderHealth
from .refresh_grant import RefreshGrant
from .renewal import Renewals
from .revalidation import Revalidation
from .scoped_tokens import DownScopedTokens
from .service_accounts import ClientCredentialsGrant

log = logging.getLogger(__name__)


def _not_granted(missing: list[str], account: Account) -> ScopeNotGranted:
    """The refusal of scopes the account lacks, with what the sign-in asked for and got."""
    link = account.link
    asked = link.sign_in.scopes if link is not None else ()
    return ScopeNotGranted(missing, account.info.id, account.tokens.scopes, asked)


class TokenKeeper:
    """Hands out the accounts' tokens, and keeps them fresh ahead of time (tend)."""

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
        self._audit = audit
        self._clock = clock
        grant = RefreshGrant(registry, health, clock, answer_idle=answer_idle)
        grants = (grant, ClientCredentialsGrant(health, clock))
        self._renewals = Renewals(registry, health, events, grants, clock)
        self._revalidation = Revalidation(registry, health, grant, clock)
        self._scoped = DownScopedTokens(registry, self._renewals.grant_for, health, clock)
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
            refused = await self._confirmed(account) or refused  # rejected: a renewal decides
            account = self._registry.still_signed_in(account)  # unless the confirmation ended it
        if audience or (wanted and wanted != frozenset(account.tokens.scopes)):
            tokens = await self._scoped.token(account, (wanted, audience), min_ttl, app, refused)
        else:
            tokens = await self._renewals.main_token(account, min_ttl, refused=refused)
        # As it stands after a renewal; none of a session that ended while this waited.
        account = self._registry.still_signed_in(account)
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
                await self._renewals.expire(account)
            elif now < account.standing.retry_at:
                continue
            elif renewable and now >= self._renewals.due_at(account) and not account.hold.renewing:
                self._renewals.start(account)
            elif now >= account.standing.revalidate_at:
                await self._confirmed(account)
        return self._next_due() - self._clock()

    async def _confirmed(self, account: Account) -> bool:
        """Re-validate the session (revalidation.py); True: rejected, and a renewal decides."""
        rejected = await self._revalidation.confirm(account)
        if rejected and account.renewable:
            self._renewals.start(account)  # the refresh decides
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
                moments.append(self._renewals.due_at(account))
        saved = self._registry.saved
        if saved.behind:
            moments.append(saved.retry_at)
        return min(moments)


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
