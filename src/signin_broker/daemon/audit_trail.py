"""Writes audit rows from the event loop without making any caller wait for the disk.

Rows are queued and written in batches from a worker thread, a few times a second, so
a token handed out costs an append to a list, not an SQLite transaction. Auditing never
holds an action up (contract 6), and no row is dropped silently: when the log cannot
be opened or written (another process holds its lock, it is corrupt, a symlink stands
in its place), the rows stay queued and are retried with backoff, `status` shows the
audit as degraded, and only rows beyond MAX_QUEUED are dropped, with an error that
counts them. The removal of an account is the exception that is written before
anything else happens.

An event repeated (the same token to the same program, AuditEntry.repeat_of) is one
row that counts its times: the first is queued as a row, and the rest only count, in
memory, until the next batch adds them to it. So 2,000 grants a second of one token
cost one row and one small update a batch, and no row is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..store.audit import AuditEntry, AuditLog, AuditRow, Repeat, check_entry

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.25
RETRY_MAX_SECONDS = 8.0  # after a failed write the pause doubles from FLUSH_SECONDS to this
MAX_QUEUED = 10_000  # beyond this, rows are dropped and the drop is logged as an error
DAY_SECONDS = 86_400
REMEMBERED_ROWS = 4096  # repeat keys of written rows kept, newest used last


@dataclass
class _Pending:
    """A row waiting for the next batch, and how often it happened again meanwhile."""

    entry: AuditEntry
    again: Repeat | None = None


def _once_more(repeat: Repeat | None, pid: int, more: int = 1) -> Repeat:
    """A repeat counted once more, now, by this process."""
    return Repeat((repeat.more if repeat else 0) + more, int(time.time()), pid)


class AuditTrail:
    """The daemon's side of the audit log: queued writes, retention, and reads."""

    def __init__(self, path: Path, *, retention_days: float, keep_days: float) -> None:
        self.path = path
        self.retention_seconds = retention_days * DAY_SECONDS
        self.keep_seconds = keep_days * DAY_SECONDS
        self.log: AuditLog | None = None
        self._queue: list[_Pending] = []
        self._queued: dict[str, _Pending] = {}  # queued rows by repeat key
        self._written: OrderedDict[str, int] = OrderedDict()  # row ids by repeat key
        self._repeats: dict[int, Repeat] = {}  # counts to add to written rows
        self._dropped = 0
        self._problem = ""  # why rows are not being written; "" while they are
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()  # one batch at a time, in queue order
        self._opened = False  # until open() has run, rows wait in the queue

    @property
    def degraded_reason(self) -> str:
        """Why audit rows are not being written, for status; "" when all is well."""
        if not self._problem or not self._queue:
            return self._problem
        return f"{self._problem}; {len(self._queue)} rows waiting"

    async def open(self) -> None:
        """Open the log (in a thread: it may create the file) and purge what is due."""
        await self._connect()
        self._opened = True
        await self.purge()
        await self.flush()

    def record(self, entry: AuditEntry) -> None:
        """Queue a row for the next batch, or count a repeat; refuse one that cannot be stored."""
        key = entry.repeat_of
        if key and (pending := self._queued.get(key)) is not None:
            pending.again = _once_more(pending.again, entry.actor.pid)
            return
        if key and (row := self._written.get(key)) is not None:
            self._written.move_to_end(key)
            self._repeats[row] = _once_more(self._repeats.get(row), entry.actor.pid)
            self._wake.set()
            return
        refusal = _refusal(entry)
        if refusal:
            log.error("an audit row was refused", extra={"reason": refusal})
            return
        if len(self._queue) >= MAX_QUEUED:
            self._dropped += 1
            return
        self._queue.append(pending := _Pending(entry))
        if key:
            self._queued[key] = pending
        self._wake.set()

    async def record_now(self, entry: AuditEntry) -> None:
        """Write the row (with whatever is queued before it) before returning, if the log can."""
        self._queue.append(_Pending(entry))
        await self.flush()

    async def forget_account(self, account: str) -> None:
        """Mark the account's rows deleted; the retention job removes them (contract 3, T9)."""
        await self.flush()
        if self.log is not None:
            try:
                await asyncio.to_thread(self.log.soft_delete_account, account)
            except Exception:
                log.exception("could not mark the account's audit rows", extra={"account": account})
        if self.retention_seconds == 0:
            await self.purge()

    async def purge(self) -> None:
        """Remove rows past their retention."""
        if self.log is None:
            return
        try:
            removed = await asyncio.to_thread(
                self.log.purge,
                deleted_older_than_seconds=self.retention_seconds,
                created_older_than_seconds=self.keep_seconds,
            )
        except Exception:
            log.exception("the audit retention job failed")
            return
        if removed:
            log.info("audit rows past their retention removed", extra={"rows": removed})

    async def accounts(self) -> list[str]:
        """The accounts with readable rows, signed in or not."""
        await self.flush()
        if self.log is None:
            return []
        return await asyncio.to_thread(self.log.accounts)

    async def read(
        self,
        accounts: list[str],
        *,
        app: str,
        limit: int,
        before_id: int | None,
        daemon_wide: bool,
    ) -> list[AuditRow]:
        """The newest rows of these accounts (and daemon-wide ones), of one app or all."""
        await self.flush()
        if self.log is None:
            return []
        return await asyncio.to_thread(
            self.log.recent,
            accounts,
            app=app,
            limit=limit,
            before_id=before_id,
            daemon_wide=daemon_wide,
        )

    async def flush(self) -> bool:
        """Write every queued row now; False when they stay queued for a retry.

        The write is shielded: a caller cancelled meanwhile (the daemon stopping) does
        not cut a batch in half, so no row is written twice or lost.
        """
        if not self._opened:
            return True
        return await asyncio.shield(self._flush())

    async def _flush(self) -> bool:
        async with self._writing:
            self._report_dropped()
            if not self._queue and not self._repeats:
                return True
            audit_log = await self._connect()
            if audit_log is None:
                return False
            batch, repeats = self._queue[:], dict(self._repeats)
            try:
                rows = await asyncio.to_thread(
                    audit_log.record, [pending.entry for pending in batch], repeats
                )
            except Exception as error:
                self._degrade(f"audit rows cannot be written to {self.path}: {error}")
                return False
            del self._queue[: len(batch)]  # rows queued during the write stay
            self._written_now(batch, rows, repeats)
            if self._problem:
                self._problem = ""
                log.info("audit rows are written again", extra={"rows": len(batch)})
            return True

    def _written_now(
        self, batch: list[_Pending], rows: list[int], repeats: dict[int, Repeat]
    ) -> None:
        """After a batch: its rows are known by id, and what repeated meanwhile counts on."""
        for row, applied in repeats.items():
            now = self._repeats.pop(row)
            if now is not applied:  # it repeated during the write: count the rest next time
                self._repeats[row] = Repeat(now.more - applied.more, now.last_unix, now.pid)
        for pending, row in zip(batch, rows, strict=True):
            key = pending.entry.repeat_of
            if not key:
                continue
            self._queued.pop(key, None)
            self._written[key] = row
            if pending.again is not None:  # repeated while queued: one update next batch
                self._repeats[row] = pending.again
                self._wake.set()
        while len(self._written) > REMEMBERED_ROWS:
            self._written.popitem(last=False)

    async def _connect(self) -> AuditLog | None:
        """The open log, opening it if it is not yet; None while it cannot be opened."""
        if self.log is None:
            try:
                self.log = await asyncio.to_thread(AuditLog, self.path)
            except Exception as error:
                self._degrade(f"the audit log {self.path} cannot be opened: {error}")
        return self.log

    def _degrade(self, problem: str) -> None:
        if problem != self._problem:
            log.error(
                "auditing is degraded: rows wait in memory and are retried",
                extra={"reason": problem, "rows": len(self._queue)},
            )
        self._problem = problem

    def _report_dropped(self) -> None:
        if self._dropped:
            log.error(
                "audit rows dropped: too many were waiting to be written",
                extra={"rows": self._dropped, "reason": self._problem or "the log is too slow"},
            )
            self._dropped = 0

    async def run(self) -> None:
        """Write batches until cancelled, retrying with backoff, and purge once a day."""
        loop = asyncio.get_running_loop()
        next_purge = loop.time() + DAY_SECONDS
        pause = FLUSH_SECONDS
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(0.0, next_purge - loop.time()))
                self._wake.clear()
                await asyncio.sleep(pause)  # gather a batch, or back off after a failure
                if await self.flush():
                    pause = FLUSH_SECONDS
                else:
                    pause = min(pause * 2, RETRY_MAX_SECONDS)
                    self._wake.set()  # try again after the pause
                if loop.time() >= next_purge:
                    next_purge = loop.time() + DAY_SECONDS
                    await self.purge()
        finally:
            await asyncio.shield(self._close())

    async def _close(self) -> None:
        await self.flush()
        if self._queue:
            log.error(
                "audit rows could not be written before the daemon stopped",
                extra={"rows": len(self._queue), "reason": self._problem},
            )
        if self.log is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.log.close)


def _refusal(entry: AuditEntry) -> str:
    """Why the entry could never be stored (a bug of its maker), or "" when it can be."""
    try:
        check_entry(entry)
    except ValueError as error:
        return str(error)
    return ""
