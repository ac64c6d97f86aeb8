"""A notify-send of the test's own on the daemon's PATH, to read the desktop notifications sent."""

from __future__ import annotations

import os
from pathlib import Path


class Notifications:
    """Every notification the daemon sends, as (summary, body); `env` puts the fake first."""

    def __init__(self, folder: Path) -> None:
        self._sent = folder / "notified"
        fake_bin = folder / "bin"
        fake_bin.mkdir(exist_ok=True)
        script = fake_bin / "notify-send"
        script.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$2" "$3" >> {self._sent}\n')
        script.chmod(0o755)
        self.env = {"PATH": f"{fake_bin}:{os.environ['PATH']}"}

    def sent(self) -> list[tuple[str, str]]:
        if not self._sent.exists():
            return []
        lines = self._sent.read_text().splitlines()
        return [(summary, body) for summary, _, body in (line.partition("|") for line in lines)]
