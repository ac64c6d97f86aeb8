"""A process in namespaces of its own tries to pass for another program: an app, a browser.

On the tree before the first fix, the daemon relayed each connection to a private gRPC socket
from an abstract address (`@signin-broker.<hex>`) that named the caller. Abstract
addresses are per network namespace, so a process that ran `unshare -Urn` could bind
a live app's address in its own namespace, dial the private socket by its path, and
get that app's token. Here the impostor tries every name the daemon holds, through
every socket file in its folder, and must get nothing but its own refusal.

On the tree before the second fix, the daemon took the path /proc/<pid>/exe names for
the file the daemon finds at that path: a shell copied to Chrome's path on a tmpfs of a
mount namespace of its own (on a machine without Chrome) started the broker's native host
and got tokens as `browser:chrome/<id>`, from inside that namespace or run from the
daemon's own through /proc/<pid>/root.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker.daemon.apps.policy import AppRule, Decision
from signin_broker_testing import StubProvider
from support.apps import write_policy
from support.commands import BIN, curl_json, signin_broker
from support.identity import (
    RELAY,
    Script,
    auditor,
    daemon_unix_sockets,
    namespaces_available,
)
from support.native_messaging import EXTENSION, ORIGIN, answers, get_token
from support.signin import signed_in_daemon

# Allowed app A: connects, says its pid, and keeps that connection until its stdin closes.
HOLDER = """\
import json, sys
from signin_broker.client import BrokerClient
from signin_broker.daemon.apps.policy import AppRule, Decision
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


FAKE_CHROME = "/opt/google/chrome/chrome"
# A mount namespace of its own whose /opt is a tmpfs holding the shell as Chrome's executable.
PLANT = (
    f"mount -t tmpfs none /opt; mkdir -p {os.path.dirname(FAKE_CHROME)}; cp /bin/sh {FAKE_CHROME}"
)
# What the fake browser runs: the broker's host for the extension, as Chrome starts it
# (a child of the browser, with the extension's origin; `; exit` keeps the shell its parent).
AS_A_BROWSER = [
    "-c",
    f'"$0" chrome-extension://{EXTENSION}/; exit',
    str(BIN / "signin-broker-native-host"),
]


def test_a_browser_planted_in_a_mount_namespace_of_its_own_is_not_the_browser_of_that_path(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    namespaces_available("-Urm")
    chrome_app = f"browser:chrome/{EXTENSION}"
    daemon = signed_in_daemon(stub, socket_path)
    allowed = signin_broker(
        "--socket", str(socket_path), "apps", "allow", chrome_app, "--origin", ORIGIN
    )
    assert allowed.returncode == 0, allowed.stderr
    requests = folder / "requests"
    requests.write_bytes(get_token())
    env = {**os.environ, "SIGNIN_BROKER_SOCKET": str(socket_path)}

    def host_answer(command: list[str]) -> dict[str, object]:
        with requests.open("rb") as stdin:
            done = subprocess.run(command, stdin=stdin, capture_output=True, env=env, timeout=60)
        (answer,) = answers(done.stdout)
        return answer

    inside = host_answer(
        ["unshare", "-Urm", "sh", "-ec", f'{PLANT}; exec {FAKE_CHROME} "$@"', "sh", *AS_A_BROWSER]
    )
    holder = subprocess.Popen(
        ["unshare", "-Urm", "sh", "-ec", f"{PLANT}; echo planted; read _"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "planted\n"
        # From the daemon's own namespace, run through the holder's root: the kernel names
        # the executable by its path there, /opt/google/chrome/chrome.
        through = host_answer([f"/proc/{holder.pid}/root{FAKE_CHROME}", *AS_A_BROWSER])
    finally:
        holder.kill()
        holder.wait(timeout=30)

    assert inside["ok"] is False and inside["code"] == "permission_denied", inside
    assert "signin-broker-native-host is not known to be the daemon's file" in str(inside["error"])
    assert through["ok"] is False and through["code"] == "permission_denied", through
    assert f"parent is {FAKE_CHROME} as another mount namespace names it" in str(through["error"])
    with BrokerClient(socket_path) as client:
        issued = [row for row in client.audit_events(app=chrome_app) if row.action == "issue_token"]
    assert issued == []
    assert daemon.alive
    daemon.stop()


# An app the policy allows, pinned to its file's hash; the impostor says "hostile".
PINNED = """\
import json, sys
from signin_broker.client import BrokerClient, BrokerError
with BrokerClient(sys.argv[1], timeout=20) as broker:
    try:
        print(json.dumps({"ok": bool(broker.get_token().access_token), "who": WHO}))
    except BrokerError as error:
        print(json.dumps({"ok": False, "code": error.code.name, "message": error.message}))
"""
# In a mount namespace of its own, a file bound over an allowed one ($1 over $2), then run.
BOUND_OVER = ["unshare", "-Urm", "sh", "-ec", 'mount --bind "$1" "$2"; shift 2; exec "$@"', "sh"]


def test_a_program_or_script_bound_over_an_allowed_one_in_a_namespace_of_its_own_is_refused(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    namespaces_available("-Urm")
    curl = os.path.realpath(shutil.which("curl") or "/usr/bin/curl")
    allowed = Script(folder / "apps", "allowed", PINNED.replace("WHO", '"allowed"'))
    hostile = Script(folder / "apps", "hostile", PINNED.replace("WHO", '"hostile"'))
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    pin = hashlib.sha256(allowed.path.read_bytes()).hexdigest()
    write_policy(socket_path, allowed.rule("allow", pin), AppRule(curl, Decision.ALLOW))
    assert allowed.run(str(socket_path)) == {"ok": True, "who": "allowed"}
    assert curl_json(socket_path, "GetToken")[0] == 200

    python = [sys.executable, str(allowed.path), str(socket_path)]
    script = subprocess.run(
        [*BOUND_OVER, str(hostile.path), str(allowed.path), *python],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    found = json.loads(script.stdout.strip().splitlines()[-1])
    assert found.get("code") == "PERMISSION_DENIED", found
    assert f"its script {allowed.path} is not known to be the daemon's file" in found["message"]

    shutil.copy(curl, folder / "curl")  # the same bytes, but not the daemon's file there
    program = subprocess.run(
        [*BOUND_OVER, str(folder / "curl"), curl, curl, "-s", "--unix-socket", str(socket_path),
         "-H", "Content-Type: application/json", "-d", "{}",
         "http://broker/signin_broker.v1.TokenBroker/GetToken"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    refused = json.loads(program.stdout)
    assert refused.get("code") == "permission_denied", refused
    assert f"its program {curl} is not known to be the daemon's file" in refused["error"]

    # What a process of the same uid can do (the threat model says so): run the allowed
    # script, in the daemon's own view, with code of its own loaded into it.
    injected = folder / "injected"
    injected.mkdir()
    (injected / "sitecustomize.py").write_text("import sys; print('injected', file=sys.stderr)")
    inside = subprocess.run(
        python, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(injected)},
    )  # fmt: skip
    assert "injected" in inside.stderr
    assert json.loads(inside.stdout) == {"ok": True, "who": "allowed"}
    assert daemon.alive
    daemon.stop()
