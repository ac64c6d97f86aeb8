"""Accounts by the names people know them by: an alias of their choosing, an e-mail, a login.

Every request that names an account is read here (Naming.account_id), so
each RPC, over gRPC and JSON alike, understands a name the same way, in this order:

1. empty: the default account (which one is decided later, per caller);
2. an id (`user:1001`, `work/user:1001:workspace:7`): itself;
3. an alias the person gave an account the caller may see, unless it is also the login
   of another account the caller may see that signed in since, which the person did not
   let it hide (AliasConflict: refused until the person chooses, and named in status);
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
removes its aliases, and its leave to be hidden by others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .. import audit_entries
from ..audit_entries import Actor
from ..errors import (
    AccountNotFound,
    AliasConflict,
    AliasHidesLogin,
    AliasNotSaved,
    AmbiguousAccount,
    TooManyAliases,
    UnknownAlias,
)
from ..ports import AliasStore, AuditSink
from ..validation import ID_LIKE, MAX_ALIASES, check_account, check_alias
from .records import EVERYTHING, Account, Entitlement
from .registry import AccountRegistry

log = logging.getLogger(__name__)


def same_email(address: str, name: str) -> bool:
    """Whether `name` is the e-mail `address`: the local part exactly, the domain in any case."""
    local, at, domain = address.rpartition("@")
    named_local, named_at, named_domain = name.rpartition("@")
    return bool(at and named_at and local) and (
        local == named_local and domain.lower() == named_domain.lower()
    )


@dataclass(frozen=True, slots=True)
class _Kept:
    """The aliases (alias -> account id) and what each may hide (alias -> account ids)."""

    aliases: dict[str, str]
    hiding: dict[str, frozenset[str]]


class AccountNames:
    """The person's aliases, and what a name means to one caller."""

    def __init__(self) -> None:
        self._kept = _Kept({}, {})
        self._store: AliasStore | None = None
        self._writing = asyncio.Lock()

    def aliases_of(self, account_id: str) -> tuple[str, ...]:
        """The aliases that name this account, sorted."""
        named = self._kept.aliases.items()
        return tuple(sorted(alias for alias, target in named if target == account_id))

    def resolve(
        self, name: str, accounts: Iterable[Account], entitlement: Entitlement = EVERYTHING
    ) -> str:
        """The id of the account `name` means among `accounts`, as this caller may see them.

        `name` was checked (validation.check_account). An id is returned as it is
        (whether it exists is the caller's next question); AccountNotFound when nothing
        the caller may see fits, AmbiguousAccount when several do, AliasConflict when an
        alias would hide a login it was not given to hide.
        """
        if not name or ID_LIKE.match(name):
            return name
        accounts = list(accounts)
        aliased = self._kept.aliases.get(name)
        if aliased is not None and entitlement.sees(aliased):
            hidden = self._hidden(name, aliased, accounts, entitlement)
            if hidden:
                raise AliasConflict(name, aliased, hidden)
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

    def conflicts(
        self, accounts: Iterable[Account], entitlement: Entitlement = EVERYTHING
    ) -> list[AliasConflict]:
        """The aliases the caller may see that `resolve` refuses now, by alias."""
        accounts = list(accounts)
        found = []
        for alias, aliased in sorted(self._kept.aliases.items()):
            hidden = self._hidden(alias, aliased, accounts, entitlement)
            if hidden and entitlement.sees(aliased):
                found.append(AliasConflict(alias, aliased, hidden))
        return found

    def _hidden(
        self, alias: str, aliased: str, accounts: list[Account], entitlement: Entitlement
    ) -> list[str]:
        """The accounts the caller sees whose login the alias hides without leave to."""
        allowed = self._kept.hiding.get(alias, frozenset())
        return [
            account_id
            for account_id in self.hidden_by(alias, aliased, accounts)
            if account_id not in allowed and entitlement.sees(account_id)
        ]

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
            aliases, hiding = await asyncio.to_thread(store.load)
        except (OSError, ValueError) as error:
            log.warning("the account aliases cannot be read", extra={"reason": str(error)})
            return
        kept = _Kept({}, {})
        for alias, account_id in aliases.items():
            problem = _problem(alias, account_id) or _problem(alias, *hiding.get(alias, ()))
            if problem:
                log.warning("an account alias was left out", extra={"reason": problem})
                continue
            kept.aliases[alias] = account_id
            if hiding.get(alias):
                kept.hiding[alias] = frozenset(hiding[alias])
        self._kept = kept

    async def set(self, alias: str, account_id: str, hiding: Iterable[str] = ()) -> None:
        """Make `alias` name the account (another one it named before no longer).

        `hiding`: the accounts whose login the person lets it hide (given with --force).
        """
        check_alias(alias)

        def given(kept: _Kept) -> _Kept:
            if alias not in kept.aliases and len(kept.aliases) >= MAX_ALIASES:
                raise TooManyAliases(f"at most {MAX_ALIASES} aliases; remove one first")
            others = {a: ids for a, ids in kept.hiding.items() if a != alias}
            allowed = {alias: frozenset(hiding)} if hiding else {}
            return _Kept({**kept.aliases, alias: account_id}, {**others, **allowed})

        await self._change(given)

    async def remove(self, alias: str) -> str:
        """Remove the alias; the id of the account it named."""
        named = ""

        def without(kept: _Kept) -> _Kept:
            nonlocal named
            if alias not in kept.aliases:
                raise UnknownAlias(alias)
            named = kept.aliases[alias]
            aliases = {a: i for a, i in kept.aliases.items() if a != alias}
            return _Kept(aliases, {a: ids for a, ids in kept.hiding.items() if a != alias})

        await self._change(without)
        return named

    async def forget(self, account_id: str) -> None:
        """Remove the account's aliases, and its leave to be hidden (the account was removed)."""

        def forgotten(kept: _Kept) -> _Kept:
            aliases = {a: i for a, i in kept.aliases.items() if i != account_id}
            hiding = {a: ids - {account_id} for a, ids in kept.hiding.items() if a in aliases}
            return _Kept(aliases, {a: ids for a, ids in hiding.items() if ids})

        if forgotten(self._kept) != self._kept:
            await self._change(forgotten)

    async def _change(self, change: Callable[[_Kept], _Kept]) -> None:
        """Change the aliases one change at a time, stored first: one not written is not taken."""
        async with self._writing:
            kept = change(self._kept)
            if self._store is not None:
                hiding = {alias: tuple(sorted(ids)) for alias, ids in kept.hiding.items()}
                try:
                    await asyncio.to_thread(self._store.save, kept.aliases, hiding)
                except OSError as error:
                    log.warning("the account aliases cannot be saved", extra={"reason": str(error)})
                    raise AliasNotSaved(error) from None
            self._kept = kept


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

        AliasHidesLogin when it is another account's login, unless forced: then it may
        hide those accounts' login (and only theirs: one that signs in later is a conflict).
        """
        chosen = self._registry.resolve(self.account_id(account), EVERYTHING)
        hidden = self._names.hidden_by(alias, chosen.info.id, self._registry.all())
        if hidden and not force:
            raise AliasHidesLogin(alias, chosen.info.id, hidden)
        await self._names.set(alias, chosen.info.id, hiding=hidden)
        self._audit.record(audit_entries.alias_set(actor, chosen.info.id, alias))
        return chosen.info.id

    async def remove_alias(self, alias: str, *, actor: Actor) -> str:
        """Remove an alias; the id of the account it named."""
        named = await self._names.remove(alias)
        self._audit.record(audit_entries.alias_removed(actor, named, alias))
        return named


def _problem(alias: str, *account_ids: str) -> str:
    """Why a kept alias, naming or hiding these accounts, cannot be taken back ("" if it can)."""
    try:
        check_alias(alias)
        for account_id in account_ids:
            check_account(account_id)
    except ValueError as error:
        return str(error)
    wrong = [account_id for account_id in account_ids if not ID_LIKE.match(account_id)]
    return f"{wrong[0][:80]!r} is not an account id" if wrong else ""
