"""The aliases a person gave accounts, kept in the state folder as one small JSON file.

An alias names an account id; neither is a secret, so the file is not encrypted, but
it is written as every state file is (0600, in a private folder, by an atomic rename)
and read only as a bounded regular file. Beside the aliases, `hiding` keeps, for an
alias the person gave over other accounts' login (`accounts alias --force`), which
accounts it may hide; a file without it (written before it was kept) hides none. Calls
block: the session layer makes them from worker threads.
"""

from __future__ import annotations

import errno
from pathlib import Path

from .files import read_versioned_document, versioned_json, write_atomically

VERSION = 1
MAX_BYTES = 512 * 1024  # 64 aliases of 32 characters, each naming an id of up to 4 KiB

Aliases = dict[str, str]  # alias -> the account id it names
Hiding = dict[str, tuple[str, ...]]  # alias -> the accounts whose login it may hide


class AliasFile:
    """`aliases.json` in the state folder: {"version": 1, "aliases": {...}, "hiding": {...}}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> tuple[Aliases, Hiding]:
        """The aliases kept, and what each may hide; OSError or ValueError when unreadable."""
        kind = "an aliases file"
        document = read_versioned_document(self.path, "aliases", VERSION, MAX_BYTES, kind)
        if document is None:
            return {}, {}
        aliases, hiding = document["aliases"], document.get("hiding", {})
        if not (
            isinstance(aliases, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items())
            and isinstance(hiding, dict)
            and all(
                isinstance(ids, list) and all(isinstance(i, str) for i in ids)
                for ids in hiding.values()
            )
        ):
            raise ValueError(f"{self.path} is not {kind} of version {VERSION}")
        return dict(aliases), {str(alias): tuple(ids) for alias, ids in hiding.items()}

    def save(self, aliases: Aliases, hiding: Hiding) -> None:
        """Write all the aliases at once, replacing the file atomically.

        OSError, and nothing written, for more than `load` reads back: a file it would
        refuse at the next start would lose every alias then, not this one now.
        """
        data = versioned_json(
            "aliases",
            VERSION,
            dict(sorted(aliases.items())),
            hiding={alias: sorted(ids) for alias, ids in sorted(hiding.items()) if ids},
        )
        if len(data) > MAX_BYTES:
            raise OSError(errno.EFBIG, f"the aliases would take over {MAX_BYTES} bytes")
        write_atomically(self.path, data)
