"""Floods of request bytes: refused or bounded, never buffered.

The JSON path: a caller whose GetToken waits (here, for the user's answer under
`new_apps = ask`) and keeps sending would otherwise grow the daemon's buffer without
end. More than one more request's worth closes the connection; the daemon goes on
serving.

The stock services beside the API (health, reflection) were read by grpclib's own
receive, whole, whoever called: six health checks of 190 MiB from an app its policy
denies took the daemon from 58 MB to 1.6 GB, 1.19 GB of it kept. They are refused
before a byte is read now, and the daemon's peak stays where it was (here six calls of
16 MiB, which took it 130 MB higher before).
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest

from signin_broker.daemon.api.json_calls import MAX_BODY_BYTES, MAX_HEAD_BYTES
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.apps import write_policy
from support.identity import Script
from support.memory import MB, resident_bytes
from support.signin import signed_in_daemon

FLOOD_MIB, PARALLEL = 16, 6
# A denied app's calls of `size` bytes each, in parallel, each on a channel of its own; it
# prints their status codes. The message is one string field of that size, as the
# health check's and reflection's requests have.
STOCK_FLOOD = r"""
import json, os, sys, threading
import grpc

socket_path, path, size, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
length = bytearray()
rest = size
while True:
    length.append((rest & 0x7F) | (0x80 if rest > 0x7F else 0))
    rest >>= 7
    if not rest:
        break
message = bytes([0x0A]) + bytes(length) + b"a" * size
codes = []


def call():
    options = [("grpc.max_send_message_length", -1)]
    with grpc.insecure_channel(f"unix:{socket_path}", options=options) as channel:
        try:
            if "Reflection" in path:
                list(channel.stream_stream(path)(iter([message]), timeout=60))
            else:
                channel.unary_unary(path)(message, timeout=60)
            codes.append("OK")
        except grpc.RpcError as error:
            codes.append(error.code().name)


threads = [threading.Thread(target=call) for _ in range(calls)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(codes), flush=True)
# grpc's exit can wait on a stream's sender thread still holding the refused 16 MiB
os._exit(0)
"""

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


@pytest.mark.parametrize(
    "path",
    [
        "/grpc.health.v1.Health/Check",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ],
)
def test_a_denied_apps_flood_of_stock_calls_is_refused_unread(
    daemon: DaemonProcess, folder: Path, path: str
) -> None:
    flood = Script(folder / "apps", "flood", STOCK_FLOOD)
    write_policy(daemon.socket_path, flood.rule("deny"))
    started = resident_bytes(daemon.pid, peak_from_now=True)
    codes = flood.run(str(daemon.socket_path), path, str(FLOOD_MIB * MB), str(PARALLEL))
    peak = resident_bytes(daemon.pid, peak=True)
    assert peak - started < 20 * MB, (started // MB, peak // MB)
    assert codes == ["PERMISSION_DENIED"] * PARALLEL
    assert daemon.alive


def _status(socket_path: Path) -> str:
    from signin_broker.cli._json_client import json_call

    status, body = json_call(str(socket_path), "/signin_broker.v1.TokenBroker/GetStatus", b"{}", 10)
    assert status == 200
    return body.decode()
