"""The signed-in accounts by id: the only place an account comes, changes, or goes.

An account's record never changes in place (records.Account): the registry alone
replaces it, whole, and every other room asks it to, by what it means (new tokens, the
provider's answers, an app's use, the default), naming the record it holds; the change
is made to the session's record as it stands then, and to none once the session ended.
Every change of what is stored is written to the store before anyone is handed what it
changed (saving.py). A session ends here (signed out, revoked, expired, removed): its
record goes, the default passes to the account signed in longest, and watchers are told.
A caller that names an account is resolved here too, among the accounts it may see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType

from ...states import EventKind
from .. import audit_entries
from ..audit_entries import Actor
from ..clock import Moment, since_stored, to_wall
from ..errors import AccountNotFound, SignInRequired
from ..ports import AccountStore, AuditSink
from ..providers.links import Providers
from ..schedule import first_revalidation
from ..tokens import TokenSet
from .events import EndedSession, EventBus, SessionEvent
from .records import Account, AppUse, Entitlement, SessionHold, Standing, service_account
from .saving import SAVED_AT, SavedStates, SavedView

log = logging.getLogger(__name__)


ENDED_KEPT = 16  # sessions that ended by themselves, remembered for status


class AccountRegistry:
    """The accounts by id, as the store keeps them; every other part asks here."""

    def __init__(
        self,
        events: EventBus,
        audit: AuditSink,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._events = events
        self._audit = audit
        self.providers = Providers()  # until restore()
        self.storage = "memory only"
        self.changed = asyncio.Event()  # wakes the keeper: an account came or went
        self._ended: dict[str, EndedSession] = {}  # by account, oldest first
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock
        self._accounts: dict[str, Account] = {}
        self._saving = SavedStates(self._accounts, events, clock)

    # -- the accounts, as a caller names them -------------------------------------------

    @property
    def by_id(self) -> Mapping[str, Account]:
        """The signed-in accounts by id (read only)."""
        return MappingProxyType(self._accounts)

    def all(self) -> list[Account]:
        """Every signed-in account (a copy: the keeper may end some as it goes)."""
        return list(self._accounts.values())

    def get(self, account_id: str) -> Account | None:
        """The account with this id, if signed in."""
        return self._accounts.get(account_id)

    def ended(self, entitlement: Entitlement) -> list[EndedSession]:
        """Sessions the caller may see that ended by themselves, newest first."""
        visible = [e for e in self._ended.values() if entitlement.sees(e.account)]
        return sorted(visible, key=lambda e: e.ended_at, reverse=True)

    def _default_id(self) -> str:
        """The id of the default account, or "" when none is signed in."""
        return next((a.info.id for a in self._accounts.values() if a.info.is_default), "")

    def default_for(self, entitlement: Entitlement) -> str:
        """The account an empty `account` means for this caller ("" when it sees none).

        That is the default when the caller may see it, else the first account it may
        see that was signed in.
        """
        default = self._default_id()
        if default and entitlement.sees(default):
            return default
        visible = [a.info for a in self._accounts.values() if entitlement.sees(a.info.id)]
        first = min(
            visible, key=lambda info: (not info.is_default, info.signed_in_at), default=None
        )
        return first.id if first is not None else ""

    def resolve(self, account_id: str, entitlement: Entitlement) -> Account:
        """The account the caller means; one it may not see is as absent as a missing one."""
        if not account_id:
            account_id = self.default_for(entitlement)
            if not account_id:
                ended = self.ended(entitlement)
                raise self.sign_in_required(ended[0].account if ended else "")
        account = self._accounts.get(account_id)
        if account is None and account_id in self._ended and entitlement.sees(account_id):
            raise self.sign_in_required(account_id)  # ended by itself: say why
        if account is None or not entitlement.sees(account_id):
            raise AccountNotFound
        return account

    def sign_in_required(self, account_id: str) -> SignInRequired:
        """The refusal for an account without a session: why it ended, if it ended by itself."""
        ended = self._ended.get(account_id)
        return SignInRequired(f"{account_id}: {ended.reason}" if ended is not None else "")

    def current(self, account: Account) -> Account | None:
        """The record of the account's session as it stands now; None once that session ended.

        A session ends when it is signed out, revoked, expired or removed, or when the
        account signs in anew: then `account` is a record of another session.
        """
        now = self._accounts.get(account.info.id)
        return now if now is not None and now.hold is account.hold else None

    def still_signed_in(self, account: Account) -> Account:
        """The record of the account's session as it stands now; SignInRequired once it ended."""
        now = self.current(account)
        if now is None:
            raise self.sign_in_required(account.info.id)
        return now

    @property
    def saved(self) -> SavedView:
        """Which accounts' states are not in their files, and why (written here only)."""
        return self._saving

    # -- changes ----------------------------------------------------------------------

    async def add(self, account: Account) -> tuple[Account, Account | None]:
        """Store and add a signed-in account: as added, and the session it replaces, if any.

        It is linked to its provider, keeps the apps' use and the default of the session
        it replaces, and is the default when it is the only account.
        """
        previous = self._accounts.get(account.info.id)
        is_default = previous.info.is_default if previous is not None else not self._accounts
        account = replace(
            account,
            info=replace(account.info, is_default=is_default),
            link=self.providers.of(account.info.id),
            apps=previous.apps if previous is not None else account.apps,
            hold=SessionHold(),  # a session of its own, whatever record it was made from
        )
        await self._saving.write(account)
        self._accounts[account.info.id] = account
        self._ended.pop(account.info.id, None)  # signed in again
        self.changed.set()
        return account, previous

    async def replace_tokens(self, account: Account, tokens: TokenSet) -> None:
        """Give the account these tokens, written first (kept in memory if they cannot be).

        Nothing changes for a session that ended meanwhile.
        """
        if (current := self.current(account)) is None:
            return
        await self._saving.write(current, tokens)
        if (current := self.current(account)) is not None:
            self._accounts[current.info.id] = replace(current, tokens=tokens)

    def stand(self, account: Account, change: Callable[[Standing], Standing]) -> Standing:
        """Change the account's standing with its provider, as provider_health.py decides.

        The change is made to the standing as it is now; the new standing is returned
        (and kept nowhere once the session ended).
        """
        current = self.current(account)
        standing = change((current or account).standing)
        if current is not None:
            self._accounts[current.info.id] = replace(current, standing=standing)
        return standing

    def note_use(
        self, account: Account, app: str, counted: Callable[[AppUse | None], AppUse]
    ) -> None:
        """Count an app's use of the account (use_ledger.py), on its use as it is now."""
        if (current := self.current(account)) is not None:
            apps = MappingProxyType({**current.apps, app: counted(current.apps.get(app))})
            self._accounts[current.info.id] = replace(current, apps=apps)

    async def write_ahead(self, account: Account, sent: TokenSet) -> None:
        """Store the account with these tokens, theirs not yet (a refresh token sent), or raise.

        SignInRequired once the session ended, StorageWaits while its state cannot be
        written (saving.SavedStates.write_ahead): then nothing is sent.
        """
        await self._saving.write_ahead(self.still_signed_in(account), sent)

    async def write_back(self, account: Account) -> None:
        """Store the account as it stands (a write-ahead taken back: the refresh was not spent)."""
        if (current := self.current(account)) is not None:
            await self._saving.write(current)

    async def write_again(self) -> None:
        """Write again the states not in their files, when their retry is due (the keeper's)."""
        if self._saving.behind and self._clock() >= self._saving.retry_at:
            await self._saving.write_again()

    async def set_default(self, chosen: Account) -> None:
        """Make the account the one used when a request names none."""
        for account in list(self._accounts.values()):
            is_default = account.info.id == chosen.info.id
            if account.info.is_default != is_default:
                await self._set_default(account, is_default=is_default)

    async def end(
        self,
        account: Account,
        kind: EventKind,
        detail: str,
        actor: Actor,
        *,
        by_itself: bool = False,
    ) -> bool:
        """Forget the account and its stored state, and hand the default on; False if gone.

        `by_itself`: nobody asked (the provider ended it, or its token expired
        unrenewable); status lists it until the account signs in again.
        """
        removed = self.current(account)  # not a new session of the account, signed in since
        if removed is None:
            return False
        del self._accounts[removed.info.id]
        ended = None
        if by_itself:  # nobody asked: the person must be told, and sign in again
            now = to_wall(self._clock, self._clock())
            ended = EndedSession(account.info.id, account.info.display_name, kind, detail, now)
            await self._remember_ended(ended)
        self._audit.record(audit_entries.session_ended(actor, account.info.id, detail))
        if removed.info.is_default and self._accounts:
            heir = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            await self._set_default(heir, is_default=True)
        self._saving.forget(account.info.id)
        await self._unstore(account.info.id, ended)
        self.changed.set()
        self._events.publish(
            SessionEvent(kind, account=account.info.id, detail=detail, ended=ended)
        )
        return True

    async def _set_default(self, account: Account, *, is_default: bool) -> None:
        """Make the account the default, or no longer, and store that."""
        changed = replace(account, info=replace(account.info, is_default=is_default))
        self._accounts[account.info.id] = changed
        await self._saving.write(changed)

    async def _unstore(self, account_id: str, ended: EndedSession | None) -> None:
        """Its tokens go from the store; why it ended by itself stays, across restarts."""
        store = self._saving.store
        if store is None:
            return
        try:
            if ended is None:
                await asyncio.to_thread(store.delete, account_id)
            else:
                await asyncio.to_thread(store.save, account_id, ended.to_record())
        except Exception:
            log.exception("could not remove the stored state", extra={"account": account_id})

    # -- start -------------------------------------------------------------------------

    async def restore(self, providers: Providers, store: AccountStore | None, storage: str) -> None:
        """Take the providers and the store, bring back the accounts stored of them.

        And each service provider's account, without a token: the keeper asks for it.
        """
        self.providers, self._saving.store, self.storage = providers, store, storage
        if store is not None:
            await self._restore_stored(store)
        for link in providers:
            if link.service:  # nothing of it was stored: its token is asked for now
                now = self._clock()
                account = service_account(link, now, to_wall(self._clock, now))
                self._accounts[account.info.id] = account
        if self._accounts and not self._default_id():
            first = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            self._accounts[first.info.id] = replace(
                first, info=replace(first.info, is_default=True)
            )
        if self._accounts:
            log.info("sessions restored", extra={"accounts": sorted(self._accounts)})

    async def _restore_stored(self, store: AccountStore) -> None:
        """The accounts the store holds, of providers and clients still configured."""
        for account_id in await asyncio.to_thread(store.accounts):
            account = await self._restored(store, account_id)
            if account is not None:
                revalidate_at = first_revalidation(self._clock(), self._revalidate_seconds)
                # Confirmed before this start: a confirmation is owed now.
                standing = Standing(revalidate_at=revalidate_at, confirm_by=0.0)
                self._accounts[account.info.id] = replace(account, standing=standing)
                self._saving.restored(account)

    async def _remember_ended(self, ended: EndedSession) -> None:
        """Keep the newest ENDED_KEPT ended sessions; the store forgets the older ones."""
        self._ended.pop(ended.account, None)
        self._ended[ended.account] = ended
        while len(self._ended) > ENDED_KEPT:
            oldest = min(self._ended.values(), key=lambda e: e.ended_at).account
            del self._ended[oldest]
            store = self._saving.store
            if store is not None and oldest not in self._accounts:
                with contextlib.suppress(Exception):  # it is only a note for status
                    await asyncio.to_thread(store.delete, oldest)

    async def _restored(self, store: AccountStore, account_id: str) -> Account | None:
        """One stored account, if it can be read and its provider and client are configured."""
        try:
            record = await asyncio.to_thread(store.load, account_id)
            if record is None:
                return None
            ended = EndedSession.from_record(record)
            if ended is not None:  # it ended by itself before: status says so still
                await self._remember_ended(ended)
                return None
            account = Account.from_record(record)
            saved = Moment.from_record(record.get(SAVED_AT))
            account = replace(
                account, tokens=account.tokens.shifted(since_stored(self._clock, saved))
            )
        except Exception as error:
            log.warning(
                "a stored session could not be restored",
                extra={"account": account_id, "reason": str(error)},
            )
            return None
        return self._configured(account, record.get("issuer"))

    def _configured(self, account: Account, issuer: object) -> Account | None:
        """The restored account, linked to its provider; None when that or its client is gone."""
        link = self.providers.of(account.info.id)
        if link is None or issuer != link.issuer or link.service:
            log.info(
                "a stored session belongs to a provider that is not configured (now)",
                extra={"account": account.info.id, "issuer": issuer},
            )
            return None
        account = replace(account, link=link)
        if account.client is None:
            log.info(
                "a stored session belongs to a client that is not configured (now)",
                extra={"account": account.info.id, "client_id": account.client_id},
            )
            return None
        if account.tokens.refresh_in_doubt:
            log.warning(
                "a renewal got no answer before the daemon stopped: its refresh token is"
                " sent once more when the access token is about to expire",
                extra={"account": account.info.id, "resend_at": round(account.refresh_at)},
            )
        return account
