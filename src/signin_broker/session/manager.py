"""The daemon's accounts and their sessions: the one object the gRPC and web layers talk to.

An account is keyed `user:<platform_user_id>` (the id_token `sub`, contract 2.1 and
2.9). Its tokens are renewed at 75 % of their lifetime, once however many callers
ask at the same moment: one refresh task per account is shared by all of them, and
every call that spends a refresh token runs under the account's lock, because a
rotated refresh token may be spent only once. A rotated refresh token is written to
the encrypted store before the new access token is handed out.

When the provider cannot be reached the daemon keeps serving a still-valid token,
says so (`degraded`), and tries again with exponential backoff and jitter. Only the
provider saying `invalid_grant` ends a session.

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
from collections.abc import Callable, Sequence
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
    SignInStart,
    SignInState,
    SignOutResult,
    account_id_of,
)
from .errors import (
    AccountNotFound,
    NotConfigured,
    OAuthError,
    ProviderRefused,
    ProviderUnavailable,
    ProviderUnreachable,
    ScopeNotGranted,
    SignInRequired,
    TokenTooShortLived,
    TooManyNewTokens,
)
from .events import EventBus, EventKind, SessionEvent
from .limits import GrantBudget, ScopedKey
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
    from .device import DeviceFlow
    from .oidc import Provider, TokenResponse
    from .signin import SignedIn

log = logging.getLogger(__name__)

# How long a sign-in begun over the API may take (signin.PENDING_TTL_SECONDS agrees).
SIGN_IN_SECONDS = 600
# A caller whose token is still good waits this long for a renewal, then gets the
# current token while the renewal goes on: an outage never stalls the apps.
RENEWAL_WAIT_SECONDS = 2.0
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
        issuer: str | None,
        provider: Provider | None = None,
        *,
        store: AccountStore | None = None,
        storage: str = "memory only",
        revalidate_seconds: int = 30,
        audit: AuditTrail | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.issuer = issuer
        self.provider = provider
        self.device_flow: DeviceFlow | None = None  # set with the provider, after start-up
        self.audit: AuditTrail = audit or _NoAudit()
        self.events = EventBus()
        self.store = store
        self.storage = store.description if store is not None else storage
        self.revalidate_seconds = revalidate_seconds
        self.degraded_reason = ""
        self.last_provider_contact = 0.0
        self.restored = asyncio.Event()  # set once stored accounts are back
        self.changed = asyncio.Event()  # wakes the keeper: an account came or went
        self._clock = clock
        self._accounts: dict[str, Account] = {}
        self._sign_in_owners: dict[str, tuple[str, float]] = {}  # sign-in id: owner, until
        self._grants = GrantBudget(clock)
        self.logout_links = LogoutLinks(clock)

    # -- what apps may know ------------------------------------------------------------

    def state(self, entitlement: Entitlement = EVERYTHING) -> SignInState:
        """NOT_CONFIGURED without an issuer, else whether an account it sees is signed in."""
        if not self.issuer:
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
        self, account: Account, min_ttl: int, *, force: bool = False
    ) -> TokenSet:
        tokens = account.tokens
        now = self._clock()
        if not force and not tokens.wants_refresh(now, min_ttl):
            return tokens  # the common case: no lock, no await
        if tokens.refresh_token is None or self.provider is None:
            return self._serve_without_renewal(tokens, now, min_ttl)
        task = account.refresh_task
        if task is None or task.done():
            if now < account.retry_at:  # backing off: do not hammer a failing provider
                return self._serve_without_renewal(tokens, now, min_ttl, self.degraded_reason)
            task = asyncio.get_running_loop().create_task(self._refresh_main(account))
            account.refresh_task = task
        still_good = tokens.is_valid(now) and tokens.expires_at - now >= min_ttl
        try:
            if still_good:
                return await asyncio.wait_for(asyncio.shield(task), RENEWAL_WAIT_SECONDS)
            return await asyncio.shield(task)
        except TimeoutError:
            return account.tokens  # still good; the renewal carries on
        except ProviderUnavailable as error:
            return self._serve_without_renewal(account.tokens, self._clock(), min_ttl, str(error))
        except OAuthError:
            raise SignInRequired from None  # the task ended the session

    async def _refresh_main(self, account: Account) -> TokenSet:
        """Renew the main token; shared by every caller waiting at that moment."""
        async with account.refresh_lock:
            response = await self._spend_refresh_token(account, {})
            now = self._clock()
            renewed = account.tokens.renewed(response, now)
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
        if account.tokens.refresh_token is None or self.provider is None:
            raise (
                TokenTooShortLived(0)
                if cached is None
                else TokenTooShortLived(int(cached.expires_at - now))
            )
        try:
            self._grants.take(app)  # before the lock: a refused flood does not queue there
        except TooManyNewTokens:
            if cached is not None and cached.is_valid(now) and cached.expires_at - now >= min_ttl:
                return cached  # due for renewal, but still good enough for this caller
            raise
        async with account.refresh_lock:
            cached = account.scoped.get(key)
            now = self._clock()
            if cached is not None and not cached.wants_refresh(now, min_ttl):
                return cached  # a caller ahead in the queue fetched it
            scopes, audience = key
            extra = {"scope": " ".join(sorted(scopes))} if scopes else {}
            if audience:
                extra["resource"] = audience
            try:
                response = await self._spend_refresh_token(account, extra)
            except ProviderUnavailable as error:
                if (
                    cached is not None
                    and cached.is_valid(now)
                    and cached.expires_at - now >= min_ttl
                ):
                    return cached
                raise ProviderUnreachable(str(error)) from None
            except OAuthError as error:
                if error.error == "invalid_grant":
                    raise SignInRequired from None
                raise ProviderRefused(error.error) from None
            requested = tuple(sorted(scopes)) if scopes else account.tokens.scopes
            token = TokenSet.issued(response, now, requested)
            rotated = replace(
                account.tokens, refresh_token=response.refresh_token or account.tokens.refresh_token
            )
            await self._persist(account, rotated)
            account.tokens = rotated
            account.scoped.put(key, token, now)
            return token

    async def _spend_refresh_token(self, account: Account, extra: dict[str, str]) -> TokenResponse:
        """One refresh_token grant (caller holds the account's lock); tracks provider health."""
        assert self.provider is not None and account.tokens.refresh_token is not None  # noqa: S101 - checked by callers
        try:
            response = await self.provider.refresh(account.tokens.refresh_token, **extra)
        except ProviderUnavailable as error:
            self._provider_failed(account, str(error))
            raise
        except OAuthError as error:
            self._provider_answered(account)
            if error.error == "invalid_grant":
                await self._end(
                    account, EventKind.REVOKED, "the provider ended the session", DAEMON
                )
            else:
                log.warning("the provider refused a refresh", extra={"error_code": error.error})
            raise
        self._provider_answered(account)
        return response

    def _serve_without_renewal(
        self, tokens: TokenSet, now: float, min_ttl: int, reason: str = ""
    ) -> TokenSet:
        """The current token when it still serves the caller; else why it cannot."""
        if tokens.is_valid(now) and tokens.expires_at - now >= min_ttl:
            return tokens
        if reason:
            raise ProviderUnreachable(reason)
        if not tokens.is_valid(now):
            raise SignInRequired
        raise TokenTooShortLived(int(tokens.expires_at - now))

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
        account.failures += 1
        account.retry_at = retry_after_failure(self._clock(), account.failures)
        log.warning(
            "the identity provider is not answering",
            extra={
                "flow": "oauth",
                "reason": reason,
                "retry_in_s": round(account.retry_at - self._clock(), 1),
            },
        )
        if not self.degraded_reason:
            self._publish(EventKind.DEGRADED, "", f"degraded: {reason}")
        self.degraded_reason = reason

    def _provider_answered(self, account: Account) -> None:
        account.failures = 0
        account.retry_at = 0.0
        self.last_provider_contact = self._clock()
        if self.degraded_reason:
            self.degraded_reason = ""
            log.info("the identity provider answers again")
            self._publish(EventKind.RECOVERED, "", "the identity provider answers again")

    # -- the background keeper's work -------------------------------------------------

    async def tend(self) -> float:
        """Renew and re-validate what is due; return the seconds until something is due."""
        if self.provider is None:
            return BACKOFF_MAX_SECONDS
        now = self._clock()
        for account in list(self._accounts.values()):
            if now < account.retry_at:
                continue
            try:
                if account.tokens.refresh_token and now >= account.refresh_at:
                    await self._main_token(account, 0, force=True)
                elif now >= account.revalidate_at:
                    await self._revalidate(account)
            except (SignInRequired, ProviderUnreachable, TokenTooShortLived):
                pass  # events and logs already told; the next round tries again
        return self._next_due() - self._clock()

    async def _revalidate(self, account: Account) -> None:
        """Ask the provider whether the session still stands (contract I2, within 60 s)."""
        assert self.provider is not None  # noqa: S101 - tend() checked
        account.revalidate_at = next_revalidation(self._clock(), self.revalidate_seconds)
        try:
            await self.provider.userinfo(account.tokens.access_token)
        except ProviderUnavailable as error:
            self._provider_failed(account, str(error))
            return
        except OAuthError:
            self._provider_answered(account)
            if account.tokens.refresh_token is None:
                await self._end(
                    account, EventKind.REVOKED, "the provider no longer accepts the session", DAEMON
                )
                return
            await self._main_token(account, 0, force=True)  # the refresh decides
            return
        self._provider_answered(account)

    def _next_due(self) -> float:
        moments = [BACKOFF_MAX_SECONDS + self._clock()]
        for account in self._accounts.values():
            if account.retry_at > self._clock():
                moments.append(account.retry_at)
                continue
            moments.append(account.revalidate_at)
            if account.tokens.refresh_token:
                moments.append(account.refresh_at)
        return min(moments)

    # -- signing in and out --------------------------------------------------------------

    def new_sign_in(self, workspace_id: str = "", owner: str = "") -> SignInStart:
        """An id for a sign-in begun over the API; the browser carries it through the flow.

        The owner (see accounts.owner_key) is the only watcher told how it goes until
        it ends with an account, which then only those who may see it are told of.
        """
        if not self.issuer:
            raise NotConfigured(
                "no identity provider is configured: set issuer "
                "(--issuer, SIGNIN_BROKER_ISSUER or `issuer` in config.toml)"
            )
        now = self._clock()
        self._sign_in_owners = {
            sign_in_id: (who, until)
            for sign_in_id, (who, until) in self._sign_in_owners.items()
            if until > now
        }
        started = SignInStart(secrets.token_urlsafe(16), now + SIGN_IN_SECONDS, workspace_id)
        self._sign_in_owners[started.sign_in_id] = (owner, started.expires_at)
        return started

    async def complete_sign_in(self, signed_in: SignedIn, actor: Actor = DAEMON) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that tenant's old session)."""
        claims = await self._profile_claims(signed_in)
        platform_user_id = str(claims["sub"])
        workspace_id = signed_in.workspace_id
        account_id = account_id_of(platform_user_id, workspace_id)
        now = self._clock()
        previous = self._accounts.get(account_id)
        info = AccountInfo(
            id=account_id,
            platform_user_id=platform_user_id,
            workspace_id=workspace_id,
            display_name=_text(claims, "name") or _text(claims, "preferred_username"),
            email=_text(claims, "email"),
            is_default=previous.info.is_default if previous else not self._accounts,
            signed_in_at=now,
        )
        tokens = TokenSet.issued(signed_in.tokens, now, ())
        account = Account(info=info, tokens=tokens, apps=previous.apps if previous else {})
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

    async def _profile_claims(self, signed_in: SignedIn) -> dict[str, Any]:
        """The id_token's claims, completed from userinfo when name or email is missing."""
        claims = dict(signed_in.claims)
        if ("name" in claims and "email" in claims) or self.provider is None:
            return claims
        try:
            extra = await self.provider.userinfo(signed_in.tokens.access_token)
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
        await self._revoke_at_provider(account.tokens)
        return SignOutResult(True, await self.logout_url(page_url, account.tokens.id_token))

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
        await self._revoke_at_provider(account.tokens)
        await self.audit.forget_account(account.info.id)
        return await self.logout_url(page_url, account.tokens.id_token)

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

    async def _revoke_at_provider(self, tokens: TokenSet) -> None:
        if self.provider is None:
            return
        for token, hint in (
            (tokens.refresh_token, "refresh_token"),
            (tokens.access_token, "access_token"),
        ):
            if token is None:
                continue
            try:
                await self.provider.revoke(token, hint)
            except ProviderUnavailable as error:
                log.warning(
                    "could not revoke a token at the provider", extra={"reason": str(error)}
                )

    async def logout_url(self, page_url: str, id_token: str | None) -> str:
        """Where a browser ends its session at the provider, back to the page at page_url after.

        With an id_token, a one-time link to the loopback page (session.signout), which
        alone sends the browser on with the id_token_hint; "" without a page to serve it.
        """
        if not page_url:
            return ""
        target = await self.provider_logout_url(page_url + "/", id_token)
        return self.logout_links.create(page_url, target) if target and id_token else target

    async def provider_logout_url(
        self, post_logout_redirect_uri: str = "", id_token_hint: str | None = None
    ) -> str:
        """The provider's end-session address for a browser (contract: {idp_url}/logout)."""
        if self.provider is None or not self.issuer:
            return ""
        try:
            endpoint = (await self.provider.metadata()).end_session_endpoint
        except ProviderUnavailable:
            endpoint = ""
        params = {"client_id": self.provider.client_id}
        if id_token_hint:
            params["id_token_hint"] = id_token_hint
        if post_logout_redirect_uri:
            params["post_logout_redirect_uri"] = post_logout_redirect_uri
        return f"{endpoint or self.issuer + '/logout'}?{urlencode(params)}"

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
        record = replace(account, tokens=tokens).to_record(self.issuer or "")
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
            if record.get("issuer") != self.issuer:
                log.info(
                    "a stored session belongs to another provider", extra={"account": account_id}
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

    def _info(self, account: Account) -> AccountInfo:
        return replace(
            account.info,
            access_token_expires_at=int(account.tokens.expires_at),
            next_refresh_at=int(account.refresh_at) if account.tokens.refresh_token else 0,
            apps=tuple(sorted(account.apps.values(), key=lambda a: -a.last_used)),
        )

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        owner, _ = self._sign_in_owners.get(sign_in_id, ("", 0.0)) if sign_in_id else ("", 0.0)
        self.events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id, owner=owner)
        )


def _text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""


async def keep(manager: SessionManager) -> None:
    """The background keeper: renew ahead of time and re-validate, until cancelled."""
    while True:
        try:
            delay = await manager.tend()
        except Exception:
            log.exception("the session keeper failed; trying again shortly")
            delay = BACKOFF_FIRST_SECONDS
        manager.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                manager.changed.wait(), max(0.05, min(delay, BACKOFF_MAX_SECONDS))
            )
