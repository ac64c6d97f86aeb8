"""Thousands of idle connections of the user's own uid must not lock apps out.

Before the fix, 4,200 connections that connect and send nothing filled the daemon's
table of 4,096 and every new connection was refused for as long as they stayed. Now a
process may hold at most 64, and at the total limit the oldest idle connection makes
room for the newest, so an app that comes later still gets its token.
"""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path

from signin_broker.daemon.api.transport import MAX_CONNECTIONS_PER_PROCESS
from signin_broker_testing import StubProvider
from support.apps import App, outcome
from support.identity import Script
from support.signin import signed_in_daemon

CHILDREN, EACH, GREEDY = 66, 64, 100  # 4,224 idle connections from the children

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
        os.write(report_write, f"{len(held)}\n".encode())
        os.close(report_write)
        os.read(0, 1)  # until stdin closes
        os._exit(0)
    pids.append(pid)
os.close(report_write)
with os.fdopen(report_read) as reports:
    flooded = sum(int(line) for line in reports)
print(json.dumps({"greedy": greedy_outcome, "flooded": flooded}), flush=True)
os.read(0, 1)
for pid in pids:
    os.waitpid(pid, 0)
"""


def test_idle_connections_by_the_thousand_neither_lock_an_app_out_nor_pile_up_in_one_process(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    flood = Script(folder / "apps", "flood", FLOOD)
    attacker = flood.start(
        *map(str, (socket_path, CHILDREN, EACH, GREEDY, MAX_CONNECTIONS_PER_PROCESS)),
        stdin=subprocess.PIPE,
    )
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        ready, _, _ = select.select([attacker.stdout], [], [], 120)
        line = attacker.stdout.readline() if ready else ""
        assert line, attacker.stderr.read() if attacker.stderr else ""
        held = json.loads(line)
        late = App(folder / "apps", "late").start(socket_path, "token")
        answered = outcome(late, timeout=60)  # bounded: an app locked out never gets here
        assert answered["ok"], answered
        attacker.stdin.close()
        assert attacker.wait(timeout=60) == 0
    finally:
        if attacker.stdin is not None and not attacker.stdin.closed:
            attacker.stdin.close()  # its children leave when stdin closes
        attacker.kill()
        attacker.wait(timeout=30)
    assert held["flooded"] == CHILDREN * EACH  # every child's connect() went through
    assert held["greedy"] == {  # a process gets no more than its share, however it tries
        "open": MAX_CONNECTIONS_PER_PROCESS,
        "closed": GREEDY - MAX_CONNECTIONS_PER_PROCESS,
        "undecided": 0,
    }
    assert daemon.logs_with(msg="connection limit reached: closing one to make room")
    assert daemon.alive
    daemon.stop()
