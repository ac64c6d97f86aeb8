"""The aliases a person gave accounts, kept in the state folder as one small JSON file.

An alias names an account id; neither is a secret, so the file is not encrypted, but
it is written as every state file is (0600, in a private folder, by an atomic rename)
and read only as a bounded regular file. Calls block: the session layer makes them
from worker threads.
"""

from __future__ import annotations

import errno
from pathlib import Path

from .files import read_versioned_json, versioned_json, write_atomically

VERSION = 1
MAX_BYTES = 512 * 1024  # 64 aliases of 32 characters, each naming an id of up to 4 KiB


class AliasFile:
    """`aliases.json` in the state folder: {"version": 1, "aliases": {alias: account id}}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, str]:
        """The aliases kept (none when there is no file); OSError or ValueError when unreadable."""
        kind = "an aliases file"
        aliases = read_versioned_json(self.path, "aliases", VERSION, MAX_BYTES, kind)
        if aliases is None:
            return {}
        if not isinstance(aliases, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()
        ):
            raise ValueError(f"{self.path} is not {kind} of version {VERSION}")
        return dict(aliases)

    def save(self, aliases: dict[str, str]) -> None:
        """Write all the aliases at once, replacing the file atomically.

        OSError, and nothing written, for more than `load` reads back: a file it would
        refuse at the next start would lose every alias then, not this one now.
        """
        data = versioned_json("aliases", VERSION, dict(sorted(aliases.items())))
        if len(data) > MAX_BYTES:
            raise OSError(errno.EFBIG, f"the aliases would take over {MAX_BYTES} bytes")
        write_atomically(self.path, data)
