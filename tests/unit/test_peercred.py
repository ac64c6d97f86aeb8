"""The kernel's answer about a Unix socket peer, on a real socket pair."""

from __future__ import annotations

import os
import socket
import sys

from signin_broker.daemon.callers import CallerRegistry, identify_caller
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
    if pidfd is not None:  # Linux 6.5+
        os.close(pidfd)


def test_identify_caller_reads_the_executable() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        caller = identify_caller(left, connection=7)
    assert caller.pid == os.getpid()
    assert caller.executable == os.path.realpath(sys.executable)
    assert caller.connection == 7


def test_registry_maps_grpc_peer_strings_and_forgets_closed_connections() -> None:
    registry = CallerRegistry()
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        caller = identify_caller(left, connection=1)
    registry.register("signin-broker.abc", caller)
    assert registry.lookup("unix-abstract:signin-broker.abc") is caller
    assert registry.lookup("unix:") is None
    assert registry.lookup("unix:/tmp/signin-broker.abc") is None
    registry.unregister("signin-broker.abc")
    assert registry.lookup("unix-abstract:signin-broker.abc") is None
