"""Thousands of idle connections of the user's own uid must not lock apps out.

Before the fix, 4,200 connections that connect and send nothing filled the daemon's
table of 4,096 and every new connection was refused for as long as they stayed. Now a
process may hold at most 64, and at the total limit the oldest idle connection makes
room for the newest, so an app that comes later still gets its token.

And the total is what the daemon's descriptors allow: with a hard limit of 4,096, 70
processes of 64 idle connections took every descriptor before the table of 4,096 was
full, accept() failed, a token request waited 5.3 s and asyncio logged 69,710 errors
with their tracebacks in 20 s. Here, at a limit of 512, 9 processes do the same.
"""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from signin_broker.cli._json_client import json_call
from signin_broker.daemon.api.transport import MAX_CONNECTIONS_PER_PROCESS
from signin_broker_testing import StubProvider
from support.apps import App, outcome
from support.identity import Script
from support.signin import signed_in_daemon

CHILDREN, EACH, GREEDY = 66, 64, 100  # 4,224 idle connections from the children
DESCRIPTORS, FEW_CHILDREN = 512, 9  # 576 idle connections for 512 descriptors

# First, as one process, GREEDY connections: how many the daemon keeps open and how many
# it closed. Then CHILDREN forked processes of EACH connections each. All are held,
# sending nothing, until stdin closes.
FLOOD = r"""
import json, os, resource, socket, sys, time

socket_path, children, each, greedy, limit = sys.argv[1], *map(int, sys.argv[2:6])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))


# What a gRPC client sends first: the daemon answers with its settings only once it knows
# the connection speaks HTTP/2 (not HTTP/1.1 JSON). Then it sends nothing more.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
def connect(count):
    held = []
    for _ in range(count):
        conn = socket.socket(socket.AF_UNIX)  # blocking: waits for room in the backlog
        try:
            conn.connect(socket_path)
            conn.sendall(PREFACE)
        except OSError:
            conn.close()
            continue
        held.append(conn)
    return held


# How many connections the daemon keeps open (it sent its HTTP/2 settings) or closed, once
# it answered each and keeps no more than `limit` open (or at the timeout).
def settle(held, limit, timeout=10):
    state = {conn: "undecided" for conn in held}
    for conn in held:
        conn.setblocking(False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for conn in held:
            if state[conn] == "closed":
                continue
            try:
                answer = conn.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                answer = b""
            state[conn] = "open" if answer else "closed"
        seen = list(state.values())
        counts = {name: seen.count(name) for name in ("open", "closed", "undecided")}
        if counts["undecided"] == 0 and counts["open"] <= limit:
            break
        time.sleep(0.05)
    return counts


mine = connect(greedy)
greedy_outcome = settle(mine, limit)
report_read, report_write = os.pipe()
pids = []
for _ in range(children):
    pid = os.fork()
    if pid == 0:
        held = connect(each)
        answered = settle(held, each)  # every connection let in or closed by the daemon
        os.write(report_write, f"{len(held)} {answered['undecided']}\n".encode())
        os.close(report_write)
        os.read(0, 1)  # until stdin closes
        os._exit(0)
    pids.append(pid)
os.close(report_write)
with os.fdopen(report_read) as reports:
    counts = [list(map(int, line.split())) for line in reports]
flooded, unanswered = (sum(column) for column in zip(*counts))
report = {"greedy": greedy_outcome, "flooded": flooded, "unanswered": unanswered}
print(json.dumps(report), flush=True)
os.read(0, 1)
for pid in pids:
    os.waitpid(pid, 0)
"""


class Flood:
    """The FLOOD script against a socket: its connections held until `end`."""

    def __init__(self, folder: Path, socket_path: Path, children: int, greedy: int) -> None:
        script = Script(folder / "apps", "flood", FLOOD)
        limit = MAX_CONNECTIONS_PER_PROCESS
        self.attacker = script.start(
            *map(str, (socket_path, children, EACH, greedy, limit)), stdin=subprocess.PIPE
        )

    def held(self) -> dict[str, Any]:
        """What the script reports once every connection is made (and the children's answered)."""
        assert self.attacker.stdout is not None
        ready, _, _ = select.select([self.attacker.stdout], [], [], 120)
        line = self.attacker.stdout.readline() if ready else ""
        assert line, self.attacker.stderr.read() if self.attacker.stderr else ""
        held: dict[str, Any] = json.loads(line)
        return held

    def end(self) -> None:
        """Close stdin: the script and its children leave, their connections with them."""
        assert self.attacker.stdin is not None
        if not self.attacker.stdin.closed:
            self.attacker.stdin.close()
        try:
            self.attacker.wait(timeout=60)
        finally:
            self.attacker.kill()
            self.attacker.wait(timeout=30)


def test_idle_connections_by_the_thousand_neither_lock_an_app_out_nor_pile_up_in_one_process(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    flood = Flood(folder, socket_path, CHILDREN, GREEDY)
    try:
        held = flood.held()
        late = App(folder / "apps", "late").start(socket_path, "token")
        answered = outcome(late, timeout=60)  # bounded: an app locked out never gets here
        assert answered["ok"], answered
    finally:
        flood.end()
    assert flood.attacker.returncode == 0
    assert held["flooded"] == CHILDREN * EACH  # every child's connect() went through
    assert held["greedy"] == {  # a process gets no more than its share, however it tries
        "open": MAX_CONNECTIONS_PER_PROCESS,
        "closed": GREEDY - MAX_CONNECTIONS_PER_PROCESS,
        "undecided": 0,
    }
    assert daemon.logs_with(msg="connection limit reached: closing one to make room")
    assert daemon.alive
    daemon.stop()


def test_connections_beyond_the_descriptors_neither_stall_a_token_nor_flood_the_log(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, open_files=DESCRIPTORS)
    logged = len(daemon.lines)
    flood = Flood(folder, socket_path, FEW_CHILDREN, greedy=0)
    try:
        held = flood.held()
        assert held["flooded"] == FEW_CHILDREN * EACH
        assert held["unanswered"] == 0  # each was let in or closed: none waits for a descriptor
        began = time.perf_counter()
        status, token = json_call(
            str(socket_path), "/signin_broker.v1.TokenBroker/GetToken", b"{}", 10
        )
        took = time.perf_counter() - began
    finally:
        flood.end()
    assert status == 200 and b"access_token" in token
    assert took < 0.1, took
    assert daemon.logs_with(msg="connection limit reached: closing one to make room")
    flooded_lines = daemon.lines[logged:]
    assert len(flooded_lines) < 10, flooded_lines[:20]
    assert daemon.alive
