"""A test daemon's state folder as an attacker, or a bad day, leaves it before or while it runs."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.real import unavailable


def state_dir(socket_path: Path) -> Path:
    """The state folder of a DaemonProcess serving socket_path (its XDG_STATE_HOME)."""
    return socket_path.parent / "state" / "signin-broker"


def make_state_dir(socket_path: Path) -> Path:
    """Create the socket and state folders 0700, as the daemon would; the state folder."""
    state = state_dir(socket_path)
    for folder in (socket_path.parent, state.parent, state):
        folder.mkdir(mode=0o700, exist_ok=True)
    return state


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A small tmpfs mounted at path (0700) while the block runs: a disk that can fill up."""
    for folder in (*reversed(path.parents[:2]), path):  # private, as the daemon wants
        folder.mkdir(mode=0o700, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs (root is needed): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


@contextmanager
def filled(folder: Path) -> Iterator[None]:
    """The file system of folder full (one file takes what is left) while the block runs."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: nothing left to flush at close
        for _ in range(100_000):  # bounded: 6 GB at most, a tmpfs fills long before
            try:
                out.write(b"\0" * 65536)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
    try:
        yield
    finally:
        filler.unlink()


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """The folder read-only while the block runs, for every file opened from now on.

    A read-only bind mount of it over itself: the folder's own file system cannot be
    remounted read-only while a process holds a file open for writing (the daemon's
    audit database), and a bind mount's flag is its own.
    """
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)
