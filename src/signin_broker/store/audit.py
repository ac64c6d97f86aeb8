"""The daemon's audit log: which app did what to which account, in a private SQLite file.

Rows follow contract 2.7 adapted to a local broker: the actor is the calling app (its
identity string, uid and pid), the target is the tenant key of the account acted on, or
NULL for daemon-wide changes such as app policy. Every scoped read and delete names its
tenant and fails closed without one (contract 4.4, T7), the reads go through the tenant
and actor indexes (T8), and an account's rows are soft-deleted with it and purged by the
retention job (contract 3, T9). Payloads never hold secrets.
"""

from __future__ import annotations

import enum
import errno
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import UnsafeStorage, private_folder
from .tenants import MissingTenantKey, tenant_key

SCHEMA_VERSION = 2  # PRAGMA user_version; each later version migrates from the one before
BUSY_TIMEOUT_SECONDS = 5.0
SECRET_WORDS = ("token", "secret", "password", "code_verifier")

SCHEMA = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    actor_app TEXT NOT NULL,
    actor_uid INTEGER NOT NULL,
    actor_pid INTEGER NOT NULL DEFAULT 0,
    target_account TEXT,
    action TEXT NOT NULL
        CHECK (action IN ('create', 'update', 'delete', 'read_admin', 'issue_token')),
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
"""

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
FOR_ACCOUNT_SQL = """
SELECT id, actor_app, actor_uid, actor_pid, target_account, action, resource, resource_id,
    payload, created_unix, deleted_unix, times, last_unix
FROM audit_log INDEXED BY audit_log_target_created
WHERE target_account = :account AND deleted_unix IS NULL AND (:app = '' OR actor_app = :app)
    AND (:before_id IS NULL
        OR (created_unix, id) < (SELECT created_unix, id FROM audit_log WHERE id = :before_id))
ORDER BY created_unix DESC, id DESC LIMIT :limit
"""

FOR_APP_SQL = """
SELECT id, actor_app, actor_uid, actor_pid, target_account, action, resource, resource_id,
    payload, created_unix, deleted_unix, times, last_unix
FROM audit_log INDEXED BY audit_log_actor_created
WHERE actor_app = :app AND target_account IN (SELECT value FROM json_each(:accounts))
    AND deleted_unix IS NULL
    AND (:before_id IS NULL
        OR (created_unix, id) < (SELECT created_unix, id FROM audit_log WHERE id = :before_id))
ORDER BY created_unix DESC, id DESC LIMIT :limit
"""

DAEMON_WIDE_SQL = """
SELECT id, actor_app, actor_uid, actor_pid, target_account, action, resource, resource_id,
    payload, created_unix, deleted_unix, times, last_unix
FROM audit_log INDEXED BY audit_log_target_created
WHERE target_account IS NULL
    AND (:before_id IS NULL
        OR (created_unix, id) < (SELECT created_unix, id FROM audit_log WHERE id = :before_id))
ORDER BY created_unix DESC, id DESC LIMIT :limit
"""

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


class Action(enum.StrEnum):
    """What was done; the values, the names in lower case, are the CHECK constraint's."""

    CREATE = enum.auto()
    UPDATE = enum.auto()
    DELETE = enum.auto()
    READ_ADMIN = enum.auto()
    ISSUE_TOKEN = enum.auto()


@dataclass(frozen=True, slots=True)
class Actor:
    """The app that acted: its identity string (such as its executable path), uid and pid."""

    app: str
    uid: int
    pid: int = 0
    # Through a forward: what the caller says of itself and what the kernel saw of the
    # peer, recorded with its tokens' rows; never identity (the app is the forward).
    hint: str = ""
    # A browser extension's request: the web origin the extension vouched for.
    web_origin: str = ""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """A row to record; an empty target_account means a daemon-wide change.

    Entries with the same `repeat_of` (a key kept in memory only, never stored) are one
    event repeated: the first is a row, the others count on it (AuditLog.repeat).
    """

    actor: Actor
    action: Action
    resource: str
    target_account: str = ""
    resource_id: str = ""
    payload: Mapping[str, object] = field(default_factory=dict)
    repeat_of: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Repeat:
    """More times a written row happened: how many, the last moment and process."""

    more: int
    last_unix: int
    pid: int


@dataclass(frozen=True, slots=True)
class AuditRow:
    """A stored row, every column, its payload decoded."""

    id: int
    actor_app: str
    actor_uid: int
    actor_pid: int
    target_account: str | None
    action: Action
    resource: str
    resource_id: str | None
    payload: dict[str, object]
    created_unix: int
    deleted_unix: int | None
    times: int = 1  # how many times it happened (a grant repeated to the same program)
    last_unix: int | None = None  # when it last happened, if more than once


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
        self, entries: Sequence[AuditEntry], repeats: Mapping[int, Repeat] | None = None
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


def check_entry(entry: AuditEntry) -> None:
    """Refuse (ValueError) an entry that could never be stored, before it is queued."""
    _values(entry)


def _values(entry: AuditEntry) -> tuple[object, ...]:
    """The entry's columns but created_unix, after refusing what must never be stored."""
    if not entry.actor.app or not entry.resource:
        raise ValueError("an audit entry needs the acting app and a resource")
    _refuse_secrets(entry.payload)
    return (
        entry.actor.app,
        entry.actor.uid,
        entry.actor.pid,
        tenant_key(entry.target_account) if entry.target_account else None,
        Action(entry.action).value,
        entry.resource,
        entry.resource_id or None,
        json.dumps(dict(entry.payload), separators=(",", ":")) if entry.payload else None,
    )


def _refuse_secrets(value: object) -> None:
    """Refuse a payload with a key that looks like a secret, at any depth."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if any(word in str(key).lower() for word in SECRET_WORDS):
                raise ValueError(f"payload key {key!r} looks like a secret: never audit one")
            _refuse_secrets(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_secrets(item)


def _row(values: tuple[Any, ...]) -> AuditRow:
    columns = list(values)  # in the order of the SELECT lists, which is AuditRow's
    columns[5] = Action(columns[5])
    columns[8] = json.loads(columns[8]) if columns[8] else {}
    return AuditRow(*columns)
