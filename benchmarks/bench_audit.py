"""The audit under load: many GetToken calls from several processes of one program.

    python benchmarks/bench_audit.py [--processes 8] [--calls 25000]

Each process makes --calls GetToken calls as fast as it can (the same script, so one
program to the daemon). Printed: calls per second, the audit rows the calls made and
the times they count, rows dropped (the daemon's own error lines), the audit database's
size, and the daemon's RSS before, at its peak and 10 s after; the yardstick is the
daemon's RSS before the burst, and the targets (DESIGN.md) are beside each figure.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench_api  # beside this file, as the script's folder is on sys.path
import psutil

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider

CALLER = """
import sys
from signin_broker.client import BrokerClient
with BrokerClient(sys.argv[1]) as client:
    for _ in range(int(sys.argv[2])):
        client.get_token()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--calls", type=int, default=25_000, help="per process")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sb-audit-", dir="/tmp"))
    state = folder / "state"
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_STATE_HOME": str(state),
        "XDG_DATA_HOME": str(folder / "data"),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
    }
    socket_path = str(folder / "run" / "broker.sock")
    log_path = folder / "daemon.log"
    stub = StubProvider().start()
    with log_path.open("w") as daemon_log:
        daemon = subprocess.Popen(
            [str(bench_api.BIN / "signin-brokerd"), "--socket", socket_path,
             "--issuer", stub.issuer, "--http", "127.0.0.1:0"],
            env=env, stderr=daemon_log, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        for _ in range(300):  # bounded: 30 s
            if '"sign-in page ready"' in log_path.read_text():
                break
            time.sleep(0.1)
        with BrokerClient(socket_path) as client:
            bench_api.sign_in(client.begin_sign_in().url)
            client.get_token()
        process = psutil.Process(daemon.pid)
        before = process.memory_info().rss / 2**20
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak.append(process.memory_info().rss / 2**20)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.perf_counter()
        callers = [
            subprocess.Popen([sys.executable, "-c", CALLER, socket_path, str(options.calls)])
            for _ in range(options.processes)
        ]
        for caller in callers:
            caller.wait()
        took = time.perf_counter() - began
        done.set()
        sampler.join()
        time.sleep(10)
        after = process.memory_info().rss / 2**20
        with BrokerClient(socket_path) as client:
            client.audit_events(limit=1)  # the daemon writes what is queued first
        database = state / "signin-broker" / "audit.sqlite3"
        with sqlite3.connect(database) as db:
            rows, counted = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(times), 0) FROM audit_log"
                " WHERE action = 'issue_token'"
            ).fetchone()
        size = sum(p.stat().st_size for p in database.parent.glob("audit.sqlite3*")) / 2**20
        dropped = log_path.read_text().count("audit rows dropped")
        calls = options.processes * options.calls
        print(f"{'figure':<44} {'value':>12}  target")
        print("-" * 72)
        print(f"{'GetToken calls':<44} {calls:>12,}")
        print(f"{'calls per second (all processes)':<44} {calls / took:>12,.0f}")
        print(f"{'audit rows of issue_token':<44} {rows:>12,}  grows with grants")
        print(f"{'times those rows count':<44} {counted:>12,}  = calls + 1")
        print(f"{'rows dropped (daemon error lines)':<44} {dropped:>12}  0")
        print(f"{'audit database and WAL, MB':<44} {size:>12.2f}  < 5")
        print(f"{'daemon RSS before, MB (yardstick)':<44} {before:>12.1f}")
        print(f"{'daemon RSS at peak, MB':<44} {max(peak):>12.1f}")
        print(f"{'daemon RSS 10 s after, MB':<44} {after:>12.1f}  within 10 of before")
    finally:
        daemon.terminate()
        daemon.wait()
        stub.stop()


if __name__ == "__main__":
    main()
