"""Half-sent requests must neither starve the page nor stay open.

Another user's connections are closed when they are accepted, before they count
against any limit; the owner's own get a few seconds to send their request headers.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from signin_broker_testing.daemon import DaemonProcess
from support.fuzzing import troubled_lines
from support.other_user import AS_USER, other_user

SLOW = 80  # more than the page serves at once (64)
BOUND_SECONDS = 20.0  # far above the header deadline: a bound, not a timing


def page_address(daemon: DaemonProcess) -> tuple[str, int]:
    parts = urlsplit(daemon.web_url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def half_sent(address: tuple[str, int]) -> socket.socket:
    """A connection whose request lacks its final empty line: the page waits for more."""
    conn = socket.create_connection(address, timeout=5)
    conn.sendall(f"GET / HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n".encode())
    return conn


def answered_then_half_sent(address: tuple[str, int]) -> socket.socket:
    """A kept-alive connection: one whole request answered, then a half-sent one."""
    conn = socket.create_connection(address, timeout=5)
    conn.sendall(f"GET / HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(65536)
        assert chunk, answer
        answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int(
        next(
            line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        ).split(b":")[1]
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk
        body += chunk
    conn.sendall(f"GET / HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n".encode())
    return conn


def closed_by_peer(conns: list[socket.socket], bound: float) -> int:
    """How many of conns the other end closes (EOF or reset) within bound seconds."""
    waiting = set(conns)
    deadline = time.monotonic() + bound
    while waiting and time.monotonic() < deadline:
        readable, _, _ = select.select(list(waiting), [], [], 0.2)
        for conn in readable:
            try:
                if conn.recv(65536):
                    continue
            except OSError:
                pass
            waiting.discard(conn)
    return len(conns) - len(waiting)


@pytest.fixture(params=["127.0.0.1", "::1"], ids=["ipv4", "ipv6"])
def page_daemon(request: pytest.FixtureRequest, socket_path: Path) -> Iterator[DaemonProcess]:
    """A daemon whose page listens on IPv4 or IPv6 loopback."""
    host = request.param
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
    except OSError:
        pytest.skip(f"no {host} here")
    address = f"[{host}]:0" if ":" in host else f"{host}:0"
    with DaemonProcess(socket_path, "--http", address) as daemon:
        yield daemon


def test_another_users_half_sent_requests_do_not_starve_the_page(
    page_daemon: DaemonProcess, tmp_path: Path
) -> None:
    user = other_user()
    daemon = page_daemon
    spec = tmp_path / "slow.json"
    spec.write_text(
        json.dumps({"address": list(page_address(daemon)), "count": SLOW, "wait": BOUND_SECONDS})
    )
    attacker = subprocess.Popen(
        [sys.executable, str(AS_USER), user, str(spec), "http-slow"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert attacker.stdout is not None
        assert json.loads(attacker.stdout.readline()) == {"opened": SLOW}
        assert httpx2.get(daemon.web_url + "/", timeout=10).status_code == 200
        assert json.loads(attacker.stdout.readline()) == {"closed": SLOW, "open": 0}
    finally:
        attacker.kill()
        attacker.wait(10)
    assert daemon.alive
    assert not troubled_lines(daemon.lines)


def test_the_owners_own_half_sent_requests_are_closed(daemon: DaemonProcess) -> None:
    kept = answered_then_half_sent(page_address(daemon))  # before the others fill the page
    conns = [kept] + [half_sent(page_address(daemon)) for _ in range(SLOW)]
    try:
        assert closed_by_peer(conns, BOUND_SECONDS) == len(conns)
    finally:
        for conn in conns:
            conn.close()
    assert httpx2.get(daemon.web_url + "/", timeout=10).status_code == 200
    assert daemon.alive
    assert not troubled_lines(daemon.lines)
