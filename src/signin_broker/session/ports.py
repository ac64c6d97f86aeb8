"""What the session layer needs from outside it: a store for accounts, a sink for audit rows.

The daemon plugs in the encrypted vault (store.vault) and its audit trail
(daemon.audit_trail); tests plug in memory. Calls to a store may block: the session
layer makes them from worker threads.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from ..store.audit import Actor, AuditEntry


def daemon_actor() -> Actor:
    """Who acts when the daemon itself changes a session (the provider revoked it, ...)."""
    return Actor(app="signin-brokerd", uid=os.geteuid(), pid=os.getpid())


class AccountStore(Protocol):
    """Where accounts survive a restart (store.vault.Vault); calls may block."""

    @property
    def description(self) -> str:
        """Where the state and its keys are, for status."""

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        """Write the account's record."""

    def load(self, account_id: str) -> dict[str, Any] | None:
        """Read the account's record."""

    def delete(self, account_id: str) -> None:
        """Remove the account's record and key."""

    def accounts(self) -> list[str]:
        """The ids of the stored accounts."""


class AuditSink(Protocol):
    """Where the audit rows go (daemon.audit_trail.AuditTrail); best effort: it never raises."""

    def record(self, entry: AuditEntry) -> None:
        """Queue a row."""

    async def record_now(self, entry: AuditEntry) -> None:
        """Write a row before going on (the removal of an account is recorded first)."""

    async def forget_account(self, account: str) -> None:
        """Mark the account's rows for deletion after the retention."""


class NoAudit:
    """An audit sink that keeps nothing (tests, tools)."""

    def record(self, entry: AuditEntry) -> None:
        """Drop the row."""

    async def record_now(self, entry: AuditEntry) -> None:
        """Drop the row."""

    async def forget_account(self, account: str) -> None:
        """Nothing to forget."""
