"""The signed-in accounts: who may see which, the default one, and their encrypted records.

Only the registry adds, changes or forgets an account, and each change is written to
the store before anyone is handed what it changed. A session ends here (signed out,
revoked, expired, removed): its record goes, the default passes to the account
signed in longest, and watchers are told.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from ..store.audit import Actor
from . import audit_rows
from .accounts import (
    EVERYTHING,
    NOTHING,
    Account,
    AccountInfo,
    Entitlement,
    SignInState,
)
from .clock import Moment, moment_of, since_stored, to_wall
from .errors import AccountNotFound, SignInRequired
from .events import EndedSession, EventBus, EventKind, SessionEvent
from .names import AccountNames
from .ports import AccountStore, AuditSink
from .providers import Providers
from .schedule import first_revalidation
from .tokens import TokenSet

log = logging.getLogger(__name__)


ENDED_KEPT = 16  # sessions that ended by themselves, remembered for status
SAVE_RETRY_SECONDS = 5.0  # how often a state that could not be written is tried again
SAVED_AT = "saved_at"  # the record's key for when it was written (clock.Moment)


class AccountRegistry:
    """The accounts by id, as the store keeps them; every other part asks here."""

    def __init__(
        self,
        events: EventBus,
        audit: AuditSink,
        names: AccountNames,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.events = events
        self.audit = audit
        self.names = names  # the person's aliases, shown with each account
        self.providers = Providers()  # until restore()
        self.store: AccountStore | None = None
        self.storage = "memory only"
        self.changed = asyncio.Event()  # wakes the keeper: an account came or went
        self._ended: dict[str, EndedSession] = {}  # by account, oldest first
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock
        self._accounts: dict[str, Account] = {}
        # Accounts whose state could not be written, with the reason; and the refresh
        # token each account last had stored, to tell what a restart now would lose.
        self._unsaved: dict[str, str] = {}
        self._stored_refresh: dict[str, str | None] = {}
        # The refresh token of each account's latest state, saved or not: every change of
        # tokens is saved before it is used, so one the store lacks is only in memory.
        self._latest_refresh: dict[str, str | None] = {}
        self.save_retry_at = 0.0  # when the keeper writes the unsaved states again

    # -- what callers may see -----------------------------------------------------------

    def state(self, entitlement: Entitlement = EVERYTHING) -> SignInState:
        """NOT_CONFIGURED without a provider, else whether an account it sees is signed in."""
        if not self.providers:
            return SignInState.NOT_CONFIGURED
        if any(entitlement.sees(account_id) for account_id in self._accounts):
            return SignInState.SIGNED_IN
        return SignInState.SIGNED_OUT

    def ended(self, entitlement: Entitlement = EVERYTHING) -> list[EndedSession]:
        """Sessions the caller may see that ended by themselves, newest first."""
        visible = [e for e in self._ended.values() if entitlement.sees(e.account)]
        return sorted(visible, key=lambda e: e.ended_at, reverse=True)

    def accounts(self, entitlement: Entitlement = EVERYTHING) -> list[AccountInfo]:
        """The signed-in accounts the caller may see, default first."""
        infos = [self.info(a) for a in self._accounts.values() if entitlement.sees(a.info.id)]
        return sorted(infos, key=lambda a: (not a.is_default, a.signed_in_at))

    def account(self, account_id: str, entitlement: Entitlement = EVERYTHING) -> AccountInfo | None:
        """One account by id, or None (also when the caller may not see it)."""
        account = self._accounts.get(account_id)
        if account is None or not entitlement.sees(account_id):
            return None
        return self.info(account)

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

    def info(self, account: Account) -> AccountInfo:
        """What may be said of the account, with its token's expiry and next renewal."""
        refresh_at = to_wall(self._clock, account.refresh_at) if self.renewable(account) else 0
        return replace(
            account.info,
            access_token_expires_at=int(to_wall(self._clock, account.tokens.expires_at)),
            next_refresh_at=int(refresh_at),
            apps=tuple(sorted(account.apps.values(), key=lambda a: -a.last_used)),
            at_risk=self._at_risk(account, refresh_at),
            aliases=self.names.aliases_of(account.info.id),
        )

    def _at_risk(self, account: Account, refresh_at: float) -> str:
        """Why the session may end that the person should know now ("" when nothing)."""
        if lost := account.tokens.refresh_lost:
            ends = to_wall(self._clock, account.tokens.expires_at)
            at = time.strftime("%H:%M:%S", time.localtime(ends))
            return f"{lost}: the session ends at {at}; sign in again before (signin-broker login)"
        if account.info.id in self._lost_at_a_restart():
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

    # -- the accounts the other parts work on --------------------------------------------

    def all(self) -> list[Account]:
        """Every signed-in account (a copy: the keeper may end some as it goes)."""
        return list(self._accounts.values())

    @property
    def ids(self) -> Mapping[str, Account]:
        """The signed-in accounts by id (read only)."""
        return self._accounts

    def get(self, account_id: str) -> Account | None:
        """The account with this id, if signed in."""
        return self._accounts.get(account_id)

    def is_current(self, account: Account) -> bool:
        """Whether the account is still signed in (not ended, nor replaced by a new sign-in)."""
        return self._accounts.get(account.info.id) is account

    def renewable(self, account: Account) -> bool:
        """Whether the daemon may send the account's refresh token."""
        tokens = account.tokens
        return account.client is not None and tokens.refresh_token is not None

    # -- changes ----------------------------------------------------------------------

    async def add(self, account: Account) -> Account | None:
        """Store and add a signed-in account; the one it replaces (same id), if any."""
        previous = self._accounts.get(account.info.id)
        account.link = self.providers.of(account.info.id)
        await self.persist(account)
        self._accounts[account.info.id] = account
        self._ended.pop(account.info.id, None)  # signed in again
        self.changed.set()
        return previous

    async def persist(self, account: Account, tokens: TokenSet | None = None) -> bool:
        """Write the account (with these tokens, if given) before anyone is handed them.

        False when it could not be written: the state stays in memory, status says so
        (`storage_problem`), and the keeper writes it again every few seconds.
        """
        if self.store is None:
            return True
        link = account.link
        tokens = account.tokens if tokens is None else tokens
        on_disk = tokens.shifted(to_wall(self._clock, 0.0))  # the wall clock of now
        record = replace(account, tokens=on_disk).to_record(link.issuer if link else "")
        record[SAVED_AT] = moment_of(self._clock).to_record()  # for the state's age at a restart
        before = self.storage_problem()
        self._latest_refresh[account.info.id] = tokens.refresh_token
        try:
            await asyncio.to_thread(self.store.save, account.info.id, record)
        except Exception as error:
            log.warning(
                "could not store the session",
                extra={"account": account.info.id, "reason": str(error)},
            )
            self._unsaved[account.info.id] = str(error)
            self.save_retry_at = self._clock() + SAVE_RETRY_SECONDS
            saved = False
        else:
            self._unsaved.pop(account.info.id, None)
            self._stored_refresh[account.info.id] = tokens.refresh_token
            saved = True
        self._say_storage_changed(before)
        return saved

    def storage_problem(self, entitlement: Entitlement = NOTHING) -> str:
        """Why sessions cannot be saved now and what a restart would lose; "" when they can.

        Accounts are named only as far as the caller may see them.
        """
        if not self._unsaved:
            return ""
        reason = next(iter(self._unsaved.values()))
        at_risk = self._lost_at_a_restart()
        fix = "free space in the state folder, or make it writable: it is saved at once then"
        if not at_risk:
            return (
                f"sessions cannot be saved ({reason}); renewals wait until they can (a refresh"
                " token is spent only once its successor can be stored), tokens are served"
                f" while they last; {fix}"
            )
        named = [account_id for account_id in at_risk if entitlement.sees(account_id)]
        who = ", ".join(named) if len(named) == len(at_risk) else "a renewed account"
        return (
            f"sessions cannot be saved ({reason}); a restart now would sign out {who}, whose"
            f" new refresh token is only in memory; {fix}"
        )

    def _lost_at_a_restart(self) -> list[str]:
        """Accounts whose refresh token on disk is not their latest one (it was renewed)."""
        return sorted(
            account_id
            for account_id in self._unsaved
            if account_id in self._accounts
            and self._latest_refresh.get(account_id) != self._stored_refresh.get(account_id)
        )

    @property
    def restart_would_sign_out(self) -> bool:
        """Whether a restart now would lose a session: its new refresh token is unsaved."""
        return bool(self._lost_at_a_restart())

    def _say_storage_changed(self, before: str) -> None:
        """An event when saving starts or stops failing, or a restart would now lose more."""
        now = self.storage_problem()
        if now == before:
            return
        if now:
            log.warning("sessions are not being saved", extra={"reason": now})
            self.events.publish(
                SessionEvent(
                    EventKind.DEGRADED, detail=now, restart_signs_out=self.restart_would_sign_out
                )
            )
        else:
            log.info("sessions are saved again")
            self.events.publish(
                SessionEvent(EventKind.RECOVERED, detail="sessions are saved again")
            )

    @property
    def saving_fails(self) -> bool:
        """Whether the last attempt to save some account's state failed."""
        return bool(self._unsaved)

    def is_unsaved(self, account: Account) -> bool:
        """Whether the last attempt to save this account's state failed."""
        return account.info.id in self._unsaved

    def unsaved_reason(self, account: Account) -> str:
        """Why this account's state could not be saved ("" when it could)."""
        return self._unsaved.get(account.info.id, "")

    async def save_unsaved(self) -> None:
        """Write again the states that could not be written (the keeper calls this when due)."""
        for account_id in list(self._unsaved):
            account = self._accounts.get(account_id)
            if account is None:
                self._unsaved.pop(account_id, None)
            else:
                await self.persist(account)

    async def set_default(self, chosen: Account) -> None:
        """Make the account the one used when a request names none."""
        for account in self._accounts.values():
            is_default = account is chosen
            if account.info.is_default != is_default:
                account.info = replace(account.info, is_default=is_default)
                await self.persist(account)

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
        removed = self._accounts.pop(account.info.id, None)
        if removed is None:
            return False
        ended = None
        if by_itself:  # nobody asked: the person must be told, and sign in again
            ended = EndedSession(
                account.info.id,
                account.info.display_name,
                kind,
                detail,
                to_wall(self._clock, self._clock()),
            )
            await self._remember_ended(ended)
        self.audit.record(audit_rows.session_ended(actor, account.info.id, detail))
        if removed.info.is_default and self._accounts:
            heir = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            heir.info = replace(heir.info, is_default=True)
            await self.persist(heir)
        before = self.storage_problem()
        self._unsaved.pop(account.info.id, None)
        self._stored_refresh.pop(account.info.id, None)
        self._latest_refresh.pop(account.info.id, None)
        self._say_storage_changed(before)
        if self.store is not None:  # its tokens go; why it ended stays, across restarts
            try:
                if ended is None:
                    await asyncio.to_thread(self.store.delete, account.info.id)
                else:
                    await asyncio.to_thread(self.store.save, account.info.id, ended.to_record())
            except Exception:
                log.exception(
                    "could not remove the stored state", extra={"account": account.info.id}
                )
        self.changed.set()
        self.events.publish(SessionEvent(kind, account=account.info.id, detail=detail, ended=ended))
        return True

    # -- start -------------------------------------------------------------------------

    async def restore(self, providers: Providers, store: AccountStore | None, storage: str) -> None:
        """Take the providers and the store, and bring back the accounts stored of them."""
        self.providers, self.store, self.storage = providers, store, storage
        if self.store is None:
            return
        for account_id in await asyncio.to_thread(self.store.accounts):
            account = await self._restored(account_id)
            if account is not None:
                account.revalidate_at = first_revalidation(self._clock(), self._revalidate_seconds)
                self._accounts[account.info.id] = account
                self._stored_refresh[account.info.id] = account.tokens.refresh_token
                self._latest_refresh[account.info.id] = account.tokens.refresh_token
        if self._accounts and not self.default_account:
            first = min(self._accounts.values(), key=lambda a: a.info.signed_in_at)
            first.info = replace(first.info, is_default=True)
        if self._accounts:
            log.info("sessions restored", extra={"accounts": sorted(self._accounts)})

    async def _remember_ended(self, ended: EndedSession) -> None:
        """Keep the newest ENDED_KEPT ended sessions; the store forgets the older ones."""
        self._ended.pop(ended.account, None)
        self._ended[ended.account] = ended
        while len(self._ended) > ENDED_KEPT:
            oldest = min(self._ended.values(), key=lambda e: e.ended_at).account
            del self._ended[oldest]
            if self.store is not None and oldest not in self._accounts:
                with contextlib.suppress(Exception):  # it is only a note for status
                    await asyncio.to_thread(self.store.delete, oldest)

    async def _restored(self, account_id: str) -> Account | None:
        """One stored account, if it can be read and its provider and client are configured."""
        assert self.store is not None  # noqa: S101 - restore() checked
        try:
            record = await asyncio.to_thread(self.store.load, account_id)
            if record is None:
                return None
            ended = EndedSession.from_record(record)
            if ended is not None:  # it ended by itself before: status says so still
                await self._remember_ended(ended)
                return None
            account = Account.from_record(record)
            saved = Moment.from_record(record.get(SAVED_AT))
            account.tokens = account.tokens.shifted(since_stored(self._clock, saved))
        except Exception as error:
            log.warning(
                "a stored session could not be restored",
                extra={"account": account_id, "reason": str(error)},
            )
            return None
        link = self.providers.of(account.info.id)
        if link is None or record.get("issuer") != link.issuer:
            log.info(
                "a stored session belongs to a provider that is not configured (now)",
                extra={"account": account_id, "issuer": record.get("issuer")},
            )
            return None
        account.link = link
        if account.client is None:
            log.info(
                "a stored session belongs to a client that is not configured (now)",
                extra={"account": account_id, "client_id": account.client_id},
            )
            return None
        if account.tokens.refresh_in_doubt:
            log.warning(
                "a renewal got no answer before the daemon stopped: its refresh token is"
                " sent once more when the access token is about to expire",
                extra={"account": account_id, "resend_at": round(account.refresh_at)},
            )
        return account
