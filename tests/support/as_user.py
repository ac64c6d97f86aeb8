"""Run one broker call as another OS user and print the outcome as JSON.

Usage: python as_user.py USER SOCKET {connect,status,bad-token-request}
       python as_user.py USER URL http-get
       python as_user.py USER SPEC_FILE {http-reset,http-slow}   (JSON, see raw_http)

Needs root. Everything is imported first and the privileges dropped afterwards, so
the interpreter and the packages need not be readable by the other user; the call
itself, and so the connection the daemon sees, is made as that user.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import select
import socket
import struct
import sys
import time

import grpc

from signin_broker.client import BrokerClient, BrokerError, _channel, _errors, _models  # noqa: F401 - load before the drop


def drop_to(user: str) -> None:
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    assert os.geteuid() == entry.pw_uid


def raw_http(action: str, spec: dict) -> dict[str, object]:
    """Raw TCP to the loopback page, as a hostile user would send it.

    http-reset: {"address": [host, port], "requests": [raw, ...]}: each request on its
    own connection, closed at once with SO_LINGER 0 (an RST: the client row disappears).
    http-slow: {"address": ..., "count": n, "wait": seconds}: n requests sent but for
    their last line; prints {"opened": n} once they are open, then waits (bounded) for
    the daemon to close them and returns how many it closed.
    """
    address = tuple(spec["address"])
    if action == "http-reset":
        for raw in spec["requests"]:
            with socket.create_connection(address, timeout=5) as conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                with contextlib.suppress(OSError):  # closed by the daemon: a refusal too
                    conn.sendall(raw.encode("latin-1"))
        return {"sent": len(spec["requests"])}
    half = f"GET / HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n".encode()
    conns = []
    for _ in range(spec["count"]):
        conn = socket.create_connection(address, timeout=5)
        with contextlib.suppress(OSError):  # closed by the daemon already
            conn.sendall(half)
        conns.append(conn)
    print(json.dumps({"opened": len(conns)}), flush=True)
    open_ = set(conns)
    deadline = time.monotonic() + spec["wait"]
    while open_ and time.monotonic() < deadline:
        readable, _, _ = select.select(list(open_), [], [], 0.2)
        for conn in readable:
            try:
                if conn.recv(65536):
                    continue  # an answer; the close comes next
            except OSError:
                pass
            open_.discard(conn)
    for conn in conns:
        conn.close()
    return {"closed": len(conns) - len(open_), "open": len(open_)}


def main(user: str, socket_path: str, action: str) -> dict[str, object]:
    if action in ("http-reset", "http-slow"):
        with open(socket_path) as file:  # read as root, before the drop
            spec = json.load(file)
        "127.0.0.1".encode("idna")  # load the codec while its files are still readable
        drop_to(user)
        return raw_http(action, spec)
    if action == "http-get":
        import urllib.request

        "127.0.0.1".encode("idna")  # load the codec while its files are still readable
        drop_to(user)
        try:
            with urllib.request.urlopen(socket_path, timeout=5) as response:
                return {"status": response.status}
        except urllib.error.HTTPError as error:
            return {"status": error.code}
    client = BrokerClient(socket_path, timeout=5)  # creates the channel as root; connects later
    drop_to(user)
    if action == "connect":
        with socket.socket(socket.AF_UNIX) as raw:
            try:
                raw.connect(socket_path)
            except OSError as error:
                return {"connected": False, "errno": error.errno}
            return {"connected": True}
    try:
        if action == "status":
            client.status()
        else:  # a request the servicer would refuse with INVALID_ARGUMENT, if it ran
            client.get_token(min_ttl_seconds=-1)
    except BrokerError as error:
        return {"code": error.code.name, "message": error.message}
    return {"code": grpc.StatusCode.OK.name}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
