"""The kernel's answer about a Unix socket peer, on a real socket pair."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from signin_broker.daemon.callers import identify_caller
from signin_broker.daemon.peercred import open_peer_pidfd, read_peer_credentials


def test_peer_credentials_are_this_process() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        creds = read_peer_credentials(left)
    assert (creds.uid, creds.gid, creds.pid) == (os.geteuid(), os.getegid(), os.getpid())


def test_pidfd_pins_the_peer_where_the_kernel_offers_it() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        pidfd = open_peer_pidfd(left)
    kernel = tuple(int(part) for part in os.uname().release.split(".")[:2])
    if not sys.platform.startswith("linux") or kernel < (6, 5):
        assert pidfd is None
        return
    assert pidfd is not None
    try:  # the pidfd names this very process
        fdinfo = Path(f"/proc/self/fdinfo/{pidfd}").read_text()
        assert f"Pid:\t{os.getpid()}" in fdinfo
    finally:
        os.close(pidfd)


def test_identify_caller_reads_the_executable() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        caller = identify_caller(left, connection=7)
    assert caller.pid == os.getpid()
    assert caller.executable == os.path.realpath(sys.executable)
    assert caller.connection == 7
