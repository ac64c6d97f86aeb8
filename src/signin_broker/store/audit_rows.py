"""What the audit log keeps of an event, and what it refuses to: its rows, and no secret.

What happened is the session's to say (session.audit: the actor, the action, the account
acted on, a payload); the log stores whatever entry has that shape (Entry), one row per
event, and reads rows back as AuditRow. The actions it keeps are the CHECK constraint's
(ACTIONS). An entry that could never be stored is refused before it is queued
(check_entry): one without an acting app or a resource, of an action the log does not
keep, or with a payload key that looks like a secret, at any depth. Where rows are kept,
and how they get there, is audit_log.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

SECRET_WORDS = ("token", "secret", "password", "code_verifier")
# What was done, as the audit_log table's CHECK constraint spells it.
ACTIONS = ("create", "update", "delete", "read_admin", "issue_token")


class EntryActor(Protocol):
    """The app that acted, as a row records it."""

    @property
    def app(self) -> str: ...
    @property
    def uid(self) -> int: ...
    @property
    def pid(self) -> int: ...


class Entry(Protocol):
    """An event to keep (session.audit.AuditEntry); an empty target_account: daemon-wide.

    Entries with the same `repeat_of` (kept in memory only, never stored) are one event
    repeated: the first is a row, the others count on it.
    """

    @property
    def actor(self) -> EntryActor: ...
    @property
    def action(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def target_account(self) -> str: ...
    @property
    def resource_id(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, object]: ...
    @property
    def repeat_of(self) -> str: ...


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
    action: str  # one of ACTIONS
    resource: str
    resource_id: str | None
    payload: dict[str, object]
    created_unix: int
    deleted_unix: int | None
    times: int = 1  # how many times it happened (a grant repeated to the same program)
    last_unix: int | None = None  # when it last happened, if more than once


def check_entry(entry: Entry) -> None:
    """Refuse (ValueError) an entry that could never be stored, before it is queued."""
    if not entry.actor.app or not entry.resource:
        raise ValueError("an audit entry needs the acting app and a resource")
    if entry.action not in ACTIONS:
        raise ValueError(f"the audit log keeps no action {entry.action!r}")
    _refuse_secrets(entry.payload)


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
