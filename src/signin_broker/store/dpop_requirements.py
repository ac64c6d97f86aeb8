"""The clients that providers require DPoP of, kept in the state folder as one small JSON file.

Each is an issuer and a client id, learned at a sign-in (session.dpop_requirements);
neither is a secret, so the file is not encrypted, but it is written as every state
file is (0600, in a private folder, by an atomic rename) and read only as a bounded
regular file. Calls block: the session layer makes them from worker threads.
"""

from __future__ import annotations

from pathlib import Path

from .files import read_versioned_json, versioned_json, write_atomically

REQUIREMENTS_FILE = "dpop-required.json"  # in the state folder
VERSION = 1
MAX_BYTES = 256 * 1024  # a few providers' issuer URLs and client ids
MAX_TEXT = 4096  # an issuer URL or a client id, at most


class RequirementFile:
    """`dpop-required.json`: {"version": 1, "required": [{"issuer": ..., "client_id": ...}]}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> set[tuple[str, str]]:
        """The pairs kept (none when there is no file); OSError or ValueError when unreadable."""
        kind = "a DPoP requirements file"
        entries = read_versioned_json(self.path, "required", VERSION, MAX_BYTES, kind)
        if entries is None:
            return set()
        if not isinstance(entries, list):  # a file's content: ValueError, as every refusal here
            raise ValueError(f"{self.path} is not {kind} of version {VERSION}")  # noqa: TRY004
        pairs = set()
        for entry in entries:
            issuer = entry.get("issuer") if isinstance(entry, dict) else None
            client_id = entry.get("client_id") if isinstance(entry, dict) else None
            if not (_text(issuer) and _text(client_id)):
                raise ValueError(f"{self.path} holds an entry that is not an issuer and client id")
            pairs.add((str(issuer), str(client_id)))
        return pairs

    def save(self, required: frozenset[tuple[str, str]]) -> None:
        """Write all the pairs at once, replacing the file atomically."""
        entries = [{"issuer": issuer, "client_id": client} for issuer, client in sorted(required)]
        write_atomically(self.path, versioned_json("required", VERSION, entries))


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT
