"""The account model: what apps may learn about an account, and what the daemon keeps of it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...identities import AccountId
from ...oidc.dpop import BY_PROVIDER, BY_SETTING, DpopKey, is_bound
from ..limits import ScopedTokens
from ..schedule import refresh_early_fraction
from ..tokens import TokenSet

if TYPE_CHECKING:
    from ..ports import ProviderClient
    from ..providers.links import ProviderLink
    from ..providers.revocation import Revocation
    from ..step_up import StepUp

RECORD_VERSION = 1


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
    provider: str = ""  # the alias of its provider ("" for the main one)
    display_name: str = ""
    email: str = ""
    username: str = ""  # the `preferred_username` claim: a login, as people name the account
    is_default: bool = False
    access_token_expires_at: int = 0
    next_refresh_at: int = 0
    signed_in_at: float = 0.0
    apps: tuple[AppUse, ...] = ()
    at_risk: str = ""  # why the session is at risk, and what happens next (not stored)
    aliases: tuple[str, ...] = ()  # the person's names for it (names.py; not stored here)
    acr: str = ""  # the sign-in's authentication context class (the ID token's acr)
    auth_time: int = 0  # when the person authenticated for it (auth_time; 0: not said)
    # Why its tokens are DPoP-bound (oidc.dpop.BY_SETTING or BY_PROVIDER); "": Bearer tokens.
    dpop_bound_by: str = ""
    # A service account: the client itself, whose tokens come from the client credentials
    # grant (service_accounts.py), with no person, no refresh token, and nothing stored.
    service: bool = False


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """An access token handed to an app."""

    access_token: str = field(repr=False)
    token_type: str
    expires_at: int
    scopes: tuple[str, ...]
    account: str
    id_token: str = field(default="", repr=False)  # only when asked for, and allowed
    id_token_expires_at: int = 0
    acr: str = ""  # of the sign-in behind the token (AccountInfo.acr)
    auth_time: int = 0
    dpop_bound_by: str = ""  # why a DPoP-bound token is (AccountInfo.dpop_bound_by)
    renew_at: int = 0  # when it is due for renewal, whoever asks (Unix seconds)


@dataclass(frozen=True, slots=True)
class SignInStart:
    """A sign-in begun over the API: its id, for matching the outcome's event."""

    sign_in_id: str
    expires_at: float
    workspace_id: str = ""
    owner: str = ""  # who began it (owner_key): the one watcher told how it goes
    authorize_params: Mapping[str, str] = field(default_factory=dict)  # login_hint, prompt, ...
    provider: str = ""  # the alias of the provider it signs in at ("" the main one)
    step_up: StepUp | None = (
        None  # a token request's step-up it was begun for (step_up_sign_ins.py)
    )
    asked_at: float = 0.0  # when that request came (Unix seconds): max_age counts from it
    only_as: str = ""  # the account it must end as ("" any): an app limited to it began it


@dataclass(frozen=True, slots=True)
class SignOutResult:
    """The outcome of a sign-out."""

    was_signed_in: bool
    logout_url: str = ""
    revocation: Revocation | None = None  # None: no session, so nothing to revoke
    revocation_error: str = ""  # why a FAILED revocation failed (never a token)


def account_id_of(platform_user_id: str, workspace_id: str = "", provider: str = "") -> str:
    """The tenant-prefixed account id (docs/contract.md §10), as identities.py writes it."""
    return str(AccountId(platform_user_id, workspace_id, provider))


def provider_of(account_id: str) -> str:
    """The alias of the provider an account id belongs to ("" for the main provider)."""
    return AccountId.parse(account_id).provider


def owner_key(account: str, app: str) -> str:
    """Whose a device sign-in is: the account it signs in again, else the app's own key."""
    if account:
        return account
    if not app:
        raise ValueError("a device sign-in needs an owner: an account or an app")
    return f"app:{app}"


@dataclass(frozen=True, slots=True)
class Entitlement:
    """What a caller may see and get: these accounts and at most these scopes (None: all)."""

    accounts: frozenset[str] | None = None
    scopes: frozenset[str] | None = None
    id_token: bool = False  # may have the account's ID token as well (never by default)
    audience: str = ""  # every token is for this audience (RFC 8707); "" for any the app names

    def sees(self, account: str) -> bool:
        """Whether the caller may see and use the account."""
        return self.accounts is None or account in self.accounts


EVERYTHING = Entitlement()
NOTHING = Entitlement(accounts=frozenset())  # what a denied or undecided app sees


@dataclass(frozen=True, slots=True)
class Standing:
    """What the provider's answers left an account with: its backoff, and its next checks.

    Decided by provider_health.py alone, and kept with the account by the registry.
    """

    failures: int = 0
    retry_at: float = 0.0  # no provider call before this (backoff after a failure)
    refusal: str = ""  # why the last refresh was refused ("" if it was not)
    revalidate_at: float = 0.0
    # When a confirmation with the provider is owed before a token is served (I2): a
    # confirmation's time plus the interval. A sign-in here is one (inf: none owed until
    # the keeper's first); a restored session's last one was before this start (0.0).
    confirm_by: float = math.inf


class SessionHold:
    """The keeper's hold on one session while the daemon runs, the same across its records.

    The lock every spend of its refresh token takes, the renewal and the confirmation
    under way (one each, shared by whoever waits for it), and its down-scoped tokens.
    A new sign-in of the account is a new session, with a hold of its own: a record is
    of the session still signed in when it shares the current record's hold
    (AccountRegistry.current).
    """

    __slots__ = ("_confirmation", "_lock", "_renewal", "_scoped")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._renewal: asyncio.Task[TokenSet] | None = None
        self._confirmation: asyncio.Task[bool] | None = None
        self._scoped = ScopedTokens()

    @property
    def lock(self) -> asyncio.Lock:
        """Held by every spend of the refresh token (a rotated one is spent once)."""
        return self._lock

    @property
    def scoped(self) -> ScopedTokens:
        """The session's down-scoped tokens (scoped_tokens.py)."""
        return self._scoped

    def renewal(self, start: Callable[[], asyncio.Task[TokenSet]]) -> asyncio.Task[TokenSet]:
        """The renewal under way, or the one `start` begins now: one at a time, whoever asks."""
        if self._renewal is None or self._renewal.done():
            self._renewal = start()
        return self._renewal

    def confirmation(self, start: Callable[[], asyncio.Task[bool]]) -> asyncio.Task[bool]:
        """The confirmation under way, or the one `start` begins now."""
        if self._confirmation is None or self._confirmation.done():
            self._confirmation = start()
        return self._confirmation

    @property
    def renewing(self) -> asyncio.Task[TokenSet] | None:
        """The renewal under way, if one is."""
        task = self._renewal
        return task if task is not None and not task.done() else None

    @property
    def busy(self) -> bool:
        """Whether a renewal, a grant (the lock held) or a confirmation is under way."""
        confirming = self._confirmation is not None and not self._confirmation.done()
        return bool(self.renewing) or self._lock.locked() or confirming


@dataclass(frozen=True, slots=True, eq=False)
class Account:
    """A signed-in account's record: what the store keeps of it, and what the daemon holds.

    A record never changes: the registry (registry.py) alone replaces it, whole, and the
    other rooms ask it to. Beside what is stored (its info, its tokens, their client and
    key): its provider, resolved as it entered the registry; its standing with the
    provider; its apps' use; and the keeper's hold on its session.
    """

    info: AccountInfo
    tokens: TokenSet
    client_id: str = ""  # the client its tokens were issued to ("": the provider's main one)
    # The key its tokens are bound to (RFC 9449), made at sign-in; None: Bearer tokens.
    dpop_key: DpopKey | None = field(default=None, repr=False)
    link: ProviderLink | None = field(default=None, repr=False)
    standing: Standing = field(default_factory=Standing, repr=False)
    apps: Mapping[str, AppUse] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    early_fraction: float = field(default_factory=refresh_early_fraction, repr=False)
    hold: SessionHold = field(default_factory=SessionHold, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.apps, MappingProxyType):  # read only, whoever made it
            object.__setattr__(self, "apps", MappingProxyType(dict(self.apps)))

    @property
    def client(self) -> ProviderClient | None:
        """The client that renews its tokens; None before it is in the registry."""
        link = self.link
        return link.client_for(self.client_id) if link is not None else None

    @property
    def renewable(self) -> bool:
        """Whether the daemon may renew it: a refresh token, or a service's credentials."""
        if self.client is None:
            return False
        return self.info.service or self.tokens.refresh_token is not None

    def dpop_for(self, tokens: TokenSet) -> DpopKey | None:
        """The key to send these tokens' access token with; None for a Bearer token."""
        return self.dpop_key if is_bound(tokens.token_type) else None

    @property
    def refresh_at(self) -> float:
        """When the background loop renews the main token."""
        return self.tokens.refresh_due_at(self.early_fraction)

    def to_record(self, issuer: str, tokens: TokenSet | None = None) -> dict[str, Any]:
        """The account as the encrypted store keeps it (what the daemon holds is not kept).

        `tokens`: these instead of its own (a write-ahead, or its times on another clock).
        """
        info = asdict(self.info)
        for transient in ("apps", "access_token_expires_at", "next_refresh_at", "at_risk"):
            info.pop(transient)
        info.pop("aliases")  # kept by names.py
        info.pop("service")  # a service account is never stored
        return {
            "version": RECORD_VERSION,
            "issuer": issuer,
            "client_id": self.client_id,
            # Beside the account, not in it: a daemon of an earlier version reads the
            # account's fields as they were, and so still restores the session.
            "username": info.pop("username"),
            "sign_in": {"acr": info.pop("acr"), "auth_time": info.pop("auth_time")},
            "dpop_bound_by": info.pop("dpop_bound_by"),
            "account": info,
            "tokens": (self.tokens if tokens is None else tokens).to_record(),
            **({"dpop_key": self.dpop_key.to_record()} if self.dpop_key else {}),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Account:
        """Back from to_record(); KeyError, TypeError or ValueError when it is not one."""
        if record.get("version") != RECORD_VERSION:
            raise ValueError(f"unknown record version {record.get('version')!r}")
        info = AccountInfo(**record["account"])
        username = record.get("username", "")
        sign_in = record.get("sign_in")
        acr, auth_time = sign_in_facts(sign_in if isinstance(sign_in, dict) else {})
        dpop_key = DpopKey.from_record(record.get("dpop_key"))
        tokens = TokenSet.from_record(record["tokens"])
        return cls(
            info=replace(
                info,
                apps=(),
                provider=provider_of(info.id),
                username=username if isinstance(username, str) else "",
                acr=acr,
                auth_time=auth_time,
                dpop_bound_by=_bound_by(record.get("dpop_bound_by"), dpop_key, tokens),
            ),
            tokens=tokens,
            client_id=str(record.get("client_id", "")),
            dpop_key=dpop_key,
        )


def _bound_by(stored: object, key: DpopKey | None, tokens: TokenSet) -> str:
    """Why a restored account's tokens are bound; "" when they are not.

    An account bound before the reason was kept was bound by the setting, whose
    default (auto) then bound tokens wherever the provider offered DPoP.
    """
    if key is None or not is_bound(tokens.token_type):
        return ""
    return stored if stored in (BY_SETTING, BY_PROVIDER) else BY_SETTING


def sign_in_facts(claims: Mapping[str, Any]) -> tuple[str, int]:
    """A sign-in's acr and auth_time, from its ID token's claims or its stored record.

    A value of another type (a provider's mistake, a damaged record) counts as unsaid.
    """
    acr, when = claims.get("acr"), claims.get("auth_time")
    auth_time = 0
    if (isinstance(when, float) and math.isfinite(when)) or type(when) is int:
        auth_time = max(0, int(when))
    return acr if isinstance(acr, str) else "", auth_time


def service_account(link: ProviderLink, now: float, wall_now: float) -> Account:
    """The account of a service provider's client, with no token yet: due at once."""
    client_id = link.client.client_id
    info = AccountInfo(
        id=str(AccountId(client_id, provider=link.alias)),
        platform_user_id=client_id,
        provider=link.alias,
        display_name=f"service account {client_id}",
        signed_in_at=wall_now,
        service=True,
    )
    tokens = TokenSet(
        access_token="",
        token_type="Bearer",  # noqa: S106 - a token type's name
        scopes=link.scopes,
        issued_at=now,
        expires_at=now,
    )
    return Account(info, tokens, link=link)
