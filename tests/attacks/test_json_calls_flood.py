"""The JSON path: bytes sent ahead of a call that waits are bounded, not buffered.

A caller whose GetToken waits (here, for the user's answer under `new_apps = ask`) and
keeps sending would otherwise grow the daemon's buffer without end. More than one more
request's worth closes the connection; the daemon goes on serving.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from signin_broker.daemon.api.json_calls import MAX_BODY_BYTES, MAX_HEAD_BYTES
from signin_broker_testing import StubProvider
from support.signin import signed_in_daemon

REQUEST = (
    b"POST /signin_broker.v1.TokenBroker/GetToken HTTP/1.1\r\nHost: broker\r\n"
    b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
)


def test_a_flood_behind_a_waiting_call_closes_the_connection(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "ask", "--ask-timeout-seconds", "60")
    try:
        with socket.socket(socket.AF_UNIX) as caller:
            caller.settimeout(20)
            caller.connect(str(socket_path))
            caller.sendall(REQUEST)  # waits for the user's answer: an unknown app under ask
            daemon.expect_log(msg="an app waits for the user's answer")
            chunk = b"x" * 65536
            sent = 0
            try:
                while sent <= 4 * (MAX_HEAD_BYTES + MAX_BODY_BYTES):  # bounded
                    caller.sendall(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while still sending: what is expected
            answer = b""
            with contextlib.suppress(ConnectionResetError):
                answer = caller.recv(65536)
            assert answer == b"", answer[:200]  # closed, nothing answered
        assert daemon.alive
        assert '"version"' in _status(socket_path)  # still serving (this app sees nothing yet)
    finally:
        daemon.stop()


def _status(socket_path: Path) -> str:
    from signin_broker.cli.quick import json_call

    status, body = json_call(str(socket_path), "/signin_broker.v1.TokenBroker/GetStatus", b"{}", 10)
    assert status == 200
    return body.decode()
