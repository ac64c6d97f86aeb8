"""Helpers for the caller-identity attacks: hostile scripts, a byte relay, the daemon's sockets.

Each hostile script is its own file, so the daemon sees it as an app of its own (the
interpreter plus the script path). Scripts that speak gRPC over a socket grpcio did not
open itself (one bound to a borrowed name, one inherited across a fork) put RELAY in
front: grpcio dials a private path, and the relay copies that one connection's bytes to
the socket under attack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from signin_broker.daemon.apps.policy import AppRule, Decision
from support.real import unavailable

# Python source for hostile scripts: `relay(upstream, folder)` gives a path grpcio can dial;
# its one connection is piped to `upstream` (a socket, or a function opening one).
# `call(path, methods)` makes calls on one channel and returns their outcomes as dicts;
# `attempt(channel, method)` makes one on a channel the script holds.
# Nothing here imports grpc at load, so a script may fork before its first call.
RELAY = r'''
import itertools, json, os, socket, threading

_relays = itertools.count()


def _pump(source, target):
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(upstream, folder):
    """A socket path for grpcio whose one connection is copied to and from `upstream`."""
    path = os.path.join(folder, f"relay-{os.getpid()}-{next(_relays)}.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        listener.close()
        try:
            up = upstream() if callable(upstream) else upstream
        except OSError:
            conn.close()
            return
        threading.Thread(target=_pump, args=(conn, up), daemon=True).start()
        _pump(up, conn)

    threading.Thread(target=serve, daemon=True).start()
    return path


def report(path, outcome):
    """Write the outcome as JSON where the test waits for it, all at once."""
    with open(path + ".part", "w") as file:
        json.dump(outcome, file)
    os.replace(path + ".part", path)


def attempt(channel, method="GetToken", timeout=20):
    """One call on an open grpcio channel: its code, message, and whether a token came."""
    import grpc
    from signin_broker.v1 import broker_pb2, broker_pb2_grpc

    stub = broker_pb2_grpc.TokenBrokerStub(channel)
    request = getattr(broker_pb2, method + "Request")()
    try:
        answer = getattr(stub, method)(request, timeout=timeout)
    except grpc.RpcError as error:
        return {"code": error.code().name, "message": error.details() or ""}
    return {"code": "OK", "token": bool(getattr(answer, "access_token", ""))}


def call(path, methods=("GetToken",), timeout=20):
    """Each method called in turn on one channel to `path` (see attempt)."""
    import grpc

    with grpc.insecure_channel("unix:" + path) as channel:
        return [attempt(channel, method, timeout) for method in methods]
'''


class Script:
    """A script file of its own; run by absolute path it is one app to the daemon."""

    def __init__(self, folder: Path, name: str, source: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{name}.py"
        self.path.write_text(source)

    @property
    def id(self) -> str:
        """The app id the daemon gives this script run by `sys.executable` and its path."""
        return f"{os.path.realpath(sys.executable)} {self.path}"

    def rule(self, decision: str, sha256: str = "") -> AppRule:
        """A policy entry for this script."""
        return AppRule(self.id, Decision(decision), sha256=sha256)

    def start(self, *args: str, **popen: Any) -> subprocess.Popen[str]:
        """Start it by absolute path; stdout and stderr are piped unless `popen` says otherwise."""
        options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
        return subprocess.Popen([sys.executable, str(self.path), *args], **options)

    def run(self, *args: str, timeout: float = 60) -> Any:
        """Run it to the end and return the JSON it printed last."""
        process = self.start(*args)
        out, err = process.communicate(timeout=timeout)
        assert process.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


AUDITOR_SOURCE = """\
import json, sys
from signin_broker.client import BrokerClient
with BrokerClient(sys.argv[1], timeout=20) as broker:
    print(json.dumps([row.as_dict() for row in broker.audit_events(limit=1000)]))
"""


def auditor(folder: Path) -> Script:
    """A script that prints every audit row it may see (give it an allow rule)."""
    return Script(folder, "auditor", AUDITOR_SOURCE)


def namespaces_available(*flags: str) -> None:
    """Skip (or fail in CI) unless `unshare` can make these namespaces here (as root it can)."""
    try:
        made = subprocess.run(["unshare", *flags, "true"], capture_output=True, timeout=30)
    except OSError:
        made = None
    if made is None or made.returncode != 0:
        unavailable(f"`unshare {' '.join(flags)}` does not work here")


def daemon_unix_sockets(pid: int) -> list[tuple[str, bool]]:
    """Each Unix socket the process holds: its name ("@..." if abstract, "" if none), listening."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    held = []
    with open("/proc/net/unix") as table:
        next(table)  # Num RefCount Protocol Flags Type St Inode Path
        for row in table:
            fields = row.split()
            if fields[6] in inodes:
                listening = bool(int(fields[3], 16) & 0x10000)  # __SO_ACCEPTCON
                held.append((fields[7] if len(fields) > 7 else "", listening))
    return held


def wait_for_files(paths: list[Path], timeout: float = 60) -> list[Any]:
    """The JSON each file holds once all exist (written by processes that are not our children)."""
    deadline = time.monotonic() + timeout
    while not all(path.exists() for path in paths):
        missing = [str(path) for path in paths if not path.exists()]
        assert time.monotonic() < deadline, f"no result in {missing}"
        time.sleep(0.05)
    return [json.loads(path.read_text()) for path in paths]
