"""The daemon's accounts and their sessions: the one object the gRPC layer talks to."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import AccountNotFound, NotConfigured, SignInRequired
from .events import EventBus


class SignInState(enum.Enum):
    """Where sign-in stands (mirrors the API's SignInState)."""

    NOT_CONFIGURED = "not_configured"
    SIGNED_OUT = "signed_out"
    SIGNED_IN = "signed_in"


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
    """A sign-in in progress: where the user completes it, and until when."""

    sign_in_id: str
    url: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class SignOutResult:
    """The outcome of a sign-out."""

    was_signed_in: bool
    logout_url: str = ""


class SessionManager:
    """Owns the signed-in accounts; sign-in itself arrives with the OAuth client."""

    def __init__(self, issuer: str | None) -> None:
        self.issuer = issuer
        self.events = EventBus()
        self._accounts: dict[str, AccountInfo] = {}

    @property
    def state(self) -> SignInState:
        """NOT_CONFIGURED without an issuer, else whether any account is signed in."""
        if not self.issuer:
            return SignInState.NOT_CONFIGURED
        return SignInState.SIGNED_IN if self._accounts else SignInState.SIGNED_OUT

    def accounts(self) -> list[AccountInfo]:
        """The signed-in accounts, default first."""
        return sorted(self._accounts.values(), key=lambda a: (not a.is_default, a.id))

    @property
    def default_account(self) -> str:
        """The id of the default account, or "" when none is signed in."""
        return next((a.id for a in self._accounts.values() if a.is_default), "")

    async def get_token(self, account: str, scopes: Sequence[str], min_ttl: int) -> IssuedToken:
        """A token of `account` (default when empty) valid for min_ttl seconds."""
        if account and account not in self._accounts:
            raise AccountNotFound
        raise SignInRequired

    async def begin_sign_in(self) -> SignInStart:
        """Start a sign-in; needs an issuer."""
        if not self.issuer:
            raise NotConfigured(
                "no identity provider is configured: set issuer "
                "(--issuer, SIGNIN_BROKER_ISSUER or `issuer` in config.toml)"
            )
        raise NotConfigured("this version of the daemon cannot sign in yet")

    async def sign_out(self, account: str) -> SignOutResult:
        """End `account`'s session (default when empty); not an error when there is none."""
        if account and account not in self._accounts:
            raise AccountNotFound
        return SignOutResult(was_signed_in=False)
