"""Issue 13 finding 7: thousands of idle connections of the user's own uid must not lock apps out.

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

from signin_broker.daemon.transport import MAX_CONNECTIONS_PER_PROCESS
from signin_broker.testing import StubProvider
from support.apps import App, outcome
from support.identity import Script
from support.signin import signed_in_daemon

CHILDREN, EACH, GREEDY = 66, 64, 100  # 4,224 idle connections from the children

# First, as one process, GREEDY connections: how many the daemon admitted (it sends its
# HTTP/2 settings) and how many it closed unanswered. Then CHILDREN forked processes of
# EACH connections each. All are held, sending nothing, until stdin closes.
FLOOD = r"""
import json, os, resource, select, socket, sys, time

socket_path, children, each, greedy = sys.argv[1], *map(int, sys.argv[2:5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))


def connect(count):
    held = []
    for _ in range(count):
        conn = socket.socket(socket.AF_UNIX)  # blocking: waits for room in the backlog
        try:
            conn.connect(socket_path)
        except OSError:
            conn.close()
            continue
        held.append(conn)
    return held


def settle(held, timeout=30):
    poller = select.poll()
    pending = {conn.fileno(): conn for conn in held}
    for fd in pending:
        poller.register(fd, select.POLLIN)
    admitted = closed = 0
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for fd, _ in poller.poll(200):
            conn = pending.pop(fd, None)
            if conn is None:
                continue
            poller.unregister(fd)
            try:
                answer = conn.recv(65536)
            except OSError:
                answer = b""
            admitted, closed = (admitted + 1, closed) if answer else (admitted, closed + 1)
    return {"admitted": admitted, "closed": closed, "undecided": len(pending)}


mine = connect(greedy)
greedy_outcome = settle(mine)
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
        str(socket_path), str(CHILDREN), str(EACH), str(GREEDY), stdin=subprocess.PIPE
    )
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        ready, _, _ = select.select([attacker.stdout], [], [], 120)
        line = attacker.stdout.readline() if ready else ""
        assert line, attacker.stderr.read() if attacker.stderr else ""
        held = json.loads(line)
        late = App(folder / "apps", "late").start(socket_path, "token")
        assert outcome(late, timeout=60)["ok"]  # bounded: an app locked out never gets here
        attacker.stdin.close()
        assert attacker.wait(timeout=60) == 0
    finally:
        attacker.kill()
    assert held["flooded"] == CHILDREN * EACH  # every child's connect() went through
    greedy = held["greedy"]
    assert greedy["admitted"] <= MAX_CONNECTIONS_PER_PROCESS, greedy
    assert greedy == {
        "admitted": MAX_CONNECTIONS_PER_PROCESS,
        "closed": GREEDY - MAX_CONNECTIONS_PER_PROCESS,
        "undecided": 0,
    }
    assert daemon.logs_with(msg="connection limit reached: closing one to make room")
    assert daemon.alive
    daemon.stop()
