"""Flow control on the checked transport: what a caller may send before the daemon reads,
what accept() does when descriptors run out, and pausing a connection that is not HTTP/2.

grpclib lets a caller send 4 MiB on a connection, and as much on each call, before the
server reads any of it, and make 100 calls at once; the daemon allows HTTP/2's initial
window (64 KiB: a request is at most 64 KiB and is read as it comes) and 16 calls, in
the first settings it sends. What a call has read of a request it has not all of is
acknowledged, so the window opens again: larger requests may hold 128 KiB at once on
a connection (100 calls of 64 KiB never ended held 6.4 MB).

Out of descriptors, asyncio logs each failed accept() with its traceback, and retries
a second later, a thousand accepts at a time: 69,710 records (51 MB) in 20 s. The
daemon counts them into one record a minute.

The transport pauses writing when an answer outgrows its buffer (a 1 MB JSON answer
to a slow reader): grpclib's pause handler, made for HTTP/2, raised AttributeError
("'CheckedProtocol' object has no attribute 'connection'") in the daemon's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from grpclib.const import Status

from signin_broker.daemon.api.dispatch import MAX_REQUEST_BYTES, ServiceHandlers
from signin_broker.daemon.api.json_calls import JsonCalls
from signin_broker.daemon.api.transport import (
    MAX_CALLS_PER_CONNECTION,
    RECEIVE_WINDOW_BYTES,
    CheckedProtocol,
    CheckedServer,
    ConnectionTable,
    TransportGate,
)
from signin_broker.daemon.apps.gate import AppGate
from signin_broker.daemon.apps.policy import Decision, PolicyFile
from signin_broker.daemon.callers.identity import Caller
from support.stand_ins import SERVICE, StandIns

CALLER = Caller(0, 0, 1, "/usr/bin/app", 1)


@contextlib.asynccontextmanager
async def serving(socket_path: Path, services: list[Any]) -> AsyncIterator[None]:
    """A checked server on the socket, every connection the same caller's."""
    gate = TransportGate(frozenset({0}), ConnectionTable(), lambda sock, number: CALLER)
    server = CheckedServer(services, gate, JsonCalls({}))
    await server.start(path=str(socket_path))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


class Http2:
    """A client's end of one HTTP/2 connection, driven by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.http = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
        self.http.initiate_connection()
        self.settled = False  # the daemon's settings came
        self.ended: dict[int, dict[str, str]] = {}  # the status of each call that ended

    async def until(self, done: Callable[[], bool]) -> None:
        """Send what is due, and take in what comes until `done` (10 s at most)."""
        async with asyncio.timeout(10):
            while True:
                self.writer.write(self.http.data_to_send())
                if done():
                    return
                for event in self.http.receive_data(await self.reader.read(65536)):
                    if isinstance(event, h2.events.RemoteSettingsChanged):
                        self.settled = True
                    answer = (h2.events.ResponseReceived, h2.events.TrailersReceived)
                    if isinstance(event, answer) and "grpc-status" in dict(event.headers):
                        self.ended[event.stream_id] = dict(event.headers)


def test_a_caller_may_send_64_kib_ahead_and_make_16_calls_at_once(tmp_path: Path) -> None:
    async def offered() -> tuple[int, int, int | None]:
        async with serving(tmp_path / "s", []):
            client = Http2(*await asyncio.open_unix_connection(tmp_path / "s"))
            await client.until(lambda: client.settled)  # the daemon's first settings
            client.writer.close()
            settings = client.http.remote_settings
            window = client.http.outbound_flow_control_window
            return window, settings.initial_window_size, settings.max_concurrent_streams

    connection, each_call, calls = asyncio.run(offered())
    assert connection == each_call == RECEIVE_WINDOW_BYTES == 65535
    assert calls == MAX_CALLS_PER_CONNECTION == 16


def test_larger_requests_coming_at_once_on_a_connection_are_bounded(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=30)
    ready = asyncio.Event()
    broker = ServiceHandlers([StandIns()], SERVICE, apps=gate, ready=ready)
    path = f"/{SERVICE.full_name}/GetToken"
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "b"),
               ("content-type", "application/grpc"), ("te", "trailers")]  # fmt: skip
    started = struct.pack(">?I", False, MAX_REQUEST_BYTES) + b"\x0a" * 15_000  # never ended

    async def sent_at_once() -> dict[int, dict[str, str]]:
        ready.set()
        async with serving(tmp_path / "s", [broker]):
            client = Http2(*await asyncio.open_unix_connection(tmp_path / "s"))
            await client.until(lambda: client.settled)
            for stream in (1, 3, 5, 7):  # 60 KiB in all: within the window
                client.http.send_headers(stream, headers)
                client.http.send_data(stream, started)
            await client.until(lambda: len(client.ended) >= 2)
            client.writer.close()
            return client.ended

    ended = asyncio.run(sent_at_once())
    exhausted = str(Status.RESOURCE_EXHAUSTED.value)
    assert {stream: trailers["grpc-status"] for stream, trailers in ended.items()} == {
        5: exhausted,
        7: exhausted,
    }  # the first two wait for the rest of their requests: 128 KiB
    assert "at once on this connection" in ended[5]["grpc-message"]


# A server whose process may open 64 descriptors, behind the handler or not; a child
# (forked before the limit) connects 200 times. It prints the records logged.
OUT_OF_DESCRIPTORS = r"""
import asyncio, json, logging, os, resource, socket, sys, time
from signin_broker.daemon.api.transport import quiet_accept_errors

path, quiet = sys.argv[1], sys.argv[2] == "quiet"
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger().addHandler(handler)
listening = socket.socket(socket.AF_UNIX)
listening.bind(path)
listening.listen(256)
connected, done = os.pipe()
if os.fork() == 0:
    os.close(1)  # the test reads the server's output to its end, not this one's
    os.close(2)
    held = [socket.socket(socket.AF_UNIX) for _ in range(200)]
    for conn in held:
        conn.connect(path)  # queued by the kernel: nothing accepts yet
    os.write(done, b"x")
    time.sleep(5)
    os._exit(0)
os.read(connected, 1)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
asyncio.constants.ACCEPT_RETRY_DELAY = 0.1  # asyncio's 1 s, shortened for the test


async def main():
    loop = asyncio.get_running_loop()
    if quiet:
        loop.set_exception_handler(quiet_accept_errors)
    server = await asyncio.start_unix_server(lambda r, w: None, sock=listening, backlog=256)
    await asyncio.sleep(0.35)  # a few rounds of accept()s
    server.close()


asyncio.run(main())
print(json.dumps(records))
"""


def test_out_of_descriptors_accept_is_logged_once_not_at_every_try(tmp_path: Path) -> None:
    servers = {
        how: subprocess.Popen(
            [sys.executable, "-c", OUT_OF_DESCRIPTORS, str(tmp_path / how), how],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for how in ("asyncio's", "quiet")
    }
    logged: dict[str, list[str]] = {}
    for how, server in servers.items():
        out, err = server.communicate(timeout=30)
        assert server.returncode == 0, err
        logged[how] = json.loads(out)
    assert len(logged["asyncio's"]) > 1  # once a try (3.11: once a connection waiting)
    assert logged["quiet"] == [
        "out of file descriptors: new connections wait in the kernel's queue until some close"
    ]


def test_pausing_a_connection_that_is_not_http2_is_harmless() -> None:
    unused: Any = None
    protocol = CheckedProtocol(unused, unused, unused, gate=unused, json_calls=unused)
    protocol.pause_writing()
    protocol.resume_writing()
