"""The identity providers the daemon signs in at: a main one, and others under short aliases.

People have a work and a personal identity. Each provider has its own client settings
and its own accounts, whose ids carry its alias (`work/user:1001`; the main
provider's have none, as the contract writes them); a provider of the client
credentials grant has one, a service account: the client itself. A provider whose client allows
only one grant type may have a second client for device sign-ins; an account's
tokens are always renewed by the client they were issued to (RFC 6749 6), so the
account remembers which one that was. Each provider has its own health: one that
does not answer degrades only its own accounts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...identities import MAIN_ALIAS, AccountId, alias_named, name_of
from ..errors import NotConfigured
from ..ports import ProviderClient
from ..schedule import ASSUMED_ANSWER_SECONDS

if TYPE_CHECKING:  # the OAuth stack loads after the daemon is ready (daemon/app.py)
    from .flows import DeviceFlow, SignInFlow


@dataclass(eq=False)
class ProviderLink:
    """One provider as the daemon uses it: its clients, its sign-in flows, its health."""

    alias: str
    issuer: str
    client: ProviderClient  # browser sign-ins, renewals, revocation, userinfo
    device_client: ProviderClient  # device sign-ins: `client` unless a second client is set
    sign_in: SignInFlow
    device: DeviceFlow
    # Its health, changed by provider_health.ProviderHealth only: why it is considered
    # unreachable ("" when it answers), when it last answered, how long its userinfo takes.
    degraded_reason: str = ""
    last_contact: float = 0.0
    answer_seconds: float = ASSUMED_ANSWER_SECONDS
    is_default: bool = field(default=False)
    setting_sources: dict[str, str] = field(default_factory=dict)  # setting: where it was set
    dpop: str = "if-required"  # the `dpop` setting (oidc.dpop.MODES), for status
    # Its one account is the client itself (the client credentials grant), asking for
    # `scopes`; else people sign in (service_accounts.py).
    service: bool = False
    scopes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How messages name it: its alias, or "the identity provider" for the main one."""
        return f"provider {self.alias}" if self.alias else "the identity provider"

    def client_for(self, client_id: str) -> ProviderClient | None:
        """The client an account's tokens were issued to ("" is the main one); None if gone."""
        if client_id in ("", self.client.client_id):
            return self.client
        return self.device_client if client_id == self.device_client.client_id else None


class Providers:
    """The configured providers by alias, and which one a sign-in goes to by default."""

    def __init__(self, links: Iterable[ProviderLink] = (), default: str = MAIN_ALIAS) -> None:
        self._links = {link.alias: link for link in links}
        self.default_alias = default if default in self._links else next(iter(self._links), "")
        for link in self._links.values():
            link.is_default = link.alias == self.default_alias

    def __iter__(self) -> Iterator[ProviderLink]:
        """The providers, the default one first."""
        return iter(sorted(self._links.values(), key=lambda link: not link.is_default))

    def __bool__(self) -> bool:
        return bool(self._links)

    @property
    def degraded_reason(self) -> str:
        """Why providers are considered unreachable, each named when there are several."""
        several = len(self._links) > 1
        return "; ".join(
            f"{name_of(link.alias)}: {link.degraded_reason}" if several else link.degraded_reason
            for link in self
            if link.degraded_reason
        )

    @property
    def last_contact(self) -> float:
        """When a provider last answered (0 when none has yet)."""
        return max((link.last_contact for link in self), default=0.0)

    @property
    def default(self) -> ProviderLink | None:
        """Where a sign-in that names no provider goes; None when none is configured."""
        return self._links.get(self.default_alias)

    def named(self, name: str) -> ProviderLink:
        """The provider a person names ("main", an alias; "" the default); else NotConfigured."""
        return self.at(alias_named(name)) if name else self.at(self.default_alias)

    def at(self, alias: str) -> ProviderLink:
        """The provider with this alias ("" the main one); NotConfigured when there is none."""
        link = self._links.get(alias)
        if link is not None:
            return link
        if not self._links:
            raise NotConfigured(
                "no identity provider is configured: set issuer "
                "(--issuer, SIGNIN_BROKER_ISSUER or `issuer` in config.toml)"
            )
        known = ", ".join(name_of(link.alias) for link in self)
        raise NotConfigured(
            f"no identity provider is called {name_of(alias)!r}; configured: {known}"
        )

    def of(self, account_id: str) -> ProviderLink | None:
        """The provider an account belongs to, by its id; None when it is not configured.

        An account asks once, as it enters the registry (records.Account.link).
        """
        return self._links.get(AccountId.parse(account_id).provider)
