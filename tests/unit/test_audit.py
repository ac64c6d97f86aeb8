"""The audit log keeps each tenant's rows to itself, reads through its indexes, forgets on time."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from signin_broker.session.audit_entries import Action, Actor, AuditEntry
from signin_broker.store.audit_log import (
    ACCOUNTS_SQL,
    DAEMON_WIDE_SQL,
    FOR_ACCOUNT_SQL,
    FOR_APP_SQL,
    SCHEMA_VERSION,
    AuditLog,
    AuditTrail,
    MissingTenantKey,
)
from signin_broker.store.audit_rows import AuditRow, Repeat
from support.clocks import FakeClock

DAY = 86_400.0
START = 1_750_000_000.0
APP_A = Actor("/usr/bin/app-a", uid=1000, pid=41)
APP_B = Actor("/usr/bin/app-b", uid=1000, pid=42)
MALFORMED_KEYS = [
    "",
    "42",
    "tenant:42",
    "USER:42",
    " user:42",
    "user:",
    "user::42",
    "user:42:",
    "user:4 2",
    "user:42:workspace:",
    "user:42:project:7",
    "workspace:7",
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "audit.sqlite3"


@pytest.fixture
def log(path: Path, clock: FakeClock) -> Iterator[AuditLog]:
    with AuditLog(path, clock=clock) as audit:
        yield audit


def entry(
    account: str = "user:1",
    actor: Actor = APP_A,
    action: Action = Action.ISSUE_TOKEN,
    resource: str = "token",
    **payload: object,
) -> AuditEntry:
    return AuditEntry(actor, action, resource, target_account=account, payload=payload)


def ids(rows: list[AuditRow]) -> list[int]:
    return [row.id for row in rows]


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def test_rows_carry_every_column_and_the_decoded_payload(log: AuditLog) -> None:
    log.record(
        [
            AuditEntry(
                APP_A,
                Action.UPDATE,
                "account",
                target_account="user:1:workspace:7",
                resource_id="default",
                payload={"scopes": ["read:user"], "audience": "api"},
            )
        ]
    )
    [row] = log.for_account("user:1:workspace:7")
    assert row == AuditRow(
        id=row.id,
        actor_app="/usr/bin/app-a",
        actor_uid=1000,
        actor_pid=41,
        target_account="user:1:workspace:7",
        action=Action.UPDATE,
        resource="account",
        resource_id="default",
        payload={"scopes": ["read:user"], "audience": "api"},
        created_unix=int(START),
        deleted_unix=None,
    )


def test_every_action_is_stored_and_read_back(log: AuditLog) -> None:
    log.record([entry(action=action) for action in Action])
    assert {row.action for row in log.for_account("user:1")} == set(Action)


def test_an_action_the_log_does_not_keep_is_refused_before_any_write(log: AuditLog) -> None:
    with pytest.raises(ValueError, match="no action 'rename'"):
        log.record([entry(), AuditEntry(APP_A, "rename", "account", "user:1")])  # type: ignore[arg-type]
    assert log.for_account("user:1") == []


def test_rows_come_back_newest_first_and_page_by_before_id(log: AuditLog, clock: FakeClock) -> None:
    # Two rows share a second, and the wall clock steps back once: paging must still
    # list every row exactly once, in (created_unix, id) descending order.
    for offset in (0, 5, 5, 9, 3, 12, 12, 20):
        clock.now = START + offset
        log.record([entry(step=offset)])
    everything = log.for_account("user:1")
    created = [(row.created_unix, row.id) for row in everything]
    assert created == sorted(created, reverse=True)
    assert len(everything) == 8

    pages: list[list[int]] = []
    before: int | None = None
    while page := log.for_account("user:1", limit=3, before_id=before):
        pages.append(ids(page))
        before = page[-1].id
    assert [len(page) for page in pages] == [3, 3, 2]
    assert [row_id for page in pages for row_id in page] == ids(everything)


def test_one_cursor_pages_a_merged_read_of_several_scopes(log: AuditLog, clock: FakeClock) -> None:
    # The daemon merges for_account of each visible account with daemon_wide and passes
    # the last row's id back as the next cursor; every row must come exactly once.
    for n, offset in enumerate((0, 4, 4, 7, 2, 9, 9, 9, 11, 15, 15, 20)):
        clock.now = START + offset
        log.record([entry(("user:1", "user:2", "")[n % 3], n=n)])

    def merged(before_id: int | None, limit: int = 100) -> list[AuditRow]:
        rows = log.for_account("user:1", limit=limit, before_id=before_id)
        rows += log.for_account("user:2", limit=limit, before_id=before_id)
        rows += log.daemon_wide(limit=limit, before_id=before_id)
        return sorted(rows, key=lambda row: (row.created_unix, row.id), reverse=True)[:limit]

    seen: list[int] = []
    before: int | None = None
    while page := merged(before, limit=5):
        seen += ids(page)
        before = page[-1].id
    assert seen == ids(merged(None))
    assert len(seen) == 12


def test_for_account_never_returns_another_tenants_rows(log: AuditLog) -> None:
    log.record(
        [
            entry("user:1", note="mine"),
            entry("user:2", note="theirs"),
            entry("user:12", note="prefix"),
            entry("user:1:workspace:7", note="workspace"),
            entry("", resource="app_policy", note="daemon"),
        ]
    )
    mine = log.for_account("user:1")
    assert [row.payload["note"] for row in mine] == ["mine"]
    assert {row.target_account for row in log.for_account("user:2")} == {"user:2"}
    # A cursor taken from another tenant's row pages by its position, nothing more.
    [theirs] = log.for_account("user:2")
    assert log.for_account("user:1", before_id=theirs.id) == mine
    assert log.for_account("user:1", before_id=mine[0].id) == []


def test_for_account_can_narrow_to_one_app(log: AuditLog) -> None:
    log.record([entry(actor=APP_A), entry(actor=APP_B), entry(actor=APP_B)])
    assert {row.actor_app for row in log.for_account("user:1", app=APP_B.app)} == {APP_B.app}
    assert len(log.for_account("user:1", app=APP_B.app)) == 2
    assert len(log.for_account("user:1")) == 3


def test_for_app_returns_only_the_listed_accounts_rows(log: AuditLog) -> None:
    log.record(
        [
            entry("user:1", APP_A),
            entry("user:2", APP_A),
            entry("user:3", APP_A),
            entry("user:1", APP_B),
            entry("", APP_A, resource="app_policy"),
        ]
    )
    seen = log.for_app(APP_A.app, ["user:1", "user:2"])
    assert {(row.actor_app, row.target_account) for row in seen} == {
        (APP_A.app, "user:1"),
        (APP_A.app, "user:2"),
    }
    assert [row.target_account for row in log.for_app(APP_B.app, ["user:2"])] == []
    [newest, older] = seen
    assert log.for_app(APP_A.app, ["user:1", "user:2"], before_id=newest.id) == [older]
    # A cursor from a row the caller may not see still yields only the listed accounts.
    [hidden] = log.for_app(APP_A.app, ["user:3"])
    assert log.for_app(APP_A.app, ["user:1", "user:2"], before_id=hidden.id) == seen


def test_daemon_wide_rows_are_kept_apart_from_tenant_rows(log: AuditLog) -> None:
    log.record(
        [
            AuditEntry(
                APP_A,
                Action.UPDATE,
                "app_policy",
                resource_id="/usr/bin/app-b",
                payload={"decision": "allow"},
            ),
            entry("user:1"),
        ]
    )
    [row] = log.daemon_wide()
    assert (row.target_account, row.resource, row.resource_id, row.payload) == (
        None,
        "app_policy",
        "/usr/bin/app-b",
        {"decision": "allow"},
    )
    assert row.id not in ids(log.for_account("user:1"))
    assert log.daemon_wide(before_id=row.id) == []


@pytest.mark.parametrize("key", MALFORMED_KEYS)
def test_iso_T7_scoped_access_without_a_tenant_key_is_refused(
    log: AuditLog, path: Path, key: str
) -> None:
    log.record([entry("user:42"), entry("")])
    before = raw(path).execute("SELECT * FROM audit_log ORDER BY id").fetchall()

    with pytest.raises(MissingTenantKey):
        log.for_account(key)
    with pytest.raises(MissingTenantKey):
        log.for_app(APP_A.app, [key])
    with pytest.raises(MissingTenantKey):
        log.for_app(APP_A.app, ["user:42", key])
    with pytest.raises(MissingTenantKey):
        log.soft_delete_account(key)
    if key:  # an empty target means daemon-wide; any other must be a tenant key
        with pytest.raises(MissingTenantKey):
            log.record([entry(key)])

    assert raw(path).execute("SELECT * FROM audit_log ORDER BY id").fetchall() == before


def test_iso_T7_an_empty_account_list_is_refused(log: AuditLog) -> None:
    log.record([entry("user:42")])
    with pytest.raises(MissingTenantKey):
        log.for_app(APP_A.app, [])


def test_iso_T7_the_queries_match_nothing_when_the_tenant_is_unset(
    log: AuditLog, path: Path
) -> None:
    log.record([entry("user:42"), entry("")])
    unset = {"account": None, "accounts": None, "app": APP_A.app, "before_id": None, "limit": 9}
    with raw(path) as db:
        assert db.execute(FOR_ACCOUNT_SQL, unset).fetchall() == []
        assert db.execute(FOR_APP_SQL, unset).fetchall() == []


def fill(log: AuditLog, clock: FakeClock) -> None:
    """A few thousand rows over many apps and a handful of accounts, some daemon-wide."""
    batch = []
    for n in range(4000):
        account = "" if n % 10 == 0 else f"user:{n % 5}"
        batch.append(entry(account, Actor(f"/usr/bin/app-{n % 20}", 1000, n), n=n))
    for start in range(0, len(batch), 500):
        clock.now += 60
        log.record(batch[start : start + 500])


def plan(db: sqlite3.Connection, sql: str, before_id: int | None) -> list[str]:
    params = {
        "account": "user:1",
        "app": "/usr/bin/app-3",
        "accounts": json.dumps(["user:1", "user:2"]),
        "before_id": before_id,
        "limit": 100,
    }
    return [detail for *_, detail in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


@pytest.mark.parametrize("analyzed", [False, True], ids=["no-stats", "analyzed"])
@pytest.mark.parametrize("before_id", [None, 2000])
@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (FOR_ACCOUNT_SQL, "audit_log_target_created"),
        (FOR_APP_SQL, "audit_log_actor_created"),
        (DAEMON_WIDE_SQL, "audit_log_target_created"),
    ],
    ids=["for_account", "for_app", "daemon_wide"],
)
def test_iso_T8_reads_use_the_index_not_a_scan(
    log: AuditLog,
    clock: FakeClock,
    path: Path,
    sql: str,
    index: str,
    before_id: int | None,
    analyzed: bool,
) -> None:
    fill(log, clock)
    with raw(path) as db:
        if analyzed:
            db.execute("ANALYZE")
        details = plan(db, sql, before_id)
    assert details[0].startswith(f"SEARCH audit_log USING INDEX {index} "), details
    assert not [detail for detail in details if detail.startswith("SCAN audit_log")], details


def test_accounts_lists_each_account_with_readable_rows_by_index_seeks(
    log: AuditLog, clock: FakeClock, path: Path
) -> None:
    fill(log, clock)  # user:0 to user:4, and daemon-wide rows
    log.soft_delete_account("user:3")
    assert log.accounts() == ["user:0", "user:1", "user:2", "user:4"]
    with raw(path) as db:
        details = [detail for *_, detail in db.execute(f"EXPLAIN QUERY PLAN {ACCOUNTS_SQL}")]
    assert any("USING COVERING INDEX audit_log_target_created" in d for d in details), details
    assert not [d for d in details if d.startswith("SCAN audit_log")], details


def test_iso_T9_deleted_tenant_is_purged_after_retention_and_others_stay(
    log: AuditLog, clock: FakeClock, path: Path
) -> None:
    log.record(
        [
            entry("user:1"),
            entry("user:1:workspace:7"),
            entry("user:1"),
            entry("user:2"),
            entry("user:12"),
            entry("user:2:workspace:7"),
            entry("", resource="app_policy"),
        ]
    )
    clock.now += 3600
    log.record([entry("user:1", action=Action.DELETE, resource="account")])  # before cleanup

    assert log.soft_delete_account("user:1") == 4  # its workspace rows too
    assert log.for_account("user:1") == []
    assert log.for_account("user:1:workspace:7") == []
    assert log.soft_delete_account("user:1") == 0

    retention = {"deleted_older_than_seconds": 30 * DAY, "created_older_than_seconds": 365 * DAY}
    clock.now += 30 * DAY - 1
    assert log.purge(**retention) == 0
    clock.now += 1
    assert log.purge(**retention) == 4

    with raw(path) as db:
        left = db.execute("SELECT target_account FROM audit_log ORDER BY id").fetchall()
    assert left == [("user:2",), ("user:12",), ("user:2:workspace:7",), (None,)]
    assert len(log.for_account("user:2")) == 1
    assert len(log.for_account("user:12")) == 1
    assert len(log.daemon_wide()) == 1


def test_deleting_a_workspace_tenant_leaves_the_users_own_rows(log: AuditLog) -> None:
    log.record([entry("user:1"), entry("user:1:workspace:7"), entry("user:1:workspace:8")])
    assert log.soft_delete_account("user:1:workspace:7") == 1
    assert len(log.for_account("user:1")) == 1
    assert len(log.for_account("user:1:workspace:8")) == 1


def test_purge_removes_rows_older_than_the_age_limit(log: AuditLog, clock: FakeClock) -> None:
    log.record([entry(age="old"), entry("", resource="app_policy")])
    clock.now += 100 * DAY
    log.record([entry(age="new")])
    removed = log.purge(deleted_older_than_seconds=30 * DAY, created_older_than_seconds=90 * DAY)
    assert removed == 2
    assert [row.payload for row in log.for_account("user:1")] == [{"age": "new"}]
    assert log.daemon_wide() == []


@pytest.mark.parametrize(
    "payload",
    [
        {"access_token": "x"},
        {"Refresh_Token": "x"},
        {"client_secret": "x"},
        {"PASSWORD": "x"},
        {"code_verifier": "x"},
        {"details": {"id_token": "x"}},
        {"grants": [{"token": "x"}]},
    ],
)
def test_a_secret_looking_payload_key_is_refused(log: AuditLog, payload: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="secret"):
        log.record([entry(note="fine"), entry(**payload)])
    assert log.for_account("user:1") == []  # the batch is all or nothing


def test_bad_arguments_are_refused(log: AuditLog) -> None:
    with pytest.raises(ValueError, match="limit"):
        log.for_account("user:1", limit=0)
    with pytest.raises(ValueError, match="app"):
        log.for_app("", ["user:1"])
    with pytest.raises(ValueError, match="negative"):
        log.purge(deleted_older_than_seconds=-1, created_older_than_seconds=DAY)
    with pytest.raises(ValueError, match="app"):
        log.record([entry(actor=Actor("", 1000))])


def test_the_file_and_its_wal_files_are_private(log: AuditLog, path: Path) -> None:
    log.record([entry()])
    log.for_account("user:1")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    with raw(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_loose_files_left_behind_are_tightened(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "audit.sqlite3"
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        (tmp_path / name).touch(mode=0o644)
        (tmp_path / name).chmod(0o644)
    with AuditLog(path, clock=clock) as log:
        log.record([entry()])
        for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_a_reopened_log_keeps_its_rows_and_schema_version(path: Path, clock: FakeClock) -> None:
    with AuditLog(path, clock=clock) as log:
        log.record([entry(n=1), entry("", resource="app_policy")])
        rows = log.for_account("user:1")
    with AuditLog(path, clock=clock) as log:
        assert log.for_account("user:1") == rows
        assert len(log.daemon_wide()) == 1
    with raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_a_newer_schema_is_not_touched(path: Path, clock: FakeClock) -> None:
    AuditLog(path, clock=clock).close()
    with raw(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(sqlite3.DatabaseError, match="schema"):
        AuditLog(path, clock=clock)


def test_the_check_constraint_refuses_an_unknown_action(log: AuditLog, path: Path) -> None:
    with raw(path) as db, pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        db.execute(
            "INSERT INTO audit_log (actor_app, actor_uid, action, resource, created_unix)"
            " VALUES ('/usr/bin/app-a', 1000, 'drop_table', 'token', 0)"
        )


def test_worker_threads_can_share_the_log(log: AuditLog) -> None:
    def work(n: int) -> int:
        log.record([entry(f"user:{n % 3}", n=n)])
        return len(log.for_account(f"user:{n % 3}"))

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(60)))
    assert sum(len(log.for_account(f"user:{n}")) for n in range(3)) == 60


def test_a_log_of_the_first_schema_is_migrated_and_keeps_its_rows(
    path: Path, clock: FakeClock
) -> None:
    path.parent.mkdir(mode=0o700)
    with raw(path) as db:  # as signin-broker made it before repeats were counted
        db.executescript(
            "CREATE TABLE audit_log (id INTEGER PRIMARY KEY AUTOINCREMENT, actor_app TEXT NOT NULL,"
            " actor_uid INTEGER NOT NULL, actor_pid INTEGER NOT NULL DEFAULT 0, target_account"
            " TEXT, action TEXT NOT NULL, resource TEXT NOT NULL, resource_id TEXT, payload TEXT,"
            " created_unix INTEGER NOT NULL, deleted_unix INTEGER);"
            "CREATE INDEX audit_log_actor_created ON audit_log (actor_app, created_unix DESC);"
            "CREATE INDEX audit_log_target_created"
            " ON audit_log (target_account, created_unix DESC);"
            "INSERT INTO audit_log (actor_app, actor_uid, target_account, action, resource,"
            " created_unix) VALUES ('/usr/bin/mail', 1000, 'user:1', 'issue_token', 'token', 5);"
            "PRAGMA user_version = 1;"
        )
    with AuditLog(path, clock=clock) as log:
        (old,) = log.for_account("user:1")
        assert (old.actor_app, old.times, old.last_unix) == ("/usr/bin/mail", 1, None)
    with raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_repeats_count_on_their_row_in_the_same_transaction(log: AuditLog) -> None:
    (row,) = log.record([entry()])
    log.record([entry("user:2")], {row: Repeat(more=41, last_unix=1_800_000_123, pid=77)})
    (counted,) = log.for_account("user:1")
    assert (counted.times, counted.last_unix, counted.actor_pid) == (42, 1_800_000_123, 77)


def test_the_trail_makes_one_row_of_a_repeated_grant_however_its_repeats_fall(
    path: Path,
) -> None:
    """Repeats while queued, while written, and after: one row, every time counted."""

    async def run() -> list[AuditRow]:
        trail = AuditTrail(path, retention_days=30, keep_days=365)
        await trail.open()
        grant = AuditEntry(APP_A, Action.ISSUE_TOKEN, "token", "user:1", repeat_of="k")
        other = AuditEntry(APP_B, Action.ISSUE_TOKEN, "token", "user:1", repeat_of="k2")
        for _ in range(500):
            trail.record(grant)  # queued once, counted 499 times
        trail.record(other)
        writing = asyncio.ensure_future(trail.flush())
        for _ in range(300):  # while the batch is being written
            trail.record(grant)
            await asyncio.sleep(0)
        await writing
        for _ in range(200):  # after it was written: counted on its row
            trail.record(grant)
        await trail.flush()
        rows = await trail.read(["user:1"], app="", limit=10, before_id=None, daemon_wide=False)
        assert trail.log is not None
        trail.log.close()
        return rows

    rows = asyncio.run(run())
    assert sorted((row.actor_app, row.times) for row in rows) == [
        (APP_A.app, 1000),
        (APP_B.app, 1),
    ]
