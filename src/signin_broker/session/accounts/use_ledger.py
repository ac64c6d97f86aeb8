"""Which apps got tokens, how often and when, and the audit row of each grant.

However many of its processes ask, and however often, the same token to the same
program is one audit row that counts its times (AuditEntry.repeat_of), so the log
grows with distinct grants, not with calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import audit_entries
from ..audit_entries import Actor
from ..clock import to_wall
from ..ports import AuditSink
from ..tokens import TokenSet
from .records import Account, AppUse
from .registry import AccountRegistry


class UseLedger:
    """Counts each app's use of the accounts and audits every token handed out."""

    def __init__(
        self, audit: AuditSink, registry: AccountRegistry, clock: Callable[[], float] = time.time
    ) -> None:
        self._audit = audit
        self._registry = registry
        self._clock = clock
        # Each app's use of any account since the start, for the apps list; an account's
        # own list (AccountInfo.apps) goes with it at sign-out, this one stays.
        self.app_use: dict[str, AppUse] = {}

    def note(
        self, account: Account, actor: Actor, tokens: TokenSet, audience: str, id_token: bool
    ) -> None:
        """Count the use, and audit it: a token given again to the same program is a repeat.

        However many of its processes ask, and however often, the same token to the
        same program is one audit row that counts its times (AuditEntry.repeat_of), so
        the log grows with distinct grants, not with calls.
        """
        now = to_wall(self._clock, self._clock())
        self._registry.note_use(account, actor.app, lambda use: _one_more(use, actor, now))
        self.app_use[actor.app] = _one_more(self.app_use.get(actor.app), actor, now)
        # str caches its hash: the key costs nothing per call, and is kept in memory only
        grant = (
            f"{actor.app}\0{actor.web_origin}\0{account.info.id}\0{hash(tokens.access_token)}"
            f"\0{audience}\0{id_token}"
        )
        expires_at = int(to_wall(self._clock, tokens.expires_at))
        self._audit.record(
            audit_entries.token_issued(
                actor,
                account.info.id,
                tokens.scopes,
                expires_at,
                audience=audience,
                id_token=id_token,
                grant=grant,
            )
        )


def _one_more(previous: AppUse | None, actor: Actor, now: float) -> AppUse:
    """The app's use counted once more, by this process at this moment."""
    return AppUse(
        executable=actor.app,
        last_pid=actor.pid,
        last_used=now,
        tokens_issued=(previous.tokens_issued if previous else 0) + 1,
    )
