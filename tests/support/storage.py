"""A test daemon's state folder, prepared before it starts, as an attacker would find it."""

from __future__ import annotations

from pathlib import Path


def state_dir(socket_path: Path) -> Path:
    """The state folder of a DaemonProcess serving socket_path (its XDG_STATE_HOME)."""
    return socket_path.parent / "state" / "signin-broker"


def make_state_dir(socket_path: Path) -> Path:
    """Create the socket and state folders 0700, as the daemon would; the state folder."""
    state = state_dir(socket_path)
    for folder in (socket_path.parent, state.parent, state):
        folder.mkdir(mode=0o700, exist_ok=True)
    return state
