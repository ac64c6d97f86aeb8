"""Each account's state written before anyone is handed it, and what a restart now would lose.

A state its file cannot take (the state folder is full or read-only) the store keeps in
a journal (store/journal.py): it is saved, renewals go on, and status says where it is
until the keeper, writing it again every few seconds (schedule.SAVE_RETRY_SECONDS),
finds the folder writable. A write that fails even so leaves the state in memory: the
account is unsaved, status says so (`storage_problem`, an event when saving starts or
stops failing), and the keeper writes it again as often. A restart loses a session
only when its newest refresh token is the one that could not be written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from ...states import EventKind
from ..clock import moment_of, to_wall
from ..errors import StorageWaits
from ..ports import AccountStore
from ..schedule import SAVE_RETRY_SECONDS
from ..tokens import TokenSet
from .events import EventBus, SessionEvent
from .records import NOTHING, Account, Entitlement

log = logging.getLogger(__name__)

SAVED_AT = "saved_at"  # the record's key for when it was written (clock.Moment)


class SavedView(Protocol):
    """What the other rooms may read of the saved states; only the registry writes them."""

    @property
    def behind(self) -> bool: ...
    @property
    def retry_at(self) -> float: ...
    def unsaved(self, account: Account) -> str: ...
    def problem(self, entitlement: Entitlement = NOTHING) -> str: ...
    def lost_at_a_restart(self) -> list[str]: ...


class SavedStates:
    """Writes accounts to the store, and remembers which could not be written and why."""

    def __init__(
        self, accounts: Mapping[str, Account], events: EventBus, clock: Callable[[], float]
    ) -> None:
        self._accounts = accounts  # the registry's signed-in accounts, by id (read only)
        self._events = events
        self._clock = clock
        self.store: AccountStore | None = None  # until the registry restores
        # Accounts whose state could not be written, with the reason; and the refresh
        # token each account last had stored, to tell what a restart now would lose.
        self._unsaved: dict[str, str] = {}
        # Accounts whose state a journal keeps, not their file: where, and why.
        self._elsewhere: dict[str, str] = {}
        self._stored_refresh: dict[str, str | None] = {}
        # The refresh token of each account's latest state, saved or not: every change of
        # tokens is saved before it is used, so one the store lacks is only in memory.
        self._latest_refresh: dict[str, str | None] = {}
        self.retry_at = 0.0  # when the keeper writes again the states not in their files

    async def write(self, account: Account, tokens: TokenSet | None = None) -> bool:
        """Write the account (with these tokens, if given) before anyone is handed them.

        False when it could not be written: the state stays in memory, and is written
        again when `retry_at` comes.
        """
        if self.store is None or account.info.service:
            return True  # a service account's token is asked for anew at each start
        link = account.link
        tokens = account.tokens if tokens is None else tokens
        on_disk = tokens.shifted(to_wall(self._clock, 0.0))  # the wall clock of now
        record = account.to_record(link.issuer if link else "", on_disk)
        record[SAVED_AT] = moment_of(self._clock).to_record()  # for the state's age at a restart
        before = self.problem()
        self._latest_refresh[account.info.id] = tokens.refresh_token
        try:
            await asyncio.to_thread(self.store.save, account.info.id, record)
        except Exception as error:
            log.warning(
                "could not store the session",
                extra={"account": account.info.id, "reason": str(error)},
            )
            self._unsaved[account.info.id] = str(error)
            self.retry_at = self._clock() + SAVE_RETRY_SECONDS
            saved = False
        else:
            self._unsaved.pop(account.info.id, None)
            self._stored_refresh[account.info.id] = tokens.refresh_token
            self._note_where(account.info.id)
            saved = True
        self._say_changed(before)
        return saved

    async def write_ahead(self, account: Account, sent: TokenSet) -> None:
        """Store that the refresh token is out, or send nothing (StorageWaits).

        While the account's state cannot be written, the store is tried again only when
        its retry is due, so that callers asking meanwhile do not each write in vain.
        """
        now = self._clock()
        retry_due = not self.unsaved(account) or now >= self.retry_at
        if retry_due and await self.write(account, sent):
            return
        raise StorageWaits(account.info.id, self.unsaved(account), self.retry_at - now)

    def _note_where(self, account_id: str) -> None:
        """Whether the store kept the account's state in its file, or elsewhere until it can."""
        where = self.store.kept_elsewhere(account_id) if self.store is not None else ""
        if not where:
            self._elsewhere.pop(account_id, None)
            return
        if account_id not in self._elsewhere:
            self.retry_at = self._clock() + SAVE_RETRY_SECONDS
        self._elsewhere[account_id] = where

    def restored(self, account: Account) -> None:
        """The account came back from the store as it is: its refresh token is saved."""
        self._stored_refresh[account.info.id] = account.tokens.refresh_token
        self._latest_refresh[account.info.id] = account.tokens.refresh_token
        before = self.problem()
        self._note_where(account.info.id)
        self._say_changed(before)

    def forget(self, account_id: str) -> None:
        """The account ended: nothing of it is left to save."""
        before = self.problem()
        self._unsaved.pop(account_id, None)
        self._elsewhere.pop(account_id, None)
        self._stored_refresh.pop(account_id, None)
        self._latest_refresh.pop(account_id, None)
        self._say_changed(before)

    async def write_again(self) -> None:
        """Write again the states not in their files (the keeper calls this when due)."""
        for account_id in dict.fromkeys([*self._unsaved, *self._elsewhere]):
            account = self._accounts.get(account_id)
            if account is None:
                self._unsaved.pop(account_id, None)
                self._elsewhere.pop(account_id, None)
            else:
                await self.write(account)
        if self._elsewhere and not self._unsaved:
            self.retry_at = self._clock() + SAVE_RETRY_SECONDS

    @property
    def behind(self) -> bool:
        """Whether some account's state is not in its file: unsaved, or kept in a journal."""
        return bool(self._unsaved or self._elsewhere)

    def unsaved(self, account: Account) -> str:
        """Why this account's state could not be saved; "" when it could."""
        return self._unsaved.get(account.info.id, "")

    def problem(self, entitlement: Entitlement = NOTHING) -> str:
        """Why sessions cannot be saved now and what a restart would lose; "" when they can.

        Accounts are named only as far as the caller may see them.
        """
        fix = "free space in the state folder, or make it writable: it is saved at once then"
        if not self._unsaved:
            if not self._elsewhere:
                return ""
            where = next(iter(self._elsewhere.values()))
            return f"sessions are kept in {where}; renewals go on meanwhile; {fix}"
        reason = next(iter(self._unsaved.values()))
        at_risk = self.lost_at_a_restart()
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

    def lost_at_a_restart(self) -> list[str]:
        """Accounts whose refresh token on disk is not their latest one (it was renewed)."""
        return sorted(
            account_id
            for account_id in self._unsaved
            if account_id in self._accounts
            and self._latest_refresh.get(account_id) != self._stored_refresh.get(account_id)
        )

    def _say_changed(self, before: str) -> None:
        """An event when saving starts or stops failing, or a restart would now lose more."""
        now = self.problem()
        if now == before:
            return
        if now:
            log.warning("sessions are not being saved", extra={"reason": now})
            lost = bool(self.lost_at_a_restart())
            self._events.publish(
                SessionEvent(EventKind.DEGRADED, detail=now, restart_signs_out=lost)
            )
        else:
            log.info("sessions are saved again")
            self._events.publish(
                SessionEvent(EventKind.RECOVERED, detail="sessions are saved again")
            )
