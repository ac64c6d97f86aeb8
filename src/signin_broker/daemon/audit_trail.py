"""Writes audit rows from the event loop without making any caller wait for the disk.

Rows are queued and written in batches from a worker thread, a few times a second, so
a token handed out costs an append to a list, not an SQLite transaction. Writing is
best effort (contract 6): a failure is logged and the action it records goes on. The
removal of an account is the exception that is written before anything else happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from ..store.audit import AuditEntry, AuditLog, AuditRow

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.25
MAX_QUEUED = 10_000  # beyond this, rows are dropped and the drop is logged
DAY_SECONDS = 86_400


class AuditTrail:
    """The daemon's side of the audit log: queued writes, retention, and reads."""

    def __init__(self, path: Path, *, retention_days: float, keep_days: float) -> None:
        self.path = path
        self.retention_seconds = retention_days * DAY_SECONDS
        self.keep_seconds = keep_days * DAY_SECONDS
        self.log: AuditLog | None = None
        self._queue: list[AuditEntry] = []
        self._dropped = 0
        self._wake = asyncio.Event()
        self._opened = False  # until open() has run, rows wait in the queue

    async def open(self) -> None:
        """Open the log (in a thread: it may create the file) and purge what is due."""
        try:
            self.log = await asyncio.to_thread(AuditLog, self.path)
        except Exception:
            log.exception("the audit log cannot be opened; actions go on unrecorded")
        self._opened = True
        await self.purge()
        await self.flush()

    def record(self, entry: AuditEntry) -> None:
        """Queue a row for the next batch."""
        if len(self._queue) >= MAX_QUEUED:
            self._dropped += 1
            return
        self._queue.append(entry)
        self._wake.set()

    async def record_now(self, entry: AuditEntry) -> None:
        """Write the row (with whatever is queued before it) before returning."""
        self._queue.append(entry)
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

    async def flush(self) -> None:
        """Write every queued row now."""
        if not self._opened:
            return
        batch, self._queue = self._queue, []
        if self._dropped:
            log.warning(
                "audit rows dropped: the log could not keep up", extra={"rows": self._dropped}
            )
            self._dropped = 0
        if not batch or self.log is None:
            return
        try:
            await asyncio.to_thread(self.log.record, batch)
        except Exception:
            log.exception("audit rows could not be written", extra={"rows": len(batch)})

    async def run(self) -> None:
        """Write batches until cancelled, and purge once a day."""
        loop = asyncio.get_running_loop()
        next_purge = loop.time() + DAY_SECONDS
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(0.0, next_purge - loop.time()))
                    self._wake.clear()
                    await asyncio.sleep(FLUSH_SECONDS)  # gather a batch
                    await self.flush()
                if loop.time() >= next_purge:
                    next_purge = loop.time() + DAY_SECONDS
                    await self.purge()
        finally:
            await asyncio.shield(self._close())

    async def _close(self) -> None:
        await self.flush()
        if self.log is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.log.close)
