"""A real Secret Service for tests: a private D-Bus session bus with gnome-keyring on it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.real import unavailable

KEYRING_PASSWORD = "test-keyring-password"


@contextmanager
def secret_service(home: Path, *, unlock: bool = True) -> Iterator[dict[str, str]]:
    """Start dbus-daemon and gnome-keyring-daemon for a private home; yield the env to use.

    The keyring file lives under home, so a second `secret_service(home)` unlocks the
    same keyring, as a user's next login would; with unlock=False it stays locked, as
    after a login that did not unlock it (no password given, no prompt to ask for one).
    """
    if not (shutil.which("dbus-daemon") and shutil.which("gnome-keyring-daemon")):
        unavailable("the Secret Service test needs Debian's dbus and gnome-keyring")
    home.mkdir(mode=0o700, exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_RUNTIME_DIR": str(home),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
    }
    bus = subprocess.run(
        ["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
        capture_output=True, text=True, env=env, check=True, timeout=30,
    )  # fmt: skip
    address, bus_pid = bus.stdout.split()
    env["DBUS_SESSION_BUS_ADDRESS"] = address
    try:
        subprocess.run(
            ["gnome-keyring-daemon", *(["--unlock"] if unlock else []), "--components=secrets",
             "--daemonize"],
            input=KEYRING_PASSWORD if unlock else "", capture_output=True, text=True, env=env,
            check=True, timeout=30,
        )  # fmt: skip
        yield env
    finally:
        os.kill(int(bus_pid), signal.SIGTERM)  # gnome-keyring leaves with its bus
