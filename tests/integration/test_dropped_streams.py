"""Event streams opened and dropped, and one-shot JSON calls, leave nothing behind.

500 WatchEvents streams opened and dropped took the daemon's RSS from 61 to 79 MB,
kept after 15 s: grpclib kept every lost connection's handler until ten more
connections came (one it never served, a JSON call's or a refused caller's, for good),
and with it each cancelled call's traceback: every frame of the call, its HTTP/2
stream and the watcher's event queue. Here the real daemon counts its own live
objects (support.daemon_objects) while streams are held, and again once they are
dropped: killed callers, callers that cancel their streams and keep the connection,
streams on one shared connection, then JSON calls of a connection each.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker.daemon.api.transport import MAX_CALLS_PER_CONNECTION
from signin_broker_testing.daemon import short_temp_dir
from support.daemon_objects import CountedDaemon

# Per stream, in the daemon: what each watcher's call holds while it runs, and its HTTP/2
# stream (h2 forgets a connection's closed streams when it next counts its open ones:
# one may stay while its connection does).
PER_CALL = (
    "signin_broker.session.accounts.events.Subscription",
    "grpclib.server.Stream",
    "grpclib.protocol.Stream",
)
PER_STREAM = (*PER_CALL, "h2.stream.H2Stream")
SETTLE_SECONDS = 15  # for the calls of what was dropped to end: milliseconds, on a quiet machine
PER_CONNECTION = (
    "signin_broker.daemon.api.connection_calls.ConnectionCalls",
    "grpclib.server.Handler",
)

# An app in any language: generated stubs, a stream per channel (each its own connection
# unless `shared`), the snapshot read, then held until killed; `cancel` ends the streams
# and keeps the connection open.
HOLDER = r"""
import asyncio, sys
import grpc
from signin_broker.v1 import broker_pb2 as pb, broker_pb2_grpc as pb_grpc

async def main(socket_path, streams, how):
    target = f"unix:{socket_path}"
    shared = grpc.aio.insecure_channel(target) if how != "own" else None
    own = [("grpc.use_local_subchannel_pool", 1)]
    calls = []
    for _ in range(streams):
        channel = shared or grpc.aio.insecure_channel(target, options=own)
        calls.append(pb_grpc.TokenBrokerStub(channel).WatchEvents(pb.WatchEventsRequest()))
    for call in calls:
        await call.read()
    print("watching", flush=True)
    if how == "cancel":
        for call in calls:
            call.cancel()
        await pb_grpc.TokenBrokerStub(shared).GetStatus(pb.GetStatusRequest())
        print("cancelled", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
"""


@pytest.fixture(scope="module")
def daemon() -> Iterator[CountedDaemon]:
    """One daemon for the module: each test leaves it with no stream and no extra connection."""
    folder = short_temp_dir()
    with CountedDaemon(folder / "run" / "broker.sock") as running:
        running.at_start = running.objects()  # the daemon's own watcher, say
        yield running  # type: ignore[misc]
    shutil.rmtree(folder, ignore_errors=True)


def hold(daemon: CountedDaemon, streams: int, how: str, until: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(daemon.socket_path), str(streams), how],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    for line in holder.stdout:
        if line.strip() == until:
            return holder
    raise AssertionError(f"the holder ended before {until!r}: exit {holder.wait()}")


def beyond(daemon: CountedDaemon, counts: Counter[str], kinds: tuple[str, ...]) -> dict[str, int]:
    """How many objects of these kinds the daemon holds beyond those it had when it started."""
    more = {name: counts[name] - daemon.at_start[name] for name in kinds}
    return {name: number for name, number in more.items() if number}


def nothing_left(daemon: CountedDaemon, kinds: tuple[str, ...], what: str) -> None:
    """Wait until the daemon holds no more objects of these kinds than at its start."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while left := beyond(daemon, daemon.objects(), kinds):
        assert time.monotonic() < deadline, f"{what}: still {left} after {SETTLE_SECONDS} s"
        time.sleep(0.1)


def drop(holders: list[subprocess.Popen[str]]) -> None:
    for holder in holders:
        holder.kill()
        holder.wait()


def test_streams_of_killed_apps_leave_nothing_behind(daemon: CountedDaemon) -> None:
    holders = [hold(daemon, 50, "own", "watching") for _ in range(2)]  # 64 a process at most
    holders.append(hold(daemon, MAX_CALLS_PER_CONNECTION, "shared", "watching"))
    try:
        held = daemon.objects()
    finally:
        drop(holders)
    streams = beyond(daemon, held, PER_STREAM)
    assert streams == dict.fromkeys(PER_STREAM, 100 + MAX_CALLS_PER_CONNECTION), streams
    nothing_left(daemon, (*PER_STREAM, *PER_CONNECTION), "no stream's or connection's objects")


def test_streams_cancelled_on_a_connection_that_stays_leave_nothing_behind(
    daemon: CountedDaemon,
) -> None:
    holder = hold(daemon, MAX_CALLS_PER_CONNECTION, "cancel", "cancelled")
    try:
        nothing_left(daemon, PER_CALL, "no call's objects, its connection still open")
        assert beyond(daemon, daemon.objects(), ("h2.stream.H2Stream",)) in (
            {},
            {"h2.stream.H2Stream": 1},
        )
    finally:
        drop([holder])
    nothing_left(daemon, (*PER_STREAM, *PER_CONNECTION), "no stream's or connection's objects")


def test_json_calls_of_a_connection_each_leave_nothing_behind(daemon: CountedDaemon) -> None:
    request = (
        b"POST /signin_broker.v1.TokenBroker/GetStatus HTTP/1.1\r\nHost: broker\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    for _ in range(300):  # as `signin-broker token` and curl call: a connection each
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(daemon.socket_path))
            conn.sendall(request)
            answer = b"".join(iter(lambda conn=conn: conn.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    nothing_left(daemon, PER_CONNECTION, "no JSON connection's handler")


def test_a_stop_with_idle_connections_and_a_stream_open_is_clean(socket_path: Path) -> None:
    """Each connection let go as it closes must not upset the server's own close at the stop
    (an idle one left grpclib's set as grpclib went through it: RuntimeError, exit 1)."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
    with CountedDaemon(socket_path) as daemon, BrokerClient(socket_path) as client:
        watching = client.watch_events()
        next(watching)  # the snapshot: a stream open on its connection
        idle = [socket.socket(socket.AF_UNIX) for _ in range(5)]
        for conn in idle:  # HTTP/2 connections that make no call
            conn.connect(str(socket_path))
            conn.sendall(preface)
            conn.recv(9)  # the daemon's settings: it took the connection as HTTP/2
        try:
            assert daemon.stop() == 0, daemon.output()
        finally:
            for conn in idle:
                conn.close()
    assert "Traceback" not in daemon.output()
