"""The account store in memory (session.ports.AccountStore), for tests of the session layer.

tests/unit/test_account_stores.py holds it to the same contract as the encrypted vault.
"""

from __future__ import annotations

from typing import Any


class MemoryStore:
    """One record per account, kept in a dict."""

    description = "memory (test)"

    def __init__(self, records: dict[str, dict[str, Any]] | None = None) -> None:
        self.records: dict[str, dict[str, Any]] = dict(records or {})
        self.failure: OSError | None = None  # every save fails so while set (a full disk)

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        if self.failure is not None:
            raise self.failure
        self.records[account_id] = record

    def kept_elsewhere(self, account_id: str) -> str:
        return ""

    def load(self, account_id: str) -> dict[str, Any] | None:
        return self.records.get(account_id)

    def delete(self, account_id: str) -> None:
        self.records.pop(account_id, None)

    def accounts(self) -> list[str]:
        return list(self.records)
