"""Where audit rows are kept, a private SQLite file, and how they get there with no caller waiting.

The file (AuditLog): the target of a row is the tenant key of the account acted on, or
NULL for a daemon-wide change. Every scoped read and delete names its tenant and fails
closed without one (docs/contract.md §12), the reads go through the tenant and actor
indexes (§13), and an account's rows are soft-deleted with it and purged by the
retention job (§14). What happened is the session's to say (session.audit_entries); the
rows, what they are made of and what is refused, audit_rows.py's.

The daemon's writer (AuditTrail): rows are queued and written in batches from a worker
thread, a few times a second, so a token handed out costs an append to a list, not an
SQLite transaction. Auditing never holds an action up (§13), and no row is dropped
silently: when the log cannot be opened or written (another process holds its lock, it
is corrupt, a symlink stands in its place), the rows stay queued and are retried with
backoff, `status` shows the audit as degraded, and only rows beyond MAX_QUEUED are
dropped, with an error that counts them. The removal of an account is the exception
that is written before anything else happens (§14). An event repeated (the same token
to the same program, Entry.repeat_of) is one row that counts its times: the first
is queued as a row, and the rest only count, in memory, until the next batch adds them
to it. So 2,000 grants a second of one token cost one row and one small update a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import sqlite3
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..json_depth import within_depth
from .audit_rows import ACTIONS, AuditRow, Entry, Repeat, check_entry
from .files import UnsafeStorage, private_folder
from .tenants import MissingTenantKey, tenant_key

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # PRAGMA user_version; each later version migrates from the one before
BUSY_TIMEOUT_SECONDS = 5.0

SCHEMA = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    actor_app TEXT NOT NULL,
    actor_uid INTEGER NOT NULL,
    actor_pid INTEGER NOT NULL DEFAULT 0,
    target_account TEXT,
    action TEXT NOT NULL
        CHECK (action IN ({actions})),
    resource TEXT NOT NULL,
    resource_id TEXT,
    payload TEXT,
    created_unix INTEGER NOT NULL,
    deleted_unix INTEGER,
    times INTEGER NOT NULL DEFAULT 1,
    last_unix INTEGER
);
CREATE INDEX IF NOT EXISTS audit_log_actor_created ON audit_log (actor_app, created_unix DESC);
CREATE INDEX IF NOT EXISTS audit_log_target_created
    ON audit_log (target_account, created_unix DESC);
PRAGMA user_version = 2;
COMMIT;
""".format(actions=", ".join(f"'{action}'" for action in ACTIONS))

# Version 2: a grant repeated (the same token to the same program) is one row that counts
# its times and its last moment, so the log grows with distinct events, not with calls.
MIGRATIONS = {
    1: """
BEGIN IMMEDIATE;
ALTER TABLE audit_log ADD COLUMN times INTEGER NOT NULL DEFAULT 1;
ALTER TABLE audit_log ADD COLUMN last_unix INTEGER;
PRAGMA user_version = 2;
COMMIT;
""",
}

REPEAT_SQL = """
UPDATE audit_log SET times = times + :more, last_unix = :last_unix, actor_pid = :pid
WHERE id = :id
"""

INSERT_SQL = """
INSERT INTO audit_log (actor_app, actor_uid, actor_pid, target_account, action, resource,
    resource_id, payload, created_unix) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# Newest first is (created_unix, id) descending, the order of the indexes, and each read
# names its index (INDEXED BY), so it stays on it whatever the statistics say (T8): on a
# small table ANALYZE can otherwise make SQLite prefer a full scan. A page ends before
# the position of row before_id, whichever tenant's: one cursor then pages a merged read
# of several scoped queries, and it tells the caller nothing its own ids, taken from one
# global sequence, do not already tell.
# Each page: its rows' columns, from one index, older than row before_id, newest first.
_PAGE_OF = """
SELECT id, actor_app, actor_uid, actor_pid, target_account, action, resource, resource_id,
    payload, created_unix, deleted_unix, times, last_unix
FROM audit_log INDEXED BY {index}
WHERE {where}
    AND (:before_id IS NULL
        OR (created_unix, id) < (SELECT created_unix, id FROM audit_log WHERE id = :before_id))
ORDER BY created_unix DESC, id DESC LIMIT :limit
"""

FOR_ACCOUNT_SQL = _PAGE_OF.format(
    index="audit_log_target_created",
    where="target_account = :account AND deleted_unix IS NULL AND (:app = '' OR actor_app = :app)",
)
FOR_APP_SQL = _PAGE_OF.format(
    index="audit_log_actor_created",
    where="actor_app = :app AND target_account IN (SELECT value FROM json_each(:accounts))"
    " AND deleted_unix IS NULL",
)
DAEMON_WIDE_SQL = _PAGE_OF.format(index="audit_log_target_created", where="target_account IS NULL")

# A user key also covers that user's workspace tenants: T9 removes every row of the user.
# The accounts with rows not marked deleted: a skip scan of the target index, one seek
# per account (not a pass over every row), each kept if its newest row is not deleted.
ACCOUNTS_SQL = """
WITH RECURSIVE seen(account) AS (
    SELECT MIN(target_account) FROM audit_log INDEXED BY audit_log_target_created
    UNION ALL
    SELECT (SELECT MIN(target_account) FROM audit_log INDEXED BY audit_log_target_created
            WHERE target_account > seen.account)
    FROM seen WHERE seen.account IS NOT NULL
)
SELECT account FROM seen
WHERE account IS NOT NULL AND EXISTS (
    SELECT 1 FROM audit_log INDEXED BY audit_log_target_created
    WHERE target_account = seen.account AND deleted_unix IS NULL
)
"""

SOFT_DELETE_SQL = """
UPDATE audit_log SET deleted_unix = :now
WHERE deleted_unix IS NULL AND (target_account = :account
    OR (target_account >= :account || ':workspace:' AND target_account < :account || ':workspace;'))
"""

PURGE_SQL = """
DELETE FROM audit_log WHERE deleted_unix <= :deleted_before OR created_unix < :created_before
"""


class AuditLog:
    """The audit log in one SQLite file; one connection shared by worker threads under a lock."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._db = _open(path)

    def close(self) -> None:
        """Close the database (SQLite then folds the WAL back into the file)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def record(
        self, entries: Sequence[Entry], repeats: Mapping[int, Repeat] | None = None
    ) -> list[int]:
        """Write the entries, and the repeats of rows written before, in one transaction.

        All of it, or on any error none; the new rows' ids, in the entries' order.
        """
        rows = [_values(entry) for entry in entries]  # every entry checked before any write
        now = int(self._clock())
        with self._lock, self._db:
            ids = [self._db.execute(INSERT_SQL, (*row, now)).lastrowid or 0 for row in rows]
            self._db.executemany(
                REPEAT_SQL,
                [
                    {"id": row, "more": r.more, "last_unix": r.last_unix, "pid": r.pid}
                    for row, r in (repeats or {}).items()
                ],
            )
        return ids

    def for_account(
        self, account: str, *, app: str = "", limit: int = 100, before_id: int | None = None
    ) -> list[AuditRow]:
        """The tenant's rows (of one app when named), newest first, older than before_id."""
        params = _page(limit, before_id) | {"account": tenant_key(account), "app": app}
        return self._select(FOR_ACCOUNT_SQL, params)

    def for_app(
        self, app: str, accounts: Sequence[str], *, limit: int = 100, before_id: int | None = None
    ) -> list[AuditRow]:
        """The app's rows on the accounts the caller may see, newest first."""
        if not app:
            raise ValueError("an app identity is required")
        if not accounts:
            raise MissingTenantKey("at least one account is required: there is no unscoped read")
        keys = json.dumps([tenant_key(account) for account in accounts])
        return self._select(FOR_APP_SQL, _page(limit, before_id) | {"app": app, "accounts": keys})

    def daemon_wide(self, *, limit: int = 100, before_id: int | None = None) -> list[AuditRow]:
        """Rows that target no account (app policy and the like), newest first."""
        return self._select(DAEMON_WIDE_SQL, _page(limit, before_id))

    def recent(
        self,
        accounts: Sequence[str],
        *,
        app: str = "",
        limit: int = 100,
        before_id: int | None = None,
        daemon_wide: bool = False,
    ) -> list[AuditRow]:
        """The newest rows of these accounts (and daemon-wide ones), of one app or of all.

        Each read names its tenants, so an empty `accounts` reads no tenant's rows.
        """
        rows: list[AuditRow] = []
        if app and accounts:
            rows += self.for_app(app, accounts, limit=limit, before_id=before_id)
        elif not app:
            for account in accounts:
                rows += self.for_account(account, limit=limit, before_id=before_id)
        if daemon_wide:
            rows += [
                row
                for row in self.daemon_wide(limit=limit, before_id=before_id)
                if not app or row.actor_app == app
            ]
        rows.sort(key=lambda row: (row.created_unix, row.id), reverse=True)
        return rows[:limit]

    def accounts(self) -> list[str]:
        """The accounts whose rows are still readable, signed in or not (after a logout, say)."""
        with self._lock:
            return [account for (account,) in self._db.execute(ACCOUNTS_SQL)]

    def soft_delete_account(self, account: str) -> int:
        """Mark the account's rows deleted, so reads skip them until the purge; the count."""
        params = {"account": tenant_key(account), "now": int(self._clock())}
        with self._lock, self._db:
            return self._db.execute(SOFT_DELETE_SQL, params).rowcount

    def purge(self, *, deleted_older_than_seconds: float, created_older_than_seconds: float) -> int:
        """Remove rows soft-deleted at least that long ago or created longer ago; the count."""
        if min(deleted_older_than_seconds, created_older_than_seconds) < 0:
            raise ValueError("retention periods cannot be negative")
        now = self._clock()
        params = {
            "deleted_before": now - deleted_older_than_seconds,
            "created_before": now - created_older_than_seconds,
        }
        with self._lock, self._db:
            return self._db.execute(PURGE_SQL, params).rowcount

    def _select(self, sql: str, params: dict[str, object]) -> list[AuditRow]:
        with self._lock:
            return [_row(values) for values in self._db.execute(sql, params)]


def _open(path: Path) -> sqlite3.Connection:
    """Open the database, made 0600 before SQLite writes (its -wal and -shm take its mode).

    The folder must be private and the files regular files, not symlinks: a symlink
    there would have SQLite create, chmod and write a file elsewhere.
    """
    private_folder(path.parent)
    _own_regular_file(path, create=True)
    for suffix in ("-wal", "-shm"):  # left by a crash, SQLite reuses them as they are
        _own_regular_file(path.with_name(path.name + suffix), create=False)
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)
    try:
        _prepare(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _own_regular_file(path: Path, *, create: bool) -> None:
    """Make the file 0600, creating it if asked; refuse a symlink or anything irregular."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeStorage(
                f"audit log {path} is a symlink; not writing through it: remove it"
            ) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise UnsafeStorage(f"audit log {path} is not a regular file; remove it")
        os.fchmod(descriptor, 0o600)  # also tightens a file made earlier by someone else
    finally:
        os.close(descriptor)


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Set the journal up and create the schema, or check it is one this code knows."""
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        db.executescript(SCHEMA)
    elif version in MIGRATIONS:
        db.executescript(MIGRATIONS[version])
    elif version != SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"{path} has audit schema {version}; this signin-broker knows {SCHEMA_VERSION}"
        )


def _page(limit: int, before_id: int | None) -> dict[str, object]:
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return {"limit": limit, "before_id": before_id}


def _values(entry: Entry) -> tuple[object, ...]:
    """The entry's columns but created_unix, after refusing what must never be stored."""
    check_entry(entry)
    return (
        entry.actor.app,
        entry.actor.uid,
        entry.actor.pid,
        tenant_key(entry.target_account) if entry.target_account else None,
        str(entry.action),
        entry.resource,
        entry.resource_id or None,
        json.dumps(dict(entry.payload), separators=(",", ":")) if entry.payload else None,
    )


def _row(values: tuple[Any, ...]) -> AuditRow:
    columns = list(values)  # in the order of the SELECT lists, which is AuditRow's
    columns[8] = json.loads(within_depth(columns[8])) if columns[8] else {}
    return AuditRow(*columns)


# -- the daemon's writer ------------------------------------------------------------------

FLUSH_SECONDS = 0.25
RETRY_MAX_SECONDS = 8.0  # after a failed write the pause doubles from FLUSH_SECONDS to this
MAX_QUEUED = 10_000  # beyond this, rows are dropped and the drop is logged as an error
DAY_SECONDS = 86_400
REMEMBERED_ROWS = 4096  # repeat keys of written rows kept, newest used last


@dataclass
class _Pending:
    """A row waiting for the next batch, and how often it happened again meanwhile."""

    entry: Entry
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

    def record(self, entry: Entry) -> None:
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

    async def record_now(self, entry: Entry) -> None:
        """Write the row (with whatever is queued before it) before returning, if the log can."""
        self._queue.append(_Pending(entry))
        await self.flush()

    async def forget_account(self, account: str) -> None:
        """Mark the account's rows deleted; the retention job purges them (docs/contract.md §14)."""
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


def _refusal(entry: Entry) -> str:
    """Why the entry could never be stored (a bug of its maker), or "" when it can be."""
    try:
        check_entry(entry)
    except ValueError as error:
        return str(error)
    return ""
