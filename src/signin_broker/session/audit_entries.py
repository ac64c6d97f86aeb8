"""What happened, as the audit hears it: who did what to which account, one function per event.

The session says what happened in its own words, and storage keeps it
(store/audit_log.py turns an entry into a row). The vocabulary is in one place, so that
it reads the same whichever room records a row (the sessions, the API, the token
files) and a reviewer finds all of it here: each event has its function, which decides
the action, the resource and the payload. The actor is the calling app (its identity
string, uid and pid); the target is the account acted on, or none for a daemon-wide
change such as the app policy (docs/contract.md §13). No payload names a secret: the
log refuses a key that looks like one, at any depth (store.audit_rows.check_entry).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


class Action(enum.StrEnum):
    """What was done; each value is one the audit log keeps (store.audit_rows.ACTIONS)."""

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


def daemon_actor() -> Actor:
    """Who acts when the daemon itself changes a session (the provider revoked it, ...)."""
    return Actor(app="signin-brokerd", uid=os.geteuid(), pid=os.getpid())


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """What happened, to record; an empty target_account means a daemon-wide change.

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


# -- one function per event ------------------------------------------------------------


def signed_in(actor: Actor, account: str, scopes: Sequence[str], *, again: bool) -> AuditEntry:
    """An account signed in (again: it had a session, replaced now)."""
    action = Action.UPDATE if again else Action.CREATE
    payload = {"event": "signed in", "scopes": list(scopes)}
    return AuditEntry(actor, action, "account", account, payload=payload)


def removed(actor: Actor, account: str) -> AuditEntry:
    """An account removed, with all the broker kept of it (recorded before the deletion)."""
    return AuditEntry(actor, Action.DELETE, "account", account, payload={"event": "removed"})


def made_default(actor: Actor, account: str) -> AuditEntry:
    """An account made the one used when a request names none."""
    return AuditEntry(actor, Action.UPDATE, "account", account, payload={"default": True})


def session_ended(actor: Actor, account: str, why: str) -> AuditEntry:
    """A session ended: signed out, removed, revoked by the provider, or expired."""
    return AuditEntry(actor, Action.DELETE, "session", account, payload={"event": why})


def token_issued(
    actor: Actor,
    account: str,
    scopes: Sequence[str],
    expires_at: int,
    *,
    audience: str,
    id_token: bool,
    grant: str,
) -> AuditEntry:
    """A token handed to an app; `grant` names the token given, so a repeat only counts."""
    payload: dict[str, object] = {"scopes": list(scopes), "expires_at": expires_at}
    if audience:
        payload["audience"] = audience
    if id_token:  # (a key naming a token would be refused as a secret)
        payload["with"] = "ID token"
    if actor.hint:
        payload["hint"] = actor.hint
    if actor.web_origin:
        payload["web_origin"] = actor.web_origin
    return AuditEntry(actor, Action.ISSUE_TOKEN, "token", account, payload=payload, repeat_of=grant)


def dpop_proof_signed(actor: Actor, account: str, origin: str, expires_at: int) -> AuditEntry:
    """DPoP proofs signed for an app's requests to one server (`origin`) with one token.

    Each proof is a repeat of the first for that server and token: the log grows with
    the servers an app reaches, not with its requests.
    """
    grant = f"dpop\0{actor.app}\0{actor.web_origin}\0{account}\0{origin}\0{expires_at}"
    payload: dict[str, object] = {"dpop_proofs_for": origin, "expires_at": expires_at}
    if actor.web_origin:
        payload["web_origin"] = actor.web_origin
    return AuditEntry(actor, Action.ISSUE_TOKEN, "token", account, payload=payload, repeat_of=grant)


def app_decided(
    actor: Actor,
    app: str,
    decision: str,
    accounts: Sequence[str],
    *,
    kept: bool,
    id_token: bool,
    origins: Sequence[str] = (),
) -> AuditEntry:
    """The user's lasting decision for an app (not `kept`: reset to the default)."""
    payload = {
        "decision": decision,
        "accounts": list(accounts),
        **({"with": "ID token"} if id_token else {}),
        **({"web_origins": list(origins)} if origins else {}),
    }
    action = Action.UPDATE if kept else Action.DELETE
    return AuditEntry(actor, action, "app_policy", resource_id=app, payload=payload)


def app_answered_once(actor: Actor, app: str, decision: str, answered: int) -> AuditEntry:
    """The user answered an app's waiting requests, recording no rule."""
    payload = {"decision": f"{decision} once", "answered": answered}
    return AuditEntry(actor, Action.UPDATE, "app_policy", resource_id=app, payload=payload)


def audit_read(actor: Actor, account: str, app: str, rows: int) -> AuditEntry:
    """Someone read the audit log (reading it is audited too)."""
    payload = {"account": account, "app": app, "rows": rows}
    return AuditEntry(actor, Action.READ_ADMIN, "audit_log", payload=payload)


def alias_set(actor: Actor, account: str, alias: str) -> AuditEntry:
    """The person gave an account an alias (or moved one to it)."""
    return AuditEntry(actor, Action.UPDATE, "account", account, payload={"alias": alias})


def alias_removed(actor: Actor, account: str, alias: str) -> AuditEntry:
    """The person removed an alias of an account."""
    payload = {"alias": alias, "event": "alias removed"}
    return AuditEntry(actor, Action.UPDATE, "account", account, payload=payload)


def forward_opened(
    actor: Actor,
    name: str,
    accounts: Sequence[str] | None,
    scopes: Sequence[str],
    *,
    audience: str,
    id_token: bool,
    confirm: bool,
    ttl: int,
    socket: str,
) -> AuditEntry:
    """The person opened a forward: what it lets through, for how long, and where."""
    payload: dict[str, object] = {
        "accounts": list(accounts) if accounts is not None else "all",
        "scopes": list(scopes),
        "ttl_seconds": ttl,
        "socket": socket,
        "confirm": confirm,
    }
    if audience:
        payload["audience"] = audience
    if id_token:
        payload["with"] = "ID token"
    return AuditEntry(
        actor, Action.CREATE, "forward", resource_id=f"forward:{name}", payload=payload
    )


def forward_closed(actor: Actor, name: str, why: str, tokens: int, connections: int) -> AuditEntry:
    """A forward closed (by the person, its TTL, or the daemon's stop), with its use."""
    payload = {"event": why, "issued": tokens, "connections": connections}
    return AuditEntry(
        actor, Action.DELETE, "forward", resource_id=f"forward:{name}", payload=payload
    )


def token_file_written(
    actor: Actor,
    account: str,
    path: str,
    scopes: Sequence[str],
    expires_at: int,
    *,
    audience: str,
) -> AuditEntry:
    """The daemon wrote a token file (the app `file:<name>`): one row per write, none per read."""
    payload: dict[str, object] = {"path": path, "scopes": list(scopes), "expires_at": expires_at}
    if audience:
        payload["audience"] = audience
    return AuditEntry(
        actor, Action.ISSUE_TOKEN, "token_file", account, resource_id=actor.app, payload=payload
    )


def token_file_removed(actor: Actor, account: str, path: str, why: str) -> AuditEntry:
    """The daemon removed a token file: its session ended, its policy denies it, its token died."""
    payload = {"path": path, "event": why}
    return AuditEntry(
        actor, Action.DELETE, "token_file", account, resource_id=actor.app, payload=payload
    )
