"""Latency, throughput, start-up and memory of the broker, beside bare grpcio in the same run.

    python benchmarks/bench_api.py            # prints a table; nothing is asserted

The yardstick is `_yardstick.py`: the same proto served by plain grpcio on the same
kind of event loop, called with plain generated stubs. The broker is the real daemon,
signed in to the stub provider, called through the SDK, so its column includes the
front relay, the kernel caller check, the servicer, the session and the SDK's
conversions; GetToken is the warm path (a valid token, no provider round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import _incumbent  # beside this file, as the script's folder is on sys.path
import psutil

from signin_broker.client import BrokerClient
from signin_broker.v1 import broker_pb2 as pb
from signin_broker.v1 import broker_pb2_grpc as pb_grpc
from signin_broker_testing import StubProvider
from signin_broker_testing.models import DEFAULT_CLIENT

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def start(args: list[str], ready_marker: str) -> tuple[subprocess.Popen[str], float]:
    """Start a server process; returns it and the seconds until it said it was ready."""
    began = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if ready_marker in line:
            # Keep reading what it logs, or it blocks once the pipe is full.
            threading.Thread(
                target=collections.deque, args=(process.stdout, 20), daemon=True
            ).start()
            return process, time.perf_counter() - began
    raise RuntimeError(f"{args[0]} exited before it was ready")


def bare_call(socket_path: str, method: str) -> Callable[[], object]:
    import grpc

    channel = grpc.insecure_channel(f"unix:{socket_path}")
    stub = pb_grpc.TokenBrokerStub(channel)
    rpc = getattr(stub, method)
    request = pb.GetTokenRequest() if method == "GetToken" else pb.GetStatusRequest()
    return lambda: rpc(request, timeout=10)


def broker_call(socket_path: str, method: str) -> Callable[[], object]:
    client = BrokerClient(socket_path)
    return client.get_token if method == "GetToken" else client.status


CALLERS = {"bare": bare_call, "broker": broker_call}


def latencies(kind: str, socket_path: str, method: str, calls: int) -> list[float]:
    return timed_calls(CALLERS[kind](socket_path, method), calls)


def timed_calls(call: Callable[[], object], calls: int) -> list[float]:
    """Seconds each of `calls` calls took, after a warm-up."""
    for _ in range(200):  # warm up: connection, caches, branch predictors
        call()
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        samples.append(time.perf_counter() - began)
    return samples


def count_calls(kind: str, socket_path: str, method: str, seconds: float) -> int:
    call = CALLERS[kind](socket_path, method)
    for _ in range(50):
        call()
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        call()
        done += 1
    return done


def throughput(kind: str, socket_path: str, method: str, clients: int, seconds: float) -> float:
    """Calls per second of `clients` separate processes (as separate apps would be)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        counts = pool.starmap(count_calls, [(kind, socket_path, method, seconds)] * clients)
    return sum(counts) / seconds


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def one_shots(
    commands: list[list[str]], runs: int, check: bool = True, given: bytes = b""
) -> list[float]:
    """Median wall time of each whole command, process start to exit (`given` on stdin).

    The runs are interleaved, so the machine's slow moments fall on all of them alike.
    """
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for args, samples in zip(commands, times, strict=True):
            began = time.perf_counter()
            subprocess.run(args, input=given, capture_output=True, check=check)
            samples.append(time.perf_counter() - began)
    return [statistics.median(samples) for samples in times]


async def hold_watchers(socket_path: str, count: int, ready: str) -> None:
    from signin_broker.client import AsyncBrokerClient

    clients = [AsyncBrokerClient(socket_path) for _ in range(count)]
    streams = [client.watch_events() for client in clients]
    await asyncio.gather(*(anext(stream) for stream in streams))
    os.close(os.open(ready, os.O_CREAT | os.O_WRONLY))
    await asyncio.sleep(3600)


async def hold_stuck_requests(socket_path: str, count: int, ready: str) -> None:
    """`count` connections, each a GetToken whose largest allowed request stops 6 bytes short.

    The request says it is MAX_REQUEST_BYTES long and 65,530 bytes of it are sent (all
    that HTTP/2's initial window lets a client send before the daemon's settings): the
    daemon holds each, waiting for the rest.
    """
    import h2.config
    import h2.connection

    from signin_broker.daemon.api.dispatch import MAX_REQUEST_BYTES

    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/signin_broker.v1.TokenBroker/GetToken"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    held = []
    for _ in range(count):
        # A blocking connect waits while the daemon's backlog is full, where asyncio's
        # takes the refusal for a connection.
        plain = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await asyncio.to_thread(plain.connect, socket_path)
        reader, writer = await asyncio.open_unix_connection(sock=plain)
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        connection.initiate_connection()
        connection.send_headers(1, headers)
        sent = b"\x00" + MAX_REQUEST_BYTES.to_bytes(4, "big") + bytes(65535 - 5)
        for start in range(0, len(sent), 16384):  # HTTP/2's default largest frame
            connection.send_data(1, sent[start : start + 16384])
        writer.write(connection.data_to_send())
        await writer.drain()
        held.append((reader, writer))
    os.close(os.open(ready, os.O_CREAT | os.O_WRONLY))
    await asyncio.sleep(3600)


WATCHERS_PER_PROCESS = 50  # the daemon allows a process 64 connections


@contextlib.contextmanager
def holding(socket_path: str, holder: str, count: int) -> Iterator[None]:
    """`count` connections held open by `holder` (hold_watchers, hold_stuck_requests) until exit.

    Spread over processes of WATCHERS_PER_PROCESS connections each.
    """
    holders, readies = [], []
    for first in range(0, count, WATCHERS_PER_PROCESS):
        ready = tempfile.mktemp()
        code = (
            f"import asyncio, bench_api; asyncio.run(bench_api.{holder}("
            f"{socket_path!r}, {min(WATCHERS_PER_PROCESS, count - first)}, {ready!r}))"
        )
        holders.append(subprocess.Popen([sys.executable, "-c", code], cwd=HERE))
        readies.append(ready)
    try:
        deadline = time.monotonic() + 120
        while not all(os.path.exists(ready) for ready in readies):
            if any(h.poll() is not None for h in holders) or time.monotonic() > deadline:
                raise RuntimeError(f"the processes running {holder} did not get their calls")
            time.sleep(0.1)
        time.sleep(1)
        yield
    finally:
        for process in holders:
            process.kill()
            process.wait()
        for ready in readies:
            if os.path.exists(ready):
                os.unlink(ready)


def watchers_rss(socket_path: str, daemon_pid: int, count: int) -> float:
    """Daemon RSS in MB while `count` apps each hold a WatchEvents stream open."""
    with holding(socket_path, "hold_watchers", count):
        return psutil.Process(daemon_pid).memory_info().rss / 2**20


def sign_in(begin_url: str) -> None:
    """A scripted browser through the stub provider's auto-approved sign-in."""
    import httpx2

    with httpx2.Client(timeout=30) as browser:
        url = begin_url
        for _ in range(10):
            response = browser.get(url)
            if "/callback" in url or not response.has_redirect_location:
                return
            url = str(response.url.join(response.headers["location"]))


def helper_rows(python_pass: float) -> list[str]:
    """The tool bridges' one-shots (each reads its request on stdin), beside python -c pass."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "signin-broker"
    config.mkdir(parents=True, exist_ok=True)
    (config / "docker.toml").write_text('[registries."registry.example.com"]\n')
    lines = []
    for label, command, given in (
        ("`token --format exec-credential`", ["signin-broker", "token", "--format",
                                             "exec-credential"], b""),
        ("git-credential-signin-broker get", ["git-credential-signin-broker", "get"],
         b"protocol=https\nhost=git.example.com\n\n"),
        ("docker-credential-signin-broker get", ["docker-credential-signin-broker", "get"],
         b"registry.example.com\n"),
    ):  # fmt: skip
        program = [str(BIN / command[0]), *command[1:]]
        (seconds,) = one_shots([program], 21, given=given)
        lines.append(
            row(
                f"{label} (ms)",
                f"{python_pass * 1000:.0f}",
                f"{seconds * 1000:.0f}",
                f"{seconds / python_pass:.2f}x",
                "`python -c pass`; as `token`",
            )
        )
    return lines


def incumbent_rows(stub: StubProvider, curl: list[str], curl_token: float) -> list[str]:
    """oidc-agent's `oidc-token` beside a token from curl, where oidc-agent is installed."""
    if not _incumbent.installed():
        return [
            row("a token from curl on the socket (ms)", "", f"{curl_token * 1000:.1f}", "", ""),
            "(oidc-agent is not installed: apt-get install oidc-agent puts it beside)",
        ]
    with _incumbent.oidc_agent(stub) as oidc_token:
        incumbent, curl_again = one_shots([oidc_token, curl], 21)
    # curl's own start-up, on a socket nobody serves (it fails at once): the floor.
    (curl_alone,) = one_shots([[*curl[:3], "/nonexistent/broker.sock", *curl[4:]]], 21, False)
    return [
        row("a token from curl on the socket (ms)", "", f"{curl_again * 1000:.1f}", "", ""),
        row(
            "  beside curl alone, no daemon (ms)",
            f"{curl_alone * 1000:.1f}",
            f"{curl_again * 1000:.1f}",
            f"{curl_again / curl_alone:.2f}x",
            "",
        ),
        row(
            "  beside oidc-agent's oidc-token (ms)",
            f"{incumbent * 1000:.1f}",
            f"{curl_again * 1000:.1f}",
            f"{curl_again / incumbent:.2f}x",
            "<= 2x `oidc-token`",
        ),
    ]


def row(name: str, bare: str, broker: str, ratio: str, target: str) -> str:
    return f"{name:<38} {bare:>12} {broker:>14} {ratio:>7}  {target}"


def broker_only(name: str, value: float, target: str) -> str:
    return row(name, "", f"{value:.1f}" if value < 100 else f"{value:.0f}", "", target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="sequential calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the servers")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of throughput runs")
    parser.add_argument("--watchers", type=int, default=1000)
    options = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="sb-bench-", dir="/tmp"))
    bare_socket = str(folder / "bare.sock")
    # The one-shots find the daemon as people's shells do: in $XDG_RUNTIME_DIR, no --socket.
    (folder / "run").mkdir(mode=0o700)
    broker_socket = str(folder / "run" / "signin-broker" / "broker.sock")
    env_home = {
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_STATE_HOME": str(folder / "state"),
        "XDG_RUNTIME_DIR": str(folder / "run"),
    }
    os.environ.update(env_home)
    os.environ.pop("SIGNIN_BROKER_SOCKET", None)
    yardstick, _ = start([sys.executable, str(HERE / "_yardstick.py"), bare_socket], "ready")
    stub = StubProvider(clients=[DEFAULT_CLIENT, _incumbent.CLIENT]).start()
    starts = []
    daemon = None
    try:
        for _ in range(5):  # start-up time: median of a few starts
            daemon, seconds = start(
                [str(BIN / "signin-brokerd"), "--socket", broker_socket], '"msg":"ready"'
            )
            starts.append(seconds)
            daemon.terminate()
            daemon.wait()
        daemon, _ = start(
            [
                str(BIN / "signin-brokerd"),
                "--socket",
                broker_socket,
                "--issuer",
                stub.issuer,
                "--http",
                "127.0.0.1:0",
            ],
            '"msg":"sign-in page ready"',
        )
        with BrokerClient(broker_socket) as client:
            sign_in(client.begin_sign_in().url)
            client.get_token()  # signed in: GetToken below is the warm path
        sockets = {"bare": bare_socket, "broker": broker_socket}

        lines = [row("figure", "bare grpcio", "signin-broker", "ratio", "target"), "-" * 96]
        for method in ("GetStatus", "GetToken"):
            samples: dict[str, list[float]] = {"bare": [], "broker": []}
            for _ in range(options.rounds):
                for kind in ("bare", "broker"):
                    samples[kind] += latencies(kind, sockets[kind], method, options.calls)
            for label, fraction, target in (("p50", 0.5, "<= 1.1x"), ("p99", 0.99, "<= 1.3x")):
                bare, broker = (percentile(samples[k], fraction) * 1000 for k in ("bare", "broker"))
                lines.append(
                    row(
                        f"{method} {label} latency (ms), 1 client",
                        f"{bare:.3f}",
                        f"{broker:.3f}",
                        f"{broker / bare:.2f}x",
                        target,
                    )
                )
            for clients, target in ((1, ""), (16, ">= 0.95x")):
                bare, broker = (
                    throughput(k, sockets[k], method, clients, options.seconds)
                    for k in ("bare", "broker")
                )
                lines.append(
                    row(
                        f"{method} calls/s, {clients} client{'s' * (clients > 1)}",
                        f"{bare:,.0f}",
                        f"{broker:,.0f}",
                        f"{broker / bare:.2f}x",
                        target,
                    )
                )

        cli = [str(BIN / "signin-broker")]
        curl = [
            "curl", "-s", "--unix-socket", broker_socket, "-d", "{}",
            "-H", "Content-Type: application/json",
            "http://broker/signin_broker.v1.TokenBroker/GetToken",
        ]  # fmt: skip
        python_pass, import_grpc, status, token, curl_token = one_shots(
            [
                [sys.executable, "-c", "pass"],
                [sys.executable, "-c", "import grpc"],
                [*cli, "status"],
                [*cli, "token"],
                curl,
            ],
            21,
        )
        for label, baseline, name, seconds, target in (
            ("`signin-broker status` (gRPC)", import_grpc, "import grpc", status, "<= 1.3x"),
            ("`signin-broker token` (JSON)", python_pass, "python -c pass", token, "<= 2x"),
        ):
            lines.append(
                row(
                    f"{label} one-shot (ms)",
                    f"{baseline * 1000:.0f}",
                    f"{seconds * 1000:.0f}",
                    f"{seconds / baseline:.2f}x",
                    f"{target} `{name}`",
                )
            )
        lines += helper_rows(python_pass)
        lines += incumbent_rows(stub, curl, curl_token)
        lines.append(
            row(
                "daemon start to ready (ms), median of 5",
                "",
                f"{statistics.median(starts) * 1000:.0f}",
                "",
                "<= 600",
            )
        )
        idle = psutil.Process(daemon.pid).memory_info().rss / 2**20
        lines.append(row("daemon RSS after the runs above (MB)", "", f"{idle:.1f}", "", "<= 60"))
        held = watchers_rss(broker_socket, daemon.pid, options.watchers)
        lines.append(
            row(f"daemon RSS with {options.watchers} watchers (MB)", "", f"{held:.1f}", "", "<= 75")
        )
        print("\n".join(lines))
        print(
            f"\n{os.cpu_count()} CPUs; {options.rounds} rounds of {options.calls} calls; "
            f"throughput over {options.seconds:g} s; clients are separate processes."
        )
    finally:
        stub.stop()
        for process in (yardstick, daemon):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
