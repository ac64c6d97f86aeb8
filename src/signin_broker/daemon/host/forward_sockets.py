"""Where a forward's socket goes, and binding it so that no other user's process can use it.

By default it is `forwards/<name>.sock` beside the daemon's socket, in a folder made
0700 (`$XDG_RUNTIME_DIR/signin-broker/forwards/` unless the daemon's socket is
elsewhere), where a stale socket of an earlier daemon is replaced. A path of the
person's choosing (`forward --socket PATH`) must be absolute, in an existing folder of
the user's that no other user can write to, named without symlinks (the checks of
store.files), and free: nothing there is ever replaced. Either way the socket is 0600
before it listens (bound, made 0600, then listening), so no connection can come in
while its mode is wider.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from ...locations import MAX_SOCKET_PATH_BYTES
from ...store.files import UnsafeStorage, check_private_folder, private_folder
from .instance import InstanceError, remove_stale_socket

FORWARDS_FOLDER = "forwards"
BACKLOG = 64


class ForwardSocketError(Exception):
    """The forward's socket cannot go there; the message says why and what to do."""


def default_forward_path(daemon_socket: Path, name: str) -> Path:
    """A forward's socket when no path is given: in `forwards/` beside the daemon's."""
    return daemon_socket.parent / FORWARDS_FOLDER / f"{name}.sock"


class ForwardSocket:
    """A forward's listening socket, bound at its path; removed only if still the one bound."""

    def __init__(self, path: Path, *, own_folder: bool) -> None:
        if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
            raise ForwardSocketError(
                f"{path} is longer than {MAX_SOCKET_PATH_BYTES} bytes; choose a shorter path"
            )
        try:
            _prepare_folder(path, own_folder=own_folder)
        except UnsafeStorage as error:
            said = str(error).replace("--state-dir", "--forward-socket")  # store.files' words
            raise ForwardSocketError(said) from None
        path = Path(os.path.normpath(path))  # its folder is named without symlinks: the same
        self.path = path
        self.listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listening.bind(os.fspath(path))
            path.chmod(0o600)  # before listen(): until then every connect() is refused
            self._identity = _identity(os.lstat(path))
            self.listening.listen(BACKLOG)
            self.listening.setblocking(False)
        except OSError as error:
            self.listening.close()
            raise ForwardSocketError(f"cannot listen at {path}: {error.strerror}") from None

    def remove(self) -> None:
        """Unlink the socket file, unless something else took its place meanwhile."""
        with contextlib.suppress(OSError):
            if _identity(os.lstat(self.path)) == self._identity:
                self.path.unlink()


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """What tells the socket bound from a file put in its place (inode numbers are reused)."""
    return (info.st_dev, info.st_ino, info.st_ctime_ns, stat.S_IFMT(info.st_mode))


def _prepare_folder(path: Path, *, own_folder: bool) -> None:
    """Make the default folder private, or check the person's; clear the way for the socket."""
    if own_folder:
        private_folder(path.parent, with_ancestors=True)
        try:
            remove_stale_socket(path)  # left by an earlier daemon, in the daemon's own folder
        except InstanceError as error:
            raise ForwardSocketError(str(error)) from None
        return
    if not path.is_absolute():
        raise ForwardSocketError(f"the forward's socket path must be absolute, not {path}")
    folder = path.parent
    if not folder.is_dir():
        raise ForwardSocketError(f"folder {folder} does not exist; create it (mode 0700) first")
    if os.path.realpath(folder) != os.path.normpath(folder):
        raise ForwardSocketError(f"{folder} is reached through a symlink; name the real folder")
    check_private_folder(folder)
    if os.path.lexists(path):
        raise ForwardSocketError(f"{path} exists; remove it or choose another --forward-socket")
