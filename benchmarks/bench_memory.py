"""Where the daemon's memory goes: each import's cost, the live process's map, each watcher.

    python benchmarks/bench_memory.py            # prints three tables; nothing is asserted

1. Imports, in the order the daemon loads them, each in the same fresh interpreter:
   the RSS it adds (what loading the page and the OAuth stack lazily can save), then
   what only a sign-in loads.
2. A signed-in daemon after 1,000 GetToken calls, from /proc/<pid>/smaps: resident
   memory by mapping (the Python heap, each shared library); then the same daemon
   started again, its session restored (as after an idle exit or a reboot), after
   1,000 more: RSS, PSS and the memory of its own (USS) of both.
3. RSS per WatchEvents stream held open, from 0 to `--watchers` streams.
4. The worst case the systemd unit's MemoryHigh= and MemoryMax= rest on: the watchers
   held, and the rest of the connection table (transport.MAX_CONNECTIONS) filled with
   calls whose 64 KiB request (dispatch.MAX_REQUEST_BYTES) never ends; the daemon's
   RSS then, and its peak (VmHWM) over the whole run.
The yardstick is `python -c pass`'s own RSS, measured the same way.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_api  # beside this file, as the script's folder is on sys.path
import psutil

from signin_broker.client import BrokerClient
from signin_broker.daemon.api.transport import MAX_CONNECTIONS
from signin_broker_testing import StubProvider

# The daemon's own order: before "ready" (gRPC, the servicer), then in the worker thread
# (the OAuth client, the store: oauth_stack.py), then what only a sign-in loads (joserfc
# for its id_token, the page at a browser's first visit).
IMPORTS = [
    "asyncio",
    "uvloop",
    "grpclib.server",
    "signin_broker.v1.broker_pb2",
    "signin_broker.daemon.app",
    "cryptography.hazmat.primitives.ciphers.aead",
    "httpx2",
    "signin_broker.oidc.provider",
    "signin_broker.store.vault",
    "keyring",
    "signin_broker.daemon.oauth_stack",
    "joserfc.jwt",
    "starlette.applications",
    "uvicorn",
    "signin_broker.daemon.web.site",
]

MEASURE_IMPORTS = """
import importlib, sys, warnings
warnings.simplefilter("ignore")
def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
print("start", rss())
for name in sys.argv[1:]:
    importlib.import_module(name)
    print(name, rss())
"""


def import_costs() -> list[str]:
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE_IMPORTS, *IMPORTS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    lines = [f"{'import (in load order)':<46} {'adds MB':>8} {'total MB':>9}", "-" * 65]
    previous = None
    for line in filter(None, measured):
        name, total = line.rsplit(" ", 1)
        if previous is not None:
            lines.append(f"{name:<46} {float(total) - previous:>8.1f} {float(total):>9.1f}")
        else:
            lines.append(f"{'python, before any import':<46} {'':>8} {float(total):>9.1f}")
        previous = float(total)
    return lines


def resident_by_mapping(pid: int, top: int = 8) -> list[str]:
    resident: collections.Counter[str] = collections.Counter()
    name = ""
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            header = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
            if header:
                name = header.group(1) or "[anonymous: the Python heap, thread stacks]"
            elif line.startswith("Rss:"):
                resident[Path(name).name if name.startswith("/") else name] += int(line.split()[1])
    total = sum(resident.values())
    lines = [f"{'mapping':<46} {'MB':>8} {'share':>9}", "-" * 65]
    for mapping, kib in resident.most_common(top):
        lines.append(f"{mapping[:46]:<46} {kib / 1024:>8.1f} {kib / total:>9.0%}")
    rest = total - sum(kib for _, kib in resident.most_common(top))
    lines.append(f"{'everything else':<46} {rest / 1024:>8.1f} {rest / total:>9.0%}")
    lines.append(f"{'total':<46} {total / 1024:>8.1f}")
    return lines


def flood_rows(socket_path: str, pid: int, watchers: int) -> list[str]:
    """The daemon's RSS with the connection table full: watchers, and stuck requests."""
    stuck = MAX_CONNECTIONS - watchers
    with (
        bench_api.holding(socket_path, "hold_watchers", watchers),
        bench_api.holding(socket_path, "hold_stuck_requests", stuck),
    ):
        held = psutil.Process(pid).memory_info().rss / 2**20
    with open(f"/proc/{pid}/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    return [
        f"\n{'the connection table full (' + str(MAX_CONNECTIONS) + ')':<46} {'RSS MB':>8}",
        "-" * 65,
        f"{f'{watchers} watchers, {stuck} stuck 64 KiB requests':<46} {held:>8.1f}",
        f"{'peak over the whole run (VmHWM)':<46} {peak:>8.1f}",
    ]


def python_pass_rss() -> float:
    probe = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    try:
        time.sleep(0.5)  # started and settled
        return float(psutil.Process(probe.pid).memory_info().rss) / 2**20
    finally:
        probe.kill()
        probe.wait()


def own_memory(pid: int) -> str:
    """RSS, PSS and USS (what the process alone holds) of a process, in MB."""
    full = psutil.Process(pid).memory_full_info()
    return f"RSS {full.rss / 2**20:.1f} MB, PSS {full.pss / 2**20:.1f}, USS {full.uss / 2**20:.1f}"


def start_daemon(socket_path: str, issuer: str) -> subprocess.Popen[str]:
    daemon, _ = bench_api.start(
        [
            str(bench_api.BIN / "signin-brokerd"),
            *("--socket", socket_path, "--issuer", issuer, "--http", "127.0.0.1:0"),
        ],
        '"msg":"sign-in page ready"',
    )
    return daemon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=1000)
    options = parser.parse_args()

    print("\n".join(import_costs()))
    folder = Path(tempfile.mkdtemp(prefix="sb-memory-", dir="/tmp"))
    os.environ.update(
        {"XDG_CONFIG_HOME": str(folder / "config"), "XDG_STATE_HOME": str(folder / "state")}
    )
    socket_path = str(folder / "run" / "broker.sock")
    stub = StubProvider().start()
    daemon = None
    try:
        daemon = start_daemon(socket_path, stub.issuer)
        with BrokerClient(socket_path) as client:
            bench_api.sign_in(client.begin_sign_in().url)
            for _ in range(1000):
                client.get_token()
        print(
            f"\nsigned-in daemon after 1,000 GetToken calls (python -c pass: "
            f"{python_pass_rss():.1f} MB)"
        )
        print("\n".join(resident_by_mapping(daemon.pid)))
        print(f"signed in by this daemon: {own_memory(daemon.pid)}")
        daemon.terminate()
        daemon.wait()
        daemon = start_daemon(socket_path, stub.issuer)
        with BrokerClient(socket_path) as client:
            for _ in range(1000):
                client.get_token()
        print(f"started again, its session restored: {own_memory(daemon.pid)}")
        before = psutil.Process(daemon.pid).memory_info().rss / 2**20
        held = bench_api.watchers_rss(socket_path, daemon.pid, options.watchers)
        print(f"\n{'watchers (the restored daemon)':<46} {'RSS MB':>8} {'KB each':>9}\n" + "-" * 65)
        print(f"{0:<46} {before:>8.1f}")
        each = (held - before) * 1024 / options.watchers
        print(f"{options.watchers:<46} {held:>8.1f} {each:>9.1f}")
        print("\n".join(flood_rows(socket_path, daemon.pid, options.watchers)))
    finally:
        stub.stop()
        if daemon is not None:
            daemon.terminate()
            daemon.wait()


if __name__ == "__main__":
    main()
