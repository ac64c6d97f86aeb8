"""Facts about the running daemon that the calls report (GetStatus) or hand out (URLs)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """Facts about this daemon process that GetStatus reports."""

    socket_path: Path
    started_at: float
    web_url: str  # the loopback page, e.g. http://127.0.0.1:8765
    sign_in_url: str  # where the page begins a browser sign-in (web.BEGIN_PATH)
    started_by: str = "manual"  # "socket activation", "service manager" or "manual"
    config_warnings: tuple[str, ...] = ()  # settings' files: what is wrong, said at start
    pid: int = field(default_factory=os.getpid)
