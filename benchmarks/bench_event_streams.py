"""Memory after event streams opened and dropped, beside bare grpcio doing the same.

    python benchmarks/bench_event_streams.py     # prints a table; nothing is asserted

Apps (processes of 50 streams each, every stream on its own connection, with plain
generated stubs as an app in any language has) open `--streams` WatchEvents streams,
read the first message, and are killed; `--settle` seconds later the server's RSS is
read again. Each round does it once more, to show whether memory is reused or grows.
The yardstick is `_yardstick.py` (bare grpcio, the same proto, a stream that sends one
message and waits) taking the same streams in the same run; `python -c pass`'s RSS is
printed beside. Then JSON calls of a connection each, as `signin-broker token` and curl
make them, the broker alone (grpcio speaks no JSON).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_api  # beside this file, as the script's folder is on sys.path
import psutil
from bench_memory import python_pass_rss

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider

STREAMS_PER_APP = 50  # the daemon lets one process hold 64 connections
HOLD = """
import asyncio, sys
import grpc
from signin_broker.v1 import broker_pb2 as pb, broker_pb2_grpc as pb_grpc

async def main(target, count):
    own = [("grpc.use_local_subchannel_pool", 1)]  # a connection per stream, as apps have
    calls = [
        pb_grpc.TokenBrokerStub(grpc.aio.insecure_channel(target, options=own)).WatchEvents(
            pb.WatchEventsRequest()
        )
        for _ in range(count)
    ]
    for call in calls:
        await call.read()
    print("watching", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def streams_opened_and_dropped(
    socket_path: str, pid: int, streams: int, settle: float
) -> tuple[float, float]:
    """RSS (MB) with the streams held, and `settle` seconds after their apps were killed."""
    apps = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOLD,
                f"unix:{socket_path}",
                str(min(STREAMS_PER_APP, streams - first)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for first in range(0, streams, STREAMS_PER_APP)
    ]
    try:
        for app in apps:
            assert app.stdout is not None
            if app.stdout.readline().strip() != "watching":
                raise RuntimeError("an app did not get its streams")
        held = rss_mb(pid)
    finally:
        for app in apps:
            app.kill()
            app.wait()
    time.sleep(settle)
    return held, rss_mb(pid)


def json_calls(socket_path: str, calls: int) -> None:
    request = (
        b"POST /signin_broker.v1.TokenBroker/GetToken HTTP/1.1\r\nHost: broker\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    for _ in range(calls):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(socket_path)
            conn.sendall(request)
            answer = b"".join(iter(lambda conn=conn: conn.recv(65536), b""))
        if not answer.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(f"the JSON call failed: {answer[:100]!r}")


def measured(name: str, socket_path: str, pid: int, options: argparse.Namespace) -> list[str]:
    rest = rss_mb(pid)
    lines = [f"{name:<22} {'at rest':>8} {rest:>8.1f}"]
    for round_number in range(1, options.rounds + 1):
        held, after = streams_opened_and_dropped(socket_path, pid, options.streams, options.settle)
        lines.append(
            f"{'':<22} {'round ' + str(round_number):>8} {held:>8.1f} {after:>10.1f}"
            f" {after - rest:>+10.1f}"
        )
    return lines


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after the drop")
    parser.add_argument("--json-calls", type=int, default=5000)
    options = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="sb-streams-", dir="/tmp"))
    os.environ.update(
        {
            "XDG_CONFIG_HOME": str(folder / "config"),
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_DATA_HOME": str(folder / "data"),
            "XDG_CONFIG_DIRS": str(folder / "system-config"),
        }
    )
    bare_socket = str(folder / "bare.sock")
    broker_socket = str(folder / "run" / "broker.sock")
    print(
        f"{options.streams} WatchEvents streams ({STREAMS_PER_APP} per app, a connection each),"
        f" the apps killed; RSS in MB, {options.settle:g} s after the drop"
    )
    print(f"{'server':<22} {'':>8} {'held':>8} {'after':>10} {'vs rest':>10}")
    print("-" * 62)
    bare, _ = bench_api.start(
        [sys.executable, str(bench_api.HERE / "_yardstick.py"), bare_socket], "ready"
    )
    try:
        print("\n".join(measured("bare grpcio", bare_socket, bare.pid, options)))
    finally:
        stop(bare)
    with StubProvider() as stub:
        daemon = [str(bench_api.BIN / "signin-brokerd"), "--socket", broker_socket,
                  "--issuer", stub.issuer, "--http", "127.0.0.1:0"]  # fmt: skip
        broker, _ = bench_api.start(daemon, '"msg":"sign-in page ready"')
        try:
            with BrokerClient(broker_socket) as client:
                bench_api.sign_in(client.begin_sign_in().url)
                for _ in range(1000):
                    client.get_token()
            pid = broker.pid
            print("\n".join(measured("signin-brokerd", broker_socket, pid, options)))
            before = rss_mb(pid)
            json_calls(broker_socket, options.json_calls)
            time.sleep(options.settle)
            print(
                f"\n{options.json_calls} JSON calls, a connection each (signin-brokerd):"
                f" RSS {before:.1f} -> {rss_mb(pid):.1f} MB"
            )
        finally:
            stop(broker)
    print(f"python -c pass: {python_pass_rss():.1f} MB")


if __name__ == "__main__":
    main()
