"""What a daemon claims at start: its socket folder, instance lock and socket, and its web port.

The lock (an flock on a file beside the socket) is what makes an instance the owner of
a socket path: the kernel drops it when the owner dies, even by SIGKILL, so a socket
file found while holding the lock is stale and is replaced. A second instance finds
the lock taken and stops with a clear message.

Under socket activation the service manager binds the socket and passes it on
(`adopt`); the daemon then takes the same lock, checks the socket is a named Unix
stream socket in a private folder, and leaves the socket file to its owner on exit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from ...locations import MAX_SOCKET_PATH_BYTES
from ..options import HttpAddress

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024  # connections the kernel queues while the daemon is busy


class InstanceError(Exception):
    """The daemon cannot take its socket; the message says why and what to do."""


class AlreadyRunning(InstanceError):
    """Another daemon owns the socket."""


@dataclass
class Instance:
    """The claimed socket of this daemon and what belongs to it."""

    socket_path: Path
    listening: socket.socket
    _lock_fd: int
    activated: bool = False  # the socket came from the service manager, which keeps it

    def withdraw(self) -> None:
        """Remove the socket file of the daemon's own (an idle exit): new callers find none.

        What is queued on the listening socket already is still taken in; the lock is
        kept until `release`, so the next daemon starts only once this one is gone.
        """
        if not self.activated:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def release(self) -> None:
        """Remove the sockets and drop the lock; the socket path is free for a new daemon."""
        self.listening.close()
        if not self.activated:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        os.close(self._lock_fd)


def claim(socket_path: Path) -> Instance:
    """Take ownership of socket_path: private folder, lock, stale-socket takeover, bind."""
    if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH_BYTES:
        raise InstanceError(
            f"socket path {socket_path} is longer than {MAX_SOCKET_PATH_BYTES} bytes, "
            "the limit of a Unix socket address; choose a shorter path"
        )
    lock_fd = _lock_folder(socket_path)
    try:
        _refuse_if_served(socket_path)
        remove_stale_socket(socket_path)  # stale: its owner died without cleaning up
        listening = _bind(socket_path)
    except BaseException:
        os.close(lock_fd)
        raise
    return Instance(socket_path, listening, lock_fd)


def adopt(fd: int) -> Instance:
    """Serve the listening socket a service manager passed (systemd socket activation)."""
    listening = socket.socket(fileno=fd)
    try:
        socket_path = _activated_path(listening)
        lock_fd = _lock_folder(socket_path)
    except BaseException:
        listening.close()
        raise
    try:
        if socket_path.stat().st_uid == os.geteuid():
            socket_path.chmod(0o600)  # whatever the unit said: the user's alone
    except BaseException:
        os.close(lock_fd)
        listening.close()
        raise
    listening.setblocking(False)
    return Instance(socket_path, listening, lock_fd, activated=True)


def _activated_path(listening: socket.socket) -> Path:
    if listening.family != socket.AF_UNIX or listening.type != socket.SOCK_STREAM:
        raise InstanceError("the socket passed by the service manager is not a Unix stream socket")
    if not listening.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        raise InstanceError(
            "the socket passed by the service manager is not listening (use Accept=no)"
        )
    name = listening.getsockname()
    if not isinstance(name, str) or not name or name.startswith("\0"):
        raise InstanceError(
            "the socket passed by the service manager has no file name; an abstract socket"
            " has no access control and is refused"
        )
    return Path(name)


def _lock_folder(socket_path: Path) -> int:
    """Check the socket's folder is private and take the instance lock in it."""
    folder = socket_path.parent
    _ensure_private_folder(folder)
    lock_fd = _open_lock_file(folder / f".{socket_path.name}.lock")
    try:
        _lock(lock_fd, socket_path)
    except BaseException:
        os.close(lock_fd)
        raise
    return lock_fd


def _open_lock_file(lock_path: Path) -> int:
    """The lock file, never through a symlink and only if it is a regular file of ours.

    The daemon writes its pid into it: opened through a planted symlink, that write
    would land in whatever file the link names.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        lock_fd = os.open(lock_path, flags, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InstanceError(
                f"lock file {lock_path} is a symlink; remove it (rm {lock_path}) and start again"
            ) from None
        raise InstanceError(f"cannot open lock file {lock_path}: {error.strerror}") from None
    info = os.fstat(lock_fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(lock_fd)
        raise InstanceError(
            f"lock file {lock_path} is not a regular file of yours; remove it and start again"
        )
    return lock_fd


def _ensure_private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_socket_folder(folder)


def check_socket_folder(folder: Path) -> None:
    """Refuse (InstanceError) a socket folder that is not a directory of the user's alone."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise InstanceError(f"socket folder {folder} is not a directory (a symlink?)")
    if info.st_uid != os.geteuid():
        raise InstanceError(
            f"socket folder {folder} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
        )
    if info.st_mode & 0o077:
        raise InstanceError(
            f"socket folder {folder} is open to other users"
            f" (mode {stat.S_IMODE(info.st_mode):04o});"
            f" run `chmod 700 {folder}` or choose another --socket"
        )


def _lock(lock_fd: int, socket_path: Path) -> None:
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(lock_fd, 32, 0).decode(errors="replace").strip() or "unknown"
        raise AlreadyRunning(
            f"another signin-brokerd (pid {owner}) already serves {socket_path}; "
            "stop it first, or pass another --socket"
        ) from None
    os.ftruncate(lock_fd, 0)
    os.pwrite(lock_fd, f"{os.getpid()}\n".encode(), 0)


def _refuse_if_served(socket_path: Path) -> None:
    """Belt and braces: a process answering on the socket without our lock still owns it."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(os.fspath(socket_path))
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return
        raise InstanceError(f"cannot check socket {socket_path}: {error.strerror}") from error
    finally:
        probe.close()
    raise AlreadyRunning(f"another process already serves {socket_path}; stop it first")


def remove_stale_socket(path: Path) -> None:
    """Remove a socket nobody serves any more; InstanceError when something else is there."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise InstanceError(
            f"{path} exists and is not a socket; move it away or choose another --socket"
        )
    path.unlink()


def _bind(socket_path: Path) -> socket.socket:
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the socket is born 0600: no window with a wider mode
    try:
        listening.bind(os.fspath(socket_path))
    except BaseException:
        listening.close()
        raise
    finally:
        os.umask(previous)
    listening.listen(LISTEN_BACKLOG)
    listening.setblocking(False)
    return listening


def listen_loopback(address: HttpAddress) -> socket.socket:
    """Bind the page's port; if another program holds it, take a free port instead.

    On a computer with several users, each one's daemon wants 127.0.0.1:8765. The
    provider accepts any port on a loopback redirect URI (RFC 8252 section 7.3) and
    clients learn the real address from the daemon, so a busy port is no failure.
    """
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address.host, address.port))
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            sock.close()
            raise
        log.warning(
            "the sign-in page's port is taken; using a free one",
            extra={"wanted": str(address)},
        )
        sock.bind((address.host, 0))
    sock.listen(64)
    sock.setblocking(False)
    return sock


def loopback_base_url(sock: socket.socket) -> str:
    """The http:// origin of the bound web port, e.g. http://127.0.0.1:8765."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
