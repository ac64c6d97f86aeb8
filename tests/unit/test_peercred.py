"""The kernel's answer about a Unix socket peer, on real sockets and a real peer process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from signin_broker.daemon.callers.identity import identify_caller
from signin_broker.daemon.callers.peercred import open_peer_pidfd, read_peer_credentials


def test_peer_credentials_are_this_process() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        creds = read_peer_credentials(left)
    assert (creds.uid, creds.gid, creds.pid) == (os.geteuid(), os.getegid(), os.getpid())


# A peer in a process of its own: it connects, then lives until its stdin closes.
PEER = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1]); sys.stdin.read()"


@contextmanager
def connected_peer(path: Path) -> Iterator[tuple[subprocess.Popen[bytes], socket.socket]]:
    """A peer process and our end of its connection; the peer has exited when this ends."""
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(30)
        peer = subprocess.Popen([sys.executable, "-c", PEER, str(path)], stdin=subprocess.PIPE)
        try:
            connection, _ = listener.accept()
            with connection:
                yield peer, connection
        finally:
            assert peer.stdin is not None
            peer.stdin.close()
            peer.wait(timeout=30)


def fdinfo_pid(pidfd: int) -> str:
    """The pid the kernel says a pidfd names, or "-1" once that process is gone."""
    lines = Path(f"/proc/self/fdinfo/{pidfd}").read_text().splitlines()
    return next(line for line in lines if line.startswith("Pid:")).split()[1]


def test_pidfd_pins_the_peer_where_the_kernel_offers_it(folder: Path) -> None:
    """The pidfd names the peer while it lives and still names it, gone, after it exits.

    That is what makes pid reuse harmless: the peer's pid may soon be another process's,
    its pidfd never is.
    """
    kernel = tuple(int(part) for part in os.uname().release.split(".")[:2])
    with connected_peer(folder / "peer.sock") as (peer, connection):
        pidfd = open_peer_pidfd(connection)
        if not sys.platform.startswith("linux") or kernel < (6, 5):
            assert pidfd is None
            return
        assert pidfd is not None
        named_while_alive = fdinfo_pid(pidfd)
        signal.pidfd_send_signal(pidfd, 0)  # alive: no ProcessLookupError
    try:
        assert named_while_alive == str(peer.pid)
        assert fdinfo_pid(pidfd) == "-1"
        with pytest.raises(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, 0)
    finally:
        os.close(pidfd)


def test_identify_caller_reads_the_executable() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        caller = identify_caller(left, connection=7)
    assert caller.pid == os.getpid()
    assert caller.executable == os.path.realpath(sys.executable)
    assert caller.connection == 7
