"""Accounts by the names people know them by: an alias of their choosing, an e-mail, a login.

Every request that names an account is read here (Naming.account_id), so
each RPC, over gRPC and JSON alike, understands a name the same way, in this order:

1. empty: the default account (which one is decided later, per caller);
2. an id (`user:1001`, `work/user:1001:workspace:7`): itself;
3. an alias the person gave an account the caller may see;
4. the e-mail, or the login (the `preferred_username` claim), of exactly one signed-in
   account the caller may see.

Only accounts the caller may see are ever candidates. A name that fits only accounts
it may not see is as absent as one that fits none (AccountNotFound, "not found",
docs/contract.md §11), an alias of an account it may not see is as if there were none, and an
ambiguous name lists only ids the caller may see: what a restricted app is told
depends on its own accounts alone. An account without an e-mail or login claim is
named by its id or an alias only.

E-mail addresses match exactly in the local part and in any case in the domain:
domain names are case-insensitive (RFC 5321 2.4, RFC 4343), while a local part may be
case-sensitive at its provider, so `Alice@x` and `alice@x` may be two people; folding
it would let one name reach the other's account when only that one is signed in.

Aliases are kept in the state folder (store.aliases) and survive restarts, sign-outs
and revocations (the account signs in again under the same id); removing the account
removes its aliases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from ..store import audit_rows
from ..store.audit_rows import Actor
from .accounts import EVERYTHING, Account, Entitlement
from .errors import (
    AccountNotFound,
    AliasHidesLogin,
    AliasNotSaved,
    AmbiguousAccount,
    TooManyAliases,
    UnknownAlias,
)
from .ports import AliasStore, AuditSink
from .registry import AccountRegistry
from .validation import ID_LIKE, MAX_ALIASES, check_account, check_alias

log = logging.getLogger(__name__)


def same_email(address: str, name: str) -> bool:
    """Whether `name` is the e-mail `address`: the local part exactly, the domain in any case."""
    local, at, domain = address.rpartition("@")
    named_local, named_at, named_domain = name.rpartition("@")
    return bool(at and named_at and local) and (
        local == named_local and domain.lower() == named_domain.lower()
    )


class AccountNames:
    """The person's aliases, and what a name means to one caller."""

    def __init__(self) -> None:
        self._aliases: dict[str, str] = {}  # alias -> account id
        self._store: AliasStore | None = None
        self._writing = asyncio.Lock()

    def aliases_of(self, account_id: str) -> tuple[str, ...]:
        """The aliases that name this account, sorted."""
        return tuple(sorted(a for a, named in self._aliases.items() if named == account_id))

    def resolve(
        self, name: str, accounts: Iterable[Account], entitlement: Entitlement = EVERYTHING
    ) -> str:
        """The id of the account `name` means among `accounts`, as this caller may see them.

        `name` was checked (validation.check_account). An id is returned as it is
        (whether it exists is the caller's next question); AccountNotFound when nothing
        the caller may see fits, AmbiguousAccount when several do.
        """
        if not name or ID_LIKE.match(name):
            return name
        aliased = self._aliases.get(name)
        if aliased is not None and entitlement.sees(aliased):
            return aliased
        fits = sorted(
            account.info.id
            for account in accounts
            if entitlement.sees(account.info.id)
            and (name == account.info.username or same_email(account.info.email, name))
        )
        if not fits:
            raise AccountNotFound
        if len(fits) > 1:
            raise AmbiguousAccount(name, fits)
        return fits[0]

    @staticmethod
    def hidden_by(alias: str, account_id: str, accounts: Iterable[Account]) -> list[str]:
        """The other accounts whose login `alias` is: an alias is read first, and hides it."""
        return sorted(
            account.info.id
            for account in accounts
            if account.info.username == alias and account.info.id != account_id
        )

    # -- the person's changes -----------------------------------------------------------

    async def restore(self, store: AliasStore | None) -> None:
        """Take the store and the aliases kept in it; unreadable ones are logged and left out."""
        self._store = store
        if store is None:
            return
        try:
            kept = await asyncio.to_thread(store.load)
        except (OSError, ValueError) as error:
            log.warning("the account aliases cannot be read", extra={"reason": str(error)})
            return
        for alias, account_id in kept.items():
            problem = _problem(alias, account_id)
            if problem:
                log.warning("an account alias was left out", extra={"reason": problem})
            else:
                self._aliases[alias] = account_id

    async def set(self, alias: str, account_id: str) -> None:
        """Make `alias` name the account (another one it named before no longer)."""
        check_alias(alias)

        def given(aliases: dict[str, str]) -> dict[str, str]:
            if alias not in aliases and len(aliases) >= MAX_ALIASES:
                raise TooManyAliases(f"at most {MAX_ALIASES} aliases; remove one first")
            return {**aliases, alias: account_id}

        await self._change(given)

    async def remove(self, alias: str) -> str:
        """Remove the alias; the id of the account it named."""
        named = ""

        def without(aliases: dict[str, str]) -> dict[str, str]:
            nonlocal named
            if alias not in aliases:
                raise UnknownAlias(alias)
            named = aliases[alias]
            return {a: i for a, i in aliases.items() if a != alias}

        await self._change(without)
        return named

    async def forget(self, account_id: str) -> None:
        """Remove the account's aliases (the account was removed)."""
        if account_id in self._aliases.values():
            await self._change(lambda kept: {a: i for a, i in kept.items() if i != account_id})

    async def _change(self, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Change the aliases one change at a time, stored first: one not written is not taken."""
        async with self._writing:
            aliases = change(dict(self._aliases))
            if self._store is not None:
                try:
                    await asyncio.to_thread(self._store.save, aliases)
                except OSError as error:
                    log.warning("the account aliases cannot be saved", extra={"reason": str(error)})
                    raise AliasNotSaved(error) from None
            self._aliases = aliases


class Naming:
    """Accounts as requests name them, and the person's aliases given and taken away (audited)."""

    def __init__(self, names: AccountNames, registry: AccountRegistry, audit: AuditSink) -> None:
        self._names = names
        self._registry = registry
        self._audit = audit

    def account_id(self, name: str, entitlement: Entitlement = EVERYTHING) -> str:
        """The id of the account a request names: its id, alias, e-mail or login.

        Every request that names an account asks here, as the caller it comes from:
        AccountNotFound when nothing it may see fits, AmbiguousAccount when several do.
        """
        if not name or name in self._registry.by_id:  # an id, signed in: the common case
            return name
        return self._names.resolve(name, self._registry.all(), entitlement)

    async def set_alias(
        self, alias: str, account: str, *, actor: Actor, force: bool = False
    ) -> str:
        """Let `alias` name a signed-in account (named in any way); the account's id.

        AliasHidesLogin when it is another account's login, unless forced.
        """
        chosen = self._registry.resolve(self.account_id(account), EVERYTHING)
        hidden = self._names.hidden_by(alias, chosen.info.id, self._registry.all())
        if hidden and not force:
            raise AliasHidesLogin(alias, chosen.info.id, hidden)
        await self._names.set(alias, chosen.info.id)
        self._audit.record(audit_rows.alias_set(actor, chosen.info.id, alias))
        return chosen.info.id

    async def remove_alias(self, alias: str, *, actor: Actor) -> str:
        """Remove an alias; the id of the account it named."""
        named = await self._names.remove(alias)
        self._audit.record(audit_rows.alias_removed(actor, named, alias))
        return named


def _problem(alias: str, account_id: str) -> str:
    """Why a kept alias cannot be taken back ("" when it can)."""
    try:
        check_alias(alias)
        check_account(account_id)
    except ValueError as error:
        return str(error)
    return "" if ID_LIKE.match(account_id) else f"{account_id[:80]!r} is not an account id"
