"""The clients that providers require DPoP of, kept in the state folder as one small JSON file.

Each is an issuer and a client id, with when and why a sign-in learned it
(session.providers.dpop_requirements); none of it is a secret, so the file is not encrypted, but
it is written as every state file is (0600, in a private folder, by an atomic rename)
and read only as a bounded regular file. An entry an earlier version wrote has no
time or reason: it is read with neither (None, ""), and an earlier version reading
this one's entries ignores both. Calls block: the session layer and the doctor make
them from worker threads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from .files import read_versioned_json, versioned_json, write_atomically

REQUIREMENTS_FILE = "dpop-required.json"  # in the state folder
VERSION = 1
MAX_BYTES = 256 * 1024  # a few providers' issuer URLs, client ids and reasons
MAX_TEXT = 4096  # an issuer URL, a client id or a reason, at most


class KeptRequirement(NamedTuple):
    """One client a provider requires DPoP of, as the file keeps it."""

    issuer: str
    client_id: str
    learned_at: float | None  # Unix seconds; None when an earlier version wrote it
    reason: str  # what the provider answered that taught it; "" when not kept


class RequirementFile:
    """`dpop-required.json`: {"version": 1, "required": [{"issuer", "client_id", ...}]}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[KeptRequirement]:
        """The entries kept (none when there is no file); OSError or ValueError when unreadable."""
        kind = "a DPoP requirements file"
        entries = read_versioned_json(self.path, "required", VERSION, MAX_BYTES, kind)
        if entries is None:
            return []
        if not isinstance(entries, list):  # a file's content: ValueError, as every refusal here
            raise ValueError(f"{self.path} is not {kind} of version {VERSION}")  # noqa: TRY004
        return [self._entry(entry) for entry in entries]

    def save(self, required: Iterable[KeptRequirement]) -> None:
        """Write all the entries at once, replacing the file atomically."""
        entries = [
            {
                "issuer": kept.issuer,
                "client_id": kept.client_id,
                **({} if kept.learned_at is None else {"learned_at": round(kept.learned_at)}),
                **({"reason": kept.reason} if kept.reason else {}),
            }
            for kept in sorted(required)
        ]
        write_atomically(self.path, versioned_json("required", VERSION, entries))

    def _entry(self, entry: object) -> KeptRequirement:
        fields = entry if isinstance(entry, dict) else {}
        issuer, client_id = fields.get("issuer"), fields.get("client_id")
        learned_at, reason = fields.get("learned_at"), fields.get("reason", "")
        if not (_text(issuer) and _text(client_id)):
            raise ValueError(f"{self.path} holds an entry that is not an issuer and client id")
        if learned_at is not None and not _time(learned_at):
            raise ValueError(f"{self.path} holds an entry whose learned_at is not a time")
        if reason and not _text(reason):
            raise ValueError(f"{self.path} holds an entry whose reason is not a short text")
        when = None if learned_at is None else float(learned_at)
        return KeptRequirement(str(issuer), str(client_id), when, str(reason))


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT


def _time(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
