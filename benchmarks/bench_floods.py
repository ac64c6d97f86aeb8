"""The daemon's peak memory under the worst floods an app of the user's can make.

    python benchmarks/bench_floods.py [--connections N]   # prints a table; nothing is asserted

Each flood is N connections (64 a process, as the daemon allows one), all held at
once, on a daemon of its own: idle HTTP/2 connections; on each, as many calls as the
daemon lets a connection make at once (16), either health watches (a call that
lasts) or token requests begun at 64 KiB and never ended (the largest request, held
while it comes); half-sent 64 KiB JSON bodies. The figure is the daemon's peak RSS
(VmHWM), per connection, and at the most connections its descriptors allow here and
the most it ever allows (4,096): what a `MemoryMax=` must leave room for. The
yardstick is the daemon at rest, and `python -c pass`.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_memory import python_pass_rss

from signin_broker.daemon.api.transport import MAX_CONNECTIONS, DescriptorBudget
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir

PER_PROCESS = 64
# One process's connections, each flooding as `kind` says, held until stdin closes; it
# prints "held" once every connection has sent what it will.
FLOODER = r"""
import asyncio, struct, sys
import h2.config, h2.connection, h2.events, h2.exceptions

socket_path, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
PATHS = {"watch": "/grpc.health.v1.Health/Watch",
         "partial": "/signin_broker.v1.TokenBroker/GetToken"}
JSON = (b"POST /signin_broker.v1.TokenBroker/GetToken HTTP/1.1\r\nHost: b\r\n"
        b"Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n" + b" " * 65000)


async def flood(ready):
    reader, writer = await asyncio.open_unix_connection(socket_path)
    if kind == "json":
        writer.write(JSON)
        ready.release()
        return writer
    http = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
    http.initiate_connection()
    writer.write(http.data_to_send())
    while http.remote_settings.max_concurrent_streams > 1000:  # the daemon's settings first
        http.receive_data(await reader.read(65536))
    pending = {}
    for _ in range(http.remote_settings.max_concurrent_streams if kind != "idle" else 0):
        stream = http.get_next_available_stream_id()
        http.send_headers(stream, [(":method", "POST"), (":scheme", "http"),
                                   (":path", PATHS[kind]), (":authority", "b"),
                                   ("content-type", "application/grpc"), ("te", "trailers")])
        if kind == "watch":
            http.send_data(stream, struct.pack(">?I", False, 2) + b"\x0a\x00")
        else:
            pending[stream] = struct.pack(">?I", False, 65536) + b"\x0a" * 65000
    while pending:  # as flow control lets the rest go
        for stream, rest in list(pending.items()):
            window = http.local_flow_control_window(stream)
            size = min(len(rest), window, http.max_outbound_frame_size)
            if size > 0:
                http.send_data(stream, rest[:size])
                pending[stream] = rest[size:]
            if not pending[stream] or http.streams[stream].closed:
                del pending[stream]
        writer.write(http.data_to_send())
        if pending:
            for event in http.receive_data(await reader.read(65536)):
                if isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    pending.pop(event.stream_id, None)
    writer.write(http.data_to_send())
    ready.release()
    return writer


async def main():
    ready = asyncio.Semaphore(0)
    held = [asyncio.ensure_future(flood(ready)) for _ in range(count)]
    for _ in held:
        await ready.acquire()
    print("held", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


asyncio.run(main())
"""
FLOODS = {
    "idle": "idle HTTP/2 connections",
    "watch": "16 health watches on each",
    "partial": "16 token requests of 64 KiB begun on each",
    "json": "a half-sent 64 KiB JSON body on each",
}


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return (
        int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
        / 1024
    )


def settled_peak(pid: int) -> float:
    """The peak once it has not risen for a second: the daemon has read what was sent."""
    peak, still_since = peak_rss_mb(pid), time.monotonic()
    while time.monotonic() - still_since < 1:
        time.sleep(0.1)
        if (now := peak_rss_mb(pid)) > peak:
            peak, still_since = now, time.monotonic()
    return peak


def flooded(kind: str, connections: int) -> tuple[float, float]:
    """A fresh daemon's RSS at rest and at its peak under the flood (MB)."""
    folder = short_temp_dir()
    with DaemonProcess(folder / "run" / "broker.sock") as daemon:
        time.sleep(1)  # its lazy loads done
        Path(f"/proc/{daemon.pid}/clear_refs").write_text("5")
        rest = peak_rss_mb(daemon.pid)
        floods = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    FLOODER,
                    str(daemon.socket_path),
                    kind,
                    str(min(PER_PROCESS, connections - first)),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for first in range(0, connections, PER_PROCESS)
        ]
        try:
            for process in floods:
                assert process.stdout is not None and process.stdout.readline() == "held\n"
            return rest, settled_peak(daemon.pid)
        finally:
            for process in floods:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1024)
    options = parser.parse_args()
    connections = options.connections
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # as the daemon raises its own
    here = DescriptorBudget.of_this_process().connections
    print(
        f"{'flood of ' + str(connections) + ' connections':<46} {'rest MB':>8} {'peak MB':>8}"
        f" {'KB each':>8} {'at ' + str(here):>8} {'at ' + str(MAX_CONNECTIONS):>8}\n" + "-" * 91
    )
    for kind, what in FLOODS.items():
        rest, peak = flooded(kind, connections)
        each = (peak - rest) / connections
        print(
            f"{what:<46} {rest:>8.1f} {peak:>8.1f} {each * 1024:>8.0f}"
            f" {rest + each * here:>8.0f} {rest + each * MAX_CONNECTIONS:>8.0f}"
        )
    print(
        f"\nat {here}: the connections {hard} descriptors allow (the hard limit here);"
        f" python -c pass: {python_pass_rss():.1f} MB"
    )


if __name__ == "__main__":
    main()
