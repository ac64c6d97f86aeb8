"""The sessions as one caller may see them: accounts, the default, the state, what is at risk.

What GetStatus, ListAccounts, the dashboard and the TUI show: each caller sees only
the accounts its entitlement lets it see, with what may be said of them (no secrets),
each token's expiry and next renewal, and why a session may end that the person
should know now.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ...states import SignInState
from ..clock import to_wall
from ..errors import AliasConflict
from ..providers.links import Providers
from .events import EndedSession
from .names import AccountNames
from .records import EVERYTHING, Account, AccountInfo, AppUse, Entitlement
from .registry import AccountRegistry
from .use_ledger import UseLedger


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """The sign-in state as one caller may know it (GetStatus, the TUI, `status`)."""

    state: SignInState
    default: AccountInfo | None
    account_count: int
    storage_problem: str  # why sessions may not survive a restart; "" when they will
    ended: list[EndedSession]  # sessions that ended by themselves, until signed in again
    alias_conflicts: list[str]  # aliases refused as another account's login, what to do


class SessionOverview:
    """What may be said of the sessions, to each caller as far as it may see them."""

    def __init__(
        self,
        registry: AccountRegistry,
        names: AccountNames,
        uses: UseLedger,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._names = names
        self._uses = uses
        self._clock = clock

    def status(self, entitlement: Entitlement = EVERYTHING) -> SessionStatus:
        """The sign-in state, the default account and the sessions that ended, as seen."""
        default_id = self._registry.default_for(entitlement)
        return SessionStatus(
            state=self.sign_in_state(entitlement),
            default=self.account(default_id, entitlement),
            account_count=len(self.accounts(entitlement)),
            storage_problem=self._registry.saved.problem(entitlement),
            ended=self._registry.ended(entitlement),
            alias_conflicts=[str(c) for c in self.alias_conflicts(entitlement)],
        )

    def alias_conflicts(self, entitlement: Entitlement = EVERYTHING) -> list[AliasConflict]:
        """The aliases the caller may see that are refused: another account's login too."""
        return self._names.conflicts(self._registry.all(), entitlement)

    def sign_in_state(self, entitlement: Entitlement = EVERYTHING) -> SignInState:
        """NOT_CONFIGURED without a provider, else whether an account it sees is signed in."""
        if not self._registry.providers:
            return SignInState.NOT_CONFIGURED
        if any(entitlement.sees(account_id) for account_id in self._registry.by_id):
            return SignInState.SIGNED_IN
        return SignInState.SIGNED_OUT

    def accounts(self, entitlement: Entitlement = EVERYTHING) -> list[AccountInfo]:
        """The signed-in accounts the caller may see, default first."""
        infos = [self.info(a) for a in self._registry.all() if entitlement.sees(a.info.id)]
        return sorted(infos, key=lambda a: (not a.is_default, a.signed_in_at))

    def account(self, account_id: str, entitlement: Entitlement = EVERYTHING) -> AccountInfo | None:
        """One account by id, or None (also when the caller may not see it)."""
        account = self._registry.get(account_id)
        if account is None or not entitlement.sees(account_id):
            return None
        return self.info(account)

    def info(self, account: Account) -> AccountInfo:
        """What may be said of the account, with its token's expiry and next renewal."""
        refresh_at = to_wall(self._clock, account.refresh_at) if account.renewable else 0
        apps = account.apps.values()
        held = bool(account.tokens.access_token)  # a service account has none until granted
        return replace(
            account.info,
            access_token_expires_at=int(to_wall(self._clock, account.tokens.expires_at)) * held,
            next_refresh_at=int(refresh_at),
            apps=tuple(sorted(apps, key=lambda a: -a.last_used)),
            at_risk=self._at_risk(account, refresh_at),
            aliases=self._names.aliases_of(account.info.id),
        )

    def _at_risk(self, account: Account, refresh_at: float) -> str:
        """Why the session may end that the person should know now ("" when nothing).

        For a service account: why the provider will not grant its token, until it does.
        """
        if account.info.service:
            return account.standing.refusal
        if lost := account.tokens.refresh_lost:
            ends = to_wall(self._clock, account.tokens.expires_at)
            at = time.strftime("%H:%M:%S", time.localtime(ends))
            return f"{lost}: the session ends at {at}; sign in again before (signin-broker login)"
        if account.info.id in self._registry.saved.lost_at_a_restart():
            return (
                "its new refresh token is not saved (the state folder cannot be written): a"
                " restart now would sign it out; free space there or make it writable"
            )
        if account.tokens.refresh_in_doubt and refresh_at:
            at = time.strftime("%H:%M:%S", time.localtime(refresh_at))
            return (
                "the provider never answered its last renewal: the refresh token is sent once"
                f" more at {at}, before the access token expires; if the provider had"
                " completed that renewal, you will have to sign in again then"
            )
        return ""

    def app_use(self) -> Mapping[str, AppUse]:
        """Each app's use of the accounts, by app id (for the app listing)."""
        return self._uses.app_use

    @property
    def providers(self) -> Providers:
        """The configured providers (none before start)."""
        return self._registry.providers

    @property
    def storage(self) -> str:
        """Where sessions are kept across restarts, for status."""
        return self._registry.storage

    @property
    def issuer(self) -> str:
        """The default provider's issuer ("" when none is configured)."""
        default = self.providers.default
        return default.issuer if default is not None else ""

    @property
    def degraded_reason(self) -> str:
        """Why providers are considered unreachable ("" when they answer)."""
        return self.providers.degraded_reason

    @property
    def last_provider_contact(self) -> float:
        """When a provider last answered (0 when none has yet)."""
        return self.providers.last_contact
