"""What the session layer needs from outside it: a store, an audit sink, a provider's client.

The daemon plugs in the encrypted vault (store.vault), its audit trail
(store.audit_log.AuditTrail) and oidc.provider.Provider; tests plug in memory and a scripted
provider. Each seam has a contract suite every implementation passes
(tests/unit/test_account_stores.py, tests/integration/test_provider_clients.py).
Calls to a store may block: the session layer makes them from worker threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .audit_entries import AuditEntry

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from ..oidc.answers import TokenResponse
    from ..oidc.dpop import DpopKey
    from ..oidc.metadata import ProviderMetadata
    from ..store.dpop_requirements import KeptRequirement


class AccountStore(Protocol):
    """Where accounts survive a restart (store.vault.Vault); calls may block."""

    @property
    def description(self) -> str:
        """Where the state and its keys are, for status."""

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        """Write the account's record (in a journal, if its own place cannot take it)."""

    def kept_elsewhere(self, account_id: str) -> str:
        """Where its newest record is, and why, while its place cannot take it; else ""."""

    def load(self, account_id: str) -> dict[str, Any] | None:
        """Read the account's record."""

    def delete(self, account_id: str) -> None:
        """Remove the account's record and key."""

    def accounts(self) -> list[str]:
        """The ids of the stored accounts."""


class AliasStore(Protocol):
    """Where the person's account aliases survive a restart (store.aliases.AliasFile)."""

    def load(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """The aliases kept (alias -> account id) and what each may hide; empty when none are.

        An alias given over other accounts' login (--force) may hide theirs, and only theirs.
        """

    def save(self, aliases: dict[str, str], hiding: dict[str, tuple[str, ...]]) -> None:
        """Replace what is kept with these aliases and what they may hide."""


class RequirementStore(Protocol):
    """Where the clients that providers require DPoP of survive a restart.

    store.dpop_requirements.RequirementFile, which the doctor edits too: `path` tells
    whether it changed since it was read.
    """

    path: Path

    def load(self) -> list[KeptRequirement]:
        """The entries kept; empty when none are."""

    def save(self, required: Iterable[KeptRequirement]) -> None:
        """Replace what is kept with these entries."""


class ProviderClient(Protocol):
    """One client at a provider, as renewal, re-validation and sign-out use it.

    Failures are OAuthError (the provider refused: invalid_grant, invalid_token, ...)
    or ProviderUnavailable (it could not be asked, or answered garbage), never others.
    """

    @property
    def client_id(self) -> str:
        """The client the tokens are issued to."""

    @property
    def clock_problem(self) -> str:
        """How far this device's clock is off the provider's, when it is; else ""."""

    @property
    def confidential(self) -> bool:
        """Whether the client authenticates itself (a secret, a key); a public one does not."""

    def provider_time(self) -> float:
        """Now by the provider's clock, as far as its answers told it (Unix seconds)."""

    async def metadata(self) -> ProviderMetadata:
        """The provider's endpoints (discovery)."""

    async def refresh(
        self,
        refresh_token: str,
        scope: str | None = None,
        resource: str | None = None,
        *,
        answer_within: float | None = None,
        dpop: DpopKey | None = None,
    ) -> TokenResponse:
        """New tokens for a refresh token (RFC 6749 section 6); a narrower scope or a resource.

        `answer_within`: the answer is awaited while it keeps coming, this long of
        silence at most (the client bounds the whole generously). `dpop`: the key the
        account's tokens are bound to (RFC 9449), for each proof.
        """

    async def client_credentials(
        self, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """A token for the client itself (RFC 6749 section 4.4): a service account's."""

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, Any]:
        """The user's claims; OAuthError("invalid_token") when the token is refused."""

    async def revoke(self, token: str, hint: str, dpop: DpopKey | None = None) -> bool:
        """Revoke a token (RFC 7009); False when the provider offers no revocation."""

    async def close(self) -> None:
        """Let go of connections."""


class AuditSink(Protocol):
    """Where the audit rows go (store.audit_log.AuditTrail); best effort: it never raises."""

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
