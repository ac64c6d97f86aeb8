"""What a test daemon keeps on disk and in its keyring, read from outside the daemon."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from signin_broker.testing.daemon import DaemonProcess


def state_files(socket_path: Path) -> list[Path]:
    return sorted((socket_path.parent / "state" / "signin-broker" / "accounts").glob("*.state"))


def keyring_has(daemon: DaemonProcess, name: str) -> bool:
    """Whether the daemon's keyring (as its environment selects it) holds this entry."""
    code = f"import keyring; print(keyring.get_password('signin-broker', {name!r}) is not None)"
    result = subprocess.run(
        [sys.executable, "-c", code], env=daemon.env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip() == "True"
