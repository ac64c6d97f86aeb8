"""The kernel lookup behind the page's uid check names only a held socket.

A connection's client end that no process holds any more (reset, or closed and left
in FIN_WAIT or TIME_WAIT, which the kernel shows as uid 0) is nobody's, and a socket
that merely shares the client's address (a listener on the same port) is not taken
for it. The page refuses whatever this lookup cannot name.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
from collections.abc import Iterator
from contextlib import closing

import pytest

from signin_broker.daemon.callers.peercred import loopback_tcp_peer_uid

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sock_diag")


def loopback(family: socket.AddressFamily) -> str:
    host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    try:
        with socket.socket(family) as probe:
            probe.bind((host, 0))
    except OSError:
        pytest.skip(f"no {host} here")
    return host


@pytest.fixture(params=[socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
def listener(request: pytest.FixtureRequest) -> Iterator[socket.socket]:
    family = request.param
    with socket.socket(family) as server:
        server.bind((loopback(family), 0))
        server.listen()
        yield server


def connection(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A client socket connected to listener, and the server's end of it."""
    client = socket.socket(listener.family)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    client.connect(listener.getsockname())
    served, _ = listener.accept()
    return client, served


def ends(served: socket.socket) -> tuple[tuple[str, int], tuple[str, int]]:
    """(client, server) addresses as the server sees them."""
    return served.getpeername()[:2], served.getsockname()[:2]


def bound_beside_a_client(
    listener: socket.socket,
) -> tuple[socket.socket, socket.socket, socket.socket]:
    """A connection's two ends, and a socket bound to its client's address beside it.

    The kernel may give a client a port that another process listens on at the same
    address (a connect shares ports with other tuples): no socket can be bound there
    beside it, so such a connection is given up for another (a few tries at most).
    """
    for _ in range(20):
        client, served = connection(listener)
        lookalike = socket.socket(listener.family)
        lookalike.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lookalike.bind(client.getsockname()[:2])
        except OSError as error:
            for end in (lookalike, client, served):
                end.close()
            if error.errno != errno.EADDRINUSE:
                raise
            continue
        return client, served, lookalike
    raise AssertionError("every client port was another listener's")


def reset(client: socket.socket) -> None:
    """Close with SO_LINGER 0: an RST, and the client's socket is gone at once."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def test_only_a_client_socket_a_process_holds_is_named(listener: socket.socket) -> None:
    held, served = connection(listener)
    with closing(held), closing(served):
        assert loopback_tcp_peer_uid(*ends(served)) == os.geteuid()

    # Closed by the client (FIN): the kernel keeps its end a while, held by no process
    # (FIN_WAIT2, then TIME_WAIT, which /proc/net/tcp shows as uid 0: root's).
    closed, served = connection(listener)
    peer, local = ends(served)
    closed.close()
    assert loopback_tcp_peer_uid(peer, local) is None
    served.close()
    assert loopback_tcp_peer_uid(peer, local) is None

    # Reset: no client end at all; nor is a listener that now holds its address taken
    # for it (sock_diag's exact lookup falls back to a listener on the local port).
    # The lookalike binds the address while the client still holds it (both reuse it),
    # so no other process's connect can take the port in between; it listens once the
    # client is gone.
    gone, served, lookalike = bound_beside_a_client(listener)
    with closing(served), lookalike:  # the owner's
        peer, local = ends(served)
        reset(gone)
        assert loopback_tcp_peer_uid(peer, local) is None
        lookalike.listen()
        assert loopback_tcp_peer_uid(peer, local) is None
