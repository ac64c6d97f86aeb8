"""The daemon's accounts and their sessions: the one object the gRPC and web layers talk to.

An account is keyed `user:<platform_user_id>` (the id_token `sub`, contract 2.1 and
2.9), prefixed `<alias>/` at a provider other than the main one (session.providers).
Its tokens are renewed at 75 % of their lifetime, once however many callers
ask at the same moment: one refresh task per account is shared by all of them, and
every call that spends a refresh token runs under the account's lock, because a
rotated refresh token may be spent only once. A rotated refresh token is written to
the encrypted store before the new access token is handed out.

When the provider cannot be reached the daemon keeps serving a still-valid token,
says so (`degraded`), and tries again with exponential backoff and jitter; a refused
refresh backs off the same way. A refresh, once sent, is awaited for minutes rather
than abandoned, since a provider that stalls may still complete it and rotate the
refresh token; one whose answer never came is not sent again, and its session lasts
until the access token expires. The provider ends a session by refusing the refresh
token (`invalid_grant`), or by refusing a refresh and the access token (userinfo) both.

Down-scoped tokens (fewer scopes, or an audience) are cached per account within
bounds, and each app has a budget of scoped grants at the provider (session.limits).
The id_token never leaves the daemon: sign-out hands out a one-time link to the
loopback page instead of the provider's logout URL with the hint (session.signout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from ..store.audit import Action, Actor, AuditEntry
from .accounts import (
    EVERYTHING,
    Account,
    AccountInfo,
    AppUse,
    Entitlement,
    IssuedToken,
    Revocation,
    SignInStart,
    SignInState,
    SignOutResult,
    account_id_of,
)
from .errors import (
    AccountNotFound,
    AnswerLost,
    OAuthError,
    ProviderRefused,
    ProviderUnavailable,
    ProviderUnreachable,
    ScopeNotGranted,
    SignInRequired,
    TokenLifetimeTooShort,
    TokenTooShortLived,
    TooManyNewTokens,
)
from .events import EventBus, EventKind, SessionEvent
from .limits import GrantBudget, ScopedKey
from .providers import MAIN_NAME, Providers
from .schedule import (
    BACKOFF_FIRST_SECONDS,
    BACKOFF_MAX_SECONDS,
    first_revalidation,
    next_revalidation,
    retry_after_failure,
)
from .signout import LogoutLinks
from .tokens import TokenSet

if TYPE_CHECKING:  # the OAuth stack loads after start-up (see daemon.app)
    from .oidc import Provider, TokenResponse
    from .providers import ProviderLink
    from .signin import SignedIn

log = logging.getLogger(__name__)

# How long a sign-in begun over the API may take (signin.PENDING_TTL_SECONDS agrees).
SIGN_IN_SECONDS = 600
# A caller whose token is still good waits this long for a renewal, then gets the
# current token while the renewal goes on: an outage never stalls the apps.
RENEWAL_WAIT_SECONDS = 2.0
# A caller whose token no longer serves it waits this long, then is told to try again.
CALLER_WAIT_SECONDS = 10.0
# How long the answer to a refresh, once sent, is awaited (issue 14, finding 1).
REFRESH_ANSWER_SECONDS = 180.0
RENEWAL_PENDING = "the provider has not answered a renewal yet"
ANSWER_LOST = "the provider never answered the last renewal"
# Who acts when the daemon itself changes a session (the provider revoked it, ...).
DAEMON = Actor(app="signin-brokerd", uid=os.geteuid(), pid=os.getpid())


class AccountStore(Protocol):
    """Where accounts survive a restart (store.vault.Vault); calls may block."""

    @property
    def description(self) -> str:
        """Where the state and its keys are, for status."""

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        """Write the account's record."""

    def load(self, account_id: str) -> dict[str, Any] | None:
        """Read the account's record."""

    def delete(self, account_id: str) -> None:
        """Remove the account's record and key."""

    def accounts(self) -> list[str]:
        """The ids of the stored accounts."""


class AuditTrail(Protocol):
    """Where the audit rows go (daemon.audit_trail); best effort: it never raises."""

    def record(self, entry: AuditEntry) -> None:
        """Queue a row."""

    async def record_now(self, entry: AuditEntry) -> None:
        """Write a row before going on (the removal of an account is recorded first)."""

    async def forget_account(self, account: str) -> None:
        """Mark the account's rows for deletion after the retention."""


class _NoAudit:
    def record(self, entry: AuditEntry) -> None:
        pass

    async def record_now(self, entry: AuditEntry) -> None:
        pass

    async def forget_account(self, account: str) -> None:
        pass


class SessionManager:
    """Owns the signed-in accounts, their tokens, and the events about them."""

    def __init__(
        self,
        providers: Providers | None = None,
        *,
        store: AccountStore | None = None,
        storage: str = "memory only",
        revalidate_seconds: int = 30,
        audit: AuditTrail | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.providers = providers or Providers()  # set after start-up (see daemon.app)
        self.audit: AuditTrail = audit or _NoAudit()
        self.events = EventBus()
        self.store = store
        self.storage = store.description if store is not None else storage
        self.revalidate_seconds = revalidate_seconds
        self.restored = asyncio.Event()  # set once stored accounts are back
        self.changed = asyncio.Event()  # wakes the keeper: an account came or went
        self._clock = clock
        self._accounts: dict[str, Account] = {}
        self._sign_ins: dict[str, SignInStart] = {}  # begun over the API, by id
        self._grants = GrantBudget(clock)
        self.logout_links = LogoutLinks(clock)

    # -- what apps may know ------------------------------------------------------------

    @property
    def issuer(self) -> str:
        """The default provider's issuer ("" when none is configured)."""
        default = self.providers.default
        return default.issuer if default is not None else ""

    @property
    def degraded_reason(self) -> str:
        """Why providers are considered unreachable, each named when there are several."""
        several = len(list(self.providers)) > 1
        return "; ".join(
            f"{link.alias or 'main'}: {link.degraded_reason}" if several else link.degraded_reason
            for link in self.providers
            if link.degraded_reason
        )

    @property
    def last_provider_contact(self) -> float:
        """When a provider last answered (0 when none has yet)."""
        return max((link.last_contact for link in self.providers), default=0.0)

    def state(self, entitlement: Entitlement = EVERYTHING) -> SignInState:
        """NOT_CONFIGURED without a provider, else whether an account it sees is signed in."""
        if not self.providers:
            return SignInState.NOT_CONFIGURED
        if any(entitlement.sees(account_id) for account_id in self._accounts):
            return SignInState.SIGNED_IN
        return SignInState.SIGNED_OUT

    def accounts(self, entitlement: Entitlement = EVERYTHING) -> list[AccountInfo]:
        """The signed-in accounts the caller may see, default first."""
        infos = [self._info(a) for a in self._accounts.values() if entitlement.sees(a.info.id)]
        return sorted(infos, key=lambda a: (not a.is_default, a.signed_in_at))

    def account(self, account_id: str, entitlement: Entitlement = EVERYTHING) -> AccountInfo | None:
        """One account by id, or None (also when the caller may not see it)."""
        account = self._accounts.get(account_id)
        if account is None or not entitlement.sees(account_id):
            return None
        return self._info(account)

    @property
    def default_account(self) -> str:
        """The id of the default account, or "" when none is signed in."""
        return next((a.info.id for a in self._accounts.values() if a.info.is_default), "")

    def default_for(self, entitlement: Entitlement) -> str:
        """The account an empty `account` means for this caller ("" when it sees none).

        That is the default when the caller may see it, else the first account it may
        see that was signed in.
        """
        default = self.default_account
        if default and entitlement.sees(default):
            return default
        visible = self.accounts(entitlement)
        return visible[0].id if visible else ""

    # -- tokens ------------------------------------------------------------------------

    async def get_token(
        self,
        account_id: str,
        scopes: Sequence[str],
        min_ttl: int,
        *,
        audience: str = "",
        actor: Actor | None = None,
        entitlement: Entitlement = EVERYTHING,
    ) -> IssuedToken:
        """A token of the account (default when empty) valid for min_ttl seconds more.

        TokenLifetimeTooShort when the provider's tokens never last that long: after at
        most one renewal, so such a caller costs the provider nothing more.

        With scopes narrower than the sign-in's, or an audience, the token is a
        down-scoped one, kept until it wants renewing like any other; each one the
        provider is asked for counts against the app's budget (TooManyNewTokens). A
        caller limited to some scopes gets a token of those scopes when it names none.
        """
        await self.restored.wait()
        account = self._resolve(account_id, entitlement)
        if entitlement.scopes is not None and not scopes:
            scopes = sorted(entitlement.scopes & frozenset(account.tokens.scopes))
        missing = [scope for scope in scopes if scope not in account.tokens.scopes]
        if missing:
            raise ScopeNotGranted(missing, account.info.id)
        wanted = frozenset(scopes)
        if audience or (wanted and wanted != frozenset(account.tokens.scopes)):
            app = actor.app if actor is not None else ""
            tokens = await self._scoped_token(account, (wanted, audience), min_ttl, app)
        else:
            tokens = await self._main_token(account, min_ttl)
        if actor is not None:
            self._note_use(account, actor, tokens, audience)
        return IssuedToken(
            access_token=tokens.access_token,
            token_type=tokens.token_type,
            expires_at=int(tokens.expires_at),
            scopes=tokens.scopes,
            account=account.info.id,
        )

    async def _main_token(  # noqa: PLR0911 - each return is a different situation
        self, account: Account, min_ttl: int
    ) -> TokenSet:
        tokens = account.tokens
        now = self._clock()
        if not tokens.wants_refresh(now, min_ttl):
            return tokens  # the common case: no lock, no await
        if tokens.renewal_would_hammer(now, min_ttl):  # issue 14, finding 5
            raise TokenLifetimeTooShort(tokens.lifetime, min_ttl)
        if not self._renewable(account):
            return await self._unrenewable(account, min_ttl)
        if now < account.retry_at and not self._refreshing(account):
            # Backing off: do not hammer a failing (or refusing) provider.
            return self._without_renewal(account, min_ttl, self._backoff_reason(account))
        task = self._start_refresh(account)
        wait = RENEWAL_WAIT_SECONDS if tokens.lasts(now, min_ttl) else CALLER_WAIT_SECONDS
        try:
            renewed = await asyncio.wait_for(asyncio.shield(task), wait)
        except TimeoutError:
            return self._without_renewal(account, min_ttl, RENEWAL_PENDING)  # it carries on
        except ProviderUnavailable as error:
            return self._without_renewal(account, min_ttl, str(error))
        except OAuthError:
            if not self._current(account):
                raise SignInRequired from None  # the provider ended the session
            return self._without_renewal(account, min_ttl, self._backoff_reason(account))
        if not self._current(account):
            raise SignInRequired  # signed out while the provider answered
        if renewed.lifetime < min_ttl:
            raise TokenLifetimeTooShort(renewed.lifetime, min_ttl)
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
        self.changed.set()

    async def _refresh_main(self, account: Account) -> TokenSet:
        """Renew the main token; shared by every caller waiting at that moment."""
        async with account.refresh_lock:
            try:
                response = await self._spend_refresh_token(account)
            except OAuthError as error:
                await self._refused(account, error)
                raise
            renewed = account.tokens.renewed(response, self._clock())
            if not self._current(account):  # signed out while the provider took its time
                await self._revoke_at_provider(account, renewed)
                return renewed
            await self._persist(account, renewed)
            account.tokens = renewed
        self._publish(EventKind.REFRESHED, account.info.id, "the access token was renewed")
        return renewed

    async def _scoped_token(
        self, account: Account, key: ScopedKey, min_ttl: int, app: str
    ) -> TokenSet:
        cached = account.scoped.get(key)
        now = self._clock()
        if cached is not None and not cached.wants_refresh(now, min_ttl):
            return cached  # no provider round trip while it is good
        if cached is not None and cached.renewal_would_hammer(now, min_ttl):
            raise TokenLifetimeTooShort(cached.lifetime, min_ttl)  # as in _main_token
        if not self._renewable(account):
            raise TokenTooShortLived(0 if cached is None else max(0, int(cached.expires_at - now)))
        try:
            self._grants.take(app)  # before the lock: a refused flood does not queue there
        except TooManyNewTokens:
            if cached is not None and cached.lasts(now, min_ttl):
                return cached  # due for renewal, but still good enough for this caller
            raise
        try:
            async with self._refresh_turn(account):
                token = await self._fetch_scoped(account, key, min_ttl)
        except ProviderUnreachable:
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
                await account.refresh_lock.acquire()
        except TimeoutError:
            raise ProviderUnreachable(RENEWAL_PENDING) from None
        try:
            yield
        finally:
            account.refresh_lock.release()

    async def _fetch_scoped(self, account: Account, key: ScopedKey, min_ttl: int) -> TokenSet:
        """A new down-scoped token (the caller holds the account's lock)."""
        cached = account.scoped.get(key)
        if cached is not None and not cached.wants_refresh(self._clock(), min_ttl):
            return cached  # a caller ahead in the queue fetched it
        scopes, audience = key
        try:
            response = await self._spend_refresh_token(
                account, " ".join(sorted(scopes)) if scopes else None, audience or None
            )
        except ProviderUnavailable as error:
            raise ProviderUnreachable(str(error)) from None
        except OAuthError as error:
            if error.error == "invalid_grant":
                raise SignInRequired from None
            raise ProviderRefused(error.error) from None
        now = self._clock()
        requested = tuple(sorted(scopes)) if scopes else account.tokens.scopes
        token = replace(TokenSet.issued(response, now, requested), from_refresh=True)
        rotated = account.tokens.rotated(response)
        if not self._current(account):  # signed out while the provider took its time
            await self._revoke_at_provider(
                account, replace(token, refresh_token=rotated.refresh_token)
            )
            raise SignInRequired
        await self._persist(account, rotated)
        account.tokens = rotated
        account.scoped.put(key, token, now)
        return token

    async def _spend_refresh_token(
        self, account: Account, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """One refresh_token grant (caller holds the account's lock); tracks provider health.

        Once sent, its answer is awaited however slow the provider is, within
        REFRESH_ANSWER_SECONDS: a rotating provider that stalls, then completes the
        refresh, would otherwise leave the daemon holding a spent refresh token. A token
        whose answer never came is never sent again (TokenSet.refresh_in_doubt). That
        includes a daemon stopped while it waited: the store says "in doubt" until the
        answer is stored (a write-ahead), so the next start does not send it again.
        """
        tokens, client = account.tokens, self._client(account)
        assert client is not None and tokens.refresh_token is not None  # noqa: S101 - checked by callers
        if not self._current(account):  # signed out while this waited for the lock
            raise SignInRequired
        if tokens.refresh_in_doubt:  # a renewal ahead in the queue lost its answer
            raise ProviderUnavailable(ANSWER_LOST)
        if not tokens.refresh_kept:  # a rotating provider spends it
            await self._persist(account, replace(tokens, refresh_in_doubt=True))
        try:
            async with asyncio.timeout(REFRESH_ANSWER_SECONDS):
                response = await client.refresh(
                    tokens.refresh_token,
                    scope=scope,
                    resource=resource,
                    answer_within=REFRESH_ANSWER_SECONDS,
                )
        except (TimeoutError, AnswerLost) as error:
            reason = str(error) or f"no answer within {REFRESH_ANSWER_SECONDS:g} s"
            await self._answer_lost(account, f"a renewal got no answer ({reason})")
            raise AnswerLost(reason) from None
        except ProviderUnavailable as error:
            await self._not_spent(account, tokens)  # not sent, or a server error: unspent
            self._provider_failed(account, str(error))
            raise
        except OAuthError as error:
            self._link(account).last_contact = self._clock()
            if error.error == "invalid_grant" and self._current(account):
                await self._provider_ended(account, "it refused the refresh token (invalid_grant)")
            await self._not_spent(account, tokens)
            raise
        self._provider_answered(account)
        return response

    async def _not_spent(self, account: Account, tokens: TokenSet) -> None:
        """Take back the write-ahead of a refresh the provider refused or never received."""
        if not tokens.refresh_kept and self._current(account):
            await self._persist(account, tokens)

    async def finish_renewals(self, grace: float) -> None:
        """Give the renewals under way up to grace seconds to be answered and stored (a stop)."""
        running = [
            account.refresh_task
            for account in self._accounts.values()
            if account.refresh_task is not None and not account.refresh_task.done()
        ]
        if running:
            await asyncio.wait(running, timeout=grace)

    async def _answer_lost(self, account: Account, reason: str) -> None:
        """A renewal whose answer never came: its refresh token may be spent (unless kept)."""
        if not account.tokens.refresh_kept and self._current(account):
            doubtful = replace(account.tokens, refresh_in_doubt=True)
            await self._persist(account, doubtful)
            account.tokens = doubtful
            log.warning(
                "the refresh token is not sent again: the provider may have spent it;"
                " the session lasts until the access token expires",
                extra={
                    "account": account.info.id,
                    "reason": reason,
                    "expires_in_s": round(doubtful.expires_at - self._clock()),
                },
            )
        self._provider_failed(account, reason)

    async def _refused(self, account: Account, error: OAuthError) -> None:
        """A refused renewal: the session has ended if userinfo rejects the token too.

        Else it backs off like an outage: a provider's bare 400 is neither taken for the
        end of a session it still accepts, nor retried at once (issue 14, finding 10).
        """
        if error.error == "invalid_grant" or not self._current(account):
            return  # _spend_refresh_token ended the session
        reason = f"the provider refused to renew the token ({error.error}, HTTP {error.status})"
        if await self._token_rejected(account):
            await self._provider_ended(account, f"{reason} and rejects the access token")
            return
        account.refusal = reason
        log.warning(
            "the provider refused a refresh",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": self._back_off(account, reason),
            },
        )

    async def _token_rejected(self, account: Account) -> bool:
        """Whether the provider's userinfo rejects the access token (no answer: no)."""
        client = self._client(account)
        assert client is not None  # noqa: S101 - it answered a refresh
        try:
            await client.userinfo(account.tokens.access_token)
        except OAuthError:
            return True
        except ProviderUnavailable:
            pass  # no evidence either way
        return False

    async def _provider_ended(self, account: Account, reason: str) -> None:
        """The provider ended the session: say why in the log, and end it here (REVOKED)."""
        log.warning(
            "the provider ended the session", extra={"account": account.info.id, "reason": reason}
        )
        await self._end(account, EventKind.REVOKED, "the provider ended the session", DAEMON)

    async def _unrenewable(self, account: Account, min_ttl: int) -> TokenSet:
        """The token of a session that cannot be renewed, while it serves; none after expiry."""
        tokens, now = account.tokens, self._clock()
        if tokens.lasts(now, min_ttl):
            return tokens
        if tokens.is_valid(now):
            raise TokenTooShortLived(int(tokens.expires_at - now))
        await self._expire(account)
        raise SignInRequired

    async def _expire(self, account: Account) -> None:
        """End a session whose token expired and cannot be renewed: status agrees with GetToken."""
        if self._client(account) is None:
            reason = "its identity provider is no longer configured"
        elif account.tokens.refresh_in_doubt:
            reason = "the provider never answered its last renewal"
        else:
            reason = "the provider issued no refresh token"
        log.warning(
            "the session ended: its access token expired and cannot be renewed",
            extra={"account": account.info.id, "reason": reason},
        )
        detail = f"the access token expired and cannot be renewed ({reason}); sign in again"
        await self._end(account, EventKind.SIGNED_OUT, detail, DAEMON)

    def _without_renewal(self, account: Account, min_ttl: int, reason: str) -> TokenSet:
        """The current token while a renewal is pending or failed, if it serves the caller."""
        if account.tokens.lasts(self._clock(), min_ttl):
            return account.tokens
        raise ProviderUnreachable(reason)

    def _renewable(self, account: Account) -> bool:
        """Whether the daemon may send the account's refresh token."""
        tokens = account.tokens
        return (
            self._client(account) is not None
            and tokens.refresh_token is not None
            and not (tokens.refresh_in_doubt)
        )

    @staticmethod
    def _refreshing(account: Account) -> bool:
        return account.refresh_task is not None and not account.refresh_task.done()

    def _current(self, account: Account) -> bool:
        """Whether the account is still signed in (not ended, nor replaced by a new sign-in)."""
        return self._accounts.get(account.info.id) is account

    def _backoff_reason(self, account: Account) -> str:
        link = self.providers.of(account.info.id)
        degraded = link.degraded_reason if link is not None else ""
        return account.refusal or degraded or "the last renewal failed"

    def _note_use(self, account: Account, actor: Actor, tokens: TokenSet, audience: str) -> None:
        """Count the use; audit each token the first time a process gets it.

        An app asking again for a token it already holds is counted, not audited
        again: a busy app would otherwise write a row per request, and the row adds
        nothing that the first one did not say.
        """
        previous = account.apps.get(actor.app)
        grant = (actor.pid, hash(tokens.access_token), audience)  # str caches its hash
        account.apps[actor.app] = AppUse(
            executable=actor.app,
            last_pid=actor.pid,
            last_used=self._clock(),
            tokens_issued=(previous.tokens_issued if previous else 0) + 1,
            last_grant=grant,
        )
        if previous is not None and previous.last_grant == grant:
            return
        payload: dict[str, object] = {
            "scopes": list(tokens.scopes),
            "expires_at": int(tokens.expires_at),
        }
        if audience:
            payload["audience"] = audience
        self.audit.record(
            AuditEntry(actor, Action.ISSUE_TOKEN, "token", account.info.id, payload=payload)
        )

    # -- provider health ---------------------------------------------------------------

    def _provider_failed(self, account: Account, reason: str) -> None:
        log.warning(
            "the identity provider is not answering",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": self._back_off(account, reason),
            },
        )

    def _back_off(self, account: Account, reason: str) -> float:
        """No refresh for a while (schedule.retry_after_failure); seconds until the next."""
        account.failures += 1
        account.retry_at = retry_after_failure(self._clock(), account.failures)
        link = self._link(account)
        if not link.degraded_reason:
            prefix = f"{link.alias}: " if link.alias else ""
            self._publish(EventKind.DEGRADED, "", f"degraded: {prefix}{reason}")
        link.degraded_reason = reason
        return round(account.retry_at - self._clock(), 1)

    def _provider_answered(self, account: Account) -> None:
        account.failures = 0
        account.retry_at = 0.0
        account.refusal = ""
        link = self._link(account)
        link.last_contact = self._clock()
        if link.degraded_reason:
            link.degraded_reason = ""
            log.info(f"{link.name} answers again", extra={"provider": link.alias})
            self._publish(EventKind.RECOVERED, "", f"{link.name} answers again")

    # -- the background keeper's work -------------------------------------------------

    async def tend(self) -> float:
        """Renew, re-validate and expire what is due; return the seconds until something is.

        A renewal runs on in its own task (it may wait minutes for the provider); when
        it ends, it wakes the keeper (`changed`).
        """
        now = self._clock()
        for account in list(self._accounts.values()):
            renewable = self._renewable(account)
            if not renewable and not account.tokens.is_valid(now):
                await self._expire(account)
            elif now < account.retry_at:
                continue
            elif renewable and now >= account.refresh_at and not self._refreshing(account):
                self._start_refresh(account)
            elif now >= account.revalidate_at:
                await self._revalidate(account)
        return self._next_due() - self._clock()

    async def _revalidate(self, account: Account) -> None:
        """Ask the provider whether the session still stands (contract I2, within 60 s)."""
        client = self._client(account)
        account.revalidate_at = next_revalidation(self._clock(), self.revalidate_seconds)
        if client is None:
            return  # a provider no longer configured: its accounts are not restored
        try:
            await client.userinfo(account.tokens.access_token)
            rejected = False
        except ProviderUnavailable as error:
            self._provider_failed(account, str(error))
            return
        except OAuthError:
            rejected = True
        if account.refusal:  # answering is not renewing: the refusal's backoff goes on
            self._link(account).last_contact = self._clock()
        else:
            self._provider_answered(account)
        if rejected and self._renewable(account):
            self._start_refresh(account)  # the refresh decides
        elif rejected:
            await self._provider_ended(account, "it rejects the access token")

    def _next_due(self) -> float:
        now = self._clock()
        moments = [BACKOFF_MAX_SECONDS + now]
        for account in self._accounts.values():
            if account.retry_at > now:
                moments.append(account.retry_at)
                continue
            moments.append(account.revalidate_at)
            if not self._renewable(account):
                moments.append(account.tokens.expires_at)
            elif not self._refreshing(account):
                moments.append(account.refresh_at)
        return min(moments)

    # -- signing in and out --------------------------------------------------------------

    def new_sign_in(
        self,
        workspace_id: str = "",
        owner: str = "",
        authorize_params: Mapping[str, str] | None = None,
        provider: str = "",
    ) -> SignInStart:
        """An id for a sign-in begun over the API; the browser carries it through the flow.

        The owner (see accounts.owner_key) is the only watcher told how it goes until
        it ends with an account, which then only those who may see it are told of.
        The authorize parameters (login_hint, prompt, ...) stay here, looked up by the
        id when the browser arrives: a page address cannot add any; nor can it choose
        another provider than the one (by alias; "" the default) chosen here.
        """
        link = self.providers.named(provider)  # NotConfigured when there is no such one
        now = self._clock()
        self._sign_ins = {
            sign_in_id: begun
            for sign_in_id, begun in self._sign_ins.items()
            if begun.expires_at > now
        }
        started = SignInStart(
            secrets.token_urlsafe(16),
            now + SIGN_IN_SECONDS,
            workspace_id,
            owner,
            dict(authorize_params or {}),
            link.alias,
        )
        self._sign_ins[started.sign_in_id] = started
        return started

    def sign_in_started(self, sign_in_id: str) -> SignInStart | None:
        """A sign-in begun over the API and not yet expired, by its id."""
        begun = self._sign_ins.get(sign_in_id)
        return begun if begun is not None and begun.expires_at > self._clock() else None

    async def complete_sign_in(self, signed_in: SignedIn, actor: Actor = DAEMON) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that tenant's old session)."""
        link = self.providers.named(signed_in.provider or MAIN_NAME)
        claims = await self._profile_claims(link, signed_in)
        platform_user_id = str(claims["sub"])
        workspace_id = signed_in.workspace_id
        account_id = account_id_of(platform_user_id, workspace_id, link.alias)
        now = self._clock()
        previous = self._accounts.get(account_id)
        info = AccountInfo(
            id=account_id,
            platform_user_id=platform_user_id,
            workspace_id=workspace_id,
            provider=link.alias,
            display_name=_text(claims, "name") or _text(claims, "preferred_username"),
            email=_text(claims, "email"),
            is_default=previous.info.is_default if previous else not self._accounts,
            signed_in_at=now,
        )
        tokens = TokenSet.issued(signed_in.tokens, now, ())
        if tokens.refresh_token is None:  # status shows it too: no next renewal
            log.warning(
                "the provider issued no refresh token: sign in again when the token expires",
                extra={"account": account_id, "expires_in_s": int(tokens.expires_at - now)},
            )
        account = Account(
            info=info,
            tokens=tokens,
            apps=previous.apps if previous else {},
            client_id=signed_in.client_id,
        )
        account.revalidate_at = next_revalidation(now, self.revalidate_seconds)
        await self._persist(account, tokens)
        self._accounts[account_id] = account
        self.changed.set()
        self.audit.record(
            AuditEntry(
                actor,
                Action.UPDATE if previous else Action.CREATE,
                "account",
                account_id,
                payload={"event": "signed in", "scopes": list(tokens.scopes)},
            )
        )
        self._publish(
            EventKind.SIGNED_IN,
            account_id,
            f"signed in as {info.display_name or platform_user_id}",
            signed_in.sign_in_id,
        )
        return self._info(account)

    async def _profile_claims(self, link: ProviderLink, signed_in: SignedIn) -> dict[str, Any]:
        """The id_token's claims, completed from userinfo when name or email is missing."""
        claims = dict(signed_in.claims)
        if "name" in claims and "email" in claims:
            return claims
        try:
            extra = await link.client.userinfo(signed_in.tokens.access_token)
        except (OAuthError, ProviderUnavailable) as error:
            log.info("userinfo not available for the profile", extra={"reason": str(error)})
            return claims
        if extra.get("sub") == claims["sub"]:  # OpenID Connect Core 5.3.2
            return {**extra, **claims}
        return claims

    def sign_in_failed(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers that a sign-in attempt failed, and why (no secrets in detail)."""
        self._publish(EventKind.SIGN_IN_FAILED, "", detail, sign_in_id)

    def sign_in_progress(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers how a sign-in that takes a while stands (a device sign-in)."""
        self._publish(EventKind.SIGN_IN_PROGRESS, "", detail, sign_in_id)

    async def sign_out(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor = DAEMON,
        entitlement: Entitlement = EVERYTHING,
    ) -> SignOutResult:
        """End the account's session here and at the provider; not an error when there is none.

        The tokens are revoked at the provider (RFC 7009) where it offers revocation; the
        result also carries where a browser ends its session there (see logout_url).
        """
        await self.restored.wait()
        if not account_id and not self.default_for(entitlement):
            return SignOutResult(False, await self.logout_url(page_url, None))
        account = self._resolve(account_id, entitlement)
        await self._end(account, EventKind.SIGNED_OUT, "signed out", actor)
        revocation, error = await self._revoke_at_provider(account, account.tokens)
        logout_url = await self.logout_url(page_url, account.tokens.id_token, account.info.id)
        return SignOutResult(True, logout_url, revocation, error)

    async def remove_account(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor,
        entitlement: Entitlement = EVERYTHING,
    ) -> str:
        """Sign the account out and delete all the daemon keeps of it; see logout_url.

        The audit row of the removal is written before anything is deleted (contract 3).
        """
        await self.restored.wait()
        account = self._resolve(account_id, entitlement)
        await self.audit.record_now(
            AuditEntry(
                actor, Action.DELETE, "account", account.info.id, payload={"event": "removed"}
            )
        )
        await self._end(account, EventKind.SIGNED_OUT, "the account was removed", actor)
        await self._revoke_at_provider(account, account.tokens)
        await self.audit.forget_account(account.info.id)
        return await self.logout_url(page_url, account.tokens.id_token, account.info.id)

    async def set_default(
        self, account_id: str, *, actor: Actor, entitlement: Entitlement = EVERYTHING
    ) -> AccountInfo:
        """Make the account the one used when a request names none."""
        await self.restored.wait()
        chosen = self._resolve(account_id, entitlement)
        for account in self._accounts.values():
            is_default = account is chosen
            if account.info.is_default != is_default:
                account.info = replace(account.info, is_default=is_default)
                await self._persist(account, account.tokens)
        self.audit.record(
            AuditEntry(actor, Action.UPDATE, "account", chosen.info.id, payload={"default": True})
        )
        return self._info(chosen)

    async def _revoke_at_provider(
        self, account: Account, tokens: TokenSet
    ) -> tuple[Revocation, str]:
        """Revoke the refresh and access token; what the provider did, and why it failed."""
        client = self._client(account)
        if client is None:
            return Revocation.FAILED, "its identity provider is no longer configured"
        failure = ""
        for token, hint in (
            (tokens.refresh_token, "refresh_token"),
            (tokens.access_token, "access_token"),
        ):
            if token is None:
                continue
            try:
                offered = await client.revoke(token, hint)
            except ProviderUnavailable as error:
                log.warning(
                    "could not revoke a token at the provider", extra={"reason": str(error)}
                )
                failure = failure or str(error)
                continue
            if not offered:
                log.info(
                    "the provider offers no token revocation: its tokens stay valid"
                    " until they expire"
                )
                return Revocation.NOT_OFFERED, ""
        return (Revocation.FAILED, failure) if failure else (Revocation.REVOKED, "")

    async def logout_url(self, page_url: str, id_token: str | None, account_id: str = "") -> str:
        """Where a browser ends its session at the provider, back to the page at page_url after.

        With an id_token, a one-time link to the loopback page (session.signout), which
        alone sends the browser on with the id_token_hint; "" without a page to serve it.
        """
        if not page_url:
            return ""
        target = await self.provider_logout_url(page_url + "/", id_token, account_id)
        return self.logout_links.create(page_url, target) if target and id_token else target

    async def provider_logout_url(
        self,
        post_logout_redirect_uri: str = "",
        id_token_hint: str | None = None,
        account_id: str = "",
    ) -> str:
        """The end-session address of the account's provider (contract: {idp_url}/logout).

        Without an account, the default provider's.
        """
        link = self.providers.of(account_id) if account_id else self.providers.default
        if link is None:
            return ""
        try:
            endpoint = (await link.client.metadata()).end_session_endpoint
        except ProviderUnavailable:
            endpoint = ""
        params = {"client_id": link.client.client_id}
        if id_token_hint:
            params["id_token_hint"] = id_token_hint
        if post_logout_redirect_uri:
            params["post_logout_redirect_uri"] = post_logout_redirect_uri
        return f"{endpoint or link.issuer.rstrip('/') + '/logout'}?{urlencode(params)}"

    async def _end(self, account: Account, kind: EventKind, detail: str, actor: Actor) -> None:
        """Forget the account, its stored state with it, and hand the default on."""
        removed = self._accounts.pop(account.info.id, None)
        if removed is None:
            return
        self.audit.record(
            AuditEntry(actor, Action.DELETE, "session", account.info.id, payload={"event": detail})
        )
        if removed.info.is_default and self._accounts:
            heir = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            heir.info = replace(heir.info, is_default=True)
            await self._persist(heir, heir.tokens)
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.delete, account.info.id)
            except Exception:
                log.exception(
                    "could not remove the stored state", extra={"account": account.info.id}
                )
        self.changed.set()
        self._publish(kind, account.info.id, detail)

    # -- persistence -------------------------------------------------------------------------

    async def _persist(self, account: Account, tokens: TokenSet) -> None:
        """Write the account with these tokens before anyone is handed them."""
        if self.store is None:
            return
        link = self.providers.of(account.info.id)
        record = replace(account, tokens=tokens).to_record(link.issuer if link else "")
        try:
            await asyncio.to_thread(self.store.save, account.info.id, record)
        except Exception:
            log.exception("could not store the session", extra={"account": account.info.id})

    async def restore(self) -> None:
        """Bring back the accounts stored by an earlier run (of this issuer)."""
        try:
            if self.store is not None:
                await self._restore_from(self.store)
        finally:
            self.restored.set()
            self.changed.set()

    async def _restore_from(self, store: AccountStore) -> None:
        for account_id in await asyncio.to_thread(store.accounts):
            try:
                record = await asyncio.to_thread(store.load, account_id)
                if record is None:
                    continue
                account = Account.from_record(record)
            except Exception as error:
                log.warning(
                    "a stored session could not be restored",
                    extra={"account": account_id, "reason": str(error)},
                )
                continue
            if account.tokens.refresh_in_doubt:
                log.warning(
                    "a renewal got no answer before the daemon stopped: its refresh token"
                    " is not sent again; the session lasts until the access token expires",
                    extra={"account": account_id},
                )
            link = self.providers.of(account.info.id)
            if link is None or record.get("issuer") != link.issuer:
                log.info(
                    "a stored session belongs to a provider that is not configured (now)",
                    extra={"account": account_id, "issuer": record.get("issuer")},
                )
                continue
            if link.client_for(account.client_id) is None:
                log.info(
                    "a stored session belongs to a client that is not configured (now)",
                    extra={"account": account_id, "client_id": account.client_id},
                )
                continue
            account.revalidate_at = first_revalidation(self._clock(), self.revalidate_seconds)
            self._accounts[account.info.id] = account
        if self._accounts and not self.default_account:
            first = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            first.info = replace(first.info, is_default=True)
        if self._accounts:
            log.info("sessions restored", extra={"accounts": sorted(self._accounts)})

    # -- helpers ---------------------------------------------------------------------------

    def _resolve(self, account_id: str, entitlement: Entitlement) -> Account:
        """The account the caller means; one it may not see is as absent as a missing one."""
        if not account_id:
            account_id = self.default_for(entitlement)
            if not account_id:
                raise SignInRequired
        account = self._accounts.get(account_id)
        if account is None or not entitlement.sees(account_id):
            raise AccountNotFound
        return account

    def _link(self, account: Account) -> ProviderLink:
        """The account's provider (only accounts of configured providers are kept)."""
        link = self.providers.of(account.info.id)
        assert link is not None  # noqa: S101 - restore and sign-in keep no other
        return link

    def _client(self, account: Account) -> Provider | None:
        """The client that renews the account's tokens; None when it is not configured."""
        link = self.providers.of(account.info.id)
        return link.client_for(account.client_id) if link is not None else None

    def _info(self, account: Account) -> AccountInfo:
        return replace(
            account.info,
            access_token_expires_at=int(account.tokens.expires_at),
            next_refresh_at=int(account.refresh_at) if self._renewable(account) else 0,
            apps=tuple(sorted(account.apps.values(), key=lambda a: -a.last_used)),
        )

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        begun = self._sign_ins.get(sign_in_id) if sign_in_id else None
        owner = begun.owner if begun is not None else ""
        self.events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id, owner=owner)
        )


def _text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""


async def keep(manager: SessionManager) -> None:
    """The background keeper: renew ahead of time and re-validate, until cancelled."""
    while True:
        manager.changed.clear()  # before tend(): what changes meanwhile wakes the next wait
        try:
            delay = await manager.tend()
        except Exception:
            log.exception("the session keeper failed; trying again shortly")
            delay = BACKOFF_FIRST_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                manager.changed.wait(), max(0.05, min(delay, BACKOFF_MAX_SECONDS))
            )
