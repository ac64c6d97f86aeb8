"""The daemon's accounts and their sessions: the one object the gRPC and web layers talk to.

An account is keyed `user:<platform_user_id>` (the id_token `sub`, contract 2.1 and
2.9). Tokens are renewed on demand at 75 % of their lifetime, once however many
callers ask at the same moment: the callers of one account queue on its lock, and
all but the first find the fresh token already there.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from .errors import (
    AccountNotFound,
    NotConfigured,
    OAuthError,
    ProviderUnavailable,
    ProviderUnreachable,
    ScopeNotGranted,
    SignInRequired,
    TokenTooShortLived,
)
from .events import EventBus, EventKind, SessionEvent
from .tokens import TokenSet

if TYPE_CHECKING:  # the OAuth stack loads after start-up (see daemon.app)
    from .oidc import Provider
    from .signin import SignedIn

# How long a sign-in begun over the API may take (signin.PENDING_TTL_SECONDS agrees).
SIGN_IN_SECONDS = 600

log = logging.getLogger(__name__)


class SignInState(enum.Enum):
    """Where sign-in stands (mirrors the API's SignInState)."""

    NOT_CONFIGURED = "not_configured"
    SIGNED_OUT = "signed_out"
    SIGNED_IN = "signed_in"


@dataclass(frozen=True, slots=True)
class AppUse:
    """An app (by executable) that got tokens of an account, for the dashboard."""

    executable: str
    last_pid: int
    last_used: float
    tokens_issued: int


@dataclass(frozen=True, slots=True)
class AccountInfo:
    """What the daemon may say about an account to the user's apps (no secrets)."""

    id: str
    platform_user_id: str
    workspace_id: str = ""
    display_name: str = ""
    email: str = ""
    is_default: bool = False
    access_token_expires_at: int = 0
    signed_in_at: float = 0.0
    apps: tuple[AppUse, ...] = ()


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """An access token handed to an app."""

    access_token: str = field(repr=False)
    token_type: str
    expires_at: int
    scopes: tuple[str, ...]
    account: str


@dataclass(frozen=True, slots=True)
class SignInStart:
    """A sign-in begun over the API: its id, for matching the outcome's event."""

    sign_in_id: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class SignOutResult:
    """The outcome of a sign-out."""

    was_signed_in: bool
    logout_url: str = ""


@dataclass
class _Account:
    """An account's mutable state, owned by the manager."""

    info: AccountInfo
    tokens: TokenSet
    refresh_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    apps: dict[str, AppUse] = field(default_factory=dict)


def account_id_of(platform_user_id: str) -> str:
    """The tenant-prefixed account id (contract 2.9: `user:<platform_user_id>`)."""
    return f"user:{platform_user_id}"


class SessionManager:
    """Owns the signed-in accounts, their tokens, and the events about them."""

    def __init__(
        self,
        issuer: str | None,
        provider: Provider | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.issuer = issuer
        self.provider = provider
        self.events = EventBus()
        self._clock = clock
        self._accounts: dict[str, _Account] = {}

    # -- what apps may know ------------------------------------------------------------

    @property
    def state(self) -> SignInState:
        """NOT_CONFIGURED without an issuer, else whether any account is signed in."""
        if not self.issuer:
            return SignInState.NOT_CONFIGURED
        return SignInState.SIGNED_IN if self._accounts else SignInState.SIGNED_OUT

    def accounts(self) -> list[AccountInfo]:
        """The signed-in accounts, default first."""
        infos = [self._info(account) for account in self._accounts.values()]
        return sorted(infos, key=lambda a: (not a.is_default, a.signed_in_at))

    def account(self, account_id: str) -> AccountInfo | None:
        """One account by id, or None."""
        account = self._accounts.get(account_id)
        return None if account is None else self._info(account)

    @property
    def default_account(self) -> str:
        """The id of the default account, or "" when none is signed in."""
        return next((a.info.id for a in self._accounts.values() if a.info.is_default), "")

    # -- tokens ------------------------------------------------------------------------

    async def get_token(
        self,
        account_id: str,
        scopes: Sequence[str],
        min_ttl: int,
        app: str = "",
        pid: int = 0,
    ) -> IssuedToken:
        """A token of the account (default when empty) valid for min_ttl seconds more."""
        account = self._resolve(account_id)
        missing = [scope for scope in scopes if scope not in account.tokens.scopes]
        if missing:
            raise ScopeNotGranted(missing, account.info.id)
        tokens = await self._fresh_tokens(account, min_ttl)
        self._note_use(account, app, pid)
        return IssuedToken(
            access_token=tokens.access_token,
            token_type=tokens.token_type,
            expires_at=int(tokens.expires_at),
            scopes=tokens.scopes,
            account=account.info.id,
        )

    async def _fresh_tokens(self, account: _Account, min_ttl: int) -> TokenSet:
        if not account.tokens.wants_refresh(self._clock(), min_ttl):
            return account.tokens  # the common case: no lock, no await
        async with account.refresh_lock:
            now = self._clock()
            tokens = account.tokens
            if not tokens.wants_refresh(now, min_ttl):
                return tokens  # a caller ahead in the queue renewed it
            if tokens.refresh_token is None or self.provider is None:
                return self._without_refresh(tokens, now, min_ttl)
            try:
                response = await self.provider.refresh(tokens.refresh_token)
            except OAuthError as error:
                self._end(
                    account, EventKind.REVOKED, f"the provider ended the session ({error.error})"
                )
                raise SignInRequired from None
            except ProviderUnavailable as error:
                log.warning(
                    "could not renew a token",
                    extra={"flow": "oauth", "step": "refresh", "reason": str(error)},
                )
                return self._without_refresh(tokens, now, min_ttl, reason=str(error))
            account.tokens = tokens.renewed(response, now)
            self._publish(EventKind.REFRESHED, account.info.id, "the access token was renewed")
            return account.tokens

    def _without_refresh(
        self, tokens: TokenSet, now: float, min_ttl: int, reason: str = ""
    ) -> TokenSet:
        """The current token when it still serves the caller; else why it cannot."""
        if tokens.expires_at - now >= min_ttl and tokens.is_valid(now):
            return tokens
        if reason:
            raise ProviderUnreachable(reason)
        if not tokens.is_valid(now):
            raise SignInRequired
        raise TokenTooShortLived(int(tokens.expires_at - now))

    def _note_use(self, account: _Account, app: str, pid: int) -> None:
        if not app:
            return
        previous = account.apps.get(app)
        account.apps[app] = AppUse(
            executable=app,
            last_pid=pid,
            last_used=self._clock(),
            tokens_issued=(previous.tokens_issued if previous else 0) + 1,
        )

    # -- signing in and out --------------------------------------------------------------

    def new_sign_in(self) -> SignInStart:
        """An id for a sign-in begun over the API; the browser carries it through the flow."""
        if not self.issuer:
            raise NotConfigured(
                "no identity provider is configured: set issuer "
                "(--issuer, SIGNIN_BROKER_ISSUER or `issuer` in config.toml)"
            )
        return SignInStart(secrets.token_urlsafe(16), self._clock() + SIGN_IN_SECONDS)

    async def complete_sign_in(self, signed_in: SignedIn) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that user's old session)."""
        claims = await self._profile_claims(signed_in)
        platform_user_id = str(claims["sub"])
        account_id = account_id_of(platform_user_id)
        now = self._clock()
        previous = self._accounts.get(account_id)
        info = AccountInfo(
            id=account_id,
            platform_user_id=platform_user_id,
            display_name=_text(claims, "name") or _text(claims, "preferred_username"),
            email=_text(claims, "email"),
            is_default=previous.info.is_default if previous else not self._accounts,
            signed_in_at=now,
        )
        tokens = TokenSet.issued(signed_in.tokens, now, ())
        account = _Account(info=info, tokens=tokens, apps=previous.apps if previous else {})
        self._accounts[account_id] = account
        self._publish(
            EventKind.SIGNED_IN,
            account_id,
            f"signed in as {info.display_name or platform_user_id}",
            signed_in.pending.sign_in_id,
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

    async def sign_out(self, account_id: str, post_logout_redirect_uri: str = "") -> SignOutResult:
        """End the account's session here and at the provider; not an error when there is none.

        The tokens are revoked at the provider (RFC 7009) where it offers revocation; the
        result also carries the provider's logout address for a browser session there.
        """
        if not account_id and not self._accounts:
            return SignOutResult(False, await self.provider_logout_url(post_logout_redirect_uri))
        account = self._resolve(account_id)
        self._end(account, EventKind.SIGNED_OUT, "signed out")
        await self._revoke_at_provider(account.tokens)
        return SignOutResult(
            True, await self.provider_logout_url(post_logout_redirect_uri, account.tokens.id_token)
        )

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

    def _end(self, account: _Account, kind: EventKind, detail: str) -> None:
        """Forget the account (its tokens with it) and hand the default on."""
        removed = self._accounts.pop(account.info.id, None)
        if removed is None:
            return
        if removed.info.is_default and self._accounts:
            heir = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            heir.info = replace(heir.info, is_default=True)
        self._publish(kind, account.info.id, detail)

    # -- helpers ---------------------------------------------------------------------------

    def _resolve(self, account_id: str) -> _Account:
        if not account_id:
            default = self.default_account
            if not default:
                raise SignInRequired
            account_id = default
        account = self._accounts.get(account_id)
        if account is None:
            raise AccountNotFound
        return account

    def _info(self, account: _Account) -> AccountInfo:
        return replace(
            account.info,
            access_token_expires_at=int(account.tokens.expires_at),
            apps=tuple(sorted(account.apps.values(), key=lambda a: -a.last_used)),
        )

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        self.events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id)
        )


def _text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""
