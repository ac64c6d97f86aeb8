"""The clients that providers require DPoP of, kept in the state folder as one small JSON file.

Each is an issuer and a client id, learned at a sign-in (session.dpop_requirements);
neither is a secret, so the file is not encrypted, but it is written as every state
file is (0600, in a private folder, by an atomic rename) and read only as a bounded
regular file. Calls block: the session layer makes them from worker threads.
"""

from __future__ import annotations

import json
from pathlib import Path

from .files import read_regular_file, write_atomically

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
        data = read_regular_file(self.path, MAX_BYTES)
        if data is None:
            return set()
        kept = json.loads(data)
        entries = kept.get("required") if isinstance(kept, dict) else None
        if (
            not isinstance(kept, dict)
            or kept.get("version") != VERSION
            or not isinstance(entries, list)
        ):
            raise ValueError(f"{self.path} is not a DPoP requirements file of version {VERSION}")
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
        text = json.dumps({"version": VERSION, "required": entries}, indent=1)
        write_atomically(self.path, text.encode() + b"\n")


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT
