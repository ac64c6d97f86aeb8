"""Run one broker call as another OS user and print the outcome as JSON.

Usage: python as_user.py USER SOCKET {connect,status,bad-token-request}
       python as_user.py USER URL http-get

Needs root. Everything is imported first and the privileges dropped afterwards, so
the interpreter and the packages need not be readable by the other user; the call
itself, and so the connection the daemon sees, is made as that user.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import sys

import grpc

from signin_broker.client import BrokerClient, BrokerError, _channel, _errors, _models  # noqa: F401 - load before the drop


def drop_to(user: str) -> None:
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    assert os.geteuid() == entry.pw_uid


def main(user: str, socket_path: str, action: str) -> dict[str, object]:
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
