"""A denied app in namespaces of its own tries to borrow a live app's identity.

On the tree before the fix, the daemon relayed each connection to a private gRPC socket
from an abstract address (`@signin-broker.<hex>`) that named the caller. Abstract
addresses are per network namespace, so a process that ran `unshare -Urn` could bind
a live app's address in its own namespace, dial the private socket by its path, and
get that app's token. Here the impostor tries every name the daemon holds, through
every socket file in its folder, and must get nothing but its own refusal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from signin_broker_testing import StubProvider
from support.apps import write_policy
from support.identity import (
    RELAY,
    Script,
    auditor,
    daemon_unix_sockets,
    namespaces_available,
)
from support.signin import signed_in_daemon

# Allowed app A: connects, says its pid, and keeps that connection until its stdin closes.
HOLDER = """\
import json, sys
from signin_broker.client import BrokerClient
with BrokerClient(sys.argv[1], timeout=20) as broker:
    print(json.dumps({"pid": broker.status().caller.pid}), flush=True)
    sys.stdin.read()
    broker.status()  # the same connection still serves it
"""

# Denied app B. As itself: reads the names of every Unix socket the daemon holds and
# the socket files in its folder, and asks for a token the plain way. Then, re-run in a
# new user and network namespace: binds each abstract name there (nothing else holds it
# in that namespace) and asks for a token through each socket file from that address.
IMPOSTOR = r"""
import json, os, stat, subprocess, sys

socket_path, daemon_pid, relay_dir = sys.argv[1:4]


def held_names(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    names = set()
    with open("/proc/net/unix") as table:
        next(table)
        for row in table:
            fields = row.split()
            if fields[6] in inodes and len(fields) > 7:
                names.add(fields[7])
    return names


def socket_files(folder):
    found = set()
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                found.add(path)
    return found


def bound_to(name, path):
    def connect():
        conn = socket.socket(socket.AF_UNIX)
        if name:
            conn.bind("\0" + name)
        conn.connect(path)
        return conn
    return connect


if len(sys.argv) == 4:
    names = held_names(daemon_pid)
    abstract = sorted(name[1:] for name in names if name.startswith("@"))
    paths = {name for name in names if name.startswith("/")}
    paths = sorted(paths | socket_files(os.path.dirname(socket_path)))
    (direct,) = call(socket_path)
    inside = subprocess.run(
        ["unshare", "-Urn", sys.executable, __file__, *sys.argv[1:4],
         json.dumps([abstract, paths])],
        capture_output=True, text=True, timeout=300,
    )
    if inside.returncode:
        raise SystemExit(inside.stderr)
    found = {"pid": os.getpid(), "direct": direct, "abstract": abstract, "paths": paths}
    print(json.dumps({**found, **json.loads(inside.stdout)}))
else:
    abstract, paths = json.loads(sys.argv[4])
    attempts = []
    for name in [*abstract, ""]:
        for path in paths:
            (outcome,) = call(relay(bound_to(name, path), relay_dir), timeout=5)
            attempts.append({"name": name, "path": path, **outcome})
    print(json.dumps({"inner_pid": os.getpid(), "attempts": attempts}))
"""


def test_a_denied_app_in_its_own_namespaces_cannot_borrow_a_live_apps_identity(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    namespaces_available("-Urn")
    daemon = signed_in_daemon(stub, socket_path)
    apps, relays = folder / "apps", folder / "relays"
    relays.mkdir()
    holder = Script(apps, "holder", HOLDER)
    impostor = Script(apps, "impostor", RELAY + IMPOSTOR)
    audit = auditor(apps)
    write_policy(socket_path, holder.rule("allow"), impostor.rule("deny"), audit.rule("allow"))
    held = holder.start(str(socket_path), stdin=subprocess.PIPE)
    try:
        assert held.stdout is not None and held.stdin is not None
        assert json.loads(held.stdout.readline())["pid"] == held.pid, held.stderr
        sockets = daemon_unix_sockets(daemon.pid)  # while A's connection lives
        found = impostor.run(str(socket_path), str(daemon.pid), str(relays), timeout=300)
        held.stdin.close()
        assert held.wait(timeout=30) == 0, held.stderr.read() if held.stderr else ""
    finally:
        held.kill()

    attempts = found["attempts"]
    assert attempts, "the impostor found no socket to try"
    borrowed = [a for a in [found["direct"], *attempts] if a["code"] == "OK" or a.get("token")]
    assert not borrowed, f"the impostor got tokens: {borrowed}"
    # Refused as itself: the policy names the impostor's own script, not the holder's.
    for attempt in [found["direct"], *(a for a in attempts if a["path"] == str(socket_path))]:
        assert attempt["code"] == "PERMISSION_DENIED", attempt
        assert impostor.path.name in attempt["message"], attempt
    rows = audit.run(str(socket_path))
    tokens = [row for row in rows if row["action"] == "issue_token"]
    assert not [row for row in tokens if row["actor_app"] == holder.id], tokens
    assert not [row for row in tokens if row["actor_pid"] in (found["pid"], found["inner_pid"])]
    # One listening socket, the public one, and no abstract name to take.
    assert [name for name, listening in sockets if listening] == [str(socket_path)], sockets
    assert not [name for name, _ in sockets if name.startswith("@")], sockets
    assert found["abstract"] == [] and found["paths"] == [str(socket_path)]
    assert daemon.alive
    daemon.stop()
